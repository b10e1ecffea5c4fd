// bench_drift_check: what a recompression's drift check costs against re-profiling the table
// it checks, and whether it tells the engine the table was profiled in from a changed one.
//
// One parent, one workload. Baseline: the profile job's work (costmodel::ProfileCostTable in
// the built-in engine, 1 thread, FP32): wall seconds, models served, validated error. Then the
// drift check's work (costmodel::RecheckCostTable on fresh architectures) in three engines:
// the one the table was profiled in, the same engine on 2 threads, and the same engine with
// BF16 kernels (another build of the serving stack, as an upgrade would be). Printed side by
// side with the ratio of seconds; written as JSON. --quick is the test command's smoke run
// (tiny parent, one round): it asserts nothing about the figures.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/common/bench_report.h"
#include "compression/costmodel/cost_model.h"
#include "compression/costmodel/drift_check.h"
#include "compression/costmodel/profiler.h"
#include "nlohmann/json.hpp"

namespace {

using Json = nlohmann::json;
using tailor::costmodel::CostModel;
using tailor::engine::EngineOptions;
using tailor::engine::Precision;
using tailor::model::HybridConfig;
using tailor::model::LayerSpec;

// The quickstart's demo parent shape (hidden 128, 8 hybrid layers), or a tiny one.
HybridConfig Parent(bool quick) {
  HybridConfig c;
  c.vocab = 64;
  c.hidden = quick ? 32 : 128;
  c.max_seq = 256;
  const int64_t h = c.hidden;
  c.layers = {LayerSpec::Attention(4, 2, h / 4), LayerSpec::Mamba(4, h / 4, 16, 4, 16),
              LayerSpec::Moe(4, 2, h, h), LayerSpec::Mlp(2 * h)};
  if (!quick) {
    const std::vector<LayerSpec> first = c.layers;
    c.layers.insert(c.layers.end(), first.begin(), first.end());
  }
  return c;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

struct Engine {
  std::string name;
  EngineOptions options;
};

Json Recheck(const CostModel& table, const HybridConfig& parent, const Engine& e,
             const tailor::engine::Workload& w, bool quick) {
  tailor::engine::MeasureOptions measure;
  measure.repetitions = quick ? 2 : 15;
  tailor::costmodel::RecheckOptions o;
  o.architectures = quick ? 2 : 4;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<tailor::costmodel::RecheckResult> r = tailor::costmodel::RecheckCostTable(
      table, parent, tailor::costmodel::BuiltinRecheckServe(e.options, w, measure), o);
  Json out = {{"engine", e.name}};
  if (!r.ok()) {
    out["error"] = r.status().ToString();
    return out;
  }
  out["seconds"] = Seconds(start);
  out["models_served"] = r->architectures.size();
  out["latency_mape"] = r->summary.latency_mape;
  out["latency_max_error"] = r->summary.latency_max_error;
  out["memory_mape"] = r->summary.memory_mape;
  out["bound"] = r->bound;
  out["holds"] = r->holds;
  for (const tailor::costmodel::ArchitectureMeasurement& a : r->architectures) {
    out["architectures"].push_back({{"architecture", a.description},
                                    {"predicted_latency_ms", a.predicted_latency_ms},
                                    {"measured_latency_ms", a.measured_latency_ms}});
  }
  return out;
}

void Print(const Json& out) {
  const Json& p = out["profile"];
  std::printf("\n%-34s %8s %7s %13s %7s %7s  %s\n", "WORK", "SECONDS", "MODELS",
              "LATENCY MAPE", "WORST", "BOUND", "VERDICT");
  std::printf("%-34s %8.1f %7d %12.1f%% %6.1f%% %7s  %s\n", "profile (1 thread, FP32)",
              p["seconds"].get<double>(), p["models_served"].get<int>(),
              100 * p["latency_mape"].get<double>(), 100 * p["latency_max_error"].get<double>(),
              "-", "validated");
  for (const Json& r : out["rechecks"]) {
    if (r.contains("error")) {
      std::printf("%-34s  error: %s\n", ("drift check: " + r["engine"].get<std::string>()).c_str(),
                  r["error"].get<std::string>().c_str());
      continue;
    }
    std::printf("%-34s %8.1f %7d %12.1f%% %6.1f%% %6.1f%%  %s\n",
                ("drift check: " + r["engine"].get<std::string>()).c_str(),
                r["seconds"].get<double>(), r["models_served"].get<int>(),
                100 * r["latency_mape"].get<double>(), 100 * r["latency_max_error"].get<double>(),
                100 * r["bound"].get<double>(), r["holds"].get<bool>() ? "holds" : "DRIFTED");
  }
  if (out.contains("ratio_recheck_vs_profile_seconds")) {
    std::printf("drift check / profile seconds (same engine): %.3f\n",
                out["ratio_recheck_vs_profile_seconds"].get<double>());
  }
}

constexpr char kUsage[] =
    "usage: bench_drift_check [--quick] [--json-out PATH]\n"
    "  --json-out PATH  JSON report (default bench/out/drift_check.json; --json is the same)\n"
    "  --quick          smoke mode (the test command's bench_drift_check_quick): a tiny\n"
    "                   parent, one profiling round, 2 architectures; figures mean nothing\n"
    "  --help           this text\n"
    "Full mode: the demo parent's shape (hidden 128, 8 hybrid layers), batch 1, 128 input and\n"
    "32 output tokens; the profile job's defaults (9 rounds, 8 held-out architectures); the\n"
    "drift check's (4 architectures, 15 requests each).\n";

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "bench/out/drift_check.json";
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (a == "--quick") {
      quick = true;
    } else if ((a == "--json-out" || a == "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "bench_drift_check: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  const HybridConfig parent = Parent(quick);
  tailor::costmodel::ProfileOptions po;
  po.workload.batch_size = 1;
  po.workload.input_tokens = quick ? 16 : 128;
  po.workload.output_tokens = quick ? 4 : 32;
  if (quick) {
    po.rounds = 1;
    po.validation_architectures = 2;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<tailor::costmodel::ProfileResult> profiled =
      tailor::costmodel::ProfileCostTable(parent, po);
  if (!profiled.ok()) {
    std::fprintf(stderr, "bench_drift_check: profile: %s\n", profiled.status().ToString().c_str());
    return 1;
  }
  const double profile_seconds = Seconds(start);
  absl::StatusOr<CostModel> table = CostModel::FromData(profiled->table);
  if (!table.ok()) {
    std::fprintf(stderr, "bench_drift_check: %s\n", table.status().ToString().c_str());
    return 1;
  }
  const tailor::costmodel::ValidationSummary& v = profiled->table.validation;
  Json out = {{"bench", "drift_check"}, {"date", tailor::bench::UtcNow()},
              {"machine", tailor::bench::Machine()},
              {"quick", quick}};
  out["profile"] = {
      {"seconds", profile_seconds},
      {"models_served",
       static_cast<int>(profiled->profiling_models.size() + profiled->validation.size())},
      {"latency_mape", v.latency_mape},
      {"latency_max_error", v.latency_max_error},
      {"validated_architectures", v.architectures}};
  EngineOptions same;  // what the table was profiled with: 1 thread, FP32
  EngineOptions threads = same;
  threads.cpu_threads = 2;
  EngineOptions bf16 = same;
  bf16.precision = Precision::kBf16;
  bool failed = false;
  for (const Engine& e : {Engine{"as profiled", same}, Engine{"2 threads", threads},
                          Engine{"BF16 kernels", bf16}}) {
    Json r = Recheck(*table, parent, e, po.workload, quick);
    failed = failed || r.contains("error");
    out["rechecks"].push_back(std::move(r));
  }
  if (!out["rechecks"][0].contains("error")) {
    out["ratio_recheck_vs_profile_seconds"] =
        out["rechecks"][0]["seconds"].get<double>() / profile_seconds;
  }
  Print(out);
  if (!tailor::bench::WriteJson(out, json_path, "bench_drift_check")) return 1;
  std::printf("wrote %s\n", json_path.c_str());
  return failed ? 1 : 0;
}
