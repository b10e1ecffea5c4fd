#ifndef TAILOR_PROFILER_AGENT_HANDLERS_H_
#define TAILOR_PROFILER_AGENT_HANDLERS_H_

#include "common/agent_runtime.h"
#include "profiler-agent/device.h"

namespace tailor::profiler {

// Registers every job kind the profiler agent runs. A new kind (profile, verify) is one
// RegisterHandler line here; the runtime advertises the kinds in AgentInfo.job_kinds.
void RegisterProfilerHandlers(AgentRuntime& runtime, const DeviceDescription& device);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_HANDLERS_H_
