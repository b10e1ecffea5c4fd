#ifndef TAILOR_PROFILER_AGENT_PROBE_H_
#define TAILOR_PROFILER_AGENT_PROBE_H_

// The `probe` job: report what a target host really is (CPU, memory, kernel, CUDA devices) and
// what it really delivers (memory copy bandwidth, single-thread FP32 matmul throughput), so
// admins can check a device kind before trusting cost tables measured on it.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/agent_runtime.h"
#include "google/protobuf/struct.pb.h"
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

double Median(std::vector<double> values);

// One timed memcpy of src into dst (same size); returns GB/s (1e9 bytes copied per second).
double MeasureMemcpyGbps(const std::vector<char>& src, std::vector<char>& dst);
// One timed n x n FP32 matmul C = A * B with a cache-blocked loop; returns GFLOP/s (2 n^3).
double MeasureMatmulGflops(const std::vector<float>& a, const std::vector<float>& b,
                           std::vector<float>& c, int n);

struct ProbeConfig {
  std::string device_kind = "cpu";  // the agent's registered device kind
  std::string device = "cpu";       // "cpu" or "cuda:N"
  std::string proc_dir = "/proc";
  int64_t memcpy_bytes = 64 << 20;
  int matmul_n = 256;
  absl::Duration progress_every = absl::Milliseconds(100);
};

JobHandler MakeProbeHandler(ProbeConfig config);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_PROBE_H_
