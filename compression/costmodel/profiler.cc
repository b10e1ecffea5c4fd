#include "compression/costmodel/profiler.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <tuple>

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

// One served model and its requests across rounds (profiled: split at layer boundaries).
struct Unit {
  model::HybridConfig config;
  uint64_t seed = 0;  // of its dummy weights
  bool profiling = false;  // builds the table; otherwise a held-out architecture
  std::string description;
  std::vector<engine::RequestResult> results;
  int64_t peak_bytes = 0;
};

double MeasuredMiB(const Unit& u) { return ToMiB(u.peak_bytes); }

// Sum over steps of the median over samples of each step: a preemption inflates one step
// of one sample, which the per-step median ignores (a per-request sum would keep it).
double SumOfStepMedians(const std::vector<std::vector<double>>& steps, size_t first,
                        size_t last) {
  double total = 0;
  for (size_t s = first; s < std::min(last, steps.size()); ++s) total += Median(steps[s]);
  return total;
}

absl::StatusOr<Unit> MakeUnit(const model::HybridConfig& config, uint64_t seed,
                              const engine::EngineOptions& options) {
  TAILOR_RETURN_IF_ERROR(model::ValidateHybridConfig(config));
  Unit u;
  u.config = config;
  u.seed = seed;
  return u;
}

// One visit of a model in a round: `warm` unrecorded requests first, because a deployed
// engine serves one model back to back, with its weights and code warm in the caches; the
// previous visit left them cold (every other model ran since). Then the measured requests.
// The engine lives only for the visit, like a deployment that serves one model: with every
// model of the job alive at once, the allocator's state (dozens of models' tensors in one
// heap) made Mamba layers ~30% slower than the same model served alone.
absl::Status Visit(Unit& u, const engine::Workload& w, const engine::EngineOptions& options,
                   int warm, int measured, bool record) {
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM lm, model::CreateHybridLM(u.config, u.seed));
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> engine,
                          engine::Engine::Create(std::move(lm), options));
  engine::ServeOptions serve;
  serve.profile_layers = true;
  for (int i = 0; i < warm + measured; ++i) {
    TAILOR_ASSIGN_OR_RETURN(engine::RequestResult r, engine->Serve(w, serve));
    if (!record || i < warm) continue;
    u.peak_bytes = std::max(u.peak_bytes, r.peak_bytes);
    r.tokens = at::Tensor();
    u.results.push_back(std::move(r));
  }
  return absl::OkStatus();
}

// One robust time per (model, layer, phase): per-step medians over rounds, summed. `layer`
// < 0 selects the fixed (embedding/head) part. steps[s] holds step s of every request.
std::vector<std::vector<double>> StepsOf(const std::vector<engine::RequestResult>& results,
                                         int layer) {
  std::vector<std::vector<double>> steps;
  for (const engine::RequestResult& r : results) {
    const std::vector<double>& v = layer < 0 ? r.fixed_step_ms : r.layers[layer].step_ms;
    steps.resize(v.size());
    for (size_t s = 0; s < v.size(); ++s) steps[s].push_back(v[s]);
  }
  return steps;
}

// Step 0 is the prefill, the rest the decode.
std::array<double, 2> PhaseTimes(const std::vector<std::vector<double>>& steps) {
  return std::array<double, 2>{SumOfStepMedians(steps, 0, 1),
                               SumOfStepMedians(steps, 1, steps.size())};
}

// A profiled layer configuration, as its table entries need it.
struct MeasuredLayer {
  std::string kind;
  LayerSpec spec;
  int64_t hidden = 0;
  int64_t workspace = 0;  // largest of any request, either phase
};

// What the profiling models measured, gathered for the fits and the table.
struct ProfileSamples {
  std::map<std::string, MeasuredLayer> layers;            // by LayerKey
  std::array<std::vector<InteractionSample>, 2> samples;  // [phase]
  KindCounts reference{};   // mean present-layer counts over the profiling models
  std::set<int64_t> hidden; // the hidden widths of the fixed entries
  std::vector<double> eps;  // measured - modelled memory per model (MiB)
};

// Adds layer j of profiling unit `u` to `out`; returns its largest workspace in `u`.
int64_t AddLayerSample(const Unit& u, size_t j, const KindCounts& counts,
                       ProfileSamples& out) {
  const int64_t h = u.config.hidden;
  const LayerSpec& spec = u.config.layers[j];
  const std::string key = LayerKey(spec, h);
  MeasuredLayer& l = out.layers[key];
  l.kind = std::string(model::LayerKindName(spec.kind));
  l.spec = spec;
  l.hidden = h;
  int64_t max_workspace = 0;
  for (const engine::RequestResult& r : u.results) {
    l.workspace = std::max({l.workspace, r.layers[j].prefill_workspace_bytes,
                            r.layers[j].decode_workspace_bytes});
    max_workspace = std::max({max_workspace, r.layers[j].prefill_workspace_bytes,
                              r.layers[j].decode_workspace_bytes});
  }
  const std::array<double, 2> t = PhaseTimes(StepsOf(u.results, static_cast<int>(j)));
  for (int ph = 0; ph < 2; ++ph) {
    out.samples[ph].push_back({static_cast<int>(spec.kind), key, counts, t[ph]});
  }
  return max_workspace;
}

// Adds profiling unit `u`: its fixed part, every present layer, and its memory residual.
void AddUnitSamples(const Unit& u, const engine::Workload& w, int64_t bytes,
                    ProfileSamples& out) {
  const int64_t h = u.config.hidden;
  const KindCounts counts = PresentCounts(u.config);
  out.hidden.insert(h);
  for (int k = 0; k < kKinds; ++k) out.reference[k] += counts[k];
  const std::array<double, 2> fixed = PhaseTimes(StepsOf(u.results, -1));
  for (int ph = 0; ph < 2; ++ph) {
    out.samples[ph].push_back({kFixedRow, absl::StrCat(kFixedKind, ":", h), counts, fixed[ph]});
  }
  int64_t max_workspace = 0;
  for (size_t j = 0; j < u.config.layers.size(); ++j) {
    if (!u.config.layers[j].present()) continue;
    max_workspace = std::max(max_workspace, AddLayerSample(u, j, counts, out));
  }
  const int64_t modelled = WeightBytes(u.config, bytes) + CacheBytes(u.config, w, bytes) +
                           RuntimeBytes(h, w, bytes) + max_workspace;
  out.eps.push_back(MeasuredMiB(u) - ToMiB(modelled));
}

// The samples of every profiling unit that has results.
ProfileSamples GatherSamples(const std::vector<Unit>& units, const engine::Workload& w,
                             int64_t bytes) {
  ProfileSamples out;
  int models = 0;
  for (const Unit& u : units) {
    if (!u.profiling || u.results.empty()) continue;
    AddUnitSamples(u, w, bytes, out);
    ++models;
  }
  for (double& r : out.reference) r /= std::max(1, models);
  return out;
}

// The table's entries of the profiled layers, both phases, at their fitted base times.
void AddLayerEntries(const ProfileSamples& g, std::array<InteractionFit, 2>& fit,
                     const engine::Workload& w, int64_t bytes,
                     std::vector<CostEntryData>& entries) {
  for (const auto& [key, l] : g.layers) {
    std::map<std::string, double> params = LayerParams(l.spec, l.hidden);
    params[kWorkspaceParam] = ToMiB(l.workspace);
    const double static_mib =
        ToMiB(LayerWeightBytes(l.spec, l.hidden, bytes) + LayerCacheBytes(l.spec, w, bytes));
    entries.push_back({l.kind, key, kPrefill, fit[0].base[key], static_mib, params});
    entries.push_back({l.kind, key, kDecode, fit[1].base[key], static_mib, params});
  }
}

// The fixed (embedding/head) entries, one pair per profiled hidden width.
void AddFixedEntries(const std::set<int64_t>& hidden, std::array<InteractionFit, 2>& fit,
                     const model::HybridConfig& parent, int64_t bytes,
                     std::vector<CostEntryData>& entries) {
  for (int64_t h : hidden) {
    const std::string key = absl::StrCat(kFixedKind, ":", h);
    const std::map<std::string, double> params = {{"hidden", static_cast<double>(h)},
                                                  {kWorkspaceParam, 0.0}};
    const double mib = ToMiB(FixedParameterCount(parent.vocab, h, parent.tie_embeddings) * bytes);
    const std::string config = absl::StrCat("hidden=", h);
    entries.push_back({kFixedKind, config, kPrefill, fit[0].base[key], mib, params});
    entries.push_back({kFixedKind, config, kDecode, fit[1].base[key], mib, params});
  }
}

// The memory offset eps: the median residual, and how far any model strays from it.
void SetMemoryOffset(const std::vector<double>& eps, MemoryModelData& memory) {
  memory.eps_mib = Median(eps);
  for (double e : eps) {
    memory.eps_spread_mib = std::max(memory.eps_spread_mib, std::abs(e - memory.eps_mib));
  }
}

// Every unit measured against the table: profiling models as they are, held-out
// architectures with the table's predictions beside.
absl::Status AddMeasurements(const std::vector<Unit>& units, const CostModel& cost_model,
                             const engine::Workload& w, ProfileResult& result) {
  for (const Unit& u : units) {
    ArchitectureMeasurement m;
    m.description = u.description;
    m.config = u.config;
    m.seed = u.seed;
    m.parameters = u.config.ParameterCount();
    m.flops = RequestFlops(u.config, w);
    m.measured_latency_ms = engine::RobustLatencyOf(u.results).latency_ms();
    m.measured_memory_mib = MeasuredMiB(u);
    if (u.profiling) {
      result.profiling_models.push_back(std::move(m));
      continue;
    }
    TAILOR_ASSIGN_OR_RETURN(Prediction p, cost_model.Predict(u.config));
    m.predicted_latency_ms = p.latency_ms;
    m.predicted_memory_mib = p.memory_mib;
    result.validation.push_back(std::move(m));
  }
  return absl::OkStatus();
}

// The table from the samples so far, validated against the held-out units.
absl::StatusOr<ProfileResult> BuildResult(const std::vector<Unit>& units,
                                          const model::HybridConfig& parent,
                                          const ProfileOptions& options) {
  const engine::Workload& w = options.workload;
  const int64_t bytes = engine::PrecisionBytes(options.engine.precision);
  ProfileResult result;
  CostTableData& t = result.table;
  t.device_kind = options.device_kind;
  t.precision = options.engine.precision;
  t.workload = w;
  t.vocab = parent.vocab;
  t.memory.element_bytes = bytes;

  ProfileSamples g = GatherSamples(units, w, bytes);
  std::array<InteractionFit, 2> fit;
  for (int ph = 0; ph < 2; ++ph) {
    fit[ph] = FitInteraction(g.samples[ph], g.reference, options.interaction_ridge,
                             options.fit_interaction ? 8 : 0);
  }
  t.interaction.reference = g.reference;
  t.interaction.prefill = fit[0].gamma;
  t.interaction.decode = fit[1].gamma;
  AddLayerEntries(g, fit, w, bytes, t.entries);
  AddFixedEntries(g.hidden, fit, parent, bytes, t.entries);
  SortCostEntries(t.entries);
  SetMemoryOffset(g.eps, t.memory);

  TAILOR_ASSIGN_OR_RETURN(CostModel model, CostModel::FromData(t));
  TAILOR_RETURN_IF_ERROR(AddMeasurements(units, model, w, result));
  t.validation = Summarize(result.validation);
  SetParentCosts(model, parent, w, t);
  return result;
}

}  // namespace

std::vector<ProfilePoint> ProfileGrid(const SearchSpace& space, const ProfileOptions& options) {
  return ProfileGrid(space, options.max_points_per_axis, options.max_hidden_points);
}

namespace {

absl::Status ValidateProfileOptions(const ProfileOptions& options) {
  TAILOR_RETURN_IF_ERROR(engine::ValidateWorkload(options.workload));
  if (options.rounds < 1 || options.warmup_rounds < 0 || options.validation_architectures < 0 ||
      options.max_points_per_axis < 2 || options.max_hidden_points < 1 ||
      options.occurrences < 1 || options.warm_requests_per_visit < 0 ||
      options.measured_requests_per_visit < 1) {
    return absl::InvalidArgumentError(
        "profile options: rounds >= 1, warmup_rounds >= 0, validation_architectures >= 0, "
        "max_points_per_axis >= 2, max_hidden_points >= 1, occurrences >= 1, "
        "warm_requests_per_visit >= 0, measured_requests_per_visit >= 1");
  }
  return absl::OkStatus();
}

// Calls the progress callback; CANCELLED when it asks to stop.
absl::Status Report(const ProfileOptions& options, double fraction, const std::string& message,
                    const std::map<std::string, double>& metrics) {
  if (options.progress && !options.progress(fraction, message, metrics)) {
    return absl::CancelledError("profiling cancelled");
  }
  return absl::OkStatus();
}

// What the units are drawn with: one generator for layouts, draws and visit orders, and the
// running seed of the units' dummy weights.
struct Draws {
  std::mt19937_64 rng;
  uint64_t seed = 0;
};

// The grid's layer specs by hidden width and by the parent position they were dealt to.
std::map<int64_t, std::vector<std::vector<LayerSpec>>> SlotsByHidden(
    const std::vector<ProfilePoint>& grid, size_t layers) {
  std::map<int64_t, std::vector<std::vector<LayerSpec>>> by_hidden;  // [hidden][position]
  for (const ProfilePoint& p : grid) {
    std::vector<std::vector<LayerSpec>>& slots = by_hidden[p.hidden];
    slots.resize(layers);
    slots[p.position].push_back(p.spec);
  }
  return by_hidden;
}

// The profiling models of hidden width `h`: each draw keeps position i with odds keep[i]
// (taking the next node dealt to it) until every node ran `occurrences` times.
absl::Status AddProfilingUnitsAt(const model::HybridConfig& parent, const SearchSpace& space,
                                 const ProfileOptions& options, int64_t positions, int64_t h,
                                 std::vector<std::vector<LayerSpec>>& slots,
                                 const std::vector<double>& keep,
                                 std::uniform_real_distribution<double>& coin, Draws& draws,
                                 std::vector<Unit>& units) {
  std::vector<size_t> taken(slots.size(), 0);
  for (std::vector<LayerSpec>& s : slots) std::shuffle(s.begin(), s.end(), draws.rng);
  auto done = [&] {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (taken[i] < options.occurrences * slots[i].size()) return false;
    }
    return true;
  };
  for (int guard = 0; !done() && guard < 100000; ++guard) {
    model::HybridConfig c{parent.vocab, h, positions, parent.rope_theta, parent.norm_eps};
    bool any = false;
    for (size_t i = 0; i < slots.size(); ++i) {
      const bool present = !slots[i].empty() && coin(draws.rng) < keep[i];
      c.layers.push_back(present ? slots[i][taken[i]++ % slots[i].size()]
                                 : space.LayerSpecFor(static_cast<int>(i), 0, 0));
      any |= present;
    }
    if (!any) continue;
    TAILOR_ASSIGN_OR_RETURN(Unit u, MakeUnit(c, ++draws.seed, options.engine));
    u.profiling = true;
    u.description = absl::StrCat("profiling model ", units.size() + 1, " (hidden ", h, ")");
    units.push_back(std::move(u));
  }
  return absl::OkStatus();
}

// Profiling models: the parent's layer sequence at one hidden width. Each position takes
// the next grid node dealt to it, or is removed with the search space's odds (so models
// look like the random architectures they must predict and contexts vary, which the
// interaction fit needs), until every node ran `occurrences` times.
absl::Status AddProfilingUnits(const model::HybridConfig& parent, const SearchSpace& space,
                               const std::vector<ProfilePoint>& grid,
                               const ProfileOptions& options, int64_t positions, Draws& draws,
                               std::vector<Unit>& units) {
  std::map<int64_t, std::vector<std::vector<LayerSpec>>> by_hidden =
      SlotsByHidden(grid, parent.layers.size());
  std::vector<double> keep(parent.layers.size());
  for (size_t i = 0; i < keep.size(); ++i) {
    const double n = static_cast<double>(space.layer_options(static_cast<int>(i)).size());
    keep[i] = options.random_removal ? (n - 1) / n : 1.0;
  }
  TAILOR_RETURN_IF_ERROR(Report(options, 0.0,
                                absl::StrCat("building ", grid.size(),
                                             " layer configurations into models"),
                                {{"configurations", static_cast<double>(grid.size())}}));
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  for (auto& [h, slots] : by_hidden) {
    TAILOR_RETURN_IF_ERROR(AddProfilingUnitsAt(parent, space, options, positions, h, slots, keep,
                                               coin, draws, units));
  }
  return absl::OkStatus();
}

// Held-out architectures: distinct random draws from the search space.
absl::Status AddValidationUnits(const SearchSpace& space, const ProfileOptions& options,
                                int64_t positions, Draws& draws, std::vector<Unit>& units) {
  TAILOR_ASSIGN_OR_RETURN(
      std::vector<DrawnArchitecture> drawn,
      DrawValidationArchitectures(space, options.validation_architectures, positions,
                                  /*require_present_layer=*/false, draws.rng));
  for (DrawnArchitecture& d : drawn) {
    TAILOR_ASSIGN_OR_RETURN(Unit u, MakeUnit(d.config, ++draws.seed, options.engine));
    u.description = std::move(d.description);
    units.push_back(std::move(u));
  }
  return absl::OkStatus();
}

// Serves every unit once per round, in a fresh random order each round; rounds after the
// warm-up are recorded. Reports each round with the validation so far.
absl::Status ServeRounds(std::vector<Unit>& units, const model::HybridConfig& parent,
                         const ProfileOptions& options, Draws& draws) {
  std::vector<size_t> order(units.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const int total_rounds = options.warmup_rounds + options.rounds;
  std::map<std::string, double> metrics;
  for (int round = 0; round < total_rounds; ++round) {
    const bool record = round >= options.warmup_rounds;
    std::shuffle(order.begin(), order.end(), draws.rng);
    for (size_t i : order) {
      TAILOR_RETURN_IF_ERROR(Visit(units[i], options.workload, options.engine,
                                   options.warm_requests_per_visit,
                                   options.measured_requests_per_visit, record));
    }
    const int measured = round - options.warmup_rounds + 1;
    metrics = {{"round", static_cast<double>(round + 1)},
               {"models", static_cast<double>(units.size())}};
    if (measured >= 1 && options.validation_architectures > 0) {
      // The validation so far, so a watcher sees the table converge.
      TAILOR_ASSIGN_OR_RETURN(ProfileResult partial, BuildResult(units, parent, options));
      metrics["latency_mape"] = partial.table.validation.latency_mape;
      metrics["memory_mape"] = partial.table.validation.memory_mape;
    }
    TAILOR_RETURN_IF_ERROR(Report(options, 0.95 * (round + 1) / total_rounds,
                                  absl::StrCat(record ? "round " : "warm-up round ", round + 1,
                                               " of ", total_rounds, ": served ", units.size(),
                                               " models"),
                                  metrics));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProfileResult> ProfileCostTable(const model::HybridConfig& parent,
                                               const ProfileOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  TAILOR_RETURN_IF_ERROR(ValidateProfileOptions(options));
  TAILOR_ASSIGN_OR_RETURN(SearchSpace space, SearchSpace::FromParent(parent, options.space));
  const int64_t positions = std::max(parent.max_seq, options.workload.cache_positions());
  Draws draws{std::mt19937_64(options.seed), options.seed * 1000003};
  std::vector<ProfilePoint> grid = ProfileGrid(space, options);
  std::vector<Unit> units;
  TAILOR_RETURN_IF_ERROR(
      AddProfilingUnits(parent, space, grid, options, positions, draws, units));
  TAILOR_RETURN_IF_ERROR(AddValidationUnits(space, options, positions, draws, units));
  TAILOR_RETURN_IF_ERROR(ServeRounds(units, parent, options, draws));
  TAILOR_ASSIGN_OR_RETURN(ProfileResult result, BuildResult(units, parent, options));
  result.profiled_configs = static_cast<int>(grid.size());
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

RecheckServeFn BuiltinRecheckServe(const engine::EngineOptions& options,
                                   const engine::Workload& workload,
                                   const engine::MeasureOptions& measure) {
  return [options, workload, measure](const model::HybridConfig& arch,
                                      uint64_t seed) -> absl::StatusOr<RecheckServed> {
    TAILOR_ASSIGN_OR_RETURN(model::HybridLM lm, model::CreateHybridLM(arch, seed));
    TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> e,
                            engine::Engine::Create(std::move(lm), options));
    TAILOR_ASSIGN_OR_RETURN(engine::Measurement m, e->Measure(workload, measure));
    return RecheckServed{m.latency_ms, static_cast<double>(m.peak_bytes) / (1 << 20)};
  };
}

}  // namespace tailor::costmodel
