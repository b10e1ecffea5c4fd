#include "compression/costmodel/search_space.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace tailor::costmodel {

using model::LayerKind;
using model::LayerSpec;

std::vector<int64_t> StepChoices(int64_t n, int steps, int64_t multiple) {
  std::vector<int64_t> out;
  if (n <= 0 || steps <= 0) return out;
  multiple = std::max<int64_t>(multiple, 1);
  for (int k = 1; k <= steps; ++k) {
    const double units = static_cast<double>(n) * k / steps / static_cast<double>(multiple);
    int64_t v = std::max<int64_t>(1, static_cast<int64_t>(std::llround(units))) * multiple;
    if (k == steps || v > n) v = n;
    if (out.empty() || out.back() < v) out.push_back(v);
  }
  return out;
}

LayerSpec AttentionOf(const LayerSpec& parent, int64_t heads, int64_t kv_heads) {
  LayerSpec l = parent;
  l.attention.heads = heads;
  l.attention.kv_heads = kv_heads;
  return l;
}

LayerSpec MambaOf(const LayerSpec& parent, int64_t heads) {
  LayerSpec l = parent;
  l.mamba.heads = heads;
  return l;
}

LayerSpec MoeOf(const LayerSpec& parent, int64_t experts, int64_t expert_ffn,
                int64_t shared_ffn) {
  LayerSpec l = parent;
  l.moe.experts = experts;
  l.moe.expert_ffn = experts > 0 ? expert_ffn : 0;
  l.moe.shared_ffn = shared_ffn;
  const model::MoeSpec& p = parent.moe;
  const int64_t reachable = p.groups > 0 ? p.top_groups * (experts / p.groups) : experts;
  l.moe.top_k = experts > 0 ? std::min({p.top_k, experts, reachable}) : 0;
  return l;
}

LayerSpec MlpOf(const LayerSpec& parent, int64_t ffn) {
  LayerSpec l = parent;
  l.mlp.ffn = ffn;
  return l;
}

std::vector<int64_t> AttentionKvChoices(const model::AttentionSpec& a, int steps,
                                        bool prune_heads) {
  return prune_heads ? StepChoices(a.kv_heads, steps) : std::vector<int64_t>{a.kv_heads};
}

std::vector<int64_t> AttentionGroupChoices(const model::AttentionSpec& a, int steps,
                                           bool prune_heads) {
  const int64_t groups = a.heads / a.kv_heads;
  return prune_heads ? StepChoices(groups, steps) : std::vector<int64_t>{groups};
}

std::vector<int64_t> ExpertChoices(const model::MoeSpec& m, int steps) {
  if (m.groups <= 1) return StepChoices(m.experts, steps);
  // k experts of EVERY routing group (model::KeptExperts), k >= 2: a group's score is the
  // sum of its two best. The steps are those of the per-group count.
  std::vector<int64_t> out;
  for (int64_t e : StepChoices(m.experts, steps, m.groups)) {
    if (e >= 2 * m.groups) out.push_back(e);
  }
  return out;
}

namespace {

// Every option keeps the parent's block variant (biases, q/k norms, RoPE, Mamba groups and
// norm, MoE routing, activations): only widths change.
std::vector<LayerOption> AttentionOptions(const LayerSpec& p, int steps, bool prune_heads) {
  std::vector<LayerOption> out = {{AttentionOf(p, 0, 0), "removed"}};
  if (!p.present()) return out;
  for (int64_t kv : AttentionKvChoices(p.attention, steps, prune_heads)) {
    for (int64_t g : AttentionGroupChoices(p.attention, steps, prune_heads)) {
      out.push_back({AttentionOf(p, kv * g, kv), absl::StrCat("heads=", kv * g, ",kv=", kv)});
    }
  }
  return out;
}

std::vector<LayerOption> MambaOptions(const LayerSpec& p) {
  std::vector<LayerOption> out = {{MambaOf(p, 0), "removed"}};
  if (p.present()) out.push_back({p, "keep"});
  return out;
}

std::vector<LayerOption> MoeOptions(const LayerSpec& p, int steps, bool keep_shared) {
  const model::MoeSpec& m = p.moe;
  std::vector<int64_t> shared = {0};
  for (int64_t s : StepChoices(m.shared_ffn, steps)) shared.push_back(s);
  // keep_shared_experts: routed experts always kept, the shared expert whole (the
  // autocompress space's rule, autocompress/space.h).
  const bool keep = keep_shared && m.shared_ffn > 0;
  if (keep) shared = {m.shared_ffn};
  std::vector<LayerOption> out;
  // Routed part dropped: removed (shared 0) or a dense MLP through the shared expert.
  for (int64_t s : keep ? std::vector<int64_t>() : shared) {
    out.push_back(
        {MoeOf(p, 0, 0, s), s == 0 ? std::string("removed") : absl::StrCat("shared_ffn=", s)});
  }
  for (int64_t e : ExpertChoices(m, steps)) {
    // llama.cpp aborts on n_expert_groups >= n_expert (GGML_ASSERT), one group included.
    if (keep && e <= std::max<int64_t>(1, m.groups)) continue;
    for (int64_t f : StepChoices(m.expert_ffn, steps)) {
      for (int64_t s : shared) {
        out.push_back({MoeOf(p, e, f, s),
                       absl::StrCat("experts=", e, ",expert_ffn=", f, ",shared_ffn=", s)});
      }
    }
  }
  return out;
}

std::vector<LayerOption> MlpOptions(const LayerSpec& p, int steps) {
  std::vector<LayerOption> out = {{MlpOf(p, 0), "removed"}};
  for (int64_t f : StepChoices(p.mlp.ffn, steps)) {
    out.push_back({MlpOf(p, f), absl::StrCat("ffn=", f)});
  }
  return out;
}

// `nemotron_h_moe` has one expert count (hence one top-k) for all MoE layers: each later MoE
// layer that keeps routed experts takes the first such layer's count at its own drawn widths
// (SearchSpaceOptions::keep_shared_experts marks that layout).
void TieExpertCounts(const std::vector<std::vector<LayerOption>>& options, Architecture& a) {
  int64_t experts = 0;
  for (size_t i = 0; i < options.size(); ++i) {
    const model::MoeSpec& drawn = options[i][a.layers[i]].spec.moe;
    if (options[i][a.layers[i]].spec.kind != LayerKind::kMoe || drawn.experts == 0) continue;
    if (experts == 0) {
      experts = drawn.experts;
      continue;
    }
    for (size_t o = 0; o < options[i].size(); ++o) {
      const model::MoeSpec& m = options[i][o].spec.moe;
      if (m.experts == experts && m.expert_ffn == drawn.expert_ffn &&
          m.shared_ffn == drawn.shared_ffn) {
        a.layers[i] = static_cast<int>(o);
        break;
      }
    }
  }
}

}  // namespace

absl::StatusOr<SearchSpace> SearchSpace::FromParent(const model::HybridConfig& parent,
                                                    const SearchSpaceOptions& options) {
  TAILOR_RETURN_IF_ERROR(model::ValidateHybridConfig(parent));
  if (options.hidden_steps < 1 || options.width_steps < 1 || options.hidden_multiple < 1) {
    return absl::InvalidArgumentError(
        "search space: hidden_steps, width_steps and hidden_multiple must be >= 1");
  }
  SearchSpace s;
  s.parent_ = parent;
  s.options_ = options;
  for (int k = options.prune_hidden_and_heads ? 1 : options.hidden_steps;
       k <= options.hidden_steps; ++k) {
    int64_t h = parent.hidden * k / options.hidden_steps;
    h = std::max(options.hidden_multiple, h / options.hidden_multiple * options.hidden_multiple);
    h = std::min(h, parent.hidden);
    if (k == options.hidden_steps) h = parent.hidden;
    if (s.hidden_.empty() || s.hidden_.back() < h) s.hidden_.push_back(h);
  }
  int64_t max_mamba = 0;
  for (const LayerSpec& l : parent.layers) {
    if (l.kind == LayerKind::kMamba) max_mamba = std::max(max_mamba, l.mamba.heads);
  }
  // Multiples of every Mamba layer's B/C groups, so each group keeps as many heads.
  s.mamba_heads_ = max_mamba > 0 ? StepChoices(max_mamba, options.width_steps,
                                               model::MambaHeadMultiple(parent))
                                 : std::vector<int64_t>{0};
  for (const LayerSpec& l : parent.layers) {
    switch (l.kind) {
      case LayerKind::kAttention:
        s.options_by_layer_.push_back(
            AttentionOptions(l, options.width_steps, options.prune_hidden_and_heads));
        break;
      case LayerKind::kMamba:
        s.options_by_layer_.push_back(MambaOptions(l));
        break;
      case LayerKind::kMoe:
        s.options_by_layer_.push_back(
            MoeOptions(l, options.width_steps, options.keep_shared_experts));
        break;
      case LayerKind::kMlp:
        s.options_by_layer_.push_back(MlpOptions(l, options.width_steps));
        break;
    }
  }
  return s;
}

LayerSpec SearchSpace::LayerSpecFor(int layer, int option, int mamba_heads_index) const {
  LayerSpec spec = options_by_layer_[layer][option].spec;
  if (spec.kind == LayerKind::kMamba && spec.present()) {
    spec.mamba.heads = model::KeptMambaHeads(spec.mamba, mamba_heads_[mamba_heads_index]);
  }
  return spec;
}

Architecture SearchSpace::ParentArchitecture() const {
  Architecture a;
  a.hidden = static_cast<int>(hidden_.size()) - 1;
  a.mamba_heads = static_cast<int>(mamba_heads_.size()) - 1;
  for (int i = 0; i < num_layers(); ++i) {
    const std::vector<LayerOption>& opts = options_by_layer_[i];
    int pick = static_cast<int>(opts.size()) - 1;
    for (int o = 0; o < static_cast<int>(opts.size()); ++o) {
      if (opts[o].spec == parent_.layers[i]) pick = o;
    }
    a.layers.push_back(pick);
  }
  return a;
}

absl::Status SearchSpace::Validate(const Architecture& a) const {
  if (a.hidden < 0 || a.hidden >= static_cast<int>(hidden_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("architecture.hidden: index ", a.hidden, " not in [0, ", hidden_.size(), ")"));
  }
  if (a.mamba_heads < 0 || a.mamba_heads >= static_cast<int>(mamba_heads_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("architecture.mamba_heads: index ",
                                                   a.mamba_heads, " not in [0, ",
                                                   mamba_heads_.size(), ")"));
  }
  if (static_cast<int>(a.layers.size()) != num_layers()) {
    return absl::InvalidArgumentError(absl::StrCat("architecture.layers: ", a.layers.size(),
                                                   " entries for ", num_layers(), " layers"));
  }
  for (int i = 0; i < num_layers(); ++i) {
    const int n = static_cast<int>(options_by_layer_[i].size());
    if (a.layers[i] < 0 || a.layers[i] >= n) {
      return absl::InvalidArgumentError(absl::StrCat("architecture.layers[", i, "]: index ",
                                                     a.layers[i], " not in [0, ", n, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<model::HybridConfig> SearchSpace::Materialize(const Architecture& a) const {
  TAILOR_RETURN_IF_ERROR(Validate(a));
  model::HybridConfig c = parent_;
  c.hidden = hidden_[a.hidden];
  for (int i = 0; i < num_layers(); ++i) c.layers[i] = LayerSpecFor(i, a.layers[i], a.mamba_heads);
  TAILOR_RETURN_IF_ERROR(model::ValidateHybridConfig(c));
  return c;
}

Architecture SearchSpace::Sample(std::mt19937_64& rng) const {
  auto pick = [&rng](size_t n) {
    return static_cast<int>(std::uniform_int_distribution<size_t>(0, n - 1)(rng));
  };
  Architecture a;
  a.hidden = pick(hidden_.size());
  a.mamba_heads = pick(mamba_heads_.size());
  if (!options_.uniform_layers) {
    for (int i = 0; i < num_layers(); ++i) a.layers.push_back(pick(options_by_layer_[i].size()));
    if (options_.keep_shared_experts) TieExpertCounts(options_by_layer_, a);
    return a;
  }
  // Layers of one parent spec have the same options: one draw among the present ones each.
  std::vector<std::pair<LayerSpec, int>> drawn;
  for (int i = 0; i < num_layers(); ++i) {
    const LayerSpec& p = parent_.layers[i];
    auto it = std::find_if(drawn.begin(), drawn.end(), [&](const auto& d) { return d.first == p; });
    if (it == drawn.end()) {
      const size_t n = options_by_layer_[i].size();
      drawn.emplace_back(p, n > 1 ? 1 + pick(n - 1) : 0);
      it = drawn.end() - 1;
    }
    a.layers.push_back(it->second);
  }
  return a;
}

double SearchSpace::Log10Size() const {
  double s = std::log10(static_cast<double>(hidden_.size())) +
             std::log10(static_cast<double>(mamba_heads_.size()));
  for (const auto& opts : options_by_layer_) s += std::log10(static_cast<double>(opts.size()));
  return s;
}

std::string SearchSpace::Describe(const Architecture& a) const {
  std::vector<std::string> parts = {
      absl::StrCat("hidden=", hidden_[a.hidden], " mamba_heads=", mamba_heads_[a.mamba_heads])};
  for (int i = 0; i < num_layers(); ++i) {
    parts.push_back(absl::StrCat(model::LayerKindName(parent_.layers[i].kind), " ",
                                 options_by_layer_[i][a.layers[i]].label));
  }
  return absl::StrJoin(parts, " | ");
}

std::string LayerKey(const LayerSpec& l, int64_t hidden) {
  if (!l.present()) return "removed";
  switch (l.kind) {
    case LayerKind::kAttention:
      return absl::StrCat("hidden=", hidden, ",heads=", l.attention.heads,
                          ",kv=", l.attention.kv_heads, ",head_dim=", l.attention.head_dim);
    case LayerKind::kMamba:
      return absl::StrCat("hidden=", hidden, ",heads=", l.mamba.heads,
                          ",head_dim=", l.mamba.head_dim, ",state=", l.mamba.state,
                          ",conv=", l.mamba.conv_kernel, ",chunk=", l.mamba.chunk);
    case LayerKind::kMoe:
      return absl::StrCat("hidden=", hidden, ",experts=", l.moe.experts, ",top_k=", l.moe.top_k,
                          ",expert_ffn=", l.moe.expert_ffn, ",shared_ffn=", l.moe.shared_ffn);
    case LayerKind::kMlp:
      return absl::StrCat("hidden=", hidden, ",ffn=", l.mlp.ffn);
  }
  return "removed";
}

std::map<std::string, double> LayerParams(const LayerSpec& l, int64_t hidden) {
  std::map<std::string, double> p = {{"hidden", static_cast<double>(hidden)}};
  auto d = [](int64_t v) { return static_cast<double>(v); };
  switch (l.kind) {
    case LayerKind::kAttention:
      p["heads"] = d(l.attention.heads);
      p["kv"] = d(l.attention.kv_heads);
      p["head_dim"] = d(l.attention.head_dim);
      break;
    case LayerKind::kMamba:
      p["heads"] = d(l.mamba.heads);
      p["head_dim"] = d(l.mamba.head_dim);
      p["state"] = d(l.mamba.state);
      p["conv"] = d(l.mamba.conv_kernel);
      p["chunk"] = d(l.mamba.chunk);
      break;
    case LayerKind::kMoe:
      p["experts"] = d(l.moe.experts);
      p["top_k"] = d(l.moe.top_k);
      p["expert_ffn"] = d(l.moe.expert_ffn);
      p["shared_ffn"] = d(l.moe.shared_ffn);
      break;
    case LayerKind::kMlp:
      p["ffn"] = d(l.mlp.ffn);
      break;
  }
  return p;
}

}  // namespace tailor::costmodel
