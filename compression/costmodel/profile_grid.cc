#include "compression/costmodel/profile_grid.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/costmodel/cost_model.h"

namespace tailor::costmodel {

using model::LayerKind;
using model::LayerSpec;

namespace {

// The grid of one layer class: axes (hidden excluded), how to build a layer from a node,
// and the parent's layer positions of that class (where its nodes are profiled).
struct ClassGrid {
  std::vector<std::set<int64_t>> axes;
  std::function<LayerSpec(const std::vector<int64_t>&)> make;
  std::vector<int> positions;
};

// The routing / activation fields of a MoE block, for class keys.
std::string MoeVariantKey(const model::MoeSpec& m) {
  return absl::StrCat(model::MoeRouterName(m.router), ",", m.norm_top_k, ",", m.score_bias, ",",
                      m.groups, ",", m.top_groups, ",", m.scale, ",",
                      model::FfnActivationName(m.activation));
}

void AddAxes(std::map<std::string, ClassGrid>& classes, const std::string& key, int position,
             const std::vector<std::vector<int64_t>>& axes,
             std::function<LayerSpec(const std::vector<int64_t>&)> make) {
  ClassGrid& g = classes[key];
  if (g.axes.empty()) {
    g.axes.resize(axes.size());
    g.make = std::move(make);
  }
  g.positions.push_back(position);
  // Parent layers of one class may differ (e.g. in KV groups): the union of their points
  // keeps the class's grid complete.
  for (size_t a = 0; a < axes.size(); ++a) g.axes[a].insert(axes[a].begin(), axes[a].end());
}

// A class's layers are the parent's block variant at grid widths (search_space.h, *Of): the
// key names the variant too, so two variants never share one class's nodes.
void AddLayerClasses(const LayerSpec& p, int position, const SearchSpace& space, int max_points,
                     std::map<std::string, ClassGrid>& classes) {
  if (!p.present()) return;
  const int steps = space.options().width_steps;
  auto pts = [max_points](const std::vector<int64_t>& v) {
    return SelectAxisPoints(v, max_points);
  };
  switch (p.kind) {
    case LayerKind::kAttention: {
      const model::AttentionSpec a = p.attention;
      AddAxes(classes,
              absl::StrCat("attention|", a.head_dim, "|", a.qkv_bias, a.o_bias, a.qk_norm, a.rope),
              position,
              {pts(AttentionKvChoices(a, steps, space.options().prune_hidden_and_heads)),
               pts(AttentionGroupChoices(a, steps, space.options().prune_hidden_and_heads))},
              [p](const std::vector<int64_t>& x) { return AttentionOf(p, x[0] * x[1], x[0]); });
      break;
    }
    case LayerKind::kMamba: {
      const model::MambaSpec m = p.mamba;
      std::vector<int64_t> heads;
      for (int64_t c : space.mamba_head_choices()) {
        const int64_t h = model::KeptMambaHeads(m, c);
        if (heads.empty() || heads.back() != h) heads.push_back(h);
      }
      AddAxes(classes,
              absl::StrCat("mamba|", m.head_dim, ",", m.state, ",", m.conv_kernel, ",", m.chunk,
                           ",", m.groups, ",", model::MambaNormName(m.norm)),
              position, {pts(heads)},
              [p](const std::vector<int64_t>& x) { return MambaOf(p, x[0]); });
      break;
    }
    case LayerKind::kMoe: {
      const model::MoeSpec m = p.moe;
      const std::string variant = MoeVariantKey(m);
      // "No shared expert" is its own regime (the shared path is skipped), so 0 is a node
      // of its own and never an end of an interpolation segment with real widths.
      std::vector<int64_t> shared = {0};
      for (int64_t s : pts(StepChoices(m.shared_ffn, steps))) shared.push_back(s);
      const bool keep_shared = space.options().keep_shared_experts && m.shared_ffn > 0;
      if (keep_shared) shared = {m.shared_ffn};  // SearchSpaceOptions::keep_shared_experts
      std::map<int64_t, std::vector<int64_t>> experts_by_top_k;
      for (int64_t e : ExpertChoices(m, steps)) {
        // As the space's MoeOptions: `nemotron_h_moe` needs more experts than groups.
        if (keep_shared && e <= std::max<int64_t>(1, m.groups)) continue;
        experts_by_top_k[MoeOf(p, e, 1, 0).moe.top_k].push_back(e);
      }
      for (const auto& [k, experts] : experts_by_top_k) {
        AddAxes(classes, absl::StrCat("moe|routed|", k, "|", variant), position,
                {pts(experts), pts(StepChoices(m.expert_ffn, steps)), shared},
                [p](const std::vector<int64_t>& x) { return MoeOf(p, x[0], x[1], x[2]); });
      }
      if (m.shared_ffn > 0 && !keep_shared) {
        AddAxes(classes, absl::StrCat("moe|shared|", variant), position,
                {pts(StepChoices(m.shared_ffn, steps))},
                [p](const std::vector<int64_t>& x) { return MoeOf(p, 0, 0, x[0]); });
      }
      break;
    }
    case LayerKind::kMlp:
      AddAxes(classes,
              absl::StrCat("mlp|", p.mlp.bias, "|", model::FfnActivationName(p.mlp.activation)),
              position, {pts(StepChoices(p.mlp.ffn, steps))},
              [p](const std::vector<int64_t>& x) { return MlpOf(p, x[0]); });
      break;
  }
}

// Every node of the product of `axes`, in lexicographic order.
void ForEachNode(const std::vector<std::set<int64_t>>& axes,
                 const std::function<void(const std::vector<int64_t>&)>& fn) {
  std::vector<std::vector<int64_t>> v;
  for (const auto& a : axes) v.emplace_back(a.begin(), a.end());
  std::vector<size_t> idx(v.size(), 0);
  while (true) {
    std::vector<int64_t> x;
    for (size_t a = 0; a < v.size(); ++a) x.push_back(v[a][idx[a]]);
    fn(x);
    size_t a = v.size();
    while (a > 0) {
      --a;
      if (++idx[a] < v[a].size()) break;
      idx[a] = 0;
      if (a == 0) return;
    }
    if (v.empty()) return;
  }
}

}  // namespace

std::vector<int64_t> SelectAxisPoints(const std::vector<int64_t>& values, int max_points) {
  if (static_cast<int>(values.size()) <= max_points || max_points < 2) {
    return max_points < 1 || values.empty() ? std::vector<int64_t>{} : values;
  }
  std::vector<int64_t> out;
  const double step = static_cast<double>(values.size() - 1) / (max_points - 1);
  for (int i = 0; i < max_points; ++i) {
    const int64_t v = values[static_cast<size_t>(std::llround(i * step))];
    if (out.empty() || out.back() != v) out.push_back(v);
  }
  return out;
}

std::vector<ProfilePoint> ProfileGrid(const SearchSpace& space, int max_points_per_axis,
                                     int max_hidden_points) {
  std::map<std::string, ClassGrid> classes;
  const std::vector<LayerSpec>& layers = space.parent().layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    AddLayerClasses(layers[i], static_cast<int>(i), space, max_points_per_axis, classes);
  }
  std::vector<ProfilePoint> out;
  for (int64_t h : SelectAxisPoints(space.hidden_choices(), max_hidden_points)) {
    for (const auto& [key, g] : classes) {
      // Nodes are dealt to the class's positions in turn, so layers of one kind share the
      // class's nodes instead of each repeating all of them.
      size_t n = 0;
      ForEachNode(g.axes, [&](const std::vector<int64_t>& x) {
        out.push_back({g.make(x), h, g.positions[n++ % g.positions.size()]});
      });
    }
  }
  return out;
}

double RequestFlops(const model::HybridConfig& c, const engine::Workload& w) {
  const double b = static_cast<double>(w.batch_size);
  const double prefill_tokens = b * w.input_tokens;
  const double decode_tokens = b * (w.output_tokens - 1);
  double per_token = 0;  // weights touched per token in the layers (top_k experts only)
  double attention = 0;  // score + value products per (token, context position)
  for (const LayerSpec& l : c.layers) {
    model::HybridConfig one{0, c.hidden, 1};
    one.layers = {l};
    per_token += static_cast<double>(one.ActiveParameterCount() - c.hidden);
    if (l.kind == LayerKind::kAttention && l.present()) {
      attention += 4.0 * static_cast<double>(l.attention.heads * l.attention.head_dim);
    }
  }
  // Context length summed over the timed tokens: prompt token i sees prefix + i + 1
  // positions, decode step j sees prefix + input + j + 1.
  const double p = static_cast<double>(w.cached_prefix_tokens);
  const double n = static_cast<double>(w.input_tokens);
  const double d = static_cast<double>(w.output_tokens - 1);
  const double context = b * (n * p + n * (n + 1) / 2 + d * (p + n) + d * (d + 1) / 2);
  const double head = 2.0 * static_cast<double>(c.vocab * c.hidden) * (b + decode_tokens);
  return 2.0 * per_token * (prefill_tokens + decode_tokens) + attention * context + head;
}

ValidationSummary Summarize(const std::vector<ArchitectureMeasurement>& rows) {
  ValidationSummary s;
  s.architectures = static_cast<int>(rows.size());
  if (rows.empty()) return s;
  int within5 = 0, within10 = 0;
  for (const ArchitectureMeasurement& r : rows) {
    const double lat = std::abs(r.predicted_latency_ms - r.measured_latency_ms) /
                       std::max(1e-9, r.measured_latency_ms);
    const double mem = std::abs(r.predicted_memory_mib - r.measured_memory_mib) /
                       std::max(1e-9, r.measured_memory_mib);
    s.latency_mape += lat;
    s.memory_mape += mem;
    s.latency_max_error = std::max(s.latency_max_error, lat);
    s.memory_max_error = std::max(s.memory_max_error, mem);
    within5 += lat <= 0.05 ? 1 : 0;
    within10 += lat <= 0.10 ? 1 : 0;
  }
  const double n = static_cast<double>(rows.size());
  s.latency_mape /= n;
  s.memory_mape /= n;
  s.latency_within_5 = within5 / n;
  s.latency_within_10 = within10 / n;
  return s;
}

absl::StatusOr<std::vector<DrawnArchitecture>> DrawValidationArchitectures(
    const SearchSpace& space, int count, int64_t positions, bool require_present_layer,
    std::mt19937_64& rng) {
  std::vector<DrawnArchitecture> drawn;
  for (int tries = 0; static_cast<int>(drawn.size()) < count && tries < 100 * (count + 1);
       ++tries) {
    Architecture a = space.Sample(rng);
    const bool seen = std::any_of(drawn.begin(), drawn.end(), [&](const DrawnArchitecture& d) {
      return d.architecture == a;
    });
    if (seen) continue;
    TAILOR_ASSIGN_OR_RETURN(model::HybridConfig c, space.Materialize(a));
    if (require_present_layer &&
        std::none_of(c.layers.begin(), c.layers.end(),
                     [](const LayerSpec& l) { return l.present(); })) {
      continue;
    }
    c.max_seq = positions;
    std::string description = space.Describe(a);
    drawn.push_back({std::move(a), std::move(c), std::move(description)});
  }
  return drawn;
}

// Readable order for `tailor costs show`: fixed costs first, then by kind, hidden width,
// configuration, and prefill before decode.
void SortCostEntries(std::vector<CostEntryData>& entries) {
  auto rank = [](const CostEntryData& e) {
    return std::make_tuple(e.layer_kind == kFixedKind ? 0 : 1, e.layer_kind,
                           e.params.count("hidden") ? e.params.at("hidden") : 0.0, e.config,
                           e.phase == kPrefill ? 0 : 1);
  };
  std::sort(entries.begin(), entries.end(),
            [&](const CostEntryData& a, const CostEntryData& b) { return rank(a) < rank(b); });
}

// The parent under the table, for display (best effort: left at 0 when it cannot predict).
void SetParentCosts(const CostModel& cost_model, const model::HybridConfig& parent,
                    const engine::Workload& w, CostTableData& t) {
  model::HybridConfig p = parent;
  p.max_seq = std::max(p.max_seq, w.cache_positions());
  if (absl::StatusOr<double> t0 = cost_model.FixedCost(p); t0.ok()) t.t0_ms = *t0;
  if (absl::StatusOr<Prediction> pp = cost_model.Predict(p); pp.ok()) {
    t.memory.parent_w_mib = pp->memory.weights_mib;
    t.memory.parent_c_mib = pp->memory.cache_mib;
    t.memory.parent_p_mib = pp->memory.workspace_mib;
    t.memory.parent_r_mib = pp->memory.runtime_mib;
    t.memory.parent_total_mib = pp->memory.total_mib;
  }
}

}  // namespace tailor::costmodel
