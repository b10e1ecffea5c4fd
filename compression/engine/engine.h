#ifndef TAILOR_COMPRESSION_ENGINE_ENGINE_H_
#define TAILOR_COMPRESSION_ENGINE_ENGINE_H_

// tailor's built-in serving engine ("tailor-builtin"): serves one request batch of a
// HybridLM the way the deployment contract describes it and measures it.
//
// A request: `batch_size` sequences whose cache already holds `cached_prefix_tokens` tokens
// (pre-filled before the clock starts, like a prefix cache hit), then the timed part:
//   prefill of `input_tokens` new tokens per sequence (logits of the last position only),
//   greedy token 1 from those logits, then `output_tokens - 1` decode steps, each feeding
//   the previous greedy token.
// Latency is that timed part end to end; throughput = batch * output_tokens / latency.
// Memory is the measured peak of allocated bytes: the weights (counted when the engine
// copies them in) plus the request's peak (cache, activations, buffers) above what was
// allocated before it began. See docs/costmodel.md.
//
// The engine name and version are part of every target fingerprint: any change that moves
// latency or memory must bump kEngineVersion (and the agents' --engine-version default).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/engine/device_backend.h"
#include "compression/engine/package_linear.h"
#include "compression/engine/workload.h"
#include "compression/entropy/package.h"
#include "compression/model/hybrid_lm.h"

namespace tailor::engine {

struct EngineOptions {
  std::string device = "cpu";  // "cpu" or "cuda:N"
  Precision precision = Precision::kFp32;
  // LibTorch intra-op threads on CPU (process-wide). 1 is part of engine version 1: on a
  // shared host more threads make every measurement depend on the neighbours' load.
  int cpu_threads = 1;
};

// One layer's share of a request (the timeline split at layer boundaries).
struct LayerMeasurement {
  double prefill_ms = 0;  // the layer's time in the prefill
  double decode_ms = 0;   // summed over all decode steps of the request
  // Per step: [0] the prefill, [s] decode step s (1 .. output_tokens - 1).
  std::vector<double> step_ms;
  // Peak bytes allocated inside the layer above what was allocated when it began.
  int64_t prefill_workspace_bytes = 0;
  int64_t decode_workspace_bytes = 0;  // max over decode steps
  // Bytes the request had allocated when the layer's prefill began (cache, ids, the
  // residual stream): what the runtime term R of the memory model has to explain.
  int64_t prefill_live_bytes = 0;
};

struct ServeOptions {
  // [batch, cached_prefix + input] int64 prompt; undefined = tokens drawn from `seed`.
  at::Tensor prompt;
  uint64_t seed = 1;
  // Split the timeline at layer boundaries (fills the per-layer and fixed fields).
  bool profile_layers = false;
};

struct RequestResult {
  double latency_ms = 0;  // prefill + decode, steady clock (CUDA: events)
  double prefill_ms = 0;  // until the first greedy token is known
  double decode_ms = 0;
  double throughput_tokens_per_s = 0;
  double cpu_ms = 0;  // CPU time of the serving thread over the request
  std::vector<double> step_ms;  // per step ([0] prefill, then each decode step)
  int64_t weight_bytes = 0;        // measured when the engine copied the weights in
  int64_t cache_bytes = 0;         // the request's InferenceCache
  int64_t request_peak_bytes = 0;  // peak above the allocation at request start
  int64_t peak_bytes = 0;          // weight_bytes + request_peak_bytes
  at::Tensor tokens;               // [batch, output_tokens] greedy output (CPU, int64)
  // With profile_layers: one per model layer, and the time outside every layer per step
  // (embedding, final norm, LM head, argmax, engine overhead: the fixed cost T0).
  std::vector<LayerMeasurement> layers;
  std::vector<double> fixed_step_ms;
  double fixed_prefill_ms = 0;
  double fixed_decode_ms = 0;
};

// Latency of repeated requests, robust to a host that also runs other work: every timed
// piece of a profiled request (each layer's span and the time outside layers, per step)
// gets its median over the repetitions, and the medians are summed. A preemption lands in
// one piece of one repetition, which its median ignores; a per-request total would keep it
// (docs/costmodel.md). Needs profiled results of one workload.
struct RobustLatency {
  double prefill_ms = 0;
  double decode_ms = 0;
  double latency_ms() const { return prefill_ms + decode_ms; }
};
RobustLatency RobustLatencyOf(const std::vector<RequestResult>& profiled);

struct Measurement {
  double latency_ms = 0;  // RobustLatencyOf the repetitions
  double prefill_ms = 0;
  double decode_ms = 0;
  double throughput_tokens_per_s = 0;  // from latency_ms
  double median_request_ms = 0;        // plain median of the requests' steady-clock latency
  double cpu_ms = 0;                   // median CPU time of the serving thread per request
  int64_t peak_bytes = 0;  // maximum over repetitions (deterministic up to MoE routing)
  int64_t weight_bytes = 0;
  int64_t cache_bytes = 0;
  int repetitions = 0;
  // Per recorded request: its steady-clock latency and the serving thread's CPU time (what
  // a verify judges at a percentile, and checks for interference).
  std::vector<double> request_ms;
  std::vector<double> request_cpu_ms;
};

struct MeasureOptions {
  int warmup = 2;
  int repetitions = 15;
  uint64_t seed = 1;
};

class Engine {
 public:
  // Takes the model over: its parameters are copied to the device and precision (always a
  // fresh allocation, so the weights are counted) and the model is switched to eval use.
  // The workload's positions must fit the model's max_seq.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(model::HybridLM model,
                                                        const EngineOptions& options);
  // DIR/config.json + DIR/model.safetensors, or an entropy-coded package (DIR/settings.json,
  // see LoadPackage). max_seq is raised to `min_positions` when
  // smaller: positions only bound what the model was trained for, not what serving a
  // request costs, and the contract's lengths decide the cost. Bad files are
  // INVALID_ARGUMENT (bad config or tensors) or DATA_LOSS (corrupt safetensors).
  // `hf_format` (parent { format }) forces the Hugging Face layout of `dir`.
  static absl::StatusOr<std::unique_ptr<Engine>> Load(const std::string& dir,
                                                      const EngineOptions& options,
                                                      int64_t min_positions = 0,
                                                      absl::string_view hf_format = "");

  // A Hugging Face checkpoint folder (compression/hf/hf_import.h), imported, then Create.
  // Unlike a tailor model, its max_position_embeddings is not raised: a workload needing
  // more positions is INVALID_ARGUMENT naming both.
  static absl::StatusOr<std::unique_ptr<Engine>> LoadHfCheckpoint(
      const std::string& dir, const EngineOptions& options, int64_t min_positions = 0,
      absl::string_view hf_format = "");

  // An entropy-coded package (compression/entropy/package.h), validated, then FromPackage.
  static absl::StatusOr<std::unique_ptr<Engine>> LoadPackage(const std::string& dir,
                                                             const EngineOptions& options,
                                                             int64_t min_positions = 0);
  // Serves a loaded package (docs/entropy.md "Serving a package"). On CPU at FP32 the
  // projection weights (IsServedTensor) are never held dense: a PackageLinear serves them
  // from the coded streams (fused decode-GEMV for one-row products, decompress + GEMM for
  // prefill and batch > 1) and from the storage bytes of tensors the package left dense;
  // weight_bytes() is then the dense parameters plus the served tensors' resident bytes.
  // Elsewhere (CUDA, BF16/FP16: no fused kernel) every tensor is decoded once to exactly
  // the weights its quantised form stands for and served densely.
  static absl::StatusOr<std::unique_ptr<Engine>> FromPackage(
      std::shared_ptr<const entropy::Package> package, const EngineOptions& options,
      int64_t min_positions = 0);
  // Tensors dequantised from the package's storage formats, keyed like the state dict:
  // what a dense model must hold to be the package's dense twin.
  static absl::StatusOr<model::TensorMap> PackageWeights(const entropy::Package& package);

  // Serves one request batch.
  absl::StatusOr<RequestResult> Serve(const Workload& workload, const ServeOptions& options = {});
  // Warm-up requests, then `repetitions` measured ones.
  absl::StatusOr<Measurement> Measure(const Workload& workload, const MeasureOptions& options = {});

  // Greedy continuation of `prompt` [B, T]: output [B, n] (the request path, untimed).
  absl::StatusOr<at::Tensor> Generate(const at::Tensor& prompt, int64_t n);

  const model::HybridConfig& config() const { return model_->config(); }
  model::HybridLM& model() { return model_; }
  const EngineOptions& options() const { return options_; }
  DeviceBackend& backend() { return *backend_; }
  int64_t weight_bytes() const { return weight_bytes_; }
  // The loaded package (null for a dense model dir) and what it keeps resident for weights.
  const entropy::Package* package() const { return package_.get(); }
  // The provider serving the package's projections (null when dense or not a package).
  const PackageLinear* package_linear() const { return linear_.get(); }

  ~Engine();

 private:
  Engine(model::HybridLM model, EngineOptions options, std::unique_ptr<DeviceBackend> backend,
         int64_t weight_bytes)
      : model_(std::move(model)),
        options_(std::move(options)),
        backend_(std::move(backend)),
        weight_bytes_(weight_bytes) {}

  absl::StatusOr<RequestResult> ServeImpl(const Workload& workload, const ServeOptions& options);

  model::HybridLM model_;
  EngineOptions options_;
  std::unique_ptr<DeviceBackend> backend_;
  int64_t weight_bytes_ = 0;
  std::shared_ptr<const entropy::Package> package_;
  // Set as model_'s linear provider; ~Engine unsets it before it goes.
  std::unique_ptr<PackageLinear> linear_;
};

}  // namespace tailor::engine

#endif  // TAILOR_COMPRESSION_ENGINE_ENGINE_H_
