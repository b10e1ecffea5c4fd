#ifndef TAILOR_METHODS_PROBE_JOBS_PROBE_JOB_H_
#define TAILOR_METHODS_PROBE_JOBS_PROBE_JOB_H_

// The `probe` job (agent): report what a target host really is (profiler-agent/host_info.h)
// and what it really delivers (memory copy bandwidth, single-thread FP32 matmul throughput),
// so admins can check a device kind before trusting cost tables measured on it.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/agent_runtime.h"
#include "profiler-agent/handlers.h"
#include "profiler-agent/host_info.h"

namespace tailor::profiler {

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

// Registers `probe` on every agent (cmake/method_jobs.cmake).
void RegisterProbeJob(AgentJobs& jobs);

}  // namespace tailor::profiler

#endif  // TAILOR_METHODS_PROBE_JOBS_PROBE_JOB_H_
