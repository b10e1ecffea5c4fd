#ifndef TAILOR_PROFILER_AGENT_HOST_INFO_H_
#define TAILOR_PROFILER_AGENT_HOST_INFO_H_

// What a target host is (CPU, memory, kernel, CUDA devices): the agent registers with it
// (device.cc) and the probe job reports it (methods/probe/jobs).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "profiler-agent/cuda_info.h"

namespace tailor::profiler {

struct MemInfo {
  int64_t total_kib = 0;
  int64_t available_kib = 0;
};

// /proc/cpuinfo: the first "model name" (x86), else "Model"/"Hardware"/"cpu model"/"Processor"
// (ARM, MIPS, older kernels); "unknown" when none is present.
std::string ParseCpuModel(absl::string_view cpuinfo);

// /proc/meminfo: MemTotal and MemAvailable; kernels before 3.14 lack MemAvailable, so it is
// estimated as MemFree + Buffers + Cached there. INVALID_ARGUMENT without MemTotal.
absl::StatusOr<MemInfo> ParseMemInfo(absl::string_view meminfo);

struct HostInfo {
  std::string cpu_model;
  int logical_cores = 0;  // std::thread::hardware_concurrency
  int usable_cores = 0;   // sched_getaffinity: what this process may run on
  int64_t memory_total_mib = 0;
  int64_t memory_available_mib = 0;
  std::string hostname;
  std::string kernel;  // uname: sysname release machine
  CudaInfo cuda;
};

// Reads the host description; `proc_dir` is injectable so tests can use fixture files.
absl::StatusOr<HostInfo> ReadHostInfo(const std::string& proc_dir = "/proc");

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_HOST_INFO_H_
