#ifndef TAILOR_COMPRESSION_MODEL_MLP_H_
#define TAILOR_COMPRESSION_MODEL_MLP_H_

#include "compression/model/layers.h"

namespace tailor::model {

// Dense SwiGLU MLP: w_down (SiLU(w_gate u) * w_up u).
// Weights: w_gate, w_up [ffn, hidden]; w_down [hidden, ffn]; with spec.bias also b_gate,
// b_up [ffn] and b_down [hidden].
class MlpImpl : public Mixer {
 public:
  MlpImpl(const MlpSpec& spec, const MixerInit& init);

  at::Tensor Forward(const at::Tensor& x, const LayerContext& ctx) override;
  void PermuteHidden(const at::Tensor& perm) override;
  absl::Status Permute(const LayerPermutation& perm) override;
  absl::Status CopyPrefixFrom(const Mixer& parent, const at::Tensor& hidden) override;

  const MlpSpec& spec() const { return spec_; }

 private:
  MlpSpec spec_;
  at::Tensor w_gate_, w_up_, w_down_;
  at::Tensor b_gate_, b_up_, b_down_;  // defined with spec.bias
};

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_MLP_H_
