#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_GUMBEL_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_GUMBEL_H_

// Gumbel-softmax sampling of architecture choices with the annealing schedule of spec §1
// Step 3: y = softmax((k_t * z + g) / tau_t), g standard Gumbel noise.
//
// Interpolation (design choice; the papers give only the end points): with progress
// p = step / (steps - 1) in [0, 1],
//   k_t   = k_start + (k_end - k_start) * p             (linear)
//   tau_t = tau_start * (tau_end / tau_start)^p         (geometric)
// Temperature is a scale, so equal ratios per step (geometric) sharpen evenly in log space;
// linear tau would stay near 1 for most of the run and collapse only at the very end. The
// logit scale multiplies learned logits, so linear growth keeps its gradient steady.

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tailor::autocompress {

struct GumbelSchedule {
  int64_t steps = 250;
  double k_start = 1.0;
  double k_end = 10.0;
  double tau_start = 1.0;
  double tau_end = 0.05;

  // Progress p in [0, 1]; steps <= 1 or step past the end clamp to the last value.
  double Progress(int64_t step) const;
  double LogitScale(int64_t step) const;
  double Temperature(int64_t step) const;
};

// softmax((k * logits + noise) / tau) over the last dim. Differentiable in logits.
at::Tensor GumbelSoftmaxWithNoise(const at::Tensor& logits, const at::Tensor& noise, double k,
                                  double tau);

// Standard Gumbel noise -log(-log U) of the given shape, U ~ Uniform(0, 1) drawn from
// `generator` (undefined: the global one). U is clamped away from 0 and 1 so g is finite.
at::Tensor GumbelNoise(at::IntArrayRef shape, const at::TensorOptions& options,
                       c10::optional<at::Generator> generator = c10::nullopt);

// One sample per row of logits [..., choices].
at::Tensor SampleGumbelSoftmax(const at::Tensor& logits, const GumbelSchedule& schedule,
                               int64_t step, c10::optional<at::Generator> generator = c10::nullopt);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_GUMBEL_H_
