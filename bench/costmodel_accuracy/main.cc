// bench_costmodel_accuracy: how well the cost model predicts whole architectures on this
// machine. One profiling job (ProfileCostTable, exactly what the `profile` job runs) builds
// the table and measures held-out random heterogeneous architectures end to end; this bench
// then compares, on those same architectures,
//   - the cost model (table + interpolation + memory terms),
//   - two proxies fitted by least squares on the same profiled data (the profiling models'
//     measured latency/memory against their parameter count and against their FLOPs),
// and, as a check of what the verify job would see, the same predictions against each
// held-out architecture served alone (Engine::Measure, back to back); it also shows two
// architectures with equal parameter counts and clearly different latency.
// Prints a table and writes JSON (docs/benchmarks.md, "Cost model accuracy").

#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/costmodel_accuracy/accuracy_stats.h"
#include "bench/costmodel_accuracy/llama_cpp_mode.h"
#include "compression/costmodel/cost_model.h"
#include "compression/costmodel/profiler.h"
#include "compression/costmodel/search_space.h"
#include "compression/engine/engine.h"
#include "compression/model/hybrid_lm.h"
#include "compression/tasks/training.h"
#include "nlohmann/json.hpp"

namespace tailor::bench {
namespace {

using costmodel::ArchitectureMeasurement;
using json = nlohmann::json;

struct Flags {
  std::string parent_dir;  // empty: the quickstart parent config with dummy weights
  engine::Workload workload{1, 128, 32, 0};
  std::string precision = "FP32";
  int rounds = 9;
  int warmup = 1;
  int validation = 12;
  int max_points = 2;
  bool interaction = true;
  uint64_t alone_seed_offset = 0;
  bool removal = true;
  uint64_t seed = 1;
  std::string json_out = "bench/out/costmodel_accuracy.json";
};

constexpr char kUsage[] =
    "usage: bench_costmodel_accuracy [flags]: profiles a cost table in the built-in engine and\n"
    "compares its predictions for held-out architectures with their measurements\n"
    "  --parent DIR         parent model folder (its config.json; default: the quickstart\n"
    "                       parent's config with dummy weights)\n"
    "  --batch N --input N --output N --prefix N   workload (default 1 128 32 0)\n"
    "  --precision P        FP32 or BF16 (default FP32)\n"
    "  --rounds N           profiling rounds (default 9)\n"
    "  --warmup N           warm-up rounds (default 1)\n"
    "  --validation N       held-out architectures (default 12)\n"
    "  --max-points N       grid points per axis (default 2)\n"
    "  --seed N             (default 1)\n"
    "  --alone-seed-offset N   dummy-weight seed offset of the served-alone rerun (default 0)\n"
    "  --no-interaction     no interaction correction\n"
    "  --no-removal         no random removal in the profiling models\n"
    "  --json-out PATH      JSON report (default bench/out/costmodel_accuracy.json)\n"
    "  --quick              smoke mode (the test command's bench_costmodel_accuracy_quick):\n"
    "                       3 rounds, 4 held-out architectures, workload 1 32 8 0; flags\n"
    "                       beside it still apply\n"
    "  --engine E           tailor-builtin (default: this mode) or llama.cpp (its own flags:\n"
    "                       --engine llama.cpp --help)\n"
    "  --help               this text\n";

int Usage(const std::string& msg) {
  std::fprintf(stderr, "bench_costmodel_accuracy: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

bool ParseFlags(int argc, char** argv, Flags& f, std::string& error) {
  // --quick changes the defaults, so flags given beside it still apply wherever they stand.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") {
      f.rounds = 3;
      f.warmup = 1;
      f.validation = 4;
      f.workload = engine::Workload{1, 32, 8, 0};
    }
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-interaction") {
      f.interaction = false;
      continue;
    }
    if (a == "--no-removal") {
      f.removal = false;
      continue;
    }
    if (a == "--quick") continue;
    static const char* const kValued[] = {
        "--parent", "--precision", "--json-out", "--batch", "--input", "--output", "--prefix",
        "--rounds", "--warmup", "--validation", "--max-points", "--seed", "--alone-seed-offset"};
    if (std::find(std::begin(kValued), std::end(kValued), a) == std::end(kValued)) {
      error = absl::StrCat("unknown flag ", a);
      return false;
    }
    if (i + 1 >= argc) {
      error = absl::StrCat("missing value for ", a);
      return false;
    }
    const std::string v = argv[++i];
    int64_t n = 0;
    const bool num = absl::SimpleAtoi(v, &n);
    if (a == "--parent") f.parent_dir = v;
    else if (a == "--precision") f.precision = v;
    else if (a == "--json-out") f.json_out = v;
    else if (!num) {
      error = absl::StrCat("bad number: ", a, " ", v);
      return false;
    } else if (a == "--batch") f.workload.batch_size = n;
    else if (a == "--input") f.workload.input_tokens = n;
    else if (a == "--output") f.workload.output_tokens = n;
    else if (a == "--prefix") f.workload.cached_prefix_tokens = n;
    else if (a == "--rounds") f.rounds = static_cast<int>(n);
    else if (a == "--warmup") f.warmup = static_cast<int>(n);
    else if (a == "--validation") f.validation = static_cast<int>(n);
    else if (a == "--max-points") f.max_points = static_cast<int>(n);
    else if (a == "--seed") f.seed = static_cast<uint64_t>(n);
    else if (a == "--alone-seed-offset") f.alone_seed_offset = static_cast<uint64_t>(n);
  }
  return true;
}

// Two architectures of the space with the same parameter count and the largest predicted
// latency ratio, measured end to end.
struct EqualParamsPair {
  std::string a, b;
  int64_t params_a = 0, params_b = 0;
  double predicted_a = 0, predicted_b = 0, measured_a = 0, measured_b = 0;
};

absl::StatusOr<EqualParamsPair> FindEqualParamsPair(const costmodel::SearchSpace& space,
                                                    const costmodel::CostModel& model,
                                                    const Flags& flags,
                                                    const engine::EngineOptions& eopts) {
  std::mt19937_64 rng(flags.seed + 99);
  // params -> (min predicted latency arch, max predicted latency arch)
  struct Extremes {
    costmodel::Architecture lo, hi;
    double lo_ms = 1e300, hi_ms = -1;
  };
  std::map<int64_t, Extremes> by_params;
  for (int i = 0; i < 20000; ++i) {
    const costmodel::Architecture a = space.Sample(rng);
    absl::StatusOr<model::HybridConfig> c = space.Materialize(a);
    if (!c.ok()) continue;
    absl::StatusOr<costmodel::Prediction> p = model.Predict(*c);
    if (!p.ok()) return p.status();
    Extremes& e = by_params[c->ParameterCount()];
    if (p->latency_ms < e.lo_ms) e.lo_ms = p->latency_ms, e.lo = a;
    if (p->latency_ms > e.hi_ms) e.hi_ms = p->latency_ms, e.hi = a;
  }
  const Extremes* best = nullptr;
  int64_t best_params = 0;
  for (const auto& [params, e] : by_params) {
    if (e.hi_ms <= e.lo_ms) continue;
    if (best == nullptr || e.hi_ms / e.lo_ms > best->hi_ms / best->lo_ms) {
      best = &e;
      best_params = params;
    }
  }
  if (best == nullptr) return absl::NotFoundError("no two architectures with equal parameters");
  EqualParamsPair out;
  out.params_a = out.params_b = best_params;
  out.predicted_a = best->lo_ms;
  out.predicted_b = best->hi_ms;
  out.a = space.Describe(best->lo);
  out.b = space.Describe(best->hi);
  for (int k = 0; k < 2; ++k) {
    model::HybridConfig c = *space.Materialize(k == 0 ? best->lo : best->hi);
    c.max_seq = std::max(c.max_seq, flags.workload.cache_positions());
    absl::StatusOr<model::HybridLM> lm = model::CreateHybridLM(c, 5 + k);
    if (!lm.ok()) return lm.status();
    absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::Engine::Create(*lm, eopts);
    if (!e.ok()) return e.status();
    engine::MeasureOptions mo;
    mo.warmup = flags.warmup;
    mo.repetitions = std::max(5, flags.rounds);
    absl::StatusOr<engine::Measurement> m = (*e)->Measure(flags.workload, mo);
    if (!m.ok()) return m.status();
    (k == 0 ? out.measured_a : out.measured_b) = m->latency_ms;
  }
  return out;
}

// Each held-out architecture served alone, back to back, the way the verify job measures a
// finished model (Engine::Measure): is the prediction also right for that?
absl::StatusOr<std::vector<double>> AloneLatencies(const costmodel::ProfileResult& result,
                                                   const Flags& flags,
                                                   const engine::EngineOptions& eopts) {
  std::vector<double> out;
  for (const ArchitectureMeasurement& m : result.validation) {
    absl::StatusOr<model::HybridLM> lm =
        model::CreateHybridLM(m.config, m.seed + flags.alone_seed_offset);
    if (!lm.ok()) return lm.status();
    absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::Engine::Create(*lm, eopts);
    if (!e.ok()) return e.status();
    engine::MeasureOptions mo;
    mo.repetitions = flags.rounds;
    absl::StatusOr<engine::Measurement> meas = (*e)->Measure(flags.workload, mo);
    if (!meas.ok()) return meas.status();
    out.push_back(meas->latency_ms);
  }
  return out;
}

int Run(const Flags& flags) {

  absl::StatusOr<engine::Precision> precision = engine::ParsePrecision(flags.precision);
  if (!precision.ok()) return Usage(std::string(precision.status().message()));
  model::HybridConfig parent = tasks::DefaultParentConfig();
  if (!flags.parent_dir.empty()) {
    absl::StatusOr<model::HybridConfig> c =
        model::ReadHybridConfig(flags.parent_dir + "/config.json");
    if (!c.ok()) return Usage(std::string(c.status().message()));
    parent = *c;
  }
  costmodel::ProfileOptions opts;
  opts.engine.precision = *precision;
  opts.workload = flags.workload;
  opts.rounds = flags.rounds;
  opts.warmup_rounds = flags.warmup;
  opts.validation_architectures = flags.validation;
  opts.max_points_per_axis = flags.max_points;
  opts.fit_interaction = flags.interaction;
  opts.random_removal = flags.removal;
  opts.seed = flags.seed;
  opts.progress = [](double fraction, const std::string& message,
                     const std::map<std::string, double>& metrics) {
    std::string extra;
    if (auto it = metrics.find("latency_mape"); it != metrics.end()) {
      extra = absl::StrCat("  latency MAPE ", Pct(it->second));
    }
    std::fprintf(stderr, "[%3.0f%%] %s%s\n", 100 * fraction, message.c_str(), extra.c_str());
    return true;
  };
  const std::string load_before = LoadAverage();
  absl::StatusOr<costmodel::ProfileResult> result = costmodel::ProfileCostTable(parent, opts);
  if (!result.ok()) {
    std::fprintf(stderr, "profiling failed: %s\n", result.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<costmodel::CostModel> model = costmodel::CostModel::FromData(result->table);
  if (!model.ok()) {
    std::fprintf(stderr, "cost model: %s\n", model.status().ToString().c_str());
    return 1;
  }


  // Proxies fitted on the profiling models, evaluated on the held-out architectures.
  std::vector<double> fit_params, fit_flops, fit_lat, fit_mem;
  for (const ArchitectureMeasurement& m : result->profiling_models) {
    fit_params.push_back(static_cast<double>(m.parameters));
    fit_flops.push_back(m.flops);
    fit_lat.push_back(m.measured_latency_ms);
    fit_mem.push_back(m.measured_memory_mib);
  }
  const Line lat_by_params = FitLine(fit_params, fit_lat);
  const Line lat_by_flops = FitLine(fit_flops, fit_lat);
  const Line mem_by_params = FitLine(fit_params, fit_mem);
  const Line mem_by_flops = FitLine(fit_flops, fit_mem);
  std::vector<double> meas_lat, meas_mem, cm_lat, cm_mem, pp_lat, pf_lat, pp_mem, pf_mem;
  json rows = json::array();
  for (const ArchitectureMeasurement& m : result->validation) {
    const double p = static_cast<double>(m.parameters);
    meas_lat.push_back(m.measured_latency_ms);
    meas_mem.push_back(m.measured_memory_mib);
    cm_lat.push_back(m.predicted_latency_ms);
    cm_mem.push_back(m.predicted_memory_mib);
    pp_lat.push_back(lat_by_params(p));
    pf_lat.push_back(lat_by_flops(m.flops));
    pp_mem.push_back(mem_by_params(p));
    pf_mem.push_back(mem_by_flops(m.flops));
    rows.push_back({{"architecture", m.description},
                    {"parameters", m.parameters},
                    {"flops", m.flops},
                    {"measured_latency_ms", m.measured_latency_ms},
                    {"predicted_latency_ms", m.predicted_latency_ms},
                    {"params_proxy_latency_ms", lat_by_params(p)},
                    {"flops_proxy_latency_ms", lat_by_flops(m.flops)},
                    {"measured_memory_mib", m.measured_memory_mib},
                    {"predicted_memory_mib", m.predicted_memory_mib}});
  }
  const Errors cm_l = ErrorsOf(cm_lat, meas_lat), cm_m = ErrorsOf(cm_mem, meas_mem);
  absl::StatusOr<std::vector<double>> alone = AloneLatencies(*result, flags, opts.engine);
  if (!alone.ok()) {
    std::fprintf(stderr, "serving alone: %s\n", alone.status().ToString().c_str());
    return 1;
  }
  const Errors cm_alone = ErrorsOf(cm_lat, *alone);
  for (size_t i = 0; i < alone->size(); ++i) rows[i]["alone_latency_ms"] = (*alone)[i];
  const Errors pp_l = ErrorsOf(pp_lat, meas_lat), pp_m = ErrorsOf(pp_mem, meas_mem);
  const Errors pf_l = ErrorsOf(pf_lat, meas_lat), pf_m = ErrorsOf(pf_mem, meas_mem);

  absl::StatusOr<costmodel::SearchSpace> space =
      costmodel::SearchSpace::FromParent(parent, opts.space);
  absl::StatusOr<EqualParamsPair> pair =
      FindEqualParamsPair(*space, *model, flags, opts.engine);
  const std::string load_after = LoadAverage();

  // --- report ---
  std::printf("\ncost model accuracy: %zu held-out architectures, %d profiled configurations "
              "in %zu profiling models, %d rounds, %.1f s\n",
              result->validation.size(), result->profiled_configs,
              result->profiling_models.size(), flags.rounds, result->seconds);
  std::printf("workload batch %ld input %ld output %ld prefix %ld, %s, load average %s -> %s\n\n",
              static_cast<long>(flags.workload.batch_size),
              static_cast<long>(flags.workload.input_tokens),
              static_cast<long>(flags.workload.output_tokens),
              static_cast<long>(flags.workload.cached_prefix_tokens), flags.precision.c_str(),
              load_before.c_str(), load_after.c_str());
  std::printf("%-34s %10s %10s %9s %9s %10s %10s\n", "predictor", "lat MAPE", "lat max",
              "lat <=5%", "lat <=10%", "mem MAPE", "mem max");
  auto line = [](const char* name, const Errors& l, const Errors& m) {
    std::printf("%-34s %10s %10s %9s %9s %10s %10s\n", name, Pct(l.mape).c_str(),
                Pct(l.max).c_str(), Pct(l.within5).c_str(), Pct(l.within10).c_str(),
                Pct(m.mape).c_str(), Pct(m.max).c_str());
  };
  line("cost model (table + memory terms)", cm_l, cm_m);
  line("  same, vs each served alone (verify)", cm_alone, cm_m);
  line("proxy: parameter count (LSQ)", pp_l, pp_m);
  line("proxy: FLOPs (LSQ)", pf_l, pf_m);
  std::printf("\n%-8s %9s %9s %9s %7s %9s %9s %7s  %s\n", "params", "meas ms", "alone ms",
              "pred ms", "err", "meas MiB", "pred MiB", "err", "architecture");
  for (size_t i = 0; i < result->validation.size(); ++i) {
    const ArchitectureMeasurement& m = result->validation[i];
    std::printf("%-8ld %9.3f %9.3f %9.3f %6.1f%% %9.3f %9.3f %6.1f%%  %s\n",
                static_cast<long>(m.parameters), m.measured_latency_ms, (*alone)[i],
                m.predicted_latency_ms, 100 * (m.predicted_latency_ms / m.measured_latency_ms - 1),
                m.measured_memory_mib, m.predicted_memory_mib,
                100 * (m.predicted_memory_mib / m.measured_memory_mib - 1),
                m.description.c_str());
  }
  json pair_json = nullptr;
  if (pair.ok()) {
    std::printf("\nequal parameter counts (%ld), different latency: measured %.3f ms vs %.3f ms "
                "(%.0f%% apart; predicted %.3f vs %.3f)\n  A: %s\n  B: %s\n",
                static_cast<long>(pair->params_a), pair->measured_a, pair->measured_b,
                100 * (pair->measured_b / pair->measured_a - 1), pair->predicted_a,
                pair->predicted_b, pair->a.c_str(), pair->b.c_str());
    pair_json = {{"parameters", pair->params_a},
                 {"a", {{"architecture", pair->a}, {"measured_latency_ms", pair->measured_a},
                        {"predicted_latency_ms", pair->predicted_a}}},
                 {"b", {{"architecture", pair->b}, {"measured_latency_ms", pair->measured_b},
                        {"predicted_latency_ms", pair->predicted_b}}}};
  } else {
    std::printf("\nequal-parameter pair: %s\n", pair.status().ToString().c_str());
  }
  const costmodel::CostTableData& t = result->table;
  const costmodel::InteractionModel& im = result->table.interaction;
  std::printf("\ninteraction (decode; rows attention, mamba, moe, mlp, fixed; columns the "
              "same kinds' present-layer counts minus reference %.2f %.2f %.2f %.2f):\n",
              im.reference[0], im.reference[1], im.reference[2], im.reference[3]);
  for (int r = 0; r <= costmodel::kFixedRow; ++r) {
    std::printf("  %+.4f %+.4f %+.4f %+.4f\n", im.decode[r][0], im.decode[r][1],
                im.decode[r][2], im.decode[r][3]);
  }
  std::printf("\ntable: %zu entries, T0 %.3f ms at hidden %ld, eps %.4f MiB (spread %.4f); "
              "parent predicted %.3f MiB = W %.3f + C %.3f + P %.3f + R %.3f + eps\n",
              t.entries.size(), t.t0_ms, static_cast<long>(parent.hidden), t.memory.eps_mib,
              t.memory.eps_spread_mib, t.memory.parent_total_mib, t.memory.parent_w_mib,
              t.memory.parent_c_mib, t.memory.parent_p_mib, t.memory.parent_r_mib);

  struct utsname u {};
  uname(&u);
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  json out = {
      {"when", stamp},
      {"host", {{"kernel", absl::StrCat(u.sysname, " ", u.release)},
                {"load_average_before", load_before},
                {"load_average_after", load_after}}},
      {"engine", {{"name", engine::kEngineName}, {"version", engine::kEngineVersion}}},
      {"workload", {{"batch_size", flags.workload.batch_size},
                    {"input_tokens", flags.workload.input_tokens},
                    {"output_tokens", flags.workload.output_tokens},
                    {"cached_prefix_tokens", flags.workload.cached_prefix_tokens}}},
      {"precision", flags.precision},
      {"rounds", flags.rounds},
      {"max_points_per_axis", flags.max_points},
      {"interaction_correction", flags.interaction},
      {"random_removal", flags.removal},
      {"profiled_configurations", result->profiled_configs},
      {"profiling_models", result->profiling_models.size()},
      {"profile_seconds", result->seconds},
      {"cost_model", {{"latency", ErrorsJson(cm_l)}, {"memory", ErrorsJson(cm_m)},
                      {"latency_vs_served_alone", ErrorsJson(cm_alone)}}},
      {"proxy_parameters", {{"latency", ErrorsJson(pp_l)}, {"memory", ErrorsJson(pp_m)}}},
      {"proxy_flops", {{"latency", ErrorsJson(pf_l)}, {"memory", ErrorsJson(pf_m)}}},
      {"table", {{"entries", t.entries.size()}, {"t0_ms", t.t0_ms},
                 {"eps_mib", t.memory.eps_mib}, {"eps_spread_mib", t.memory.eps_spread_mib}}},
      {"architectures", rows},
      {"equal_parameters_pair", pair_json},
  };
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(flags.json_out).parent_path(), ec);
  std::ofstream file(flags.json_out);
  file << out.dump(2) << "\n";
  file.close();
  if (!file) {
    std::fprintf(stderr, "cannot write %s\n", flags.json_out.c_str());
    return 1;
  }
  std::printf("\nwrote %s\n", flags.json_out.c_str());
  return 0;
}

}  // namespace
}  // namespace tailor::bench

int main(int argc, char** argv) {
  // --engine picks the mode; the rest of the command line is that mode's.
  std::vector<char*> args = {argv[0]};
  std::string engine = "tailor-builtin";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--engine") {
      args.push_back(argv[i]);
    } else if (i + 1 < argc) {
      engine = argv[++i];
    } else {
      return tailor::bench::Usage("missing value for --engine");
    }
  }
  if (engine == "llama.cpp") {
    return tailor::bench::RunLlamaCppMode(static_cast<int>(args.size()), args.data());
  }
  if (engine != "tailor-builtin") {
    return tailor::bench::Usage("--engine: tailor-builtin or llama.cpp, not " + engine);
  }
  argc = static_cast<int>(args.size());
  argv = args.data();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", tailor::bench::kUsage);
      return 0;
    }
  }
  tailor::bench::Flags flags;
  std::string error;
  if (!tailor::bench::ParseFlags(argc, argv, flags, error)) return tailor::bench::Usage(error);
  return tailor::bench::Run(flags);
}
