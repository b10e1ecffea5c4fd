#include "compression/model/moe.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::model {

MoeImpl::MoeImpl(const MoeSpec& spec, const MixerInit& init) : spec_(spec) {
  const int64_t e = spec.experts, f = spec.expert_ffn, s = spec.shared_ffn, h = init.hidden;
  if (e > 0) {
    router_ = register_parameter("router", InitWeight({e, h}, init.std, init));
    w_gate_ = register_parameter("w_gate", InitWeight({e, f, h}, init.std, init));
    w_up_ = register_parameter("w_up", InitWeight({e, f, h}, init.std, init));
    w_down_ = register_parameter("w_down", InitWeight({e, h, f}, init.out_std, init));
  }
  if (s > 0) {
    shared_gate_ = register_parameter("shared_gate", InitWeight({s, h}, init.std, init));
    shared_up_ = register_parameter("shared_up", InitWeight({s, h}, init.std, init));
    shared_down_ = register_parameter("shared_down", InitWeight({h, s}, init.out_std, init));
  }
}

at::Tensor MoeImpl::Forward(const at::Tensor& x, const LayerContext& ctx) {
  const int64_t b = x.size(0), t = x.size(1), hid = x.size(2), n = b * t;
  at::Tensor out = torch::zeros({n, hid}, x.options());
  if (spec_.experts > 0) {
    at::Tensor xf = x.reshape({n, hid});
    at::Tensor logits = Project(ctx, xf, router_);  // [N, E]
    auto [top_logits, top_idx] = logits.topk(spec_.top_k, -1);
    at::Tensor gates = torch::softmax(top_logits, -1);  // [N, k]
    if (ctx.observer != nullptr || ctx.aux_loss != nullptr) {
      at::Tensor probs = torch::softmax(logits, -1);
      if (ctx.observer != nullptr) ctx.observer->Observe({Site::kRouterProbs, ctx.layer}, probs);
      if (ctx.aux_loss != nullptr) {
        // f_e: share of routing slots given to e (no gradient); P_e: mean router prob.
        at::Tensor counts =
            torch::zeros({spec_.experts}, x.options())
                .index_add(0, top_idx.flatten(), torch::ones({top_idx.numel()}, x.options()));
        at::Tensor frac = counts / static_cast<double>(top_idx.numel());
        *ctx.aux_loss = *ctx.aux_loss + spec_.experts * (frac * probs.mean(0)).sum();
      }
    }
    const LayerMask* m = ctx.mask;
    at::Tensor expert_mask, ffn_mask;
    if (m != nullptr && m->experts.defined())
      expert_mask = MaskRows(m->experts, b, t).to(x.options());
    if (m != nullptr && m->expert_ffn.defined())
      ffn_mask = MaskRows(m->expert_ffn, b, t).to(x.options());
    for (int64_t e = 0; e < spec_.experts; ++e) {
      at::Tensor hit = top_idx == e;  // [N, k]; an expert appears at most once per row
      at::Tensor rows = hit.any(1).nonzero().squeeze(1);
      if (rows.numel() == 0) continue;
      at::Tensor weight = (gates * hit).sum(1).index_select(0, rows);  // [n]
      at::Tensor xe = xf.index_select(0, rows);
      at::Tensor act = torch::silu(Project(ctx, xe, w_gate_, e)) * Project(ctx, xe, w_up_, e);
      if (ffn_mask.defined()) act = act * ffn_mask.index_select(0, rows);
      if (ctx.observer != nullptr) {
        ctx.observer->Observe({Site::kExpertFfn, ctx.layer, static_cast<int>(e)}, act);
      }
      at::Tensor ye = Project(ctx, act, w_down_, e);
      if (ctx.observer != nullptr) {
        ctx.observer->Observe({Site::kExpertOutput, ctx.layer, static_cast<int>(e)}, ye);
      }
      if (expert_mask.defined()) {
        weight = weight * expert_mask.index_select(0, rows).select(1, e);
      }
      out = out.index_add(0, rows, ye * weight.unsqueeze(1));
    }
  }
  out = out.view({b, t, hid});
  if (spec_.shared_ffn > 0) {
    at::Tensor act = torch::silu(Project(ctx, x, shared_gate_)) * Project(ctx, x, shared_up_);
    if (ctx.mask != nullptr) act = ApplyMask(act, ctx.mask->shared_ffn);
    if (ctx.observer != nullptr) ctx.observer->Observe({Site::kSharedFfn, ctx.layer}, act);
    out = out + Project(ctx, act, shared_down_);
  }
  return out;
}

void MoeImpl::PermuteHidden(const at::Tensor& perm) {
  if (spec_.experts > 0) {
    AssignParameter(router_, router_.index_select(1, perm));
    AssignParameter(w_gate_, w_gate_.index_select(2, perm));
    AssignParameter(w_up_, w_up_.index_select(2, perm));
    AssignParameter(w_down_, w_down_.index_select(1, perm));
  }
  if (spec_.shared_ffn > 0) {
    AssignParameter(shared_gate_, shared_gate_.index_select(1, perm));
    AssignParameter(shared_up_, shared_up_.index_select(1, perm));
    AssignParameter(shared_down_, shared_down_.index_select(0, perm));
  }
}

absl::Status MoeImpl::Permute(const LayerPermutation& perm) {
  const int64_t e = spec_.experts;
  if (!perm.expert_ffn.empty()) {
    if (static_cast<int64_t>(perm.expert_ffn.size()) != e) {
      return absl::InvalidArgumentError(absl::StrCat("expert_ffn: ", perm.expert_ffn.size(),
                                                     " per-expert permutations, want ", e));
    }
    for (int64_t i = 0; i < e; ++i) {
      TAILOR_RETURN_IF_ERROR(CheckPermutation(perm.expert_ffn[i], spec_.expert_ffn,
                                              absl::StrCat("expert_ffn[", i, "]")));
    }
  }
  if (!perm.experts.empty()) TAILOR_RETURN_IF_ERROR(CheckPermutation(perm.experts, e, "experts"));
  if (!perm.shared_ffn.empty()) {
    TAILOR_RETURN_IF_ERROR(CheckPermutation(perm.shared_ffn, spec_.shared_ffn, "shared_ffn"));
  }
  if (!perm.expert_ffn.empty()) {
    // Each expert's neurons are ranked on their own, so each gets its own order.
    std::vector<at::Tensor> gate, up, down;
    for (int64_t i = 0; i < e; ++i) {
      at::Tensor idx = IndexTensor(perm.expert_ffn[i], w_gate_.device());
      gate.push_back(w_gate_[i].index_select(0, idx));
      up.push_back(w_up_[i].index_select(0, idx));
      down.push_back(w_down_[i].index_select(1, idx));
    }
    AssignParameter(w_gate_, torch::stack(gate));
    AssignParameter(w_up_, torch::stack(up));
    AssignParameter(w_down_, torch::stack(down));
  }
  if (!perm.experts.empty()) {
    at::Tensor idx = IndexTensor(perm.experts, router_.device());
    for (at::Tensor* w : {&router_, &w_gate_, &w_up_, &w_down_}) {
      AssignParameter(*w, w->index_select(0, idx));
    }
  }
  if (!perm.shared_ffn.empty()) {
    at::Tensor idx = IndexTensor(perm.shared_ffn, shared_gate_.device());
    AssignParameter(shared_gate_, shared_gate_.index_select(0, idx));
    AssignParameter(shared_up_, shared_up_.index_select(0, idx));
    AssignParameter(shared_down_, shared_down_.index_select(1, idx));
  }
  return absl::OkStatus();
}

absl::Status MoeImpl::CopyPrefixFrom(const Mixer& parent_mixer, const at::Tensor& hidden) {
  const auto* parent = dynamic_cast<const MoeImpl*>(&parent_mixer);
  if (parent == nullptr) return absl::InvalidArgumentError("parent layer is not moe");
  const MoeSpec& p = parent->spec_;
  if (spec_.experts > p.experts || spec_.expert_ffn > p.expert_ffn ||
      spec_.shared_ffn > p.shared_ffn) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe experts=", spec_.experts, " expert_ffn=", spec_.expert_ffn,
                     " shared_ffn=", spec_.shared_ffn, " is not a prefix of experts=", p.experts,
                     " expert_ffn=", p.expert_ffn, " shared_ffn=", p.shared_ffn));
  }
  const int64_t e = spec_.experts, f = spec_.expert_ffn, s = spec_.shared_ffn;
  if (e > 0) {
    AssignParameter(router_, parent->router_.narrow(0, 0, e).index_select(1, hidden));
    AssignParameter(w_gate_,
                    parent->w_gate_.narrow(0, 0, e).narrow(1, 0, f).index_select(2, hidden));
    AssignParameter(w_up_, parent->w_up_.narrow(0, 0, e).narrow(1, 0, f).index_select(2, hidden));
    AssignParameter(w_down_,
                    parent->w_down_.narrow(0, 0, e).index_select(1, hidden).narrow(2, 0, f));
  }
  if (s > 0) {
    AssignParameter(shared_gate_, parent->shared_gate_.narrow(0, 0, s).index_select(1, hidden));
    AssignParameter(shared_up_, parent->shared_up_.narrow(0, 0, s).index_select(1, hidden));
    AssignParameter(shared_down_, parent->shared_down_.index_select(0, hidden).narrow(1, 0, s));
  }
  return absl::OkStatus();
}

}  // namespace tailor::model
