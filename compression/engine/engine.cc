#include "compression/engine/engine.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compression/hf/hf_import.h"
#include "compression/model/safetensors.h"

namespace tailor::engine {

namespace {

absl::Status FromTorch(const c10::Error& e, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
}

at::ScalarType TorchDType(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return at::kFloat;
    case Precision::kBf16:
      return at::kBFloat16;
    case Precision::kFp16:
      return at::kHalf;
  }
  return at::kFloat;
}

// Splits the timeline at step and layer boundaries. Each layer gets its own allocation
// window: the backend's peak is reset when a layer begins, so the peak read when it ends is
// that layer's own; the request's peak is the maximum over all windows (layers and the gaps
// between them).
class LayerRecorder final : public model::ActivationObserver {
 public:
  LayerRecorder(DeviceBackend* backend, const model::HybridConfig& config, int64_t base)
      : backend_(backend), base_(base), layers_(config.layers.size()) {
    for (size_t i = 0; i < config.layers.size(); ++i) {
      names_.push_back(
          absl::StrCat("layer ", i, " ", model::LayerKindName(config.layers[i].kind)));
    }
  }

  void set_decode(bool decode) { decode_ = decode; }

  void BeginStep() { step_begin_ = backend_->Mark(); }
  void EndStep() { steps_.push_back({step_begin_, backend_->Mark()}); }

  void OnLayerBegin(int layer) override {
    FoldWindow();
    begin_alloc_ = backend_->AllocatedBytes();
    backend_->ResetPeak();
    backend_->RangePush(names_[layer].c_str());
    begin_mark_ = backend_->Mark();
  }

  void OnLayerEnd(int layer) override {
    const int end = backend_->Mark();
    backend_->RangePop();
    spans_.push_back({layer, static_cast<int>(steps_.size()), begin_mark_, end});
    const int64_t peak = backend_->PeakBytes();
    const int64_t workspace = std::max<int64_t>(0, peak - begin_alloc_);
    LayerMeasurement& m = layers_[layer];
    if (!decode_) m.prefill_live_bytes = std::max(m.prefill_live_bytes, begin_alloc_ - base_);
    int64_t& slot = decode_ ? m.decode_workspace_bytes : m.prefill_workspace_bytes;
    slot = std::max(slot, workspace);
    max_peak_ = std::max(max_peak_, peak);
    backend_->ResetPeak();
  }

  // Call after Synchronize(): per-layer and fixed times per step from the marks.
  void Finish(RequestResult& r) {
    const size_t n = steps_.size();
    r.fixed_step_ms.assign(n, 0.0);
    for (size_t s = 0; s < n; ++s) r.fixed_step_ms[s] = backend_->ElapsedMs(steps_[s].begin, steps_[s].end);
    for (LayerMeasurement& m : layers_) m.step_ms.assign(n, 0.0);
    for (const Span& sp : spans_) {
      const double ms = backend_->ElapsedMs(sp.begin, sp.end);
      layers_[sp.layer].step_ms[sp.step] += ms;
      r.fixed_step_ms[sp.step] -= ms;
    }
    for (LayerMeasurement& m : layers_) {
      for (size_t s = 0; s < n; ++s) (s == 0 ? m.prefill_ms : m.decode_ms) += m.step_ms[s];
    }
    for (size_t s = 0; s < n; ++s) (s == 0 ? r.fixed_prefill_ms : r.fixed_decode_ms) += r.fixed_step_ms[s];
    r.layers = std::move(layers_);
  }

  // The request's peak so far, including the open window.
  int64_t PeakBytes() {
    FoldWindow();
    return max_peak_;
  }

 private:
  struct Span {
    int layer;
    int step;
    int begin, end;
  };
  struct Step {
    int begin, end;
  };
  void FoldWindow() { max_peak_ = std::max(max_peak_, backend_->PeakBytes()); }

  DeviceBackend* const backend_;
  const int64_t base_;
  std::vector<std::string> names_;
  std::vector<LayerMeasurement> layers_;
  std::vector<Span> spans_;
  std::vector<Step> steps_;
  bool decode_ = false;
  int begin_mark_ = 0;
  int step_begin_ = 0;
  int64_t begin_alloc_ = 0;
  int64_t max_peak_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(model::HybridLM model,
                                                       const EngineOptions& options) {
  if (model.is_empty()) return absl::InvalidArgumentError("Engine::Create: no model");
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBackend> backend,
                          MakeDeviceBackend(options.device));
  if (options.precision == Precision::kFp16 && backend->device().is_cpu()) {
    return absl::InvalidArgumentError(
        "precision: FP16 is served on CUDA only; use FP32 or BF16 on cpu");
  }
  if (backend->device().is_cpu()) {
    if (options.cpu_threads > 0) at::set_num_threads(options.cpu_threads);
    // Subnormal floats take microcode assists (tens to hundreds of cycles per op) on x86:
    // with them, a layer's time depended on how small its inputs happened to be.
    at::globalContext().setFlushDenormal(true);
  }
  try {
    torch::NoGradGuard no_grad;
    model->eval();
    // Copy every parameter first and only then swap them in, so the allocator delta is
    // exactly the weights at the serving precision (the old copies are freed after).
    const auto target = at::TensorOptions().device(backend->device()).dtype(
        TorchDType(options.precision));
    std::vector<at::Tensor> params = model->parameters(/*recurse=*/true);
    backend->Synchronize();
    const int64_t before = backend->AllocatedBytes();
    std::vector<at::Tensor> copies;
    copies.reserve(params.size());
    for (const at::Tensor& p : params) {
      copies.push_back(p.to(target, /*non_blocking=*/false, /*copy=*/true));
    }
    backend->Synchronize();
    const int64_t weight_bytes = backend->AllocatedBytes() - before;
    for (size_t i = 0; i < params.size(); ++i) params[i].set_data(copies[i]);
    return std::unique_ptr<Engine>(
        new Engine(std::move(model), options, std::move(backend), weight_bytes));
  } catch (const c10::Error& e) {
    return FromTorch(e, "Engine::Create");
  }
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::LoadHfCheckpoint(const std::string& dir,
                                                                 const EngineOptions& options,
                                                                 int64_t min_positions,
                                                                 absl::string_view hf_format) {
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM lm, hf::LoadModelDir(dir, hf_format));
  // The imported model is sized by max_position_embeddings; serving past it would compute
  // positions the checkpoint was never trained for.
  if (lm->config().max_seq < min_positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": the workload needs ", min_positions,
        " positions, the checkpoint's max_position_embeddings is ", lm->config().max_seq));
  }
  return Create(std::move(lm), options);
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& dir,
                                                     const EngineOptions& options,
                                                     int64_t min_positions,
                                                     absl::string_view hf_format) {
  if (entropy::IsPackageDir(dir)) return LoadPackage(dir, options, min_positions);
  if (hf::IsHfCheckpointDir(dir, hf_format)) {
    return LoadHfCheckpoint(dir, options, min_positions, hf_format);
  }
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig config,
                          model::ReadHybridConfig(dir + "/config.json"));
  config.max_seq = std::max(config.max_seq, min_positions);
  const std::string path = dir + "/model.safetensors";
  TAILOR_ASSIGN_OR_RETURN(model::TensorMap tensors, model::LoadSafetensors(path));
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM lm, model::CreateHybridLM(config, 0));
  TAILOR_RETURN_IF_ERROR(lm->LoadStateDict(tensors, path));
  tensors.clear();
  return Create(std::move(lm), options);
}

absl::StatusOr<model::TensorMap> Engine::PackageWeights(const entropy::Package& package) {
  model::TensorMap tensors;
  for (const entropy::LoadedTensor& t : package.tensors) {
    TAILOR_ASSIGN_OR_RETURN(std::vector<float> w, entropy::DecodeToFloat(t));
    at::Tensor out = at::empty(t.info.shape, at::kFloat);
    std::memcpy(out.data_ptr<float>(), w.data(), w.size() * sizeof(float));
    tensors[t.info.name] = std::move(out);
  }
  return tensors;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::LoadPackage(const std::string& dir,
                                                            const EngineOptions& options,
                                                            int64_t min_positions) {
  TAILOR_ASSIGN_OR_RETURN(entropy::Package package, entropy::LoadPackage(dir));
  absl::StatusOr<std::unique_ptr<Engine>> engine = FromPackage(
      std::make_shared<const entropy::Package>(std::move(package)), options, min_positions);
  if (!engine.ok()) {
    return absl::Status(engine.status().code(),
                        absl::StrCat(dir, "/settings.json: ", engine.status().message()));
  }
  return engine;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::FromPackage(
    std::shared_ptr<const entropy::Package> package, const EngineOptions& options,
    int64_t min_positions) {
  if (package == nullptr) return absl::InvalidArgumentError("FromPackage: no package");
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig config,
                          model::ParseHybridConfigJson(package->config_json));
  config.max_seq = std::max(config.max_seq, min_positions);
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM lm, model::CreateHybridLM(config, 0));
  // The fused kernels compute in float on the CPU; anywhere else the package is decoded.
  const bool fused = options.device == "cpu" && options.precision == Precision::kFp32;
  try {
    torch::NoGradGuard no_grad;
    auto params = lm->named_parameters(/*recurse=*/true);
    if (params.size() != package->tensors.size()) {
      return absl::InvalidArgumentError(absl::StrCat("package has ", package->tensors.size(),
                                                     " tensors, the model ", params.size()));
    }
    for (const entropy::LoadedTensor& t : package->tensors) {
      at::Tensor* p = params.find(t.info.name);
      if (p == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", t.info.name, " is not a parameter of the model"));
      }
      if (p->sizes().vec() != t.info.shape) {
        return absl::InvalidArgumentError(absl::StrCat("tensor ", t.info.name, " has shape [",
                                                       absl::StrJoin(t.info.shape, ", "),
                                                       "], the model wants [",
                                                       absl::StrJoin(p->sizes(), ", "), "]"));
      }
      if (fused && IsServedTensor(t.info)) {
        // A placeholder: the provider serves this weight, so it is never allocated dense.
        p->set_data(at::empty({0}, p->options()));
        continue;
      }
      TAILOR_ASSIGN_OR_RETURN(std::vector<float> w, entropy::DecodeToFloat(t));
      std::memcpy(p->data_ptr<float>(), w.data(), w.size() * sizeof(float));
    }
  } catch (const c10::Error& e) {
    return FromTorch(e, "Engine::FromPackage");
  }
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Create(std::move(lm), options));
  engine->package_ = package;
  if (fused) {
    TAILOR_ASSIGN_OR_RETURN(engine->linear_,
                            PackageLinear::Create(package, *engine->model_, options.cpu_threads));
    engine->model_->set_linear_provider(engine->linear_.get());
    engine->weight_bytes_ += engine->linear_->resident_bytes();
  }
  return engine;
}

Engine::~Engine() {
  if (linear_ != nullptr && !model_.is_empty()) model_->set_linear_provider(nullptr);
}

absl::StatusOr<RequestResult> Engine::Serve(const Workload& workload,
                                            const ServeOptions& options) {
  TAILOR_RETURN_IF_ERROR(ValidateWorkload(workload));
  if (workload.cache_positions() > config().max_seq) {
    return absl::OutOfRangeError(absl::StrCat(
        "workload needs ", workload.cache_positions(),
        " positions (prefix + input + output) but the model's max_seq is ", config().max_seq));
  }
  const int64_t prompt_len = workload.cached_prefix_tokens + workload.input_tokens;
  if (options.prompt.defined() &&
      (options.prompt.dim() != 2 || options.prompt.size(0) != workload.batch_size ||
       options.prompt.size(1) != prompt_len || options.prompt.scalar_type() != at::kLong)) {
    return absl::InvalidArgumentError(absl::StrCat("prompt: want int64 [", workload.batch_size,
                                                   ", ", prompt_len, "]"));
  }
  try {
    return ServeImpl(workload, options);
  } catch (const c10::Error& e) {
    return FromTorch(e, "Engine::Serve");
  }
}

absl::StatusOr<RequestResult> Engine::ServeImpl(const Workload& w, const ServeOptions& options) {
  torch::NoGradGuard no_grad;
  DeviceBackend& dev = *backend_;
  const int64_t b = w.batch_size, prefix = w.cached_prefix_tokens;
  at::Tensor prompt = options.prompt;
  if (!prompt.defined()) {
    at::Generator gen = at::detail::createCPUGenerator(options.seed);
    prompt = at::randint(config().vocab, {b, prefix + w.input_tokens}, gen, at::kLong);
  }

  dev.Synchronize();
  dev.ClearMarks();
  const int64_t base = dev.AllocatedBytes();
  dev.ResetPeak();
  // Engine buffers of the request: prompt and output ids on the device.
  const at::Tensor ids = prompt.to(dev.device(), at::kLong, /*non_blocking=*/false, /*copy=*/true);
  at::Tensor out = at::empty({b, w.output_tokens}, ids.options());
  TAILOR_ASSIGN_OR_RETURN(model::InferenceCache cache, model_->NewCache(b, w.cache_positions()));
  if (prefix > 0) {
    // The cached prefix: state a previous request left behind, not part of this one's time.
    model::ForwardOptions last_only;
    last_only.last_position_only = true;
    TAILOR_RETURN_IF_ERROR(model_->Prefill(ids.narrow(1, 0, prefix), cache, last_only).status());
  }

  LayerRecorder recorder(&dev, config(), base);
  const bool profile = options.profile_layers;
  model::ForwardOptions fwd;
  fwd.last_position_only = true;
  if (profile) fwd.layer_timer = &recorder;
  dev.Synchronize();
  dev.ResetPeak();  // the prefix's prefill workspace is gone; the cache it filled stays
  const double cpu_start = ThreadCpuMs();
  std::vector<int> steps = {dev.Mark()};  // step boundaries
  if (profile) recorder.BeginStep();
  TAILOR_ASSIGN_OR_RETURN(at::Tensor logits,
                          model_->Prefill(ids.narrow(1, prefix, w.input_tokens), cache, fwd));
  at::Tensor next = logits.select(1, 0).argmax(-1);
  out.select(1, 0).copy_(next);
  if (profile) recorder.EndStep();
  steps.push_back(dev.Mark());
  recorder.set_decode(true);
  fwd.last_position_only = false;
  for (int64_t i = 1; i < w.output_tokens; ++i) {
    if (profile) recorder.BeginStep();
    TAILOR_ASSIGN_OR_RETURN(logits, model_->DecodeStep(next, cache, fwd));
    next = logits.argmax(-1);
    out.select(1, i).copy_(next);
    if (profile) recorder.EndStep();
    steps.push_back(dev.Mark());
  }
  dev.Synchronize();
  const double cpu_end = ThreadCpuMs();

  RequestResult r;
  for (size_t i = 1; i < steps.size(); ++i) {
    r.step_ms.push_back(dev.ElapsedMs(steps[i - 1], steps[i]));
  }
  r.prefill_ms = r.step_ms[0];
  r.latency_ms = dev.ElapsedMs(steps.front(), steps.back());
  r.decode_ms = r.latency_ms - r.prefill_ms;
  r.cpu_ms = cpu_end - cpu_start;
  r.throughput_tokens_per_s =
      r.latency_ms > 0 ? 1000.0 * static_cast<double>(b * w.output_tokens) / r.latency_ms : 0;
  r.weight_bytes = weight_bytes_;
  r.cache_bytes = cache.Bytes();
  r.request_peak_bytes = std::max<int64_t>(0, recorder.PeakBytes() - base);
  r.peak_bytes = r.weight_bytes + r.request_peak_bytes;
  r.tokens = out.to(at::kCPU);
  if (profile) recorder.Finish(r);
  return r;
}

RobustLatency RobustLatencyOf(const std::vector<RequestResult>& profiled) {
  RobustLatency out;
  if (profiled.empty()) return out;
  const size_t steps = profiled.front().fixed_step_ms.size();
  const size_t layers = profiled.front().layers.size();
  std::vector<double> samples;
  auto add = [&](size_t step, double ms) { (step == 0 ? out.prefill_ms : out.decode_ms) += ms; };
  for (size_t s = 0; s < steps; ++s) {
    samples.clear();
    for (const RequestResult& r : profiled) samples.push_back(r.fixed_step_ms[s]);
    add(s, Median(samples));
    for (size_t l = 0; l < layers; ++l) {
      samples.clear();
      for (const RequestResult& r : profiled) samples.push_back(r.layers[l].step_ms[s]);
      add(s, Median(samples));
    }
  }
  return out;
}

absl::StatusOr<Measurement> Engine::Measure(const Workload& workload,
                                            const MeasureOptions& options) {
  if (options.repetitions < 1) {
    return absl::InvalidArgumentError("Measure: repetitions must be >= 1");
  }
  ServeOptions serve;
  serve.seed = options.seed;
  serve.profile_layers = true;
  for (int i = 0; i < options.warmup; ++i) {
    TAILOR_RETURN_IF_ERROR(Serve(workload, serve).status());
  }
  Measurement m;
  std::vector<RequestResult> results;
  std::vector<double> latency, cpu;
  for (int i = 0; i < options.repetitions; ++i) {
    TAILOR_ASSIGN_OR_RETURN(RequestResult r, Serve(workload, serve));
    latency.push_back(r.latency_ms);
    cpu.push_back(r.cpu_ms);
    m.peak_bytes = std::max(m.peak_bytes, r.peak_bytes);
    m.weight_bytes = r.weight_bytes;
    m.cache_bytes = r.cache_bytes;
    r.tokens = at::Tensor();
    results.push_back(std::move(r));
  }
  const RobustLatency robust = RobustLatencyOf(results);
  m.latency_ms = robust.latency_ms();
  m.prefill_ms = robust.prefill_ms;
  m.decode_ms = robust.decode_ms;
  m.throughput_tokens_per_s =
      m.latency_ms > 0
          ? 1000.0 * static_cast<double>(workload.batch_size * workload.output_tokens) /
                m.latency_ms
          : 0;
  m.median_request_ms = Median(latency);
  m.cpu_ms = Median(cpu);
  m.repetitions = options.repetitions;
  m.request_ms = std::move(latency);
  m.request_cpu_ms = std::move(cpu);
  return m;
}

absl::StatusOr<at::Tensor> Engine::Generate(const at::Tensor& prompt, int64_t n) {
  if (!prompt.defined() || prompt.dim() != 2 || prompt.scalar_type() != at::kLong || n < 1) {
    return absl::InvalidArgumentError("Generate: want an int64 prompt [B, T] and n >= 1");
  }
  ServeOptions options;
  options.prompt = prompt;
  Workload w;
  w.batch_size = prompt.size(0);
  w.input_tokens = prompt.size(1);
  w.output_tokens = n;
  TAILOR_ASSIGN_OR_RETURN(RequestResult r, Serve(w, options));
  return r.tokens;
}

}  // namespace tailor::engine
