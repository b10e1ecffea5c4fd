#ifndef TAILOR_PROFILER_AGENT_CUDA_INFO_H_
#define TAILOR_PROFILER_AGENT_CUDA_INFO_H_

// CUDA device discovery through the CUDA runtime API. Deliberately plain C++ (no Abseil, no
// gRPC) so it also compiles on the GPU machine, which has the CUDA toolkit but not our RPC
// dependencies, and can be checked there against a real device.

#include <cstdint>
#include <string>
#include <vector>

namespace tailor::profiler {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;  // e.g. "NVIDIA H200"; this is the agent's device_kind
  int64_t memory_mib = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int multiprocessors = 0;
};

struct CudaInfo {
  bool available = false;  // false: built without CUDA, or no driver / devices
  std::string error;       // why not available
  int driver_version = 0;  // e.g. 13000 for CUDA 13.0 (cudaDriverGetVersion)
  int runtime_version = 0;
  std::vector<CudaDeviceInfo> devices;
};

// True when this binary was built with TAILOR_WITH_CUDA.
bool BuiltWithCuda();

// Queries the driver and every visible device. Never aborts: errors land in CudaInfo::error.
CudaInfo QueryCuda();

// "13.0" from 13000.
std::string CudaVersionString(int version);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_CUDA_INFO_H_
