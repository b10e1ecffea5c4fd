#include "compression/gguf/llama_cpp_serve.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tailor::gguf {
namespace {

using Json = nlohmann::json;

absl::Status CheckAtLeast(const char* field, int64_t value, int64_t min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("serve benchmark: ", field, " must be >= ", min, ", got ", value));
}

absl::Status ValidateOptions(const ServeBenchmarkOptions& o) {
  const struct {
    const char* field;
    int64_t value, min;
  } checks[] = {{"batch_size", o.batch_size, 1},
                {"input_tokens", o.input_tokens, 1},
                {"output_tokens", o.output_tokens, 1},
                {"cached_prefix_tokens", o.cached_prefix_tokens, 0},
                {"threads", o.threads, 1},
                {"warmup", o.warmup, 0},
                {"repetitions", o.repetitions, 1}};
  for (const auto& c : checks) {
    if (absl::Status s = CheckAtLeast(c.field, c.value, c.min); !s.ok()) return s;
  }
  if (o.kv_type != "f16" && o.kv_type != "f32") {
    return absl::InvalidArgumentError(
        absl::StrCat("serve benchmark: kv_type must be f16 or f32, got \"", o.kv_type, "\""));
  }
  return absl::OkStatus();
}

absl::Status Missing(const char* field) {
  return absl::InternalError(
      absl::StrCat("serve benchmark: output field \"", field, "\" missing or malformed"));
}

absl::Status GetSamples(const Json& j, const char* field, std::vector<double>& out) {
  if (!j.contains(field) || !j[field].is_array()) return Missing(field);
  for (const Json& x : j[field]) {
    if (!x.is_number()) return Missing(field);
    out.push_back(x.get<double>());
  }
  return absl::OkStatus();
}

absl::Status GetInt(const Json& j, const char* field, int64_t& out) {
  if (!j.contains(field) || !j[field].is_number_integer()) return Missing(field);
  out = j[field].get<int64_t>();
  return absl::OkStatus();
}

absl::Status GetString(const Json& j, const char* field, std::string& out) {
  if (!j.contains(field) || !j[field].is_string()) return Missing(field);
  out = j[field].get<std::string>();
  return absl::OkStatus();
}

std::vector<std::string> ScriptFlags(const std::string& gguf_path, const ServeBenchmarkOptions& o) {
  return {"--model",       gguf_path,
          "--batch-size",  absl::StrCat(o.batch_size),
          "--input",       absl::StrCat(o.input_tokens),
          "--output",      absl::StrCat(o.output_tokens),
          "--prefix",      absl::StrCat(o.cached_prefix_tokens),
          "--threads",     absl::StrCat(o.threads),
          "--warmup",      absl::StrCat(o.warmup),
          "--repetitions", absl::StrCat(o.repetitions),
          "--seed",        absl::StrCat(o.seed),
          "--kv-type",     o.kv_type};
}

std::string EnvOr(const char* name, std::string fallback) {
  const char* env = std::getenv(name);
  return env != nullptr && *env != '\0' ? std::string(env) : fallback;
}

}  // namespace

std::string ServeHarnessName(ServeHarness h) {
  return h == ServeHarness::kNative ? "native" : "node";
}

absl::StatusOr<ServeHarness> ParseServeHarness(const std::string& name) {
  if (name == "native") return ServeHarness::kNative;
  if (name == "node") return ServeHarness::kNode;
  return absl::InvalidArgumentError(
      absl::StrCat("serve harness: \"", name, "\" is not native or node"));
}

std::string DefaultNativeServeProgram() {
  return EnvOr("TAILOR_LLAMA_SERVE", absl::StrCat(TAILOR_BIN_DIR, "/tailor-llama-serve"));
}

std::string DefaultLlamaLibDir() {
  return EnvOr("TAILOR_LLAMA_LIB_DIR",
               absl::StrCat(TAILOR_SOURCE_DIR, "/tools/llama-sidecar/node_modules/",
                            "@node-llama-cpp/linux-x64/bins/linux-x64"));
}

std::string ServeHarnessMissing(const ServeBenchmarkOptions& options) {
  if (options.harness == ServeHarness::kNode) {
    const std::string& script = options.sidecar.script;
    return LlamaCppSidecarMissing(script.empty() ? DefaultServeBenchmarkScript() : script);
  }
  const std::string program =
      options.native_program.empty() ? DefaultNativeServeProgram() : options.native_program;
  const std::string lib_dir = options.lib_dir.empty() ? DefaultLlamaLibDir() : options.lib_dir;
  if (access(program.c_str(), X_OK) != 0) return absl::StrCat("no ", program, " (build it)");
  if (access((lib_dir + "/_nlcBuildMetadata.json").c_str(), R_OK) != 0) {
    return absl::StrCat("no prebuilt llama.cpp in ", lib_dir, " (run deploy/install-deps.sh)");
  }
  return "";
}

absl::Status CheckServeHarness(const ServeBenchmarkOptions& options) {
  if (const std::string missing = ServeHarnessMissing(options); !missing.empty()) {
    return absl::NotFoundError(absl::StrCat("the ", ServeHarnessName(options.harness),
                                            " serving harness cannot run: ", missing));
  }
  if (options.harness == ServeHarness::kNode) return absl::OkStatus();
  const std::vector<std::string> argv = {
      options.native_program.empty() ? DefaultNativeServeProgram() : options.native_program,
      "--check", "--lib-dir", options.lib_dir.empty() ? DefaultLlamaLibDir() : options.lib_dir};
  absl::StatusOr<std::string> out = RunEngineProcess(argv, "", options.sidecar.timeout);
  if (!out.ok()) return out.status();
  const Json j = Json::parse(*out, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("harness", "") != "native") {
    return absl::InternalError(
        absl::StrCat("serve harness check: unexpected output: ", out->substr(0, 200)));
  }
  return absl::OkStatus();
}

std::string DefaultServeBenchmarkScript() {
  return EnvOr("TAILOR_LLAMA_SERVE_BENCHMARK",
               absl::StrCat(TAILOR_SOURCE_DIR, "/tools/llama-sidecar/serve_benchmark.mjs"));
}

absl::StatusOr<LlamaCppServeMeasurement> ParseServeBenchmarkOutput(const std::string& json) {
  const Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InternalError(
        absl::StrCat("serve benchmark: unexpected output: ", json.substr(0, 200)));
  }
  LlamaCppServeMeasurement m;
  int64_t threads = 0;
  for (absl::Status s :
       {GetSamples(j, "request_ms", m.request_ms), GetSamples(j, "prefill_ms", m.prefill_ms),
        GetSamples(j, "decode_ms", m.decode_ms), GetSamples(j, "cpu_ms", m.cpu_ms),
        GetInt(j, "eog_tokens", m.eog_tokens), GetInt(j, "weights_bytes", m.weights_bytes),
        GetInt(j, "state_bytes", m.state_bytes),
        GetInt(j, "compute_buffer_bytes", m.compute_buffer_bytes),
        GetInt(j, "context_buffer_bytes", m.context_buffer_bytes),
        GetInt(j, "kv_cache_cells", m.kv_cache_cells),
        GetInt(j, "rss_before_load_bytes", m.rss_before_load_bytes),
        GetInt(j, "rss_peak_bytes", m.rss_peak_bytes), GetInt(j, "threads", threads),
        GetString(j, "node_llama_cpp", m.node_llama_cpp_version),
        GetString(j, "llama_cpp", m.llama_cpp_release)}) {
    if (!s.ok()) return s;
  }
  m.threads = static_cast<int>(threads);
  if (j.contains("harness")) {
    std::string harness;
    if (absl::Status s = GetString(j, "harness", harness); !s.ok()) return s;
    absl::StatusOr<ServeHarness> h = ParseServeHarness(harness);
    if (!h.ok()) {
      return absl::InternalError(absl::StrCat("serve benchmark: ", h.status().message()));
    }
    m.harness = *h;
  }
  if (j.contains("cache_bytes_exact")) {
    if (!j["cache_bytes_exact"].is_boolean()) return Missing("cache_bytes_exact");
    m.cache_bytes_exact = j["cache_bytes_exact"].get<bool>();
  }
  const size_t n = m.request_ms.size();
  if (m.prefill_ms.size() != n || m.decode_ms.size() != n || m.cpu_ms.size() != n) {
    return absl::InternalError(
        "serve benchmark: request_ms, prefill_ms, decode_ms and cpu_ms differ in length");
  }
  return m;
}

absl::StatusOr<LlamaCppServeMeasurement> RunServeBenchmark(const std::string& gguf_path,
                                                           const ServeBenchmarkOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  struct stat st;
  if (stat(gguf_path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("serve benchmark: no GGUF at ", gguf_path));
  }
  const SidecarOptions& sidecar = options.sidecar;
  // Each sequence of each request gets what a further prompt of a batch gets in
  // RunNextTokenLogprobsBatch: a request is batch_size prompts evaluated together.
  const int64_t requests = options.warmup + options.repetitions;
  const absl::Duration timeout =
      sidecar.timeout + sidecar.timeout_per_extra_prompt * (requests * options.batch_size);
  absl::StatusOr<std::string> out;
  if (options.harness == ServeHarness::kNative) {
    std::vector<std::string> argv = {
        options.native_program.empty() ? DefaultNativeServeProgram() : options.native_program,
        "--lib-dir", options.lib_dir.empty() ? DefaultLlamaLibDir() : options.lib_dir};
    for (std::string& flag : ScriptFlags(gguf_path, options)) argv.push_back(std::move(flag));
    out = RunEngineProcess(argv, "", timeout);
  } else {
    const std::string script =
        sidecar.script.empty() ? DefaultServeBenchmarkScript() : sidecar.script;
    out = RunSidecarScript(script, ScriptFlags(gguf_path, options), "", timeout, sidecar);
  }
  if (!out.ok()) return out.status();
  absl::StatusOr<LlamaCppServeMeasurement> m = ParseServeBenchmarkOutput(*out);
  if (!m.ok()) return m.status();
  if (m->harness != options.harness) {
    return absl::InternalError(absl::StrCat("serve benchmark: asked the ",
                                            ServeHarnessName(options.harness), " harness, the ",
                                            ServeHarnessName(m->harness), " one answered"));
  }
  if (m->request_ms.size() != static_cast<size_t>(options.repetitions)) {
    return absl::InternalError(absl::StrCat("serve benchmark: ", m->request_ms.size(),
                                            " samples for ", options.repetitions, " repetitions"));
  }
  return m;
}

}  // namespace tailor::gguf
