#ifndef TAILOR_PROFILER_AGENT_DEVICE_H_
#define TAILOR_PROFILER_AGENT_DEVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tailor/v1/agent.pb.h"

namespace tailor::profiler {

// The device one profiler agent serves.
struct DeviceDescription {
  std::string device;       // "cpu" or "cuda:N", as given on the command line
  std::string device_kind;  // "cpu" or the CUDA device name, e.g. "NVIDIA H200"
  int64_t memory_mib = 0;   // host memory for cpu, device memory for cuda
  int gpus = 0;
  std::string gpu_type;
};

// Parses --device and inspects the hardware. INVALID_ARGUMENT for a malformed device,
// FAILED_PRECONDITION for cuda:N in a build without CUDA (the message says how to rebuild),
// NOT_FOUND for a CUDA index that is not visible.
absl::StatusOr<DeviceDescription> DetectDevice(const std::string& device,
                                               const std::string& proc_dir = "/proc");

// The registration record. `name` empty means hostname + ":" + device, which is stable across
// restarts, so re-registering reuses the coordinator's agent id.
v1::AgentInfo MakeAgentInfo(const DeviceDescription& device, const std::string& name,
                            const std::string& hostname, const std::string& engine,
                            const std::string& engine_version);

std::string LocalHostname();

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_DEVICE_H_
