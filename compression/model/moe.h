#ifndef TAILOR_COMPRESSION_MODEL_MOE_H_
#define TAILOR_COMPRESSION_MODEL_MOE_H_

#include "compression/model/layers.h"

namespace tailor::model {

// Top-k routed SwiGLU experts plus an optional shared SwiGLU expert.
// Routing: logits = router u; the top_k logits per token are softmaxed into gate weights
// (Mixtral-style). Each expert runs only on its routed tokens. The expert mask multiplies
// expert outputs after routing (see LayerMask). When LayerContext::aux_loss is set the
// Switch-Transformer load-balancing loss E * sum_e f_e P_e is added to it.
// Weights: router [E, hidden]; w_gate, w_up [E, F, hidden]; w_down [E, hidden, F];
// shared_gate, shared_up [S, hidden]; shared_down [hidden, S].
class MoeImpl : public Mixer {
 public:
  MoeImpl(const MoeSpec& spec, const MixerInit& init);

  at::Tensor Forward(const at::Tensor& x, const LayerContext& ctx) override;
  void PermuteHidden(const at::Tensor& perm) override;
  absl::Status Permute(const LayerPermutation& perm) override;
  absl::Status CopyPrefixFrom(const Mixer& parent, const at::Tensor& hidden) override;

  const MoeSpec& spec() const { return spec_; }

 private:
  MoeSpec spec_;
  at::Tensor router_, w_gate_, w_up_, w_down_;
  at::Tensor shared_gate_, shared_up_, shared_down_;
};

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_MOE_H_
