#include "compression/model/moe.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::model {

MoeRouting RouteTokens(const MoeSpec& spec, const at::Tensor& logits,
                       const at::Tensor& score_bias) {
  const int64_t n = logits.size(0), e = spec.experts, k = spec.top_k;
  const bool biased = spec.score_bias && score_bias.defined();
  if (spec.router == MoeRouter::kSoftmax && spec.norm_top_k && !biased && spec.groups == 1) {
    // softmax(all) -> top-k -> renormalise equals softmax over the top-k logits; computed
    // this way it is bit-identical to the demo family's block.
    auto [top_logits, top_idx] = logits.topk(k, -1);
    at::Tensor w = torch::softmax(top_logits, -1);
    if (spec.scale != 1.0) w = w * spec.scale;
    return {top_idx, w};
  }
  at::Tensor scores =
      spec.router == MoeRouter::kSoftmax ? torch::softmax(logits, -1) : torch::sigmoid(logits);
  at::Tensor choice = biased ? scores + score_bias : scores;
  if (spec.groups > 1) {
    // Group-limited choice (DeepSeek-V3 / Nemotron-H): rank groups by the sum of their two
    // best choice values, keep top_groups; the other experts' choice value becomes 0 as in
    // the reference (not -inf), so they can still win against negative biased values.
    const int64_t g = spec.groups, per = e / g;
    at::Tensor group_scores = std::get<0>(choice.view({n, g, per}).topk(2, -1)).sum(-1);
    at::Tensor keep_groups = std::get<1>(group_scores.topk(spec.top_groups, -1));
    at::Tensor group_mask = torch::zeros_like(group_scores).scatter(1, keep_groups, 1.0);
    at::Tensor keep = group_mask.unsqueeze(-1).expand({n, g, per}).reshape({n, e});
    choice = choice.masked_fill(keep == 0, 0.0);
  }
  at::Tensor idx = std::get<1>(choice.topk(k, -1));
  at::Tensor w = scores.gather(1, idx);
  if (spec.norm_top_k) {
    // The sigmoid reference guards the division (scores can all underflow to 0).
    at::Tensor sum = w.sum(-1, /*keepdim=*/true);
    w = spec.router == MoeRouter::kSigmoid ? w / (sum + 1e-20) : w / sum;
  }
  if (spec.scale != 1.0) w = w * spec.scale;
  return {idx, w};
}

MoeImpl::MoeImpl(const MoeSpec& spec, const MixerInit& init) : spec_(spec) {
  const int64_t e = spec.experts, f = spec.expert_ffn, s = spec.shared_ffn, h = init.hidden;
  // relu2 has no gate projection; SwiGLU registers (and draws) exactly as it always did.
  if (e > 0) {
    router_ = register_parameter("router", InitWeight({e, h}, init.std, init));
    if (swiglu()) w_gate_ = register_parameter("w_gate", InitWeight({e, f, h}, init.std, init));
    w_up_ = register_parameter("w_up", InitWeight({e, f, h}, init.std, init));
    w_down_ = register_parameter("w_down", InitWeight({e, h, f}, init.out_std, init));
  }
  if (s > 0) {
    if (swiglu()) {
      shared_gate_ = register_parameter("shared_gate", InitWeight({s, h}, init.std, init));
    }
    shared_up_ = register_parameter("shared_up", InitWeight({s, h}, init.std, init));
    shared_down_ = register_parameter("shared_down", InitWeight({h, s}, init.out_std, init));
  }
  // Zeros: no generator draw, so the init of everything registered above is unchanged.
  if (e > 0 && spec.score_bias) score_bias_ = register_parameter("score_bias", torch::zeros({e}));
}

at::Tensor MoeImpl::Activation(const at::Tensor& x, const LayerContext& ctx, int64_t expert) {
  const bool shared = expert < 0;
  const at::Tensor& up_w = shared ? shared_up_ : w_up_;
  at::Tensor up = Project(ctx, x, up_w, expert);
  if (!swiglu()) {
    at::Tensor r = torch::relu(up);
    return r * r;
  }
  return torch::silu(Project(ctx, x, shared ? shared_gate_ : w_gate_, expert)) * up;
}

at::Tensor MoeImpl::RoutedForward(const at::Tensor& xf, int64_t b, int64_t t,
                                  const LayerContext& ctx) {
  const int64_t n = xf.size(0), hid = xf.size(1);
  at::Tensor out = torch::zeros({n, hid}, xf.options());
  at::Tensor logits = Project(ctx, xf, router_);  // [N, E]
  MoeRouting routing = RouteTokens(spec_, logits, score_bias_);
  if (ctx.observer != nullptr || ctx.aux_loss != nullptr) {
    at::Tensor probs;
    if (spec_.router == MoeRouter::kSoftmax) {
      probs = torch::softmax(logits, -1);
    } else {
      at::Tensor scores = torch::sigmoid(logits);
      probs = scores / scores.sum(-1, /*keepdim=*/true);
    }
    if (ctx.observer != nullptr) ctx.observer->Observe({Site::kRouterProbs, ctx.layer}, probs);
    if (ctx.aux_loss != nullptr) {
      // f_e: share of routing slots given to e (no gradient); P_e: mean router prob.
      const at::Tensor& top_idx = routing.experts;
      at::Tensor counts =
          torch::zeros({spec_.experts}, xf.options())
              .index_add(0, top_idx.flatten(), torch::ones({top_idx.numel()}, xf.options()));
      at::Tensor frac = counts / static_cast<double>(top_idx.numel());
      *ctx.aux_loss = *ctx.aux_loss + spec_.experts * (frac * probs.mean(0)).sum();
    }
  }
  const LayerMask* m = ctx.mask;
  at::Tensor expert_mask, ffn_mask;
  if (m != nullptr && m->experts.defined()) {
    expert_mask = MaskRows(m->experts, b, t).to(xf.options());
  }
  if (m != nullptr && m->expert_ffn.defined()) {
    ffn_mask = MaskRows(m->expert_ffn, b, t).to(xf.options());
  }
  for (int64_t e = 0; e < spec_.experts; ++e) {
    at::Tensor hit = routing.experts == e;  // [N, k]; an expert appears at most once per row
    at::Tensor rows = hit.any(1).nonzero().squeeze(1);
    if (rows.numel() == 0) continue;
    at::Tensor weight = (routing.weights * hit).sum(1).index_select(0, rows);  // [n]
    at::Tensor xe = xf.index_select(0, rows);
    at::Tensor act = Activation(xe, ctx, e);
    if (ffn_mask.defined()) act = act * ffn_mask.index_select(0, rows);
    if (ctx.observer != nullptr) {
      ctx.observer->Observe({Site::kExpertFfn, ctx.layer, static_cast<int>(e)}, act);
    }
    at::Tensor ye = Project(ctx, act, w_down_, e);
    if (ctx.observer != nullptr) {
      ctx.observer->Observe({Site::kExpertOutput, ctx.layer, static_cast<int>(e)}, ye);
    }
    if (expert_mask.defined()) weight = weight * expert_mask.index_select(0, rows).select(1, e);
    out = out.index_add(0, rows, ye * weight.unsqueeze(1));
  }
  return out;
}

at::Tensor MoeImpl::Forward(const at::Tensor& x, const LayerContext& ctx) {
  const int64_t b = x.size(0), t = x.size(1), hid = x.size(2), n = b * t;
  at::Tensor out = spec_.experts > 0 ? RoutedForward(x.reshape({n, hid}), b, t, ctx)
                                     : torch::zeros({n, hid}, x.options());
  out = out.view({b, t, hid});
  if (spec_.shared_ffn > 0) {
    at::Tensor act = Activation(x, ctx, -1);
    if (ctx.mask != nullptr) act = ApplyMask(act, ctx.mask->shared_ffn);
    if (ctx.observer != nullptr) ctx.observer->Observe({Site::kSharedFfn, ctx.layer}, act);
    out = out + Project(ctx, act, shared_down_);
  }
  return out;
}

void MoeImpl::PermuteHidden(const at::Tensor& perm) {
  if (spec_.experts > 0) {
    AssignParameter(router_, router_.index_select(1, perm));
    if (swiglu()) AssignParameter(w_gate_, w_gate_.index_select(2, perm));
    AssignParameter(w_up_, w_up_.index_select(2, perm));
    AssignParameter(w_down_, w_down_.index_select(1, perm));
  }
  if (spec_.shared_ffn > 0) {
    if (swiglu()) AssignParameter(shared_gate_, shared_gate_.index_select(1, perm));
    AssignParameter(shared_up_, shared_up_.index_select(1, perm));
    AssignParameter(shared_down_, shared_down_.index_select(0, perm));
  }
}

absl::Status MoeImpl::PermuteExperts(const std::vector<int64_t>& perm) {
  const int64_t e = spec_.experts;
  TAILOR_RETURN_IF_ERROR(CheckPermutation(perm, e, "experts"));
  if (spec_.groups > 1) {
    // Group-limited routing depends on which experts share a group: new group g must be
    // one whole old group (experts may move inside it, groups may trade places).
    const int64_t per = e / spec_.groups;
    for (int64_t i = 0; i < e; ++i) {
      if (perm[i] / per != perm[i - i % per] / per) {
        return absl::InvalidArgumentError(absl::StrCat(
            "experts: with groups = ", spec_.groups, " the permutation must move whole groups of ",
            per, " experts; position ", i, " takes expert ", perm[i], " of group ", perm[i] / per,
            ", position ", i - i % per, " one of group ", perm[i - i % per] / per));
      }
    }
  }
  return absl::OkStatus();
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
  if (!perm.experts.empty()) TAILOR_RETURN_IF_ERROR(PermuteExperts(perm.experts));
  if (!perm.shared_ffn.empty()) {
    TAILOR_RETURN_IF_ERROR(CheckPermutation(perm.shared_ffn, spec_.shared_ffn, "shared_ffn"));
  }
  if (!perm.expert_ffn.empty()) {
    // Each expert's neurons are ranked on their own, so each gets its own order.
    std::vector<at::Tensor> gate, up, down;
    for (int64_t i = 0; i < e; ++i) {
      at::Tensor idx = IndexTensor(perm.expert_ffn[i], w_up_.device());
      if (swiglu()) gate.push_back(w_gate_[i].index_select(0, idx));
      up.push_back(w_up_[i].index_select(0, idx));
      down.push_back(w_down_[i].index_select(1, idx));
    }
    if (swiglu()) AssignParameter(w_gate_, torch::stack(gate));
    AssignParameter(w_up_, torch::stack(up));
    AssignParameter(w_down_, torch::stack(down));
  }
  if (!perm.experts.empty()) {
    at::Tensor idx = IndexTensor(perm.experts, router_.device());
    // The score bias belongs to its expert like the router row.
    for (at::Tensor* w : {&router_, &w_gate_, &w_up_, &w_down_, &score_bias_}) {
      if (w->defined()) AssignParameter(*w, w->index_select(0, idx));
    }
  }
  if (!perm.shared_ffn.empty()) {
    at::Tensor idx = IndexTensor(perm.shared_ffn, shared_up_.device());
    if (swiglu()) AssignParameter(shared_gate_, shared_gate_.index_select(0, idx));
    AssignParameter(shared_up_, shared_up_.index_select(0, idx));
    AssignParameter(shared_down_, shared_down_.index_select(1, idx));
  }
  return absl::OkStatus();
}

namespace {

// A child of a grouped parent (same groups and top_groups: SameVariant) keeps k = experts /
// groups experts of every group; the config validation says the same for a whole model, this
// guards a layer built on its own.
absl::Status CheckGroupedChild(const MoeSpec& c, const MoeSpec& p) {
  const int64_t k = c.experts / p.groups;
  if (c.experts % p.groups != 0 || k < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "moe.experts: ", c.experts, " must be a multiple of groups (", p.groups,
        ") keeping >= 2 experts per group (a group's score is the sum of its two best)"));
  }
  if (c.top_k > p.top_groups * k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "moe.top_k: ", c.top_k, " must be <= top_groups * experts per group (", p.top_groups,
        " * ", k, " = ", p.top_groups * k, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

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
  // A child with no routed experts has no routing to match; otherwise it must route alike.
  const bool routing_differs = spec_.experts > 0 && !spec_.SameVariant(p);
  if (routing_differs || spec_.activation != p.activation) {
    return absl::InvalidArgumentError(
        "moe variants (router, norm_top_k, score_bias, groups, top_groups, scale, activation) "
        "must match the parent's");
  }
  const int64_t e = spec_.experts, f = spec_.expert_ffn, s = spec_.shared_ffn;
  if (e > 0 && p.groups > 1) TAILOR_RETURN_IF_ERROR(CheckGroupedChild(spec_, p));
  if (e > 0) {
    // The first e / groups experts of every routing group (all of a prefix with groups = 1):
    // each group keeps its best, so the child routes over the same groups.
    const std::vector<int64_t> kept = KeptExperts(p, e);
    const at::Tensor idx = IndexTensor(kept, parent->router_.device());
    AssignParameter(router_, parent->router_.index_select(0, idx).index_select(1, hidden));
    if (swiglu()) {
      AssignParameter(w_gate_,
                      parent->w_gate_.index_select(0, idx).narrow(1, 0, f).index_select(2, hidden));
    }
    AssignParameter(w_up_,
                    parent->w_up_.index_select(0, idx).narrow(1, 0, f).index_select(2, hidden));
    AssignParameter(w_down_,
                    parent->w_down_.index_select(0, idx).index_select(1, hidden).narrow(2, 0, f));
    if (spec_.score_bias) AssignParameter(score_bias_, parent->score_bias_.index_select(0, idx));
  }
  if (s > 0) {
    if (swiglu()) {
      AssignParameter(shared_gate_, parent->shared_gate_.narrow(0, 0, s).index_select(1, hidden));
    }
    AssignParameter(shared_up_, parent->shared_up_.narrow(0, 0, s).index_select(1, hidden));
    AssignParameter(shared_down_, parent->shared_down_.index_select(0, hidden).narrow(1, 0, s));
  }
  return absl::OkStatus();
}

}  // namespace tailor::model
