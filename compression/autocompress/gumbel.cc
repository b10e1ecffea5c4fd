#include "compression/autocompress/gumbel.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace tailor::autocompress {

double GumbelSchedule::Progress(int64_t step) const {
  if (steps <= 1) return 1.0;
  const double p = static_cast<double>(step) / static_cast<double>(steps - 1);
  return std::clamp(p, 0.0, 1.0);
}

double GumbelSchedule::LogitScale(int64_t step) const {
  return k_start + (k_end - k_start) * Progress(step);
}

double GumbelSchedule::Temperature(int64_t step) const {
  return tau_start * std::pow(tau_end / tau_start, Progress(step));
}

at::Tensor GumbelSoftmaxWithNoise(const at::Tensor& logits, const at::Tensor& noise, double k,
                                  double tau) {
  return torch::softmax((logits * k + noise) / tau, -1);
}

at::Tensor GumbelNoise(at::IntArrayRef shape, const at::TensorOptions& options,
                       c10::optional<at::Generator> generator) {
  // Drawn in double so the clamp bounds are representable, then cast.
  at::Tensor u = at::rand(shape, generator, options.dtype(torch::kDouble));
  u = u.clamp(1e-12, 1.0 - 1e-12);
  return (-(-u.log()).log()).to(options.dtype());
}

at::Tensor SampleGumbelSoftmax(const at::Tensor& logits, const GumbelSchedule& schedule,
                               int64_t step, c10::optional<at::Generator> generator) {
  at::Tensor g = GumbelNoise(logits.sizes(), logits.options(), generator);
  return GumbelSoftmaxWithNoise(logits, g, schedule.LogitScale(step), schedule.Temperature(step));
}

}  // namespace tailor::autocompress
