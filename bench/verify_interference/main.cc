// Verify under interference: how far other processes' load moves the latency a verify judges
// in llama.cpp, and what serving until calm (compression/costmodel/calm_serving.h, with the
// verify's own thresholds, profiler::RequestCalmOptions) buys back.
//
// Each round serves one model these ways, side by side in the same run:
//   quiet, one serve : nothing else runs; the round's first quiet serve judged alone;
//   quiet, median    : `--serves` quiet serves, each its own llama.cpp process, the median
//                      judged (how verify measures, request_latency.h MeasureServes);
//   once     : `--competitors` busy processes spin through the first serve, which is judged
//              (how verify measured before the interference check);
//   guarded  : the same competitors through the first serve, then ServeUntilCalm: the
//              verify's interference check decides whether to serve again.
// Printed: median latency per mode, its ratio to the quiet one, the mean and worst |error|
// of a round's judged figure against the model's latency (the median of every quiet serve of
// the run), the serves and how many runs stayed disturbed. No timing is asserted anywhere;
// --quick (a tiny model, 2 rounds) keeps the bench from rotting in the tests.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/bench_parents.h"
#include "bench/common/bench_report.h"
#include "common/status_macros.h"
#include "compression/costmodel/calm_serving.h"
#include "compression/engine/workload.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/gguf/llama_cpp_serve.h"
#include "compression/gguf/llama_cpp_sidecar.h"
#include "compression/hf/hf_checkpoint.h"
#include "nlohmann/json.hpp"
#include "profiler-agent/llama_cpp_engine.h"
#include "profiler-agent/request_latency.h"
#include "tailor/v1/job_output.pb.h"
#include "tests/testing/hf_test_checkpoint.h"

namespace tailor::bench {
namespace {

using json = nlohmann::json;

struct Flags {
  bool quick = false;
  int rounds = 5;
  int competitors = 2;
  int threads = 1;  // the engine's (--engine-threads)
  int serves = 3;   // quiet serves per round judged on their median, as the agent's
                    // --verify-serves judges a verify
  bool memory_load = false;  // --load memory: competitors stream a 64 MiB buffer each
  std::string json_out = "bench/out/verify_interference.json";
};

constexpr char kUsage[] =
    "usage: bench_verify_interference [--quick] [--rounds N] [--competitors K] "
    "[--threads T] [--serves S] [--load cpu|memory] [--json-out PATH]\n"
    "  Serves one llama-layout model in llama.cpp quiet, then under K busy processes once\n"
    "  (judged as is) and until calm (the verify's interference check), N rounds.\n";

bool ParseFlags(int argc, char** argv, Flags& f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--quick") {
      f.quick = true;
      f.rounds = 2;
    } else if (a == "--rounds" && has_value && absl::SimpleAtoi(argv[++i], &f.rounds) &&
               f.rounds >= 1) {
    } else if (a == "--competitors" && has_value &&
               absl::SimpleAtoi(argv[++i], &f.competitors) && f.competitors >= 0) {
    } else if (a == "--threads" && has_value && absl::SimpleAtoi(argv[++i], &f.threads) &&
               f.threads >= 1) {
    } else if (a == "--serves" && has_value && absl::SimpleAtoi(argv[++i], &f.serves) &&
               f.serves >= 1) {
    } else if (a == "--load" && has_value) {
      const std::string load = argv[++i];
      if (load != "cpu" && load != "memory") return false;
      f.memory_load = load == "memory";
    } else if (a == "--json-out" && has_value) {
      f.json_out = argv[++i];
    } else {
      return false;
    }
  }
  return true;
}

// `n` processes that load the host for `d`, then exit: spinning on the CPU, or streaming
// through 64 MiB each (caches and memory bandwidth, which a CPU share does not show).
std::vector<pid_t> StartCompetitors(int n, absl::Duration d, bool memory) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const absl::Time end = absl::Now() + d;
      std::vector<double> buffer(memory ? (64 << 20) / sizeof(double) : 1, 1.0);
      volatile double x = 1;
      while (absl::Now() < end) {
        if (memory) {
          for (size_t k = 0; k < buffer.size(); k += 8) buffer[k] += x;
        } else {
          for (int k = 0; k < 100000; ++k) x = x * 1.0000001 + 1e-9;
        }
      }
      ::_exit(0);
    }
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

void Reap(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}

double MedianRequest(const costmodel::ServedModel& s) {
  std::vector<double> t;
  for (const costmodel::ServedRequest& r : s.requests) t.push_back(r.request_ms);
  return engine::Median(t);
}

struct Mode {
  const char* name;
  std::vector<double> latency_ms;  // per round: the judged run's median request
  int serves = 0;
  int disturbed = 0;  // runs judged while still disturbed (guarded) / flagged (quiet, once)
  std::vector<double> spread;  // per round, the judged run's (interquartile) spread
};

struct Modes {
  Mode quiet{"quiet, one serve"};
  Mode median{"quiet, median of serves"};
  Mode once{"under load, served once"};
  Mode guarded{"under load, until calm"};
  std::vector<double> quiet_serves;  // every quiet serve: the model's latency is their median
};

absl::Status RunRounds(const std::string& gguf, const gguf::ServeBenchmarkOptions& o,
                       const Flags& f, Modes& modes) {
  Mode& quiet = modes.quiet;
  Mode& once = modes.once;
  Mode& guarded = modes.guarded;
  const costmodel::CalmServingOptions calm = profiler::RequestCalmOptions(o.threads);
  auto serve = [&]() -> absl::StatusOr<costmodel::ServedModel> {
    absl::StatusOr<gguf::LlamaCppServeMeasurement> m = gguf::RunServeBenchmark(gguf, o);
    if (!m.ok()) return m.status();
    return profiler::ServedModelOf(*m);
  };
  for (int r = 0; r < f.rounds; ++r) {
    const absl::Time start = absl::Now();
    absl::StatusOr<costmodel::ServedModel> q = serve();
    if (!q.ok()) return q.status();
    // The competitors outlast one serve (child start, load, warm-up and requests) by a bit.
    const absl::Duration serve_time = (absl::Now() - start) * 1.2;
    quiet.latency_ms.push_back(MedianRequest(*q));
    ++quiet.serves;
    const costmodel::Disturbance qd = costmodel::JudgeDisturbance(*q, calm);
    quiet.disturbed += qd.disturbed ? 1 : 0;
    quiet.spread.push_back(qd.spread);
    // Judged as verify judges its serves (profiler::MedianServe), the first one included.
    std::vector<v1::ModelCosts> round(1);
    round[0].set_latency_ms(quiet.latency_ms.back());
    for (int s = 1; s < f.serves; ++s) {
      absl::StatusOr<costmodel::ServedModel> more = serve();
      if (!more.ok()) return more.status();
      round.emplace_back().set_latency_ms(MedianRequest(*more));
    }
    TAILOR_ASSIGN_OR_RETURN(v1::ModelCosts judged, profiler::MedianServe(round, "serves"));
    modes.median.latency_ms.push_back(judged.latency_ms());
    modes.median.serves += f.serves;
    modes.quiet_serves.insert(modes.quiet_serves.end(), judged.serve_latency_ms().begin(),
                              judged.serve_latency_ms().end());

    std::vector<pid_t> pids = StartCompetitors(f.competitors, serve_time, f.memory_load);
    absl::StatusOr<costmodel::ServedModel> p = serve();
    Reap(pids);
    if (!p.ok()) return p.status();
    once.latency_ms.push_back(MedianRequest(*p));
    ++once.serves;
    const costmodel::Disturbance pd = costmodel::JudgeDisturbance(*p, calm);
    once.disturbed += pd.disturbed ? 1 : 0;
    once.spread.push_back(pd.spread);

    pids = StartCompetitors(f.competitors, serve_time, f.memory_load);
    absl::StatusOr<costmodel::CalmServed> g = costmodel::ServeUntilCalm(serve, calm);
    Reap(pids);
    if (!g.ok()) return g.status();
    guarded.latency_ms.push_back(MedianRequest(g->served));
    guarded.serves += 1 + g->remeasures;
    guarded.disturbed += g->disturbance.disturbed ? 1 : 0;
    guarded.spread.push_back(g->disturbance.spread);
    std::printf(
        "round %d: quiet %.2f ms (spread %.0f%%), median of %d %.2f ms, once %.2f ms (%.0f%%), "
        "guarded %.2f ms (%.0f%%, %d serves%s)\n",
        r + 1, quiet.latency_ms.back(), 100 * qd.spread, f.serves,
        modes.median.latency_ms.back(), once.latency_ms.back(),
        100 * pd.spread, guarded.latency_ms.back(), 100 * g->disturbance.spread,
        1 + g->remeasures, g->disturbance.disturbed ? ", still disturbed" : "");
  }
  return absl::OkStatus();
}

// Errors against `model_ms`: the model's latency on this host, the median of every quiet serve.
json Summarize(const Mode& m, double model_ms) {
  double error = 0, worst = 0;
  for (double v : m.latency_ms) {
    error += std::abs(v / model_ms - 1);
    worst = std::max(worst, std::abs(v / model_ms - 1));
  }
  error /= static_cast<double>(m.latency_ms.size());
  const double median = engine::Median(m.latency_ms);
  return {{"mode", m.name},
          {"median_latency_ms", median},
          {"ratio_to_quiet", median / model_ms},
          {"mean_abs_error_vs_quiet", error},
          {"worst_abs_error_vs_quiet", worst},
          {"serves", m.serves},
          {"disturbed", m.disturbed},
          {"latency_ms", m.latency_ms},
          {"spread", m.spread}};
}

int Run(const Flags& f) {
  json out = {{"bench", "verify_interference"},
              {"machine", Machine()},
              {"time", UtcNow()},
              {"quick", f.quick},
              {"rounds", f.rounds},
              {"competitors", f.competitors},
              {"load", f.memory_load ? "memory" : "cpu"},
              {"threads", f.threads},
              {"serves", f.serves}};
  const std::string missing = gguf::LlamaCppSidecarMissing(gguf::DefaultServeBenchmarkScript());
  if (!missing.empty()) {
    std::printf("llama.cpp sidecar missing: %s; nothing measured\n", missing.c_str());
    out["skipped"] = absl::StrCat("llama.cpp sidecar missing: ", missing);
    return WriteJson(out, f.json_out, "bench_verify_interference") ? 0 : 1;
  }
  const std::string dir = testing::NewTestDir("verify_interference");
  const json config = DecoderParent("LlamaForCausalLM", f.quick);
  absl::Status st = testing::WriteHfCheckpointFiles(
      dir, config, testing::HfTestTensors(config, model::DType::kF32, 1), 1, true);
  absl::StatusOr<hf::HfCheckpoint> hf =
      st.ok() ? hf::HfCheckpoint::Open(dir) : absl::StatusOr<hf::HfCheckpoint>(st);
  const std::string gguf = dir + "/model.gguf";
  gguf::GgufExportOptions e;
  e.all_f32 = true;
  if (hf.ok()) st = gguf::ExportHfToGguf(*hf, gguf, e).status();
  if (!hf.ok() || !st.ok()) {
    std::fprintf(stderr, "parent: %s\n", (hf.ok() ? st : hf.status()).ToString().c_str());
    return 1;
  }
  gguf::ServeBenchmarkOptions o;  // the quickstart's workload, as its verify serves it
  o.input_tokens = 64;
  o.output_tokens = 16;
  o.warmup = f.quick ? 4 : 32;
  o.repetitions = f.quick ? 10 : 15;
  o.threads = f.threads;
  o.sidecar.threads = f.threads;
  Modes modes;
  st = RunRounds(gguf, o, f, modes);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!st.ok()) {
    std::fprintf(stderr, "serving: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf(
      "\n%d rounds, %d %s competitor(s), engine threads %d, %s, %ld warm-up + %ld timed "
      "requests\n",
      f.rounds, f.competitors, f.memory_load ? "memory" : "cpu", f.threads, Machine().c_str(),
      static_cast<long>(o.warmup), static_cast<long>(o.repetitions));
  const double model_ms = engine::Median(modes.quiet_serves);
  std::printf("the model's latency (median of %zu quiet serves): %.2f ms\n",
              modes.quiet_serves.size(), model_ms);
  std::printf("| mode | median latency | ratio to quiet | |error| vs quiet: mean, worst | "
              "serves | judged disturbed |\n|---|---:|---:|---:|---:|---:|\n");
  for (const Mode* m : {&modes.quiet, &modes.median, &modes.once, &modes.guarded}) {
    const json s = Summarize(*m, model_ms);
    std::printf("| %s | %.2f ms | %.3f | %.1f%%, %.1f%% | %d | %d |\n", m->name,
                s["median_latency_ms"].get<double>(), s["ratio_to_quiet"].get<double>(),
                100 * s["mean_abs_error_vs_quiet"].get<double>(),
                100 * s["worst_abs_error_vs_quiet"].get<double>(), m->serves, m->disturbed);
    out["modes"].push_back(s);
  }
  out["model_latency_ms"] = model_ms;
  out["quiet_serves_ms"] = modes.quiet_serves;
  return WriteJson(out, f.json_out, "bench_verify_interference") ? 0 : 1;
}

}  // namespace
}  // namespace tailor::bench

int main(int argc, char** argv) {
  tailor::bench::Flags f;
  if (!tailor::bench::ParseFlags(argc, argv, f)) {
    std::fprintf(stderr, "%s", tailor::bench::kUsage);
    return 2;
  }
  return tailor::bench::Run(f);
}
