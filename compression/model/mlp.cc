#include "compression/model/mlp.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::model {

MlpImpl::MlpImpl(const MlpSpec& spec, const MixerInit& init) : spec_(spec) {
  // The gate is registered (and drawn) first, as it always was, so a SwiGLU model's random
  // weights for a seed are unchanged; relu2 has no gate.
  if (gated()) {
    w_gate_ = register_parameter("w_gate", InitWeight({spec.ffn, init.hidden}, init.std, init));
  }
  w_up_ = register_parameter("w_up", InitWeight({spec.ffn, init.hidden}, init.std, init));
  w_down_ = register_parameter("w_down", InitWeight({init.hidden, spec.ffn}, init.out_std, init));
  if (spec.bias) {  // zeros: no generator draw, so the demo family's init is unchanged
    if (gated()) b_gate_ = register_parameter("b_gate", torch::zeros({spec.ffn}));
    b_up_ = register_parameter("b_up", torch::zeros({spec.ffn}));
    b_down_ = register_parameter("b_down", torch::zeros({init.hidden}));
  }
}

at::Tensor MlpImpl::Forward(const at::Tensor& x, const LayerContext& ctx) {
  at::Tensor up = Project(ctx, x, w_up_);
  if (spec_.bias) up = up + b_up_;
  at::Tensor act;
  if (gated()) {
    at::Tensor gate = Project(ctx, x, w_gate_);
    if (spec_.bias) gate = gate + b_gate_;
    act = torch::silu(gate) * up;
  } else {
    act = torch::relu(up).square();
  }
  if (ctx.mask != nullptr) act = ApplyMask(act, ctx.mask->mlp_ffn);
  if (ctx.observer != nullptr) ctx.observer->Observe({Site::kMlpFfn, ctx.layer}, act);
  at::Tensor y = Project(ctx, act, w_down_);
  return spec_.bias ? y + b_down_ : y;
}

void MlpImpl::PermuteHidden(const at::Tensor& perm) {
  if (gated()) AssignParameter(w_gate_, w_gate_.index_select(1, perm));
  AssignParameter(w_up_, w_up_.index_select(1, perm));
  AssignParameter(w_down_, w_down_.index_select(0, perm));
  if (spec_.bias) AssignParameter(b_down_, b_down_.index_select(0, perm));
}

absl::Status MlpImpl::Permute(const LayerPermutation& perm) {
  if (perm.mlp_ffn.empty()) return absl::OkStatus();
  TAILOR_RETURN_IF_ERROR(CheckPermutation(perm.mlp_ffn, spec_.ffn, "mlp_ffn"));
  at::Tensor idx = IndexTensor(perm.mlp_ffn, w_up_.device());
  if (gated()) AssignParameter(w_gate_, w_gate_.index_select(0, idx));
  AssignParameter(w_up_, w_up_.index_select(0, idx));
  AssignParameter(w_down_, w_down_.index_select(1, idx));
  if (spec_.bias) {
    if (gated()) AssignParameter(b_gate_, b_gate_.index_select(0, idx));
    AssignParameter(b_up_, b_up_.index_select(0, idx));
  }
  return absl::OkStatus();
}

absl::Status MlpImpl::CopyPrefixFrom(const Mixer& parent_mixer, const at::Tensor& hidden) {
  const auto* parent = dynamic_cast<const MlpImpl*>(&parent_mixer);
  if (parent == nullptr) return absl::InvalidArgumentError("parent layer is not mlp");
  if (spec_.bias != parent->spec_.bias) {
    return absl::InvalidArgumentError("mlp bias must match the parent's");
  }
  if (spec_.activation != parent->spec_.activation) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mlp activation ", FfnActivationName(spec_.activation), " must match the parent's ",
        FfnActivationName(parent->spec_.activation)));
  }
  if (spec_.ffn > parent->spec_.ffn) {
    return absl::InvalidArgumentError(
        absl::StrCat("mlp ffn ", spec_.ffn, " exceeds the parent's ", parent->spec_.ffn));
  }
  const int64_t f = spec_.ffn;
  if (gated()) {
    AssignParameter(w_gate_, parent->w_gate_.narrow(0, 0, f).index_select(1, hidden));
  }
  AssignParameter(w_up_, parent->w_up_.narrow(0, 0, f).index_select(1, hidden));
  AssignParameter(w_down_, parent->w_down_.index_select(0, hidden).narrow(1, 0, f));
  if (spec_.bias) {
    if (gated()) AssignParameter(b_gate_, parent->b_gate_.narrow(0, 0, f));
    AssignParameter(b_up_, parent->b_up_.narrow(0, 0, f));
    AssignParameter(b_down_, parent->b_down_.index_select(0, hidden));
  }
  return absl::OkStatus();
}

}  // namespace tailor::model
