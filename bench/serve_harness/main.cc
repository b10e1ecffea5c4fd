// The serving harness: what times a request in llama.cpp, node-llama-cpp's generation loop
// (tools/llama-sidecar/serve_benchmark.mjs, the baseline) or tailor's native loop around the
// same prebuilt libllama (tailor-llama-serve), side by side in one run on the same GGUFs.
//
// Two models of the quickstart's shape with dummy weights: the parent (Nemotron-H, hidden
// 128, M*-M-*M-, vocabulary 64) and a student without its second attention layer. Each round
// serves both with both harnesses (the order flipped every round), each serve its own child
// process with the agent's warm-up and timed requests under the quickstart's workload.
// Printed per harness: each model's median request over the rounds, how far one serve's
// median moves from round to round, the student / parent ratio of each round (what a budget
// relative to the parent judges) and its spread, the generation loop's time per token and a
// serve's wall time. No timing is asserted anywhere; --quick keeps the bench from rotting.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/bench_report.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/gguf/llama_cpp_serve.h"
#include "compression/hf/hf_checkpoint.h"
#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"

namespace tailor::bench {
namespace {

using json = nlohmann::json;

struct Flags {
  bool quick = false;
  int rounds = 6;
  int warmup = 40;  // the agent's profile and verify warm-up (llama_cpp_engine.cc)
  int repetitions = 15;
  std::string json_out = "bench/out/serve_harness.json";
};

constexpr char kUsage[] =
    "usage: bench_serve_harness [--quick] [--rounds N] [--warmup W] [--repetitions R] "
    "[--json-out PATH]\n"
    "  Serves the quickstart-shaped parent and a student in llama.cpp with the node harness\n"
    "  and the native one, alternating, N rounds.\n";

bool ParseFlags(int argc, char** argv, Flags& f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--quick") {
      f.quick = true;
      f.rounds = 2;
      f.warmup = 2;
      f.repetitions = 5;
    } else if (a == "--rounds" && has_value && absl::SimpleAtoi(argv[++i], &f.rounds) &&
               f.rounds >= 1) {
    } else if (a == "--warmup" && has_value && absl::SimpleAtoi(argv[++i], &f.warmup) &&
               f.warmup >= 0) {
    } else if (a == "--repetitions" && has_value &&
               absl::SimpleAtoi(argv[++i], &f.repetitions) && f.repetitions >= 1) {
    } else if (a == "--json-out" && has_value) {
      f.json_out = argv[++i];
    } else {
      return false;
    }
  }
  return true;
}

// The quickstart's parent shape (tailor-train-parent --layout nemotron-h) with `pattern`.
json QuickstartShape(const char* pattern, bool quick) {
  json c = testing::TinyNemotronHConfig(pattern);
  if (quick) return c;
  c["hidden_size"] = 128;
  c["intermediate_size"] = 256;
  c["num_attention_heads"] = 4;
  c["num_key_value_heads"] = 2;
  c["head_dim"] = 32;
  c["mamba_num_heads"] = 4;
  c["mamba_head_dim"] = 32;
  c["ssm_state_size"] = 16;
  c["n_groups"] = 2;
  c["vocab_size"] = 64;
  return c;
}

absl::StatusOr<std::string> WriteGguf(const std::string& dir, const json& config) {
  std::filesystem::create_directories(dir);
  absl::Status st = testing::WriteHfCheckpointFiles(
      dir, config, testing::HfTestTensors(config, model::DType::kF32, 1), 1, true);
  if (!st.ok()) return st;
  absl::StatusOr<hf::HfCheckpoint> hf = hf::HfCheckpoint::Open(dir);
  if (!hf.ok()) return hf.status();
  gguf::GgufExportOptions e;
  e.all_f32 = true;
  const std::string path = dir + "/model.gguf";
  absl::StatusOr<gguf::GgufExportSummary> s = gguf::ExportHfToGguf(*hf, path, e);
  if (!s.ok()) return s.status();
  return path;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One model's serves with one harness, a figure per round.
struct Serves {
  std::vector<double> request_ms, per_token_ms, wall_ms;
};

struct Harness {
  gguf::ServeHarness kind;
  Serves parent, student;
  std::vector<double> ratio;  // student / parent, per round
};

absl::Status Serve(const std::string& gguf, gguf::ServeBenchmarkOptions o, Serves& s) {
  const absl::Time start = absl::Now();
  absl::StatusOr<gguf::LlamaCppServeMeasurement> m = gguf::RunServeBenchmark(gguf, o);
  if (!m.ok()) return m.status();
  s.wall_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  s.request_ms.push_back(Median(m->request_ms));
  const double tokens = std::max<int64_t>(o.output_tokens - 1, 1);
  s.per_token_ms.push_back(Median(m->decode_ms) / tokens);
  return absl::OkStatus();
}

// (max - min) / median of `v`: how far one serve's figure moves between rounds.
double Spread(const std::vector<double>& v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return (*hi - *lo) / Median(v);
}

json Summary(const Harness& h) {
  auto model = [](const Serves& s) {
    return json{{"median_request_ms", Median(s.request_ms)},
                {"round_spread", Spread(s.request_ms)},
                {"per_token_ms", Median(s.per_token_ms)},
                {"serve_wall_ms", Median(s.wall_ms)},
                {"request_ms", s.request_ms}};
  };
  const auto [lo, hi] = std::minmax_element(h.ratio.begin(), h.ratio.end());
  return {{"harness", gguf::ServeHarnessName(h.kind)},
          {"parent", model(h.parent)},
          {"student", model(h.student)},
          {"ratio_median", Median(h.ratio)},
          {"ratio_min", *lo},
          {"ratio_max", *hi},
          {"ratio_spread", Spread(h.ratio)},
          {"ratios", h.ratio}};
}

int Run(const Flags& f) {
  json out = {{"bench", "serve_harness"}, {"machine", Machine()},  {"time", UtcNow()},
              {"quick", f.quick},         {"rounds", f.rounds},   {"warmup", f.warmup},
              {"repetitions", f.repetitions}};
  gguf::ServeBenchmarkOptions o;
  o.input_tokens = f.quick ? 16 : 128;  // the quickstart's workload: 1 / 128 / 32 / 0
  o.output_tokens = f.quick ? 4 : 32;
  o.warmup = f.warmup;
  o.repetitions = f.repetitions;
  for (gguf::ServeHarness kind : {gguf::ServeHarness::kNode, gguf::ServeHarness::kNative}) {
    o.harness = kind;
    if (const std::string missing = gguf::ServeHarnessMissing(o); !missing.empty()) {
      std::printf("llama.cpp sidecar missing: %s; nothing measured\n", missing.c_str());
      out["skipped"] = absl::StrCat("llama.cpp sidecar missing: ", missing);
      return WriteJson(out, f.json_out, "bench_serve_harness") ? 0 : 1;
    }
  }
  const std::string dir = testing::NewTestDir("serve_harness");
  absl::StatusOr<std::string> parent =
      WriteGguf(dir + "/parent", QuickstartShape(f.quick ? "M*-M-" : "M*-M-*M-", f.quick));
  absl::StatusOr<std::string> student =
      WriteGguf(dir + "/student", QuickstartShape(f.quick ? "M*-" : "M*-M-M-", f.quick));
  if (!parent.ok() || !student.ok()) {
    std::fprintf(stderr, "models: %s\n",
                 (parent.ok() ? student.status() : parent.status()).ToString().c_str());
    return 1;
  }
  std::vector<Harness> harnesses = {{gguf::ServeHarness::kNode}, {gguf::ServeHarness::kNative}};
  for (int r = 0; r < f.rounds; ++r) {
    std::printf("round %d of %d\n", r + 1, f.rounds);
    std::fflush(stdout);
    for (int k = 0; k < 2; ++k) {
      Harness& h = harnesses[r % 2 == 0 ? k : 1 - k];  // the order flips every round
      o.harness = h.kind;
      for (absl::Status st : {Serve(*parent, o, h.parent), Serve(*student, o, h.student)}) {
        if (!st.ok()) {
          std::fprintf(stderr, "serving: %s\n", st.ToString().c_str());
          return 1;
        }
      }
      h.ratio.push_back(h.student.request_ms.back() / h.parent.request_ms.back());
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::printf("\n%d rounds, %s, workload 1/%ld/%ld/0, %d warm-up + %d timed requests a serve\n",
              f.rounds, Machine().c_str(), static_cast<long>(o.input_tokens),
              static_cast<long>(o.output_tokens), f.warmup, f.repetitions);
  std::printf("| harness | parent ms | student ms | student / parent: median (min-max) | "
              "ratio spread | parent's serve spread | ms per generated token | a serve |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Harness& h : harnesses) {
    const json s = Summary(h);
    std::printf("| %s | %.2f | %.2f | %.3f (%.3f-%.3f) | %.1f%% | %.1f%% | %.3f | %.2f s |\n",
                s["harness"].get<std::string>().c_str(),
                s["parent"]["median_request_ms"].get<double>(),
                s["student"]["median_request_ms"].get<double>(), s["ratio_median"].get<double>(),
                s["ratio_min"].get<double>(), s["ratio_max"].get<double>(),
                100 * s["ratio_spread"].get<double>(),
                100 * s["parent"]["round_spread"].get<double>(),
                s["parent"]["per_token_ms"].get<double>(),
                s["parent"]["serve_wall_ms"].get<double>() / 1000);
    out["harnesses"].push_back(s);
  }
  const json& node = out["harnesses"][0];
  const json& native = out["harnesses"][1];
  out["native_over_node_parent_ms"] = native["parent"]["median_request_ms"].get<double>() /
                                      node["parent"]["median_request_ms"].get<double>();
  std::printf("native / node: parent request x%.3f, serve wall time x%.3f\n",
              out["native_over_node_parent_ms"].get<double>(),
              native["parent"]["serve_wall_ms"].get<double>() /
                  node["parent"]["serve_wall_ms"].get<double>());
  return WriteJson(out, f.json_out, "bench_serve_harness") ? 0 : 1;
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
