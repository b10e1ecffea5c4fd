#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_PENALTY_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_PENALTY_H_

// Dead-zone budget penalty of spec §1 Step 3:
//   P(rho) = max(0, rho - 1) + max(0, 1 - delta - rho),  rho = predicted cost / budget.
// Zero between (1 - delta) and 1 of the budget; penalises overspending and also leaving
// capacity unused. For a floor budget (throughput >= X) the caller passes rho = X / cost so
// that rho > 1 still means "violates the contract".

#include <ATen/core/Tensor.h>

namespace tailor::autocompress {

inline constexpr double kDefaultDeadZone = 0.02;

// Elementwise, differentiable in rho (a tensor of any shape).
at::Tensor BudgetPenalty(const at::Tensor& rho, double delta = kDefaultDeadZone);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_PENALTY_H_
