#include "compression/autocompress/space.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace tailor::autocompress {
namespace {

using model::HybridConfig;
using model::LayerKind;
using model::LayerSpec;

// round(full * i / n) for i = 1..n (rounded to a multiple of `multiple`), plus 0 when
// `with_zero`; ascending and distinct; the last is always `full`.
std::vector<int64_t> Widths(int64_t full, int n, bool with_zero, int64_t min_nonzero = 1,
                            int64_t multiple = 1) {
  std::vector<int64_t> w;
  if (with_zero) w.push_back(0);
  for (int i = 1; i <= n; ++i) {
    const double units = static_cast<double>(full) * i / n / static_cast<double>(multiple);
    const int64_t v = static_cast<int64_t>(std::llround(units)) * multiple;
    if (v >= min_nonzero && v <= full) w.push_back(v);
  }
  if (w.empty() || w.back() != full) w.push_back(full);
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  return w;
}

// Expert counts of a MoE layer, all >= top_k (a masked expert keeps its routing slot, so the
// child keeps the parent's top_k). With routing groups they are k * groups, k >= 2 kept in
// EVERY group (model::KeptExperts) and top_groups * k >= top_k, so the child routes over the
// parent's groups.
// `at_least_two`: llama.cpp's `nemotron_h_moe` aborts (GGML_ASSERT n_expert_groups < n_expert)
// on a single expert of a single group.
std::vector<int64_t> ExpertWidths(const model::MoeSpec& m, int n, bool with_zero,
                                  bool at_least_two) {
  if (m.groups <= 1) {
    return Widths(m.experts, n, with_zero,
                  at_least_two ? std::max<int64_t>(2, m.top_k) : m.top_k);
  }
  const int64_t per_group = std::max<int64_t>(2, (m.top_k + m.top_groups - 1) / m.top_groups);
  return Widths(m.experts, n, with_zero, per_group * m.groups, m.groups);
}

ChoiceAxis Axis(AxisKind kind, int layer, std::vector<int64_t> widths, absl::string_view what) {
  ChoiceAxis a;
  a.kind = kind;
  a.layer = layer;
  a.widths = std::move(widths);
  a.name = layer < 0 ? std::string(what) : absl::StrCat("layers[", layer, "].", what);
  return a;
}

// Ties the per-layer axes of one kind and the same widths (the same parent width) into the
// first of them: its choice then sets every one of those layers.
std::vector<ChoiceAxis> TieLayers(std::vector<ChoiceAxis> axes,
                                  const std::function<bool(AxisKind)>& tied) {
  std::vector<ChoiceAxis> out;
  for (ChoiceAxis& a : axes) {
    ChoiceAxis* same = nullptr;
    for (ChoiceAxis& o : out) {
      if (a.layer >= 0 && o.layer >= 0 && o.kind == a.kind && o.widths == a.widths &&
          tied(a.kind)) {
        same = &o;
      }
    }
    if (same == nullptr) {
      out.push_back(std::move(a));
    } else {
      same->tied_layers.push_back(a.layer);
    }
  }
  for (ChoiceAxis& a : out) {
    if (a.tied_layers.empty()) continue;
    const std::string what = a.name.substr(a.name.find("]."));
    std::vector<std::string> ids;
    for (int l : a.layers()) ids.push_back(absl::StrCat(l));
    a.name = absl::StrCat("layers[", absl::StrJoin(ids, ","), what);
  }
  return out;
}

// Sets a per-layer axis's width `w` on layer `l` (widths of 0 remove the part).
void ApplyLayerWidth(AxisKind kind, int64_t w, LayerSpec& l) {
  switch (kind) {
    case AxisKind::kHidden:
    case AxisKind::kMambaHeads:
      break;  // global
    case AxisKind::kAttentionHeads:
      l.attention.heads = l.attention.kv_heads * w;
      if (w == 0) l.attention.kv_heads = 0;
      break;
    case AxisKind::kExperts:
      l.moe.experts = w;
      break;
    case AxisKind::kExpertFfn:
      l.moe.expert_ffn = w;
      break;
    case AxisKind::kSharedFfn:
      l.moe.shared_ffn = w;
      break;
    case AxisKind::kMlpFfn:
      l.mlp.ffn = w;
      break;
  }
}

}  // namespace

std::vector<int> ChoiceAxis::layers() const {
  std::vector<int> out;
  if (layer < 0) return out;
  out.push_back(layer);
  out.insert(out.end(), tied_layers.begin(), tied_layers.end());
  return out;
}

bool ChoiceAxis::covers(int l) const {
  return l >= 0 && (l == layer || std::find(tied_layers.begin(), tied_layers.end(), l) !=
                                      tied_layers.end());
}

int64_t SearchSpace::total_choices() const {
  int64_t n = 0;
  for (const ChoiceAxis& a : axes) n += static_cast<int64_t>(a.widths.size());
  return n;
}

absl::StatusOr<SearchSpace> BuildSearchSpace(const HybridConfig& parent,
                                             const SpaceOptions& options) {
  TAILOR_RETURN_IF_ERROR(model::ValidateHybridConfig(parent));
  if (options.width_choices < 1) {
    return absl::InvalidArgumentError("width_choices must be >= 1");
  }
  const int n = options.width_choices;
  const bool zero = options.allow_removal && !options.uniform_layers;
  SearchSpace space;
  const bool heads = options.prune_hidden_and_heads;
  space.axes.push_back(Axis(AxisKind::kHidden, -1,
                            heads ? Widths(parent.hidden, n, false)
                                  : std::vector<int64_t>{parent.hidden},
                            "hidden"));
  int64_t mamba_heads = 0;
  for (const LayerSpec& l : parent.layers) {
    if (l.kind == LayerKind::kMamba) mamba_heads = std::max(mamba_heads, l.mamba.heads);
  }
  if (mamba_heads > 0) {
    // Multiples of every layer's B/C groups: each group keeps as many heads.
    const int64_t multiple = model::MambaHeadMultiple(parent);
    space.axes.push_back(Axis(AxisKind::kMambaHeads, -1,
                              Widths(mamba_heads, n, false, multiple, multiple), "mamba_heads"));
  }
  for (int i = 0; i < parent.num_layers(); ++i) {
    const LayerSpec& l = parent.layers[i];
    if (!l.present()) continue;
    switch (l.kind) {
      case LayerKind::kAttention: {
        const int64_t g = l.attention.heads / l.attention.kv_heads;
        space.axes.push_back(Axis(AxisKind::kAttentionHeads, i,
                                  heads ? Widths(g, n, zero) : std::vector<int64_t>{g},
                                  "attention_heads_per_group"));
        break;
      }
      case LayerKind::kMamba:
        break;  // global axis
      case LayerKind::kMoe: {
        // keep_shared_experts: routed experts are never all removed (the shared expert would
        // be left alone, which the layout cannot hold), and the shared expert stays whole.
        const bool keep = options.keep_shared_experts && l.moe.shared_ffn > 0;
        if (l.moe.experts > 0) {
          space.axes.push_back(
              Axis(AxisKind::kExperts, i, ExpertWidths(l.moe, n, zero && !keep, keep), "experts"));
          space.axes.push_back(Axis(AxisKind::kExpertFfn, i,
                                    Widths(l.moe.expert_ffn, n, zero && !keep), "expert_ffn"));
        }
        if (l.moe.shared_ffn > 0 && options.search_shared_ffn && !keep) {
          space.axes.push_back(
              Axis(AxisKind::kSharedFfn, i, Widths(l.moe.shared_ffn, n, zero), "shared_ffn"));
        }
        break;
      }
      case LayerKind::kMlp:
        space.axes.push_back(Axis(AxisKind::kMlpFfn, i, Widths(l.mlp.ffn, n, zero), "mlp_ffn"));
        break;
    }
  }
  if (options.uniform_layers) {
    space.axes = TieLayers(std::move(space.axes), [](AxisKind) { return true; });
  } else if (options.keep_shared_experts) {
    // The same layout has one expert count for every MoE layer (expert widths per layer).
    space.axes = TieLayers(std::move(space.axes),
                           [](AxisKind k) { return k == AxisKind::kExperts; });
  }
  return space;
}

absl::StatusOr<HybridConfig> ChildConfig(const HybridConfig& parent, const SearchSpace& space,
                                         const std::vector<int>& indices) {
  if (indices.size() != space.axes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ChildConfig: ", indices.size(), " choices for ", space.axes.size(), " axes"));
  }
  HybridConfig child = parent;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    const ChoiceAxis& axis = space.axes[a];
    if (indices[a] < 0 || indices[a] >= static_cast<int>(axis.widths.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          axis.name, ": choice ", indices[a], " out of range [0, ", axis.widths.size(), ")"));
    }
    const int64_t w = axis.widths[indices[a]];
    for (int l : axis.layers()) {
      if (l >= parent.num_layers()) {
        return absl::InvalidArgumentError(absl::StrCat(axis.name, ": no such layer"));
      }
      ApplyLayerWidth(axis.kind, w, child.layers[l]);
    }
    if (axis.kind == AxisKind::kHidden) child.hidden = w;
    if (axis.kind == AxisKind::kMambaHeads) {
      for (LayerSpec& m : child.layers) {
        if (m.kind == LayerKind::kMamba && m.mamba.heads > 0) {
          m.mamba.heads = model::KeptMambaHeads(m.mamba, w);
        }
      }
    }
  }
  for (LayerSpec& l : child.layers) {
    if (l.kind == LayerKind::kMoe && (l.moe.experts == 0 || l.moe.expert_ffn == 0)) {
      l.moe.experts = l.moe.top_k = l.moe.expert_ffn = 0;
    }
  }
  TAILOR_RETURN_IF_ERROR(model::ValidateHybridConfig(child));
  return child;
}

namespace {

// The axes whose widths are units of a matrix, not counts of heads or experts.
bool Divisible(AxisKind kind) {
  return kind == AxisKind::kHidden || kind == AxisKind::kMlpFfn ||
         kind == AxisKind::kExpertFfn || kind == AxisKind::kSharedFfn;
}

}  // namespace

SearchSpace RefineSpace(const SearchSpace& space, int fine_steps) {
  SearchSpace fine = space;
  if (fine_steps <= 1) return fine;
  for (ChoiceAxis& axis : fine.axes) {
    if (!Divisible(axis.kind)) continue;
    std::vector<int64_t> widths;
    for (size_t i = 0; i < axis.widths.size(); ++i) {
      const int64_t w = axis.widths[i];
      if (i > 0 && axis.widths[i - 1] > 0) {
        const int64_t from = axis.widths[i - 1];
        for (int k = 1; k < fine_steps; ++k) {
          widths.push_back(from + std::llround(static_cast<double>(w - from) * k / fine_steps));
        }
      }
      widths.push_back(w);
    }
    std::sort(widths.begin(), widths.end());
    widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
    axis.widths = std::move(widths);
  }
  return fine;
}

absl::StatusOr<std::vector<int>> RefineIndices(const SearchSpace& coarse,
                                               const SearchSpace& fine,
                                               const std::vector<int>& indices) {
  if (coarse.axes.size() != fine.axes.size() || indices.size() != coarse.axes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RefineIndices: ", indices.size(), " choices for ", coarse.axes.size(),
                     " axes of the search space and ", fine.axes.size(), " of the fine one"));
  }
  std::vector<int> out(indices.size());
  for (size_t a = 0; a < indices.size(); ++a) {
    const ChoiceAxis& c = coarse.axes[a];
    const ChoiceAxis& f = fine.axes[a];
    if (c.name != f.name || indices[a] < 0 ||
        indices[a] >= static_cast<int>(c.widths.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("RefineIndices: ", c.name, ": choice ", indices[a], " has no counterpart"));
    }
    const auto it = std::find(f.widths.begin(), f.widths.end(), c.widths[indices[a]]);
    if (it == f.widths.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RefineIndices: ", c.name, ": width ", c.widths[indices[a]], " is not in ", f.name));
    }
    out[a] = static_cast<int>(it - f.widths.begin());
  }
  return out;
}

}  // namespace tailor::autocompress
