#ifndef TAILOR_COMPRESSION_GGUF_LLAMA_CPP_SERVE_H_
#define TAILOR_COMPRESSION_GGUF_LLAMA_CPP_SERVE_H_

// The serving cost of a GGUF in llama.cpp: runs a serving harness as a child process (for the
// reasons in llama_cpp_sidecar.h) under a workload and returns the per-request times and the
// memory llama.cpp reports. Two harnesses time the same requests on the same prebuilt
// llama.cpp (node-llama-cpp 3.21.1's): the native one (tailor-llama-serve,
// llama_serve_main.cc: a C++ loop around libllama; the default) and the node one
// (tools/llama-sidecar/serve_benchmark.mjs: node-llama-cpp's own generation loop, which adds
// ~0.45 ms of JavaScript per generated token; docs/costmodel.md, "The serving harness").
// serve_benchmark.mjs's header comment defines every figure; the memory ones, found on
// node-llama-cpp 3.21.1:
//   weights_bytes = the sum of the GGUF tensors' data sizes (llama_model_size);
//   kv_cache_cells = batch_size x pad256(pad256(batch_size x (prefix + input + output)) /
//     batch_size): node-llama-cpp pads the context to 256 cells, llama.cpp gives each
//     sequence its own stream padded to 256 cells;
//   allocated KV cache = layers x 2 x kv_heads x head_dim x kv_cache_cells x kv type bytes
//     = context_buffer_bytes - compute_buffer_bytes (the latter rounded, see below);
//   state_bytes = llama_state_get_size after the last request: the serialized state of the
//     cells in use, NOT the allocated cache (see LlamaCppServeMeasurement).
//
// No LibTorch here.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/gguf/llama_cpp_sidecar.h"

namespace tailor::gguf {

enum class ServeHarness { kNative, kNode };

// "native" / "node"; ParseServeHarness: INVALID_ARGUMENT naming the value otherwise.
std::string ServeHarnessName(ServeHarness h);
absl::StatusOr<ServeHarness> ParseServeHarness(const std::string& name);

struct ServeBenchmarkOptions {
  ServeHarness harness = ServeHarness::kNative;
  int64_t batch_size = 1;            // sequences served at once (one decode batch)
  int64_t input_tokens = 1;          // per sequence, prefilled in the timed request
  int64_t output_tokens = 1;         // per sequence, generated greedily, never stopped early
  int64_t cached_prefix_tokens = 0;  // per sequence, evaluated before the timed request
  int threads = 1;
  int warmup = 1;               // requests run before the recorded ones
  int repetitions = 5;          // recorded requests
  uint64_t seed = 1;            // of the prompt token ids
  std::string kv_type = "f16";  // "f16" (llama.cpp's serving default) or "f32"
  // The native harness: the program (empty: $TAILOR_LLAMA_SERVE, else tailor-llama-serve of
  // the build tree) and the prebuilt libraries it loads (empty: $TAILOR_LLAMA_LIB_DIR, else
  // the pinned package's bins/linux-x64 under tools/llama-sidecar/node_modules).
  std::string native_program;
  std::string lib_dir;
  // node, the timeouts and the script: empty script means $TAILOR_LLAMA_SERVE_BENCHMARK,
  // else tools/llama-sidecar/serve_benchmark.mjs of the source tree. `threads` is not used.
  // The native harness uses the timeouts only.
  // The run may take sidecar.timeout (the load) plus sidecar.timeout_per_extra_prompt for
  // each sequence of each request: batch_size x (warmup + repetitions) allowances.
  SidecarOptions sidecar;
};

struct LlamaCppServeMeasurement {
  // One per recorded request, in milliseconds: the whole request, until every sequence had
  // its first token, the rest, and the process's user + system CPU time over the request.
  std::vector<double> request_ms, prefill_ms, decode_ms, cpu_ms;
  // End-of-generation tokens the recorded requests generated and went on past (greedy
  // decoding of dummy weights produces them often; they never end a sequence early).
  int64_t eog_tokens = 0;
  int64_t weights_bytes = 0;
  // llama_state_get_size after the last request, exactly (u = prefix + input + output - 1
  // cells in use per sequence: the last generated token is never evaluated; L layers):
  //   4 + len(arch) + 4 + batch_size x (4 + 12 u + 8 + 2 L x 12 + 2 L x u x kv_heads x
  //   head_dim x kv type bytes)
  // i.e. the KV rows of the used cells plus headers (a transposed V, as without flash
  // attention, has a 12-byte header per layer like K's).
  int64_t state_bytes = 0;
  // From llama.cpp's "CPU compute buffer size = X MiB" log lines: +-5243 bytes per line.
  int64_t compute_buffer_bytes = 0;
  // The allocated KV cache plus the compute buffers (llama_context's memory breakdown). Exact
  // through node and natively; natively in a sanitizer build the cache's part comes from the
  // log too (+-5243 bytes per buffer): `cache_bytes_exact` false.
  int64_t context_buffer_bytes = 0;
  bool cache_bytes_exact = true;
  int64_t kv_cache_cells = 0;  // over all sequences
  int64_t rss_before_load_bytes = 0;
  int64_t rss_peak_bytes = 0;  // VmHWM at the end of the run
  std::string node_llama_cpp_version;
  std::string llama_cpp_release;
  int threads = 0;
  ServeHarness harness = ServeHarness::kNode;  // "harness" in the output; node without it
};

// The script path ServeBenchmarkOptions{}.sidecar.script resolves to.
std::string DefaultServeBenchmarkScript();
// What ServeBenchmarkOptions{}.native_program and .lib_dir resolve to.
std::string DefaultNativeServeProgram();
std::string DefaultLlamaLibDir();

// Why `options`' harness cannot run here, or "" when it can (tests and benches skip naming
// it): the node script's prerequisites (LlamaCppSidecarMissing), or the native program and
// the libraries it loads.
std::string ServeHarnessMissing(const ServeBenchmarkOptions& options);

// What the agent checks at start-up: NotFound as ServeHarnessMissing says; for the native
// harness, the program loads the libraries (`tailor-llama-serve --check`), so a package
// version it does not declare is an error naming both versions (Internal, the child's
// message) before any job is taken.
absl::Status CheckServeHarness(const ServeBenchmarkOptions& options);

// INVALID_ARGUMENT naming the field for a bad option (batch_size, input_tokens,
// output_tokens >= 1, cached_prefix_tokens, warmup >= 0, threads, repetitions >= 1, kv_type
// f16 or f32); NotFound naming `gguf_path` when it does not exist; otherwise the errors of
// RunSidecarScript, or Internal when the output is malformed or has the wrong sample count.
absl::StatusOr<LlamaCppServeMeasurement> RunServeBenchmark(const std::string& gguf_path,
                                                           const ServeBenchmarkOptions& options);

// The script's stdout (exposed for tests); Internal naming a missing or malformed field.
absl::StatusOr<LlamaCppServeMeasurement> ParseServeBenchmarkOutput(const std::string& json);

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_LLAMA_CPP_SERVE_H_
