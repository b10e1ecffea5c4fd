#include "profiler-agent/handlers.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "compression/engine/workload.h"
#include "methods/api/job_kinds.h"
#include "methods/registry.h"
#ifdef TAILOR_AGENT_WITH_TORCH
#include "profiler-agent/llama_cpp_engine.h"
#include "profiler-agent/ml_jobs.h"
#endif

namespace tailor::profiler {

// Each method's agent-job registration, declared from the generated list.
#define TAILOR_METHOD_JOBS(register_fn) void register_fn(AgentJobs& jobs);
#include "method_jobs.inc"
#undef TAILOR_METHOD_JOBS

namespace {

bool BuiltinEngineOffered(const AgentRuntime& runtime, const HandlerOptions& options) {
  if (!options.ml_jobs) return false;
#ifdef TAILOR_AGENT_WITH_TORCH
  const v1::AgentInfo& info = runtime.options().info;
  if (info.engine() == "llama.cpp") return false;  // its own engine (ServingEngineOf)
  const std::string version = engine::BuiltinEngineVersion(options.engine_threads);
  if (info.engine() != engine::kEngineName || info.engine_version() != version) {
    spdlog::warn("engine {} {} is not the built-in {} {}: profile and verify are not offered",
                 info.engine(), info.engine_version(), engine::kEngineName, version);
    return false;
  }
  return true;
#else
  (void)runtime;
  spdlog::warn("built without LibTorch (TAILOR_WITH_TORCH=OFF): profile and verify are not "
               "offered");
  return false;
#endif
}

#ifdef TAILOR_AGENT_WITH_TORCH
// The engine profile and verify run in, or null when the agent offers neither.
std::shared_ptr<ServingEngine> ServingEngineOf(const AgentRuntime& runtime,
                                               const HandlerOptions& options,
                                               const MlJobConfig& ml, bool builtin) {
  if (builtin) return MakeBuiltinEngine(ml);
  const v1::AgentInfo& info = runtime.options().info;
  if (!options.ml_jobs || info.engine() != kLlamaCppEngineName) return nullptr;
  LlamaCppEngineOptions o;
  o.sidecar.threads = options.engine_threads;
  o.serve_harness = options.serve_harness;
  EngineIdentity id{info.engine(), info.engine_version(), options.engine_build,
                    options.engine_threads};
  return MakeLlamaCppEngine(ml, o, id);
}
#endif

}  // namespace

absl::StatusOr<ServingEngineChoice> ResolveServingEngine(const std::string& name,
                                                         const std::string& version,
                                                         const std::string& device, int threads,
                                                         gguf::ServeHarness harness) {
  if (name != "llama.cpp") return ServingEngineChoice{name, version, ""};
#ifdef TAILOR_AGENT_WITH_TORCH
  if (device != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--engine llama.cpp: this build serves llama.cpp on cpu only, not --device ", device));
  }
  gguf::SidecarOptions sidecar;
  sidecar.threads = threads;
  absl::StatusOr<EngineIdentity> id = DetectLlamaCpp(sidecar);
  if (!id.ok()) return id.status();
  gguf::ServeBenchmarkOptions serve;
  serve.harness = harness;
  TAILOR_RETURN_IF_ERROR(gguf::CheckServeHarness(serve));
  if (!version.empty() && version != id->version) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--engine-version ", version, ": the installed node-llama-cpp is ", id->version));
  }
  const std::string timed_by = harness == gguf::ServeHarness::kNative
                                 ? "; requests timed natively (tailor-llama-serve)"
                                 : "; requests timed through node-llama-cpp";
  return ServingEngineChoice{id->name, id->version, absl::StrCat(id->build, timed_by)};
#else
  (void)harness;
  (void)version;
  (void)device;
  (void)threads;
  return absl::InvalidArgumentError(
      "--engine llama.cpp needs a build with LibTorch (TAILOR_WITH_TORCH=ON): its equivalence "
      "gate compares with tailor's own forward pass");
#endif
}

void RegisterAgentJob(AgentRuntime& runtime, const std::string& kind, JobHandler handler) {
  const methods::JobKind* declared = methods::FindJobKind(kind);
  if (declared == nullptr || declared->placement != methods::Placement::kAgent) {
    std::fprintf(stderr, "agent: job kind %s is not declared as an agent job by any method\n",
                 kind.c_str());
    std::abort();
  }
  runtime.RegisterHandler(kind, std::move(handler));
}

void AgentJobs::Add(const std::string& kind, JobHandler handler) {
  RegisterAgentJob(runtime_, kind, std::move(handler));
}

void RegisterProfilerHandlers(AgentRuntime& runtime, const DeviceDescription& device,
                              const HandlerOptions& options) {
  AgentJobs jobs(runtime, device, options, BuiltinEngineOffered(runtime, options));
#define TAILOR_METHOD_JOBS(register_fn) register_fn(jobs);
#include "method_jobs.inc"
#undef TAILOR_METHOD_JOBS
#ifdef TAILOR_AGENT_WITH_TORCH
  const MlJobConfig ml = MlJobConfigOf(device, options);
  std::shared_ptr<ServingEngine> engine =
      ServingEngineOf(runtime, options, ml, jobs.builtin_engine());
  if (engine == nullptr) return;
  // Methods' own verify variants (an entropy-coded package) serve in the built-in engine.
  jobs.Add(methods::jobs::kProfile, MakeProfileHandler(engine));
  jobs.Add(methods::jobs::kDriftCheck, MakeDriftCheckHandler(engine));
  jobs.Add(methods::jobs::kMeasure, MakeMeasureHandler(ml, engine));
  jobs.Add(methods::jobs::kVerify,
           MakeVerifyHandler(ml, engine,
                             jobs.builtin_engine() ? jobs.verify_variants()
                                                   : std::vector<VerifyVariant>()));
#endif
}

}  // namespace tailor::profiler
