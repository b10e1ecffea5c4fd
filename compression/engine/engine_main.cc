// tailor-engine: serves a model directory (config.json + model.safetensors, e.g. an unpacked
// student artifact) in the built-in engine under a workload and prints what the verify job
// would measure: latency, throughput, peak memory. For people checking a model by hand; the
// campaign's numbers come from the verify job on the target's agent.
//
//   tailor-engine --model DIR [--batch 1 --input 128 --output 32 --prefix 0]
//                 [--precision FP32|BF16] [--repetitions 15] [--json]
//   tailor-engine --model DIR --next-token-logprobs 5,17,33 [--json]
// The second form checks a model's numbers rather than its speed: DIR is a tailor model or a
// Hugging Face checkpoint (config.json with `architectures`, imported as compression/hf does),
// and it prints log P(next token | the given ids) in FP32, with --json as one JSON array of
// vocab-size numbers (null for -inf).
// Exit codes: 0 ok, 1 the model failed to load or serve, 2 usage.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "compression/engine/engine.h"
#include "compression/hf/hf_import.h"

namespace {

int Usage(const char* message) {
  std::fprintf(stderr,
               "tailor-engine: %s\nusage: tailor-engine --model DIR [--batch N] [--input N] "
               "[--output N] [--prefix N] [--precision FP32|BF16] [--repetitions N] [--json]\n"
               "       tailor-engine --model DIR --next-token-logprobs ID,ID,... [--json]\n",
               message);
  return 2;
}

// "5,17,33" -> {5, 17, 33}; false on an empty list or a non-integer.
bool ParseTokenIds(const std::string& text, std::vector<int64_t>& ids) {
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(part, &id)) return false;
    ids.push_back(id);
  }
  return !ids.empty();
}

// A log-probability as a JSON number; -inf (an underflowed probability) has no JSON form.
void PrintLogprob(float v) {
  if (std::isfinite(v)) {
    std::printf("%.9g", v);
  } else {
    std::printf("null");
  }
}

int PrintNextTokenLogprobs(const std::string& dir, const std::vector<int64_t>& ids, bool json) {
  auto model = tailor::hf::LoadModelDir(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "tailor-engine: %s\n", model.status().ToString().c_str());
    return 1;
  }
  auto logprobs = tailor::hf::NextTokenLogprobs(*model, ids);
  if (!logprobs.ok()) {
    std::fprintf(stderr, "tailor-engine: %s\n", logprobs.status().ToString().c_str());
    return 1;
  }
  const std::vector<float>& lp = logprobs->front();
  if (json) {
    std::printf("[");
    for (size_t t = 0; t < lp.size(); ++t) {
      if (t > 0) std::printf(", ");
      PrintLogprob(lp[t]);
    }
    std::printf("]\n");
    return 0;
  }
  std::vector<size_t> order(lp.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t top = std::min<size_t>(10, order.size());
  std::partial_sort(order.begin(), order.begin() + top, order.end(),
                    [&](size_t a, size_t b) { return lp[a] > lp[b]; });
  std::printf("next token after %zu ids (vocab %zu), most likely first:\n", ids.size(),
              lp.size());
  for (size_t i = 0; i < top; ++i) {
    std::printf("%8zu  logprob %.6f  p %.6f\n", order[i], lp[order[i]], std::exp(lp[order[i]]));
  }
  return 0;
}

// The verify job's measurement of DIR under workload `w`, printed.
int MeasureAndPrint(const std::string& dir, const tailor::engine::Workload& w,
                    const tailor::engine::EngineOptions& options,
                    const tailor::engine::MeasureOptions& measure, bool json) {
  using namespace tailor::engine;
  auto engine = Engine::Load(dir, options, w.cache_positions());
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
  std::vector<int64_t> next_token_ids;
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
    } else if (a == "--next-token-logprobs") {
      if (!ParseTokenIds(v, next_token_ids)) {
        return Usage(("--next-token-logprobs wants comma-separated token ids, got '" + v + "'")
                         .c_str());
      }
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
  if (!next_token_ids.empty()) return PrintNextTokenLogprobs(model_dir, next_token_ids, json);
  if (absl::Status st = ValidateWorkload(w); !st.ok()) {
    return Usage(std::string(st.message()).c_str());
  }
  return MeasureAndPrint(model_dir, w, options, measure, json);
}
