#ifndef TAILOR_PROFILER_AGENT_HANDLERS_H_
#define TAILOR_PROFILER_AGENT_HANDLERS_H_

#include <string>

#include "common/agent_runtime.h"
#include "profiler-agent/device.h"

namespace tailor::profiler {

struct HandlerOptions {
  // Also run `profile` and `verify` (the built-in engine). Needs a build with LibTorch, and
  // the agent's --engine/--engine-version must be the built-in engine's; otherwise they are
  // not offered (logged), so such jobs wait for an agent that has the engine.
  bool ml_jobs = false;
  // Measurement effort (0 = the job's default). Fewer rounds trade accuracy for time; the
  // profile job still validates, so a cheap table shows its larger error in `costs list`.
  int profile_rounds = 0;
  int profile_validation_architectures = 0;
  int verify_repetitions = 0;
  int verify_task_samples = 0;
};

// Registers every job kind the profiler agent runs. A new kind is one RegisterAgentJob line
// here; the runtime advertises the kinds in AgentInfo.job_kinds.
void RegisterProfilerHandlers(AgentRuntime& runtime, const DeviceDescription& device,
                              const HandlerOptions& options = {});

// Registers `handler` for job kind `kind`, which a method must declare as an agent job
// (methods::JobKind); anything else is a programming error and aborts at startup, so a
// handler can never wait for jobs the planner places elsewhere or never plans.
void RegisterAgentJob(AgentRuntime& runtime, const std::string& kind, JobHandler handler);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_HANDLERS_H_
