#include "profiler-agent/handlers.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "common/logging.h"
#include "compression/engine/workload.h"
#include "methods/api/job_kinds.h"
#include "methods/entropy_code/job_kinds.h"
#include "methods/probe/job_kinds.h"
#include "methods/registry.h"
#include "profiler-agent/probe.h"
#ifdef TAILOR_AGENT_WITH_TORCH
#include "profiler-agent/entropy_jobs.h"
#include "profiler-agent/ml_jobs.h"
#endif

namespace tailor::profiler {

void RegisterAgentJob(AgentRuntime& runtime, const std::string& kind, JobHandler handler) {
  const methods::JobKind* declared = methods::FindJobKind(kind);
  if (declared == nullptr || declared->placement != methods::Placement::kAgent) {
    std::fprintf(stderr, "agent: job kind %s is not declared as an agent job by any method\n",
                 kind.c_str());
    std::abort();
  }
  runtime.RegisterHandler(kind, std::move(handler));
}

void RegisterProfilerHandlers(AgentRuntime& runtime, const DeviceDescription& device,
                              const HandlerOptions& options) {
  ProbeConfig probe;
  probe.device_kind = device.device_kind;
  probe.device = device.device;
  RegisterAgentJob(runtime, methods::jobs::kProbe, MakeProbeHandler(probe));
  if (!options.ml_jobs) return;
  const v1::AgentInfo& info = runtime.options().info;
  if (info.engine() != engine::kEngineName || info.engine_version() != engine::kEngineVersion) {
    spdlog::warn("engine {} {} is not the built-in {} {}: profile and verify are not offered",
                 info.engine(), info.engine_version(), engine::kEngineName,
                 engine::kEngineVersion);
    return;
  }
#ifdef TAILOR_AGENT_WITH_TORCH
  MlJobConfig ml;
  ml.device = device.device;
  ml.device_kind = device.device_kind;
  ml.profile_rounds = options.profile_rounds;
  ml.profile_validation_architectures = options.profile_validation_architectures;
  if (options.verify_repetitions > 0) ml.verify_repetitions = options.verify_repetitions;
  if (options.verify_task_samples > 0) ml.verify_task_samples = options.verify_task_samples;
  RegisterAgentJob(runtime, methods::jobs::kProfile, MakeProfileHandler(ml));
  RegisterAgentJob(runtime, methods::jobs::kVerify, MakeVerifyHandler(ml));
  RegisterAgentJob(runtime, methods::jobs::kAutotune, MakeAutotuneHandler(ml));
#else
  spdlog::warn("built without LibTorch (TAILOR_WITH_TORCH=OFF): profile and verify are not "
               "offered");
#endif
}

}  // namespace tailor::profiler
