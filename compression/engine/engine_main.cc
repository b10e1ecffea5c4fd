// tailor-engine: serves a model directory (config.json + model.safetensors, e.g. an unpacked
// student artifact) in the built-in engine under a workload and prints what the verify job
// would measure: latency, throughput, peak memory. For people checking a model by hand; the
// campaign's numbers come from the verify job on the target's agent.
//
//   tailor-engine --model DIR [--batch 1 --input 128 --output 32 --prefix 0]
//                 [--precision FP32|BF16] [--repetitions 15] [--json]
// Exit codes: 0 ok, 1 the model failed to load or serve, 2 usage.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "compression/engine/engine.h"

namespace {

int Usage(const char* message) {
  std::fprintf(stderr,
               "tailor-engine: %s\nusage: tailor-engine --model DIR [--batch N] [--input N] "
               "[--output N] [--prefix N] [--precision FP32|BF16] [--repetitions N] [--json]\n",
               message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tailor::engine;
  std::string model_dir;
  Workload w;
  w.input_tokens = 128;
  w.output_tokens = 32;
  EngineOptions options;
  MeasureOptions measure;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(("missing value for " + a).c_str());
    const std::string v = argv[++i];
    int64_t n = 0;
    const bool is_int = absl::SimpleAtoi(v, &n);
    if (a == "--model") {
      model_dir = v;
    } else if (a == "--precision") {
      auto p = ParsePrecision(v);
      if (!p.ok()) return Usage(std::string(p.status().message()).c_str());
      options.precision = *p;
    } else if (!is_int) {
      return Usage((a + " wants an integer, got '" + v + "'").c_str());
    } else if (a == "--batch") {
      w.batch_size = n;
    } else if (a == "--input") {
      w.input_tokens = n;
    } else if (a == "--output") {
      w.output_tokens = n;
    } else if (a == "--prefix") {
      w.cached_prefix_tokens = n;
    } else if (a == "--repetitions" && n >= 1 && n <= 10000) {
      measure.repetitions = static_cast<int>(n);
    } else {
      return Usage(("unknown flag or value out of range: " + a).c_str());
    }
  }
  if (model_dir.empty()) return Usage("--model is required");
  if (absl::Status st = ValidateWorkload(w); !st.ok()) {
    return Usage(std::string(st.message()).c_str());
  }
  auto engine = Engine::Load(model_dir, options, w.cache_positions());
  if (!engine.ok()) {
    std::fprintf(stderr, "tailor-engine: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  auto m = (*engine)->Measure(w, measure);
  if (!m.ok()) {
    std::fprintf(stderr, "tailor-engine: %s\n", m.status().ToString().c_str());
    return 1;
  }
  const double mib = 1 << 20;
  const long long params = static_cast<long long>((*engine)->config().ParameterCount());
  if (json) {
    std::printf(
        "{\"latency_ms\": %.4f, \"prefill_ms\": %.4f, \"decode_ms\": %.4f, "
        "\"throughput_tokens_per_s\": %.2f, \"memory_mib\": %.4f, \"weight_memory_mib\": %.4f, "
        "\"cache_mib\": %.4f, \"parameters\": %lld, \"repetitions\": %d}\n",
        m->latency_ms, m->prefill_ms, m->decode_ms, m->throughput_tokens_per_s,
        m->peak_bytes / mib, m->weight_bytes / mib, m->cache_bytes / mib, params, m->repetitions);
  } else {
    std::printf("%s %s, %s, batch %lld, input %lld, output %lld, prefix %lld, %d requests\n",
                kEngineName, kEngineVersion, std::string(PrecisionName(options.precision)).c_str(),
                static_cast<long long>(w.batch_size), static_cast<long long>(w.input_tokens),
                static_cast<long long>(w.output_tokens),
                static_cast<long long>(w.cached_prefix_tokens), m->repetitions);
    std::printf("latency     %.3f ms (prefill %.3f, decode %.3f)\n", m->latency_ms, m->prefill_ms,
                m->decode_ms);
    std::printf("throughput  %.1f tokens/s\n", m->throughput_tokens_per_s);
    std::printf("memory      %.3f MiB peak (weights %.3f, cache %.3f)\n", m->peak_bytes / mib,
                m->weight_bytes / mib, m->cache_bytes / mib);
    std::printf("parameters  %lld\n", params);
  }
  return 0;
}
