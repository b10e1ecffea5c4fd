#include "profiler-agent/handlers.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "common/logging.h"
#include "compression/engine/workload.h"
#include "methods/api/job_kinds.h"
#include "methods/registry.h"
#ifdef TAILOR_AGENT_WITH_TORCH
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
  if (info.engine() != engine::kEngineName || info.engine_version() != engine::kEngineVersion) {
    spdlog::warn("engine {} {} is not the built-in {} {}: profile and verify are not offered",
                 info.engine(), info.engine_version(), engine::kEngineName,
                 engine::kEngineVersion);
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

}  // namespace

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
  if (!jobs.builtin_engine()) return;
  const MlJobConfig ml = MlJobConfigOf(device, options);
  jobs.Add(methods::jobs::kProfile, MakeProfileHandler(ml));
  jobs.Add(methods::jobs::kVerify, MakeVerifyHandler(ml, jobs.verify_variants()));
#endif
}

}  // namespace tailor::profiler
