#include "compression/costmodel/whole_model_profiler.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/costmodel/cost_model.h"
#include "compression/costmodel/interaction.h"
#include "compression/costmodel/memory_model.h"

namespace tailor::costmodel {

using model::LayerKind;
using model::LayerSpec;

namespace {

using engine::Median;
using Options = WholeModelProfileOptions;

constexpr double kMiB = 1024.0 * 1024.0;

// --- plan ------------------------------------------------------------------------------

// The parent at hidden width `h` with every layer removed: what profiling models fill in.
model::HybridConfig EmptyAt(const SearchSpace& space, int64_t h, int64_t positions) {
  model::HybridConfig c = space.parent();
  c.hidden = h;
  c.max_seq = positions;
  for (int i = 0; i < space.num_layers(); ++i) c.layers[i] = space.LayerSpecFor(i, 0, 0);
  return c;
}

// The parent positions whose search-space options (under any Mamba-heads choice) contain the
// node, so its profiling models stay candidates of the space. A grid node no single position
// offers (the grid is the union of the class's axes) keeps the position it was dealt to.
std::vector<int> PositionsOf(const SearchSpace& space, const ProfilePoint& p) {
  std::vector<int> out;
  const int heads = static_cast<int>(space.mamba_head_choices().size());
  for (int i = 0; i < space.num_layers(); ++i) {
    if (space.parent().layers[i].kind != p.spec.kind) continue;
    bool found = false;
    for (int o = 1; o < static_cast<int>(space.layer_options(i).size()) && !found; ++o) {
      for (int m = 0; m < heads && !found; ++m) found = space.LayerSpecFor(i, o, m) == p.spec;
    }
    if (found) out.push_back(i);
  }
  if (out.empty()) out.push_back(p.position);
  return out;
}

model::HybridConfig WithNodeAt(model::HybridConfig c, const LayerSpec& spec,
                               const std::vector<int>& positions, size_t count) {
  for (size_t k = 0; k < std::min(count, positions.size()); ++k) c.layers[positions[k]] = spec;
  return c;
}

// The models of one hidden width (header, step 2). Stacks put each node at all n positions
// it may take, so its time is n times amplified over the noise of one whole-model time (the
// point of Puzzletron's repetition); halves at floor(n / 2) positions difference that out of
// T0 (N versus 2N). One half per distinct position set is enough to pin T0; more nodes
// would double the models for a better T0 only.
void PlanAtHidden(const SearchSpace& space, const std::vector<ProfilePoint>& nodes, int64_t h,
                  int64_t positions, std::vector<model::HybridConfig>& out) {
  const model::HybridConfig empty = EmptyAt(space, h, positions);
  std::vector<std::vector<int>> at;
  for (const ProfilePoint& p : nodes) {
    at.push_back(PositionsOf(space, p));
    out.push_back(WithNodeAt(empty, p.spec, at.back(), at.back().size()));
  }
  std::set<std::vector<int>> anchored;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (at[k].size() < 2 || !anchored.insert(at[k]).second) continue;
    // Layers the space cannot remove (MoE layers under keep_shared_experts) stay at their
    // option 0, so such a half can equal its stack: nothing to anchor there.
    model::HybridConfig half = WithNodeAt(empty, nodes[k].spec, at[k], at[k].size() / 2);
    if (half == WithNodeAt(empty, nodes[k].spec, at[k], at[k].size())) continue;
    out.push_back(std::move(half));
  }
  if (!anchored.empty()) return;
  // Every node has one position: T0 = sum of singles - their combination.
  model::HybridConfig combined = empty;
  std::set<std::vector<int>> seen;
  std::set<int> used;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!seen.insert(at[k]).second) continue;
    for (int i : at[k]) {
      if (!used.insert(i).second) continue;
      combined.layers[i] = nodes[k].spec;
      break;
    }
  }
  if (used.size() >= 2) out.push_back(std::move(combined));
}

// PlanAtHidden with stacks deeper than the parent (Options::stack_depth): per node, the
// parent's layers tiled until the node's positions number `depth`, every layer removed, and
// the node at `depth` of those positions in one model and at depth / 2 in another. Tiling
// keeps the layout's order of kinds (a Llama-layout block's attention then FFN), so the
// engine's file layout writes these models as it writes any student.
void PlanDeepAtHidden(const SearchSpace& space, const std::vector<ProfilePoint>& nodes,
                      int64_t h, int64_t positions, int depth,
                      std::vector<model::HybridConfig>& out) {
  const model::HybridConfig one = EmptyAt(space, h, positions);
  const int n = space.num_layers();
  for (const ProfilePoint& p : nodes) {
    const std::vector<int> at = PositionsOf(space, p);
    const int tiles = (depth + static_cast<int>(at.size()) - 1) / static_cast<int>(at.size());
    model::HybridConfig empty = one;
    std::vector<int> deep;
    for (int t = 0; t < tiles; ++t) {
      if (t > 0) empty.layers.insert(empty.layers.end(), one.layers.begin(), one.layers.end());
      for (int i : at) deep.push_back(t * n + i);
    }
    out.push_back(WithNodeAt(empty, p.spec, deep, depth));
    out.push_back(WithNodeAt(empty, p.spec, deep, depth / 2));
  }
}

// PlanAtHidden for layouts with one width per kind (SearchSpaceOptions::uniform_layers),
// which serve no model with a lone layer or mixed widths. The base model holds every layer
// at the first node offered there (the narrowest: grid axes ascend); a stack swaps one node
// in at all its positions, so it differs from the base by n times (node - reference); the
// half keeps the first floor(n / 2) layers of each parent spec, blocks whole, which pins
// T0 (N versus 2N). What stays unidentified is how a layer kind's reference time splits
// from another kind's; every model of the space has as many layers of each, so no
// prediction depends on it (the solver leaves one of them 0).
void PlanUniformAtHidden(const SearchSpace& space, const std::vector<ProfilePoint>& nodes,
                         int64_t h, int64_t positions, std::vector<model::HybridConfig>& out) {
  const model::HybridConfig empty = EmptyAt(space, h, positions);
  model::HybridConfig base = empty;
  std::vector<bool> placed(space.num_layers(), false);
  std::vector<std::vector<int>> at;
  for (const ProfilePoint& p : nodes) {
    at.push_back(PositionsOf(space, p));
    for (int i : at.back()) {
      if (!placed[i]) base.layers[i] = p.spec;
      placed[i] = true;
    }
  }
  const size_t first = out.size();
  auto add = [&](model::HybridConfig c) {
    if (std::find(out.begin() + first, out.end(), c) == out.end()) out.push_back(std::move(c));
  };
  for (size_t k = 0; k < nodes.size(); ++k) {
    add(WithNodeAt(base, nodes[k].spec, at[k], at[k].size()));
  }
  // Layers of one parent spec, in order: a Llama-layout block's attention and FFN halves
  // pair up, so halving each spec's positions removes blocks whole.
  std::map<std::string, std::vector<int>> by_spec;
  for (int i = 0; i < space.num_layers(); ++i) {
    if (placed[i]) by_spec[LayerKey(space.parent().layers[i], 0)].push_back(i);
  }
  model::HybridConfig half = empty;
  for (const auto& [key, layers] : by_spec) {
    if (layers.size() < 2) return;  // a one-block parent: T0 stays tied to its block
    for (size_t k = 0; k < layers.size() / 2; ++k) half.layers[layers[k]] = base.layers[layers[k]];
  }
  if (!by_spec.empty()) add(std::move(half));
}

std::map<int64_t, std::vector<ProfilePoint>> NodesByHidden(const SearchSpace& space,
                                                           const Options& options) {
  std::map<int64_t, std::vector<ProfilePoint>> by_hidden;
  for (ProfilePoint& p :
       ProfileGrid(space, options.max_points_per_axis, options.max_hidden_points)) {
    by_hidden[p.hidden].push_back(std::move(p));
  }
  return by_hidden;
}

// --- serving ---------------------------------------------------------------------------

// One served model: a profiling model (builds the table) or a held-out architecture.
struct Unit {
  model::HybridConfig config;
  uint64_t seed = 0;
  bool profiling = false;
  std::string description;
  ServedModel served;
  int remeasures = 0;
  bool disturbed = false;  // still, after the last re-measure
};

// Medians over the requests: prefill, decode as the rest of the median request (so the
// phases add up to the latency the validation compares against), and the request.
std::array<double, 3> PhaseMedians(const ServedModel& s) {
  std::vector<double> prefill, request;
  for (const ServedRequest& r : s.requests) {
    prefill.push_back(r.prefill_ms);
    request.push_back(r.request_ms);
  }
  const double p = Median(prefill), t = Median(request);
  return {p, t - p, t};
}

double ReportedMiB(const ServedModel& s) { return s.weights_mib + s.state_mib + s.compute_mib; }
// What the model's own layers and buffers take: the memory fit's target.
double ModelMiB(const ServedModel& s) { return ReportedMiB(s) - s.stand_in_mib; }

// Serves `u` until a calm measurement (calm_serving.h). A later round adds its requests to
// the earlier rounds' (the memory figures do not move from serve to serve) and its
// re-measures to theirs; `disturbed` is the latest round's.
absl::Status Measure(Unit& u, const Options& options, const ServeModelFn& serve, bool first) {
  absl::StatusOr<CalmServed> s =
      ServeUntilCalm([&] { return serve(u.config, u.seed); }, options.calm);
  if (!s.ok()) {
    return absl::Status(s.status().code(),
                        absl::StrCat("serving ", u.description, ": ", s.status().message()));
  }
  if (first) {
    u.served = std::move(s->served);
    u.remeasures = 0;
  } else {
    u.served.requests.insert(u.served.requests.end(), s->served.requests.begin(),
                             s->served.requests.end());
  }
  u.disturbed = s->disturbance.disturbed;
  u.remeasures += s->remeasures;
  return absl::OkStatus();
}

absl::Status Report(const Options& options, double fraction, const std::string& message,
                    const std::map<std::string, double>& metrics) {
  if (options.progress && !options.progress(fraction, message, metrics)) {
    return absl::CancelledError("profiling cancelled");
  }
  return absl::OkStatus();
}

// Serves every unit in a shuffled order (drift of the host's load then hits profiling and
// held-out models alike), reporting before each.
absl::Status ServeAll(std::vector<Unit>& units, const Options& options, const ServeModelFn& serve,
                      std::mt19937_64& rng, int round) {
  std::vector<size_t> order(units.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  int remeasures = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    Unit& u = units[order[k]];
    // Progress runs over the first round; a further round says which it is.
    const std::string round_note =
        round == 1 ? "" : absl::StrCat(" (round ", round, " of at most ", options.max_rounds, ")");
    TAILOR_RETURN_IF_ERROR(
        Report(options, 0.95 * static_cast<double>(k) / static_cast<double>(order.size()),
               absl::StrCat("serving model ", k + 1, " of ", order.size(), round_note, ": ",
                            u.description),
               {{"models", static_cast<double>(order.size())},
                {"served", static_cast<double>(k)},
                {"remeasures", static_cast<double>(remeasures)}}));
    const int before = round == 1 ? 0 : u.remeasures;
    TAILOR_RETURN_IF_ERROR(Measure(u, options, serve, round == 1));
    remeasures += u.remeasures - before;
  }
  return Report(options, 0.95, "fitting the cost table",
                {{"models", static_cast<double>(order.size())},
                 {"remeasures", static_cast<double>(remeasures)}});
}

// --- time fit --------------------------------------------------------------------------


// Base times by LayerKey, and T0 per hidden width, each [prefill, decode].
struct TimeFit {
  std::map<std::string, std::array<double, 2>> layer;
  std::map<int64_t, std::array<double, 2>> fixed;
};

// Weighted least squares of the models' phase `ph` times on [1, count of each free node];
// node columns outside `free` are held at 0. Returns one coefficient per column of `index`
// (0 is T0).
std::vector<double> SolvePhase(const std::vector<const Unit*>& models,
                               const std::map<std::string, size_t>& index,
                               const std::vector<bool>& free, int64_t h, int ph, double ridge) {
  const size_t n = index.size() + 1;
  std::vector<std::vector<double>> ata(n, std::vector<double>(n, 0.0));
  std::vector<double> atb(n, 0.0);
  for (const Unit* u : models) {
    const std::array<double, 3> t = PhaseMedians(u->served);
    std::vector<double> x(n, 0.0);
    x[0] = free[0] ? 1 : 0;
    for (const LayerSpec& l : u->config.layers) {
      if (!l.present()) continue;
      const size_t i = index.at(LayerKey(l, h));
      if (free[i]) x[i] += 1;
    }
    // A stand-in counts where it is a node the plan measures on its own (an attention head
    // of the grid's narrowest node, one Mamba head per group): its time then comes off T0.
    // Any other (`deci`'s FFN of width 1 in every block that removed its FFN) always runs
    // beside the same layers in the same numbers, so no fit could tell it from them; its
    // time stays theirs, as it is in every candidate with such blocks.
    for (const LayerSpec& l : u->served.stand_in_layers) {
      const auto it = index.find(LayerKey(l, h));
      if (it != index.end() && free[it->second]) x[it->second] += 1;
    }
    const double w = 1.0 / std::max(1e-12, t[2] * t[2]);
    for (size_t i = 0; i < n; ++i) {
      atb[i] += w * x[i] * t[ph];
      for (size_t j = 0; j < n; ++j) ata[i][j] += w * x[i] * x[j];
    }
  }
  double diag = 0;
  for (size_t i = 0; i < n; ++i) diag = std::max(diag, ata[i][i]);
  for (size_t i = 0; i < n; ++i) {
    ata[i][i] += ridge * diag;
    if (!free[i]) ata[i][i] = 1, atb[i] = 0;  // a held column solves to exactly 0
  }
  return SolveNormalEquations(std::move(ata), std::move(atb));
}

// T0(h) and every node's time at hidden width h, per phase: least squares of the models'
// times on [1, count of each node], weighted by 1 / latency^2 so every model's relative
// error counts alike (whole-model noise is multiplicative). Nothing takes negative time: a
// node the fit puts below 0 (noise on a node worth little next to the whole model) is held at
// 0 and the rest solved again, the most negative first, until none is (an active-set
// non-negative fit). T0 is held too: layers fitted a little slow under load put it below 0,
// and a candidate with few layers left then predicted a negative request time.
void FitTimesAt(int64_t h, const std::vector<const Unit*>& models, double ridge, TimeFit& fit) {
  std::map<std::string, size_t> index;  // unknown 0 is T0
  for (const Unit* u : models) {
    for (const LayerSpec& l : u->config.layers) {
      if (l.present()) index.emplace(LayerKey(l, h), index.size() + 1);
    }
  }
  for (int ph = 0; ph < 2; ++ph) {
    std::vector<bool> free(index.size() + 1, true);
    std::vector<double> x;
    for (size_t round = 0; round <= index.size(); ++round) {
      x = SolvePhase(models, index, free, h, ph, ridge);
      // One node per round, the most negative: in a plan of uniform models the split of
      // time between layer kinds is free (header), and the solver's choice of it can put a
      // whole kind below 0; holding its reference at 0 fixes the split and the rest solve
      // exactly, where holding every negative node at once would lose their differences.
      std::optional<size_t> worst;
      for (size_t i = 0; i < x.size(); ++i) {
        if (free[i] && x[i] < 0 && (!worst || x[i] < x[*worst])) worst = i;
      }
      if (!worst) break;
      free[*worst] = false;
    }
    fit.fixed[h][ph] = std::max(0.0, x[0]);
    for (const auto& [key, i] : index) fit.layer[key][ph] = std::max(0.0, x[i]);
  }
}

TimeFit FitTimes(const std::vector<Unit>& units, double ridge) {
  std::map<int64_t, std::vector<const Unit*>> by_hidden;
  for (const Unit& u : units) {
    if (u.profiling) by_hidden[u.config.hidden].push_back(&u);
  }
  TimeFit fit;
  for (const auto& [h, models] : by_hidden) FitTimesAt(h, models, ridge, fit);
  return fit;
}

// --- memory fit ------------------------------------------------------------------------

// Formula bytes of a config, split as the scales apply: W, attention C, Mamba C.
std::array<double, 3> FormulaMiB(const model::HybridConfig& c, const engine::Workload& w,
                                 int64_t bytes, model::KvCacheLayout layout) {
  std::array<double, 3> f{static_cast<double>(WeightBytes(c, bytes)) / kMiB,
                          static_cast<double>(AttentionCacheBytes(c, w, bytes, layout)) / kMiB,
                          0};
  for (const LayerSpec& l : c.layers) {
    if (l.kind != LayerKind::kMamba) continue;
    f[2] += static_cast<double>(LayerCacheBytes(l, w, bytes)) / kMiB;
  }
  return f;
}

// Scales of W and of each kind's C (least squares through 0 over the profiling models: the
// engine stores them at other element sizes and context padding, MemoryModelData), R's 0
// (the engine's own buffers are its compute buffers, P), and by LayerKey / hidden width the
// smallest compute buffer of the models holding the node / of that width.
struct MemoryFit {
  MemoryModelData scales;
  std::map<std::string, double> workspace;
  std::map<int64_t, double> fixed_workspace;
};

void FitCacheScales(double aa, double am, double mm, double as, double ms, MemoryModelData& m) {
  const double det = aa * mm - am * am;
  if (aa > 0 && mm > 0 && det > 1e-9 * aa * mm) {
    m.attention_cache_scale = (as * mm - ms * am) / det;
    m.mamba_cache_scale = (ms * aa - as * am) / det;
  } else if (aa > 0 || mm > 0) {  // one kind only, or always in one ratio: one scale
    const double s = (as + ms) / (aa + 2 * am + mm);
    m.attention_cache_scale = s;
    m.mamba_cache_scale = s;
  }
}

MemoryFit FitMemory(const std::vector<Unit>& units, const engine::Workload& w, int64_t bytes,
                    model::KvCacheLayout layout) {
  MemoryFit fit;
  fit.scales.element_bytes = bytes;
  fit.scales.runtime_scale = 0;
  double ww = 0, wr = 0, aa = 0, am = 0, mm = 0, as = 0, ms = 0;
  for (const Unit& u : units) {
    if (!u.profiling) continue;
    const std::array<double, 3> f = FormulaMiB(u.config, w, bytes, layout);
    const ServedModel& s = u.served;
    ww += f[0] * f[0];
    wr += f[0] * (s.weights_mib - s.stand_in_mib);
    aa += f[1] * f[1];
    am += f[1] * f[2];
    mm += f[2] * f[2];
    as += f[1] * s.state_mib;
    ms += f[2] * s.state_mib;
    const int64_t h = u.config.hidden;
    auto low = [&](auto& map, const auto& key) {
      auto [it, added] = map.emplace(key, s.compute_mib);
      if (!added) it->second = std::min(it->second, s.compute_mib);
    };
    low(fit.fixed_workspace, h);
    for (const LayerSpec& l : u.config.layers) {
      if (l.present()) low(fit.workspace, LayerKey(l, h));
    }
  }
  if (ww > 0) fit.scales.weights_scale = wr / ww;
  FitCacheScales(aa, am, mm, as, ms, fit.scales);
  return fit;
}

// --- table -----------------------------------------------------------------------------

// A layer's W + C at the fitted scales (the entry's memory_mib, for display).
double StaticMiB(const LayerSpec& spec, int64_t h, const engine::Workload& w,
                 const MemoryModelData& m) {
  double cache = static_cast<double>(LayerCacheBytes(spec, w, m.element_bytes));
  cache *= spec.kind == LayerKind::kAttention ? m.attention_cache_scale
           : spec.kind == LayerKind::kMamba   ? m.mamba_cache_scale
                                              : 1.0;
  return (static_cast<double>(LayerWeightBytes(spec, h, m.element_bytes)) * m.weights_scale +
          cache) /
         kMiB;
}

void AddEntries(const std::map<int64_t, std::vector<ProfilePoint>>& nodes, const TimeFit& times,
                const MemoryFit& memory, const model::HybridConfig& parent, CostTableData& t) {
  const MemoryModelData& m = t.memory;
  for (const auto& [h, points] : nodes) {
    for (const ProfilePoint& p : points) {
      const std::string key = LayerKey(p.spec, h);
      if (!times.layer.count(key)) continue;
      std::map<std::string, double> params = LayerParams(p.spec, h);
      params[kWorkspaceParam] = memory.workspace.at(key);
      const std::string kind(model::LayerKindName(p.spec.kind));
      const double mib = StaticMiB(p.spec, h, t.workload, m);
      const std::array<double, 2>& tt = times.layer.at(key);
      t.entries.push_back({kind, key, kPrefill, tt[0], mib, params});
      t.entries.push_back({kind, key, kDecode, tt[1], mib, params});
    }
    if (!times.fixed.count(h)) continue;
    const std::map<std::string, double> params = {{"hidden", static_cast<double>(h)},
                                                  {kWorkspaceParam, memory.fixed_workspace.at(h)}};
    const double mib =
        static_cast<double>(FixedParameterCount(parent.vocab, h, parent.tie_embeddings) *
                            m.element_bytes) *
        m.weights_scale / kMiB;
    const std::string config = absl::StrCat("hidden=", h);
    t.entries.push_back({kFixedKind, config, kPrefill, times.fixed.at(h)[0], mib, params});
    t.entries.push_back({kFixedKind, config, kDecode, times.fixed.at(h)[1], mib, params});
  }
  SortCostEntries(t.entries);
}

// Neutral interaction (every factor 1) at the profiling models' mean counts: whole-model
// times cannot tell a layer's context effect from T0 without many more models.
void SetNeutralInteraction(const std::vector<Unit>& units, CostTableData& t) {
  int models = 0;
  for (const Unit& u : units) {
    if (!u.profiling) continue;
    const KindCounts c = PresentCounts(u.config);
    for (int k = 0; k < kKinds; ++k) t.interaction.reference[k] += c[k];
    ++models;
  }
  for (double& r : t.interaction.reference) r /= std::max(1, models);
}

// eps: the median of measured minus modelled memory over the profiling models.
absl::Status SetEps(const std::vector<Unit>& units, const CostModel& model,
                    MemoryModelData& memory) {
  std::vector<double> eps;
  for (const Unit& u : units) {
    if (!u.profiling) continue;
    TAILOR_ASSIGN_OR_RETURN(Prediction p, model.Predict(u.config));
    eps.push_back(ModelMiB(u.served) - p.memory_mib);
  }
  memory.eps_mib = Median(eps);
  for (double e : eps) {
    memory.eps_spread_mib = std::max(memory.eps_spread_mib, std::abs(e - memory.eps_mib));
  }
  return absl::OkStatus();
}

absl::Status AddMeasurements(const std::vector<Unit>& units, const CostModel& model,
                             const engine::Workload& w, ProfileResult& result) {
  for (const Unit& u : units) {
    ArchitectureMeasurement m;
    // A measurement still disturbed after the last re-measure is kept (the calmest of its
    // serves), but never silently: its row says so and noisy_models counts it.
    m.description = u.disturbed ? absl::StrCat(u.description, " [disturbed after ", u.remeasures,
                                               " re-measures]")
                                : u.description;
    m.config = u.config;
    m.seed = u.seed;
    m.parameters = u.config.ParameterCount();
    m.flops = RequestFlops(u.config, w);
    m.measured_latency_ms = PhaseMedians(u.served)[2];
    m.measured_memory_mib = ReportedMiB(u.served);
    result.remeasured_models += u.remeasures > 0 ? 1 : 0;
    result.remeasures += u.remeasures;
    result.noisy_models += u.disturbed ? 1 : 0;
    if (u.profiling) {
      result.profiling_models.push_back(std::move(m));
      continue;
    }
    TAILOR_ASSIGN_OR_RETURN(Prediction p, model.Predict(u.config));
    m.predicted_latency_ms = p.latency_ms;
    m.predicted_memory_mib = p.memory_mib;
    result.validation.push_back(std::move(m));
  }
  return absl::OkStatus();
}

absl::StatusOr<ProfileResult> BuildResult(const std::vector<Unit>& units,
                                          const std::map<int64_t, std::vector<ProfilePoint>>& nodes,
                                          const model::HybridConfig& parent,
                                          const Options& options) {
  ProfileResult result;
  CostTableData& t = result.table;
  t.device_kind = options.device_kind;
  t.engine = options.engine;
  t.engine_version = options.engine_version;
  t.precision = options.precision;
  t.workload = options.workload;
  t.vocab = parent.vocab;
  const MemoryFit memory =
      FitMemory(units, options.workload, engine::PrecisionBytes(options.precision),
                options.kv_cache_layout);
  t.memory = memory.scales;
  AddEntries(nodes, FitTimes(units, options.ridge), memory, parent, t);
  SetNeutralInteraction(units, t);
  // eps is fitted on each model's own memory (ModelMiB: without the stand-ins' bytes), so
  // the model that fits it prices no stand-in.
  TAILOR_ASSIGN_OR_RETURN(CostModel uncalibrated, CostModel::FromData(t));
  uncalibrated.SetKvCacheLayout(options.kv_cache_layout);
  TAILOR_RETURN_IF_ERROR(SetEps(units, uncalibrated, t.memory));
  TAILOR_ASSIGN_OR_RETURN(CostModel model, CostModel::FromData(t));
  model.SetStandIns(options.stand_ins);
  model.SetKvCacheLayout(options.kv_cache_layout);
  TAILOR_RETURN_IF_ERROR(AddMeasurements(units, model, options.workload, result));
  t.validation = Summarize(result.validation);
  SetParentCosts(model, parent, options.workload, t);
  return result;
}

// Deeper stacks buy less and less (a node's error falls as 1 / D only while the rest of
// the model dominates its time), and each model is served whole.
constexpr int kMaxStackDepth = 64;

absl::Status ValidateStackDepth(const Options& o) {
  if (o.stack_depth != 0 && (o.stack_depth < 2 || o.stack_depth > kMaxStackDepth)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "whole-model profile options: stack_depth is 0 (the parent's positions) or 2 to ",
        kMaxStackDepth, ", got ", o.stack_depth));
  }
  if (o.stack_depth != 0 && o.space.uniform_layers) {
    return absl::InvalidArgumentError(
        "whole-model profile options: stack_depth needs per-layer widths; a layout of one "
        "width per kind (space.uniform_layers) serves models that hold every layer");
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const Options& o, const ServeModelFn& serve) {
  TAILOR_RETURN_IF_ERROR(engine::ValidateWorkload(o.workload));
  if (o.max_points_per_axis < 2 || o.max_hidden_points < 1 || o.validation_architectures < 0 ||
      !(o.ridge >= 0) || !(o.target_latency_mape >= 0) || o.max_rounds < 1) {
    return absl::InvalidArgumentError(
        "whole-model profile options: max_points_per_axis >= 2, max_hidden_points >= 1, "
        "validation_architectures >= 0, ridge >= 0, target_latency_mape >= 0, "
        "max_rounds >= 1");
  }
  TAILOR_RETURN_IF_ERROR(ValidateStackDepth(o));
  TAILOR_RETURN_IF_ERROR(ValidateCalmServingOptions(o.calm));
  if (!serve) return absl::InvalidArgumentError("whole-model profile: no serve function");
  return absl::OkStatus();
}

// Above any plan's model count (a few hundred at most).
constexpr uint64_t kHeldOutSeedOffset = uint64_t{1} << 20;

int64_t PositionsFor(const model::HybridConfig& parent, const Options& options) {
  return std::max(parent.max_seq, options.workload.cache_positions());
}

}  // namespace

absl::StatusOr<std::vector<model::HybridConfig>> PlanWholeModelProfiling(
    const model::HybridConfig& parent, const WholeModelProfileOptions& options) {
  TAILOR_RETURN_IF_ERROR(ValidateStackDepth(options));
  TAILOR_ASSIGN_OR_RETURN(SearchSpace space, SearchSpace::FromParent(parent, options.space));
  std::vector<model::HybridConfig> out;
  for (const auto& [h, nodes] : NodesByHidden(space, options)) {
    if (options.space.uniform_layers) {
      PlanUniformAtHidden(space, nodes, h, PositionsFor(parent, options), out);
    } else if (options.stack_depth > 0) {
      PlanDeepAtHidden(space, nodes, h, PositionsFor(parent, options), options.stack_depth, out);
    } else {
      PlanAtHidden(space, nodes, h, PositionsFor(parent, options), out);
    }
  }
  for (const model::HybridConfig& c : out) TAILOR_RETURN_IF_ERROR(model::ValidateHybridConfig(c));
  return out;
}

absl::StatusOr<ProfileResult> ProfileCostTableWholeModel(const model::HybridConfig& parent,
                                                         const WholeModelProfileOptions& options,
                                                         const ServeModelFn& serve) {
  const auto started = std::chrono::steady_clock::now();
  TAILOR_RETURN_IF_ERROR(ValidateOptions(options, serve));
  TAILOR_ASSIGN_OR_RETURN(SearchSpace space, SearchSpace::FromParent(parent, options.space));
  const std::map<int64_t, std::vector<ProfilePoint>> nodes = NodesByHidden(space, options);
  TAILOR_ASSIGN_OR_RETURN(std::vector<model::HybridConfig> plan,
                          PlanWholeModelProfiling(parent, options));
  std::mt19937_64 rng(options.seed);
  uint64_t seed = options.seed * 1000003;
  // The held-out architectures' weights get seeds of their own, independent of how many
  // models the plan serves: two plans of one parent (stack_depth 0 and 16) validate on the
  // very same held-out models, weights included (their draw already depends only on the seed).
  uint64_t held_out_seed = seed + kHeldOutSeedOffset;
  std::vector<Unit> units;
  for (model::HybridConfig& c : plan) {
    Unit u{std::move(c), ++seed, true};
    u.description =
        absl::StrCat("profiling model ", units.size() + 1, " (hidden ", u.config.hidden, ")");
    units.push_back(std::move(u));
  }
  // Engines cannot serve a model without layers: such draws are skipped.
  TAILOR_ASSIGN_OR_RETURN(std::vector<DrawnArchitecture> drawn,
                          DrawValidationArchitectures(space, options.validation_architectures,
                                                      PositionsFor(parent, options),
                                                      /*require_present_layer=*/true, rng));
  for (DrawnArchitecture& d : drawn) {
    TAILOR_RETURN_IF_ERROR(model::ValidateHybridConfig(d.config));
    Unit u{std::move(d.config), ++held_out_seed, false};
    u.description = std::move(d.description);
    units.push_back(std::move(u));
  }
  std::vector<double> mapes;
  ProfileResult result;
  for (int round = 1; round <= options.max_rounds; ++round) {
    TAILOR_RETURN_IF_ERROR(ServeAll(units, options, serve, rng, round));
    TAILOR_ASSIGN_OR_RETURN(result, BuildResult(units, nodes, parent, options));
    mapes.push_back(result.table.validation.latency_mape);
    // Without held-out architectures there is no MAPE to judge: one round.
    if (options.target_latency_mape <= 0 || result.validation.empty() ||
        mapes.back() <= options.target_latency_mape) {
      break;
    }
  }
  result.rounds = static_cast<int>(mapes.size());
  result.round_latency_mapes = std::move(mapes);
  for (const auto& [h, points] : nodes) result.profiled_configs += points.size();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

// Solves the symmetric system a x = b (Gaussian elimination, partial pivoting). An unknown
// the models cannot tell apart from others (a pivot below 1e-12 of the largest diagonal, e.g.
// a one-layer parent's T0 against its layer) is left 0: the identifiable sums it takes part
// in, which are all a candidate's prediction uses, stay exact.
std::vector<double> SolveNormalEquations(std::vector<std::vector<double>> a,
                                         std::vector<double> b) {
  const size_t n = b.size();
  double diag = 0;
  for (size_t i = 0; i < n; ++i) diag = std::max(diag, std::abs(a[i][i]));
  const double tiny = 1e-12 * diag;
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    }
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    if (std::abs(a[c][c]) <= tiny) {
      a[c][c] = 0;
      continue;
    }
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n, 0.0);
  for (size_t c = n; c-- > 0;) {
    if (a[c][c] == 0) continue;
    double s = b[c];
    for (size_t k = c + 1; k < n; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return x;
}

}  // namespace tailor::costmodel
