#include "bench/costmodel_accuracy/llama_cpp_mode.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/common/bench_parents.h"
#include "bench/costmodel_accuracy/accuracy_stats.h"
#include "common/status_macros.h"
#include "compression/costmodel/cost_model.h"
#include "compression/costmodel/search_space.h"
#include "compression/costmodel/whole_model_profiler.h"
#include "compression/gguf/llama_cpp_serve.h"
#include "compression/gguf/student_to_gguf.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_import.h"
#include "nlohmann/json.hpp"
#include "profiler-agent/llama_cpp_engine.h"
#include "tests/testing/hf_test_checkpoint.h"

namespace tailor::bench {
namespace {

using costmodel::ArchitectureMeasurement;
using json = nlohmann::json;

struct LlamaFlags {
  engine::Workload workload{1, 64, 16, 0};
  std::vector<std::string> parents = {"llama", "nemotron-h"};
  int threads = 1;
  // The agent's (llama_cpp_engine.cc): node's sidecar slows requests 6-35 or so of every
  // model by 30-100% (at the same request counts whatever the model's size: the harness's JIT,
  // not llama.cpp), which put the median of 5 on slow requests (docs/benchmarks.md).
  int warmup = 40;
  int repetitions = 15;
  int validation = 12;
  int max_points = 2;
  int max_hidden_points = 4;
  // WholeModelProfileOptions::stack_depth, one profile per entry and parent (0: the parent's
  // positions); several are compared side by side at the end of the run.
  std::vector<int> stack_depths = {0};
  // The agent's interquartile 25% (profiler::RequestCalmOptions): calm serves spread 20-60%
  // max - min (a slow request or two), so a max - min bound re-served every model twice and
  // kept the run with the fewest slow requests. Stricter than the agent on CPU: a 1-thread
  // serve sharing its core with another process runs at ~0.5-0.9 CPU per wall second, which
  // the agent's 0.5 lets through.
  double max_spread = 0.25;
  double spread_quantile = 0.75;
  double min_utilization = 0.9;
  int max_remeasures = 2;
  uint64_t seed = 1;
  bool quick = false;
  bool verbose = false;
  std::string json_out = "bench/out/costmodel_accuracy_llama_cpp.json";
};

constexpr char kLlamaUsage[] =
    "usage: bench_costmodel_accuracy --engine llama.cpp [flags]: profiles a cost table with\n"
    "llama.cpp serving whole models (the whole-model profiler) for a Llama-layout and a\n"
    "Nemotron-H-layout parent with dummy weights, and compares its predictions for held-out\n"
    "architectures with their measurements in llama.cpp\n"
    "  --parents LIST       comma-separated: llama, nemotron-h, qwen3 (one width per kind\n"
    "                       in its GGUF layout: uniform profiling models), quickstart (the\n"
    "                       demo parent's shape); default the first two\n"
    "  --batch N --input N --output N --prefix N   workload (default 1 64 16 0)\n"
    "  --threads N          llama.cpp threads (default 1)\n"
    "  --warmup N           requests before the timed ones, per model (default 40)\n"
    "  --repetitions N      timed requests per model (default 15)\n"
    "  --validation N       held-out architectures per parent (default 12)\n"
    "  --max-points N       grid points per axis (default 2)\n"
    "  --max-hidden-points N   hidden widths profiled (default 4)\n"
    "  --stack-depths LIST  comma-separated profiling-model depths, one profile each,\n"
    "                       compared side by side: 0 stacks a node at the parent's\n"
    "                       positions, D >= 2 at D and D/2 positions of the parent tiled\n"
    "                       (per-layer layouts only; default 0)\n"
    "  --max-spread PCT     re-measure a model whose requests spread more (default 25)\n"
    "  --spread-quantile PCT   the spread is (q - (1-q) quantile) / median (default 75:\n"
    "                       interquartile; 100: max - min)\n"
    "  --min-utilization PCT   re-measure a model whose median request got less CPU per\n"
    "                       wall second, per thread (default 90)\n"
    "  --max-remeasures N   (default 2)\n"
    "  --seed N             (default 1)\n"
    "  --json-out PATH      JSON report (default bench/out/costmodel_accuracy_llama_cpp.json)\n"
    "  --quick              smoke mode (bench_costmodel_accuracy_llama_cpp_quick): tiny\n"
    "                       parents, 3 held-out architectures, 1 hidden width, workload\n"
    "                       1 16 4 0, 3 timed requests; flags beside it still apply\n"
    "  --verbose            every serve's request times and CPU use on stderr\n"
    "  --help               this text\n";

int LlamaUsage(const std::string& msg) {
  std::fprintf(stderr, "bench_costmodel_accuracy --engine llama.cpp: %s\n%s", msg.c_str(),
               kLlamaUsage);
  return 2;
}

bool SetValued(const std::string& a, const std::string& v, LlamaFlags& f, std::string& error) {
  if (a == "--json-out") {
    f.json_out = v;
    return true;
  }
  if (a == "--parents") {
    f.parents = absl::StrSplit(v, ',', absl::SkipEmpty());
    for (const std::string& p : f.parents) {
      if (p != "llama" && p != "nemotron-h" && p != "qwen3" && p != "quickstart") {
        error = absl::StrCat("--parents: llama, nemotron-h, qwen3 or quickstart, not ", p);
        return false;
      }
    }
    return true;
  }
  if (a == "--stack-depths") {
    f.stack_depths.clear();
    for (absl::string_view d : absl::StrSplit(v, ',', absl::SkipEmpty())) {
      int depth = 0;
      if (!absl::SimpleAtoi(d, &depth) || depth < 0) {
        error = absl::StrCat("--stack-depths: not a depth: ", d);
        return false;
      }
      f.stack_depths.push_back(depth);
    }
    if (f.stack_depths.empty()) error = "--stack-depths: empty";
    return !f.stack_depths.empty();
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < 0) {
    error = absl::StrCat("bad number: ", a, " ", v);
    return false;
  }
  const int i = static_cast<int>(n);
  if (a == "--batch") f.workload.batch_size = n;
  else if (a == "--input") f.workload.input_tokens = n;
  else if (a == "--output") f.workload.output_tokens = n;
  else if (a == "--prefix") f.workload.cached_prefix_tokens = n;
  else if (a == "--threads") f.threads = i;
  else if (a == "--warmup") f.warmup = i;
  else if (a == "--repetitions") f.repetitions = i;
  else if (a == "--validation") f.validation = i;
  else if (a == "--max-points") f.max_points = i;
  else if (a == "--max-hidden-points") f.max_hidden_points = i;
  else if (a == "--max-spread") f.max_spread = static_cast<double>(n) / 100.0;
  else if (a == "--spread-quantile") f.spread_quantile = static_cast<double>(n) / 100.0;
  else if (a == "--min-utilization") f.min_utilization = static_cast<double>(n) / 100.0;
  else if (a == "--max-remeasures") f.max_remeasures = i;
  else if (a == "--seed") f.seed = static_cast<uint64_t>(n);
  else {
    error = absl::StrCat("unknown flag ", a);
    return false;
  }
  return true;
}

bool ParseLlamaFlags(int argc, char** argv, LlamaFlags& f, std::string& error) {
  // --quick changes the defaults, so flags given beside it still apply wherever they stand.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--quick") continue;
    f.quick = true;
    f.workload = engine::Workload{1, 16, 4, 0};
    f.validation = 3;
    f.max_hidden_points = 1;
    f.warmup = 1;
    f.repetitions = 3;
    f.max_remeasures = 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") continue;
    if (a == "--verbose") {
      f.verbose = true;
      continue;
    }
    if (a.rfind("--", 0) != 0 || i + 1 >= argc) {
      error = a.rfind("--", 0) != 0 ? absl::StrCat("unexpected ", a)
                                    : absl::StrCat("missing value for ", a);
      return false;
    }
    if (!SetValued(a, argv[++i], f, error)) return false;
  }
  if (f.threads < 1 || f.repetitions < 1) {
    error = "--threads and --repetitions must be >= 1";
    return false;
  }
  return true;
}

// The parents, sized so layer costs dominate the fixed ones (embedding, head, node's request
// overhead) without a run of the bench passing ~10 minutes per parent on 2 cores. Shapes stay
// consistent: heads x head_dim = hidden, Mamba heads x head_dim = expand x hidden.
// A Nemotron-H of `pattern` at hidden width `hidden`: heads of 32 (hidden / 32 query and Mamba
// heads, half as many KV heads), SSM state 16, MLP width `ffn`.
json NemotronHAt(const char* pattern, int64_t hidden, int64_t ffn) {
  json c = testing::TinyNemotronHConfig(pattern);
  c["hidden_size"] = hidden;
  c["intermediate_size"] = ffn;
  c["num_attention_heads"] = hidden / 32;
  c["num_key_value_heads"] = hidden / 64;
  c["head_dim"] = 32;
  c["mamba_num_heads"] = hidden / 32;
  c["mamba_head_dim"] = 32;
  c["ssm_state_size"] = 16;
  return c;
}

json NemotronHParent(bool quick) {
  return quick ? testing::TinyNemotronHConfig("M*-") : NemotronHAt("M-M*-M-M*-", 256, 768);
}

// The shape deploy/quickstart.sh trains and compresses (tailor-train-parent --layout
// nemotron-h): hidden 128, pattern M*-M-*M-, 2 B/C groups, vocabulary 64, where a request is
// mostly fixed cost and a layer ~1 ms, so the table's noise shows most.
json QuickstartParent() {
  json c = NemotronHAt("M*-M-*M-", 128, 256);
  c["n_groups"] = 2;
  c["vocab_size"] = 64;
  return c;
}

struct ParentRun {
  std::string name;
  json report;   // the parent's JSON section
  double seconds = 0;
};

// One predictor's column over the held-out architectures.
struct Column {
  std::vector<double> latency, memory;
};

void PrintRows(const costmodel::ProfileResult& r) {
  std::printf("%-9s %9s %9s %7s %9s %9s %7s  %s\n", "params", "meas ms", "pred ms", "err",
              "meas MiB", "pred MiB", "err", "architecture");
  for (const ArchitectureMeasurement& m : r.validation) {
    std::printf("%-9ld %9.2f %9.2f %6.1f%% %9.2f %9.2f %6.1f%%  %s\n",
                static_cast<long>(m.parameters), m.measured_latency_ms, m.predicted_latency_ms,
                100 * (m.predicted_latency_ms / m.measured_latency_ms - 1), m.measured_memory_mib,
                m.predicted_memory_mib,
                100 * (m.predicted_memory_mib / m.measured_memory_mib - 1), m.description.c_str());
  }
}

// What-if on the same measurements: the table's time fit redone on whole request times
// (weights 1 / t^2 like the profiler's), with T0 either per hidden width (the profiler's
// design) or affine in the width, a + b hidden, over all widths (every width's anchors then
// pin one T0 line). The whole time goes to the decode entries: with the neutral interaction a
// prediction is the sum of the entries either way. Neither counts llama.cpp's stand-in
// blocks (the measurements do not carry them) nor holds times >= 0: the per-width row is the
// profiler's fit as it was before it counted them, a before/after on one run.
absl::StatusOr<std::vector<double>> RefitLatencies(const costmodel::ProfileResult& r,
                                                   bool affine_t0) {
  std::map<std::string, size_t> index;
  std::map<int64_t, size_t> fixed;
  const size_t t0_unknowns = affine_t0 ? 2 : 0;
  for (const ArchitectureMeasurement& m : r.profiling_models) {
    if (!affine_t0) fixed.emplace(m.config.hidden, fixed.size());
  }
  const size_t base = affine_t0 ? t0_unknowns : fixed.size();
  for (const ArchitectureMeasurement& m : r.profiling_models) {
    for (const model::LayerSpec& l : m.config.layers) {
      if (l.present()) index.emplace(costmodel::LayerKey(l, m.config.hidden), base + index.size());
    }
  }
  const size_t n = base + index.size();
  std::vector<std::vector<double>> ata(n, std::vector<double>(n, 0.0));
  std::vector<double> atb(n, 0.0);
  for (const ArchitectureMeasurement& m : r.profiling_models) {
    std::vector<double> x(n, 0.0);
    const double h = static_cast<double>(m.config.hidden);
    if (affine_t0) {
      x[0] = 1;
      x[1] = h / 256.0;  // scaled so the two columns are of one size
    } else {
      x[fixed.at(m.config.hidden)] = 1;
    }
    for (const model::LayerSpec& l : m.config.layers) {
      if (l.present()) x[index.at(costmodel::LayerKey(l, m.config.hidden))] += 1;
    }
    const double y = m.measured_latency_ms, w = 1.0 / (y * y);
    for (size_t i = 0; i < n; ++i) {
      atb[i] += w * x[i] * y;
      for (size_t j = 0; j < n; ++j) ata[i][j] += w * x[i] * x[j];
    }
  }
  const std::vector<double> x = costmodel::SolveNormalEquations(std::move(ata), std::move(atb));
  costmodel::CostTableData t = r.table;
  for (costmodel::CostEntryData& e : t.entries) {
    double v = 0;
    if (e.layer_kind == costmodel::kFixedKind) {
      const double h = e.params.at("hidden");
      v = affine_t0 ? x[0] + x[1] * h / 256.0 : x[fixed.at(static_cast<int64_t>(h))];
    } else if (auto it = index.find(e.config); it != index.end()) {
      v = x[it->second];
    }
    e.time_ms = e.phase == costmodel::kDecode ? v : 0;
  }
  TAILOR_ASSIGN_OR_RETURN(costmodel::CostModel model, costmodel::CostModel::FromData(t));
  std::vector<double> out;
  for (const ArchitectureMeasurement& m : r.validation) {
    TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction p, model.Predict(m.config));
    out.push_back(p.latency_ms);
  }
  return out;
}

// The proxies fitted on the profiling models (as the built-in mode fits them), the summary
// lines and the JSON section of one parent.
json Summarize(const costmodel::ProfileResult& r) {
  std::vector<double> fp, ff, fl, fm;
  for (const ArchitectureMeasurement& m : r.profiling_models) {
    fp.push_back(static_cast<double>(m.parameters));
    ff.push_back(m.flops);
    fl.push_back(m.measured_latency_ms);
    fm.push_back(m.measured_memory_mib);
  }
  const Line lp = FitLine(fp, fl), lf = FitLine(ff, fl), mp = FitLine(fp, fm),
             mf = FitLine(ff, fm);
  Column meas, cm, pp, pf;
  json rows = json::array();
  for (const ArchitectureMeasurement& m : r.validation) {
    const double p = static_cast<double>(m.parameters);
    meas.latency.push_back(m.measured_latency_ms);
    meas.memory.push_back(m.measured_memory_mib);
    cm.latency.push_back(m.predicted_latency_ms);
    cm.memory.push_back(m.predicted_memory_mib);
    pp.latency.push_back(lp(p));
    pp.memory.push_back(mp(p));
    pf.latency.push_back(lf(m.flops));
    pf.memory.push_back(mf(m.flops));
    rows.push_back({{"architecture", m.description},
                    {"parameters", m.parameters},
                    {"flops", m.flops},
                    {"measured_latency_ms", m.measured_latency_ms},
                    {"predicted_latency_ms", m.predicted_latency_ms},
                    {"params_proxy_latency_ms", lp(p)},
                    {"flops_proxy_latency_ms", lf(m.flops)},
                    {"measured_memory_mib", m.measured_memory_mib},
                    {"predicted_memory_mib", m.predicted_memory_mib},
                    {"params_proxy_memory_mib", mp(p)},
                    {"flops_proxy_memory_mib", mf(m.flops)}});
  }
  std::printf("\n%-34s %9s %9s %9s %9s %9s %9s\n", "predictor", "lat MAPE", "lat max",
              "lat <=5%", "lat <=10%", "mem MAPE", "mem max");
  json out = {{"architectures", rows}};
  auto line = [&](const char* name, const char* key, const Column& c) {
    const Errors l = ErrorsOf(c.latency, meas.latency), m = ErrorsOf(c.memory, meas.memory);
    std::printf("%-34s %9s %9s %9s %9s %9s %9s\n", name, Pct(l.mape).c_str(), Pct(l.max).c_str(),
                Pct(l.within5).c_str(), Pct(l.within10).c_str(), Pct(m.mape).c_str(),
                Pct(m.max).c_str());
    out[key] = {{"latency", ErrorsJson(l)}, {"memory", ErrorsJson(m)}};
  };
  line("cost model (table + memory terms)", "cost_model", cm);
  for (bool affine : {false, true}) {
    absl::StatusOr<std::vector<double>> refit = RefitLatencies(r, affine);
    if (!refit.ok()) {
      std::printf("refit: %s\n", refit.status().ToString().c_str());
      continue;
    }
    Column c = cm;
    c.latency = *refit;
    line(affine ? "  what-if: T0 affine in hidden" : "  what-if: refit, T0 per width",
         affine ? "what_if_t0_affine" : "what_if_t0_per_width", c);
  }
  line("proxy: parameter count (LSQ)", "proxy_parameters", pp);
  line("proxy: FLOPs (LSQ)", "proxy_flops", pf);
  return out;
}

// `serve` that prints every serve's request times, CPU share and memory (--verbose): what the
// profiler's disturbance checks judge.
costmodel::ServeModelFn Logged(costmodel::ServeModelFn serve) {
  return [serve = std::move(serve)](const model::HybridConfig& c, uint64_t seed) {
    absl::StatusOr<costmodel::ServedModel> s = serve(c, seed);
    if (!s.ok()) return s;
    std::string line;
    for (const costmodel::ServedRequest& r : s->requests) {
      absl::StrAppendFormat(&line, " %.2f/%.2f(cpu %.2f)", r.request_ms, r.prefill_ms,
                            r.request_ms > 0 ? r.cpu_ms / r.request_ms : 0.0);
    }
    std::fprintf(stderr, "  served hidden %ld: spread %.1f%%, W %.3f C %.3f P %.3f MiB, "
                 "ms request/prefill:%s\n", static_cast<long>(c.hidden),
                 100 * costmodel::RequestSpread(*s), s->weights_mib, s->state_mib,
                 s->compute_mib, line.c_str());
    return s;
  };
}

absl::StatusOr<costmodel::ProfileResult> Profile(const json& config, const std::string& dir,
                                                 const LlamaFlags& f, int stack_depth) {
  std::filesystem::create_directories(dir + "/parent");
  std::filesystem::create_directories(dir + "/scratch");
  TAILOR_RETURN_IF_ERROR(testing::WriteHfCheckpointFiles(
      dir + "/parent", config, testing::HfTestTensors(config, model::DType::kF32, f.seed), 1,
      true));
  TAILOR_ASSIGN_OR_RETURN(hf::HfCheckpoint hf, hf::HfCheckpoint::Open(dir + "/parent"));
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig parent,
                          hf::ModelConfigFromJson(config.dump(), dir + "/parent/config.json"));
  gguf::ServeBenchmarkOptions s;
  s.batch_size = f.workload.batch_size;
  s.input_tokens = f.workload.input_tokens;
  s.output_tokens = f.workload.output_tokens;
  s.cached_prefix_tokens = f.workload.cached_prefix_tokens;
  s.threads = f.threads;
  s.warmup = f.warmup;
  s.repetitions = f.repetitions;
  s.seed = f.seed;
  s.sidecar.threads = f.threads;
  costmodel::WholeModelProfileOptions o;
  o.space = profiler::LlamaCppServableSpace(hf);  // as the agent's profile job
  const gguf::StudentShapeRules rules = gguf::StudentShapeRulesOf(hf.config());
  o.stand_ins = rules.stand_ins;
  o.kv_cache_layout = rules.kv_cache_layout;
  o.workload = f.workload;
  o.calm.threads = f.threads;
  o.max_points_per_axis = f.max_points;
  o.max_hidden_points = f.max_hidden_points;
  o.stack_depth = stack_depth;
  o.validation_architectures = f.validation;
  o.calm.max_spread = f.max_spread;
  o.calm.spread_quantile = f.spread_quantile;
  o.calm.min_thread_utilization = f.min_utilization;
  o.calm.max_remeasures = f.max_remeasures;
  o.seed = f.seed;
  o.progress = [](double fraction, const std::string& message,
                  const std::map<std::string, double>&) {
    std::fprintf(stderr, "[%3.0f%%] %s\n", 100 * fraction, message.c_str());
    return true;
  };
  costmodel::ServeModelFn serve = profiler::LlamaCppServeModelFn(hf, dir + "/scratch", s);
  if (f.verbose) serve = Logged(std::move(serve));
  return costmodel::ProfileCostTableWholeModel(parent, o, serve);
}

std::string PlanName(int stack_depth) {
  return stack_depth == 0 ? "stacks at the parent's positions"
                          : absl::StrCat("stacks of ", stack_depth, " and ", stack_depth / 2);
}

// The profiles of one run side by side (--stack-depths): the same held-out architectures
// (one seed), so the plans differ in their profiling models only.
void PrintPlans(const json& parents) {
  std::printf("\n%-12s %-34s %7s %9s %9s %9s %9s %9s\n", "parent", "plan", "models",
              "wall s", "lat MAPE", "lat max", "lat <=10%", "mem MAPE");
  for (const auto& [key, p] : parents.items()) {
    const json& l = p["cost_model"]["latency"];
    std::printf("%-12s %-34s %7d %9.1f %9s %9s %9s %9s\n", p.value("parent", key).c_str(),
                PlanName(p["profiling"].value("stack_depth", 0)).c_str(),
                p["profiling"].value("models_served", 0), p["profiling"].value("seconds", 0.0),
                Pct(l.value("mape", 0.0)).c_str(), Pct(l.value("max_error", 0.0)).c_str(),
                Pct(l.value("within_10pct", 0.0)).c_str(),
                Pct(p["cost_model"]["memory"].value("mape", 0.0)).c_str());
  }
}

// Profiles one parent in a temp dir of its own (removed after) and prints its report.
absl::StatusOr<json> RunParent(const std::string& name, const LlamaFlags& f, int stack_depth) {
  // qwen3: a layout with one width per kind, profiled on uniform models (docs/costmodel.md).
  const json config = name == "llama"  ? DecoderParent("LlamaForCausalLM", f.quick)
                      : name == "qwen3" ? DecoderParent("Qwen3ForCausalLM", f.quick)
                      : name == "quickstart" ? QuickstartParent()
                                             : NemotronHParent(f.quick);
  std::string dir = (std::filesystem::temp_directory_path() / "costmodel_llama_XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return absl::InternalError("cannot make a temp dir");
  const std::string load_before = LoadAverage();
  absl::StatusOr<costmodel::ProfileResult> r = Profile(config, dir, f, stack_depth);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!r.ok()) return r.status();
  const std::string load_after = LoadAverage();
  const size_t served = r->profiling_models.size() + r->validation.size();
  std::printf("\n=== %s parent (hidden %d, %d layers%s): %zu held-out architectures, %s ===\n",
              name.c_str(), config["hidden_size"].get<int>(),
              config["num_hidden_layers"].get<int>(),
              config.contains("hybrid_override_pattern")
                  ? absl::StrCat(", pattern ", config["hybrid_override_pattern"].get<std::string>())
                        .c_str()
                  : "",
              r->validation.size(), PlanName(stack_depth).c_str());
  std::printf("profiling cost: %.1f s wall, %zu models served (%zu profiling + %zu held-out), "
              "%d re-measures of %d models, %d still noisy; load average %s -> %s\n\n",
              r->seconds, served, r->profiling_models.size(), r->validation.size(),
              r->remeasures, r->remeasured_models, r->noisy_models, load_before.c_str(),
              load_after.c_str());
  PrintRows(*r);
  json out = Summarize(*r);
  const costmodel::CostTableData& t = r->table;
  std::printf("\ntable: %zu entries, T0 %.3f ms, memory scales W %.3f C(attn) %.3f C(mamba) "
              "%.3f, eps %.3f MiB (spread %.3f)\n",
              t.entries.size(), t.t0_ms, t.memory.weights_scale, t.memory.attention_cache_scale,
              t.memory.mamba_cache_scale, t.memory.eps_mib, t.memory.eps_spread_mib);
  json profiling = json::array();
  for (const ArchitectureMeasurement& m : r->profiling_models) {
    profiling.push_back({{"model", m.description},
                         {"hidden", m.config.hidden},
                         {"parameters", m.parameters},
                         {"flops", m.flops},
                         {"measured_latency_ms", m.measured_latency_ms},
                         {"measured_memory_mib", m.measured_memory_mib}});
  }
  out["profiling_models"] = profiling;
  out["parent_config"] = config;
  out["parent"] = name;
  out["profiling"] = {{"stack_depth", stack_depth},
                      {"seconds", r->seconds},
                      {"models_served", served},
                      {"profiling_models", r->profiling_models.size()},
                      {"profiled_configurations", r->profiled_configs},
                      {"remeasures", r->remeasures},
                      {"remeasured_models", r->remeasured_models},
                      {"noisy_models", r->noisy_models},
                      {"load_average_before", load_before},
                      {"load_average_after", load_after}};
  out["table"] = {{"entries", t.entries.size()}, {"t0_ms", t.t0_ms},
                  {"eps_mib", t.memory.eps_mib}, {"eps_spread_mib", t.memory.eps_spread_mib}};
  return out;
}

json RunJson(const LlamaFlags& f) {
  struct utsname u {};
  uname(&u);
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"when", stamp},
          {"host", {{"kernel", absl::StrCat(u.sysname, " ", u.release)},
                    {"cpus", sysconf(_SC_NPROCESSORS_ONLN)}}},
          {"workload", {{"batch_size", f.workload.batch_size},
                        {"input_tokens", f.workload.input_tokens},
                        {"output_tokens", f.workload.output_tokens},
                        {"cached_prefix_tokens", f.workload.cached_prefix_tokens}}},
          {"precision", "FP32"},
          {"threads", f.threads},
          {"warmup", f.warmup},
          {"repetitions", f.repetitions},
          {"max_points_per_axis", f.max_points},
          {"max_hidden_points", f.max_hidden_points},
          {"max_spread", f.max_spread},
          {"spread_quantile", f.spread_quantile},
          {"min_thread_utilization", f.min_utilization},
          {"max_remeasures", f.max_remeasures},
          {"quick", f.quick}};
}

bool WriteJson(const json& out, const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream file(path);
  file << out.dump(2) << "\n";
  file.close();
  if (!file) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("\nwrote %s\n", path.c_str());
  return true;
}

}  // namespace

int RunLlamaCppMode(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kLlamaUsage);
      return 0;
    }
  }
  LlamaFlags f;
  std::string error;
  if (!ParseLlamaFlags(argc, argv, f, error)) return LlamaUsage(error);
  json out = RunJson(f);
  out["engine"] = {{"name", profiler::kLlamaCppEngineName}};
  // The one case that exits 0 without numbers: nothing here can serve llama.cpp (the smoke
  // test's SKIP_REGULAR_EXPRESSION matches this line).
  const std::string missing =
      gguf::LlamaCppSidecarMissing(gguf::DefaultServeBenchmarkScript());
  if (!missing.empty()) {
    std::printf("llama.cpp sidecar missing: %s; nothing measured\n", missing.c_str());
    out["skipped"] = absl::StrCat("llama.cpp sidecar missing: ", missing);
    return WriteJson(out, f.json_out) ? 0 : 1;
  }
  absl::StatusOr<profiler::EngineIdentity> id = profiler::DetectLlamaCpp({});
  if (!id.ok()) {
    std::fprintf(stderr, "llama.cpp: %s\n", id.status().ToString().c_str());
    return 1;
  }
  out["engine"] = {{"name", id->name}, {"version", id->version}, {"build", id->build}};
  std::printf("llama.cpp %s (%s), workload batch %ld input %ld output %ld prefix %ld, FP32, "
              "%d thread(s), %d warm-up + %d timed requests per model\n",
              id->version.c_str(), id->build.c_str(), static_cast<long>(f.workload.batch_size),
              static_cast<long>(f.workload.input_tokens),
              static_cast<long>(f.workload.output_tokens),
              static_cast<long>(f.workload.cached_prefix_tokens), f.threads, f.warmup,
              f.repetitions);
  for (const std::string& name : f.parents) {
    for (int depth : f.stack_depths) {
      // Uniform layouts (qwen3) serve models that hold every layer: no deeper stacks.
      if (depth != 0 && name == "qwen3") continue;
      absl::StatusOr<json> p = RunParent(name, f, depth);
      if (!p.ok()) {
        std::fprintf(stderr, "%s parent: %s\n", name.c_str(), p.status().ToString().c_str());
        return 1;
      }
      out["parents"][depth == 0 ? name : absl::StrCat(name, "@depth", depth)] = *std::move(p);
    }
  }
  if (f.stack_depths.size() > 1) PrintPlans(out["parents"]);
  return WriteJson(out, f.json_out) ? 0 : 1;
}

}  // namespace tailor::bench
