#include "methods/probe/jobs/probe_job.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/job_output.h"
#include "common/proto_json.h"
#include "methods/probe/job_kinds.h"
#include "methods/probe/probe_results.pb.h"

namespace tailor::profiler {

namespace {

// Keeps the optimizer from deleting work whose result we never read.
inline void DoNotOptimize(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

v1::probe::ProbeResult HostInfoResult(const HostInfo& host, const ProbeConfig& config) {
  v1::probe::ProbeResult r;
  r.set_cpu_model(host.cpu_model);
  r.set_logical_cores(host.logical_cores);
  r.set_usable_cores(host.usable_cores);
  r.set_memory_total_mib(static_cast<int64_t>(host.memory_total_mib));
  r.set_memory_available_mib(static_cast<int64_t>(host.memory_available_mib));
  r.set_hostname(host.hostname);
  r.set_kernel(host.kernel);
  r.set_device_kind(config.device_kind);
  r.set_device(config.device);
  if (BuiltWithCuda()) {
    r.set_cuda_driver_version(CudaVersionString(host.cuda.driver_version));
    r.set_cuda_runtime_version(CudaVersionString(host.cuda.runtime_version));
    r.set_cuda_error(host.cuda.error);
    for (const CudaDeviceInfo& d : host.cuda.devices) {
      v1::probe::CudaDevice* dv = r.add_cuda_devices();
      dv->set_index(d.index);
      dv->set_name(d.name);
      dv->set_memory_mib(static_cast<int64_t>(d.memory_mib));
      dv->set_compute_capability(
          absl::StrCat(d.compute_capability_major, ".", d.compute_capability_minor));
      dv->set_multiprocessors(d.multiprocessors);
    }
  }
  return r;
}

}  // namespace

double Median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2.0;
}

double MeasureMemcpyGbps(const std::vector<char>& src, std::vector<char>& dst) {
  const size_t n = std::min(src.size(), dst.size());
  const absl::Time start = absl::Now();
  std::memcpy(dst.data(), src.data(), n);
  DoNotOptimize(dst.data());
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return seconds > 0 ? static_cast<double>(n) / seconds / 1e9 : 0.0;
}

double MeasureMatmulGflops(const std::vector<float>& a, const std::vector<float>& b,
                           std::vector<float>& c, int n) {
  // Blocks of 64x64 floats (16 KiB each) keep the three tiles in L1/L2, so this measures the
  // core's arithmetic rather than DRAM; the inner j loop is contiguous and vectorizes.
  constexpr int kBlock = 64;
  const absl::Time start = absl::Now();
  std::fill(c.begin(), c.end(), 0.0f);
  for (int ii = 0; ii < n; ii += kBlock) {
    for (int kk = 0; kk < n; kk += kBlock) {
      for (int jj = 0; jj < n; jj += kBlock) {
        const int i_end = std::min(ii + kBlock, n);
        const int k_end = std::min(kk + kBlock, n);
        const int j_end = std::min(jj + kBlock, n);
        for (int i = ii; i < i_end; ++i) {
          float* ci = c.data() + static_cast<size_t>(i) * n;
          for (int k = kk; k < k_end; ++k) {
            const float aik = a[static_cast<size_t>(i) * n + k];
            const float* bk = b.data() + static_cast<size_t>(k) * n;
            for (int j = jj; j < j_end; ++j) ci[j] += aik * bk[j];
          }
        }
      }
    }
  }
  DoNotOptimize(c.data());
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double flops = 2.0 * n * n * static_cast<double>(n);
  return seconds > 0 ? flops / seconds / 1e9 : 0.0;
}

JobHandler MakeProbeHandler(ProbeConfig config) {
  return [config](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    TAILOR_ASSIGN_OR_RETURN(HostInfo host, ReadHostInfo(config.proc_dir));
    const v1::ProbeParams& params = ctx.contract().probe();
    // The coordinator defaulted the duration (methods/probe); the clamp guards the range.
    const int64_t duration_ms = std::clamp<int64_t>(params.duration_ms(), 0, 600000);
    const absl::Duration duration = absl::Milliseconds(duration_ms);

    // Touch every page before timing so the first sample does not measure page faults.
    std::vector<char> src(config.memcpy_bytes, 1);
    std::vector<char> dst(config.memcpy_bytes, 0);
    const int n = config.matmul_n;
    std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(i % 17) * 0.25f;
      b[i] = static_cast<float>(i % 13) * 0.5f;
    }

    std::vector<double> gbps, gflops;
    const absl::Time start = absl::Now();
    absl::Time last_report = start;
    // Alternate the two measurements so both see the same thermal and noise conditions. At
    // least one pair always runs, so duration 0 still yields real numbers.
    do {
      gbps.push_back(MeasureMemcpyGbps(src, dst));
      if (ctx.Cancelled()) break;
      gflops.push_back(MeasureMatmulGflops(a, b, c, n));
      if (ctx.Cancelled()) break;
      const absl::Time now = absl::Now();
      if (now - last_report >= config.progress_every) {
        last_report = now;
        // Below 1.0 until the final report, so observers see strictly increasing progress.
        const double fraction =
            duration_ms > 0 ? std::min(0.99, absl::FDivDuration(now - start, duration)) : 0.99;
        absl::Status st = ctx.ReportProgress(
            fraction, "measuring memcpy bandwidth and matmul throughput",
            static_cast<int64_t>(gflops.size()), 0,
            {{"memcpy_gbps", Median(gbps)}, {"gflops", Median(gflops)}});
        if (!st.ok()) return st;
      }
    } while (absl::Now() - start < duration);
    if (ctx.Cancelled()) return absl::CancelledError("probe cancelled");

    v1::probe::ProbeResult result = HostInfoResult(host, config);
    result.set_memcpy_gbps(Median(gbps));
    result.set_gflops(Median(gflops));
    result.set_iterations(static_cast<int64_t>(gflops.size()));
    result.set_duration_ms(static_cast<int64_t>(duration_ms));
    TAILOR_RETURN_IF_ERROR(ctx.ReportProgress(
        1.0, "probe done", static_cast<int64_t>(gflops.size()),
        static_cast<int64_t>(gflops.size()),
        {{"memcpy_gbps", Median(gbps)}, {"gflops", Median(gflops)}}, /*final=*/true));

    const std::string json = ProtoJson(result);
    TAILOR_RETURN_IF_ERROR(ctx.UploadArtifactBytes("probe", "probe.json", json).status());
    // Blobs are content-addressed, so the digest is the JSON's sha256.
    result.set_artifact_sha256(Sha256::Hex(json));
    spdlog::info("probe on {}: {} ({} cores, {} MiB), memcpy {:.1f} GB/s, matmul {:.2f} GFLOP/s",
                 host.hostname, host.cpu_model, host.logical_cores, host.memory_total_mib,
                 Median(gbps), Median(gflops));
    v1::JobOutput output;
    SetDetail(output, result);
    return output;
  };
}

void RegisterProbeJob(AgentJobs& jobs) {
  ProbeConfig probe;
  probe.device_kind = jobs.device().device_kind;
  probe.device = jobs.device().device;
  jobs.Add(methods::jobs::kProbe, MakeProbeHandler(probe));
}

}  // namespace tailor::profiler
