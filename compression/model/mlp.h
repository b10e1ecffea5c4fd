#ifndef TAILOR_COMPRESSION_MODEL_MLP_H_
#define TAILOR_COMPRESSION_MODEL_MLP_H_

#include "compression/model/layers.h"

namespace tailor::model {

// Dense MLP. SwiGLU (the default): w_down (SiLU(w_gate u) * w_up u); relu2 (Nemotron-H):
// w_down (ReLU(w_up u)^2), no gate. Weights: w_gate (SwiGLU only), w_up [ffn, hidden];
// w_down [hidden, ffn]; with spec.bias also b_gate (SwiGLU only), b_up [ffn], b_down [hidden].
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
  bool gated() const { return spec_.activation == FfnActivation::kSwiGlu; }

  at::Tensor w_gate_, w_up_, w_down_;  // w_gate_ undefined for relu2
  at::Tensor b_gate_, b_up_, b_down_;  // defined with spec.bias (b_gate_ only when gated)
};

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_MLP_H_
