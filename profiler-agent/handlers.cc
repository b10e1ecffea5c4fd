#include "profiler-agent/handlers.h"

#include "profiler-agent/probe.h"

namespace tailor::profiler {

void RegisterProfilerHandlers(AgentRuntime& runtime, const DeviceDescription& device) {
  ProbeConfig probe;
  probe.device_kind = device.device_kind;
  probe.device = device.device;
  runtime.RegisterHandler("probe", MakeProbeHandler(probe));
}

}  // namespace tailor::profiler
