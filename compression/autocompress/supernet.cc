#include "compression/autocompress/supernet.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"

namespace tailor::autocompress {
namespace {

using model::LayerKind;
using model::LayerSpec;

absl::Status FromTorch(const c10::Error& e, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
}

// KeepMatrix of the global Mamba axis for one layer: choice j keeps the first
// KeptMambaHeads / groups heads of each B/C group (what SliceHybridLM keeps).
at::Tensor MambaKeepMatrix(const ChoiceAxis& axis, const model::MambaSpec& m) {
  const int64_t n = static_cast<int64_t>(axis.widths.size()), per = m.heads / m.groups;
  std::vector<int64_t> kept;
  for (int64_t w : axis.widths) kept.push_back(model::KeptMambaHeads(m, w) / m.groups);
  at::Tensor unit = torch::arange(m.heads, torch::kLong).remainder(per);
  at::Tensor widths = torch::tensor(kept, torch::kLong).view({n, 1});
  return (unit.view({1, m.heads}) < widths).to(torch::kFloat);
}

// KeepMatrix of an expert axis on one layer: choice j keeps model::KeptExperts(width_j),
// with routing groups the first width_j / groups experts of each group (what SliceHybridLM
// keeps; a plain prefix with groups = 1).
at::Tensor ExpertKeepMatrix(const ChoiceAxis& axis, const model::MoeSpec& m) {
  const int64_t n = static_cast<int64_t>(axis.widths.size());
  at::Tensor keep = torch::zeros({n, m.experts});
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t e : model::KeptExperts(m, axis.widths[j])) keep[j][e] = 1.0;
  }
  return keep;
}

// The expected keep-mask of a per-layer axis's soft choice `y` on one layer it covers.
void SetLayerMask(const ChoiceAxis& axis, const at::Tensor& y, const LayerSpec& l,
                  model::LayerMask& lm) {
  auto expected = [&](int64_t channels, int64_t group = 0) {
    return torch::matmul(y, KeepMatrix(axis, channels, group).to(y.options()));
  };
  switch (axis.kind) {
    case AxisKind::kHidden:
    case AxisKind::kMambaHeads:
      break;  // global
    case AxisKind::kAttentionHeads:
      lm.attention_heads = expected(l.attention.heads, l.attention.heads / l.attention.kv_heads);
      break;
    case AxisKind::kExperts:
      lm.experts = torch::matmul(y, ExpertKeepMatrix(axis, l.moe).to(y.options()));
      break;
    case AxisKind::kExpertFfn:
      lm.expert_ffn = expected(l.moe.expert_ffn);
      break;
    case AxisKind::kSharedFfn:
      lm.shared_ffn = expected(l.moe.shared_ffn);
      break;
    case AxisKind::kMlpFfn:
      lm.mlp_ffn = expected(l.mlp.ffn);
      break;
  }
}

}  // namespace

at::Tensor KeepMatrix(const ChoiceAxis& axis, int64_t channels, int64_t group) {
  const int64_t n = static_cast<int64_t>(axis.widths.size());
  at::Tensor unit = torch::arange(channels, torch::kLong);
  if (group > 0) unit = unit.remainder(group);  // rank inside the GQA group
  at::Tensor widths = torch::tensor(axis.widths, torch::kLong).view({n, 1});
  return (unit.view({1, channels}) < widths).to(torch::kFloat);
}

absl::StatusOr<model::ArchMask> SoftArchMask(const model::HybridConfig& parent,
                                             const SearchSpace& space,
                                             const std::vector<at::Tensor>& choices) {
  if (choices.size() != space.axes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SoftArchMask: ", choices.size(), " choice vectors for ", space.axes.size(), " axes"));
  }
  try {
    model::ArchMask mask;
    mask.layers.resize(parent.num_layers());
    for (size_t a = 0; a < space.axes.size(); ++a) {
      const ChoiceAxis& axis = space.axes[a];
      const at::Tensor& y = choices[a];
      const int64_t n = static_cast<int64_t>(axis.widths.size());
      if (!y.defined() || y.dim() < 1 || y.dim() > 2 || y.size(-1) != n) {
        return absl::InvalidArgumentError(
            absl::StrCat(axis.name, ": choice vector must be [", n, "] or [N, ", n, "]"));
      }
      for (int l : axis.layers()) {
        if (l >= parent.num_layers()) {
          return absl::InvalidArgumentError(absl::StrCat(axis.name, ": no such layer"));
        }
        SetLayerMask(axis, y, parent.layers[l], mask.layers[l]);
      }
      if (axis.kind == AxisKind::kHidden) {
        mask.hidden = torch::matmul(y, KeepMatrix(axis, parent.hidden, 0).to(y.options()));
      }
      if (axis.kind == AxisKind::kMambaHeads) {
        for (int64_t i = 0; i < parent.num_layers(); ++i) {
          const LayerSpec& m = parent.layers[i];
          if (m.kind == LayerKind::kMamba && m.mamba.heads > 0) {
            mask.layers[i].mamba_heads =
                torch::matmul(y, MambaKeepMatrix(axis, m.mamba).to(y.options()));
          }
        }
      }
    }
    return mask;
  } catch (const c10::Error& e) {
    return FromTorch(e, "SoftArchMask");
  }
}

std::vector<at::Tensor> OneHotChoices(const SearchSpace& space, const std::vector<int>& indices) {
  std::vector<at::Tensor> out;
  for (size_t a = 0; a < space.axes.size() && a < indices.size(); ++a) {
    at::Tensor y = torch::zeros({static_cast<int64_t>(space.axes[a].widths.size())});
    y[indices[a]] = 1.0;
    out.push_back(y);
  }
  return out;
}

absl::StatusOr<at::Tensor> MoeForwardWithMasking(const model::Mixer& moe, int64_t top_k,
                                                 const at::Tensor& x, const at::Tensor& expert_mask,
                                                 MoeMaskMode mode) {
  const auto params = moe.named_parameters(/*recurse=*/false);
  for (const char* name : {"router", "w_gate", "w_up", "w_down"}) {
    if (params.find(name) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("MoeForwardWithMasking: layer has no '", name, "' (not routed MoE)"));
    }
  }
  try {
    const at::Tensor& router = params["router"];
    const at::Tensor& w_gate = params["w_gate"];
    const at::Tensor& w_up = params["w_up"];
    const at::Tensor& w_down = params["w_down"];
    const int64_t experts = router.size(0), b = x.size(0), t = x.size(1), hid = x.size(2);
    at::Tensor xf = x.reshape({b * t, hid});
    at::Tensor logits = torch::linear(xf, router);
    at::Tensor top_idx, gates;
    if (mode == MoeMaskMode::kOutput) {
      auto [top_logits, idx] = logits.topk(top_k, -1);
      top_idx = idx;
      gates = torch::softmax(top_logits, -1);
    } else {
      at::Tensor scores = torch::softmax(logits, -1) * expert_mask;
      auto [top_scores, idx] = scores.topk(top_k, -1);
      top_idx = idx;
      gates = top_scores / top_scores.sum(-1, /*keepdim=*/true).clamp_min(1e-12);
    }
    at::Tensor out = torch::zeros({b * t, hid}, x.options());
    for (int64_t e = 0; e < experts; ++e) {
      at::Tensor hit = top_idx == e;
      at::Tensor rows = hit.any(1).nonzero().squeeze(1);
      if (rows.numel() == 0) continue;
      at::Tensor weight = (gates * hit).sum(1).index_select(0, rows);
      at::Tensor xe = xf.index_select(0, rows);
      at::Tensor act = torch::silu(torch::linear(xe, w_gate[e])) * torch::linear(xe, w_up[e]);
      at::Tensor ye = torch::linear(act, w_down[e]);
      if (mode == MoeMaskMode::kOutput) weight = weight * expert_mask[e];
      out = out.index_add(0, rows, ye * weight.unsqueeze(1));
    }
    return out.view({b, t, hid});
  } catch (const c10::Error& e) {
    return FromTorch(e, "MoeForwardWithMasking");
  }
}

}  // namespace tailor::autocompress
