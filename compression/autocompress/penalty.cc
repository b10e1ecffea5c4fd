#include "compression/autocompress/penalty.h"

#include <torch/torch.h>

namespace tailor::autocompress {

at::Tensor BudgetPenalty(const at::Tensor& rho, double delta) {
  return torch::relu(rho - 1.0) + torch::relu((1.0 - delta) - rho);
}

}  // namespace tailor::autocompress
