#ifndef TAILOR_COMPRESSION_MODEL_MOE_H_
#define TAILOR_COMPRESSION_MODEL_MOE_H_

#include "compression/model/layers.h"

namespace tailor::model {

// The experts each token uses and their weights: both [N, top_k].
struct MoeRouting {
  at::Tensor experts;  // int64 expert ids (each at most once per row, in no particular order)
  at::Tensor weights;  // the weight of each chosen expert's output
};

// The routing rule of `spec` (config.h, MoeSpec) on router logits [N, experts].
// `score_bias` [experts] is used when spec.score_bias (else pass an undefined tensor). The
// default variant is computed as softmax over the top-k logits, bit-identical to the demo
// family's block as it always was.
MoeRouting RouteTokens(const MoeSpec& spec, const at::Tensor& logits,
                       const at::Tensor& score_bias);

// Top-k routed experts plus an optional shared expert, SwiGLU or relu2 (MoeSpec::activation),
// routed by one of the MoeSpec variants (RouteTokens). Each expert runs only on its routed
// tokens. The expert mask multiplies expert outputs after routing (see LayerMask). When
// LayerContext::aux_loss is set the Switch-Transformer load-balancing loss
// E * sum_e f_e P_e is added to it, P_e the mean of the router probabilities (softmax over all
// experts; for the sigmoid router the sigmoid scores divided by their sum per token), which
// is also what the observer sees as kRouterProbs.
// Weights: router [E, hidden]; w_gate (SwiGLU only), w_up [E, F, hidden]; w_down
// [E, hidden, F]; shared_gate (SwiGLU only), shared_up [S, hidden]; shared_down [hidden, S];
// score_bias [E] (variant).
class MoeImpl : public Mixer {
 public:
  MoeImpl(const MoeSpec& spec, const MixerInit& init);

  at::Tensor Forward(const at::Tensor& x, const LayerContext& ctx) override;
  void PermuteHidden(const at::Tensor& perm) override;
  // An expert permutation moves each expert's router row, weights and score bias together.
  // With groups > 1 it must map whole groups onto groups (routing depends on membership).
  absl::Status Permute(const LayerPermutation& perm) override;
  // Keeps KeptExperts(parent spec, experts): with groups > 1 the first experts / groups of
  // every group (>= 2 each, top_k <= top_groups * that, else INVALID_ARGUMENT naming the
  // field), so the child routes over the parent's groups.
  absl::Status CopyPrefixFrom(const Mixer& parent, const at::Tensor& hidden) override;

  const MoeSpec& spec() const { return spec_; }

 private:
  bool swiglu() const { return spec_.activation == FfnActivation::kSwiGlu; }
  // The routed experts' contribution [N, hidden] for the flattened input xf [N, hidden].
  at::Tensor RoutedForward(const at::Tensor& xf, int64_t b, int64_t t, const LayerContext& ctx);
  // FFN activation (input of the down projection) of `expert` (-1: the shared expert).
  at::Tensor Activation(const at::Tensor& x, const LayerContext& ctx, int64_t expert);
  absl::Status PermuteExperts(const std::vector<int64_t>& perm);

  MoeSpec spec_;
  at::Tensor router_, w_gate_, w_up_, w_down_;
  at::Tensor shared_gate_, shared_up_, shared_down_;
  at::Tensor score_bias_;
};

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_MOE_H_
