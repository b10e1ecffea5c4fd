#include "profiler-agent/device.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "profiler-agent/cuda_info.h"
#include "profiler-agent/host_info.h"

namespace tailor::profiler {

std::string LocalHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

absl::StatusOr<DeviceDescription> DetectDevice(const std::string& device,
                                               const std::string& proc_dir) {
  DeviceDescription out;
  out.device = device;
  if (device == "cpu") {
    TAILOR_ASSIGN_OR_RETURN(HostInfo host, ReadHostInfo(proc_dir));
    out.device_kind = "cpu";
    out.memory_mib = host.memory_total_mib;
    return out;
  }
  int index = -1;
  if (!absl::StartsWith(device, "cuda:") || !absl::SimpleAtoi(device.substr(5), &index) ||
      index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device must be cpu or cuda:N (N >= 0), got '", device, "'"));
  }
  if (!BuiltWithCuda()) {
    return absl::FailedPreconditionError(
        "this build has no CUDA; rebuild with -DTAILOR_WITH_CUDA=ON");
  }
  const CudaInfo cuda = QueryCuda();
  if (index >= static_cast<int>(cuda.devices.size())) {
    return absl::NotFoundError(absl::StrCat(device, " is not visible: ", cuda.devices.size(),
                                            " CUDA device(s)",
                                            cuda.error.empty() ? "" : " (", cuda.error,
                                            cuda.error.empty() ? "" : ")"));
  }
  const CudaDeviceInfo& d = cuda.devices[index];
  out.device_kind = d.name;
  out.memory_mib = d.memory_mib;
  out.gpus = 1;
  out.gpu_type = d.name;
  return out;
}

v1::AgentInfo MakeAgentInfo(const DeviceDescription& device, const std::string& name,
                            const std::string& hostname, const std::string& engine,
                            const std::string& engine_version) {
  v1::AgentInfo info;
  info.set_name(name.empty() ? absl::StrCat(hostname, ":", device.device) : name);
  info.set_hostname(hostname);
  info.set_device_kind(device.device_kind);
  info.set_device(device.device);
  info.set_memory_mib(device.memory_mib);
  info.set_gpus(device.gpus);
  info.set_gpu_type(device.gpu_type);
  info.set_engine(engine);
  info.set_engine_version(engine_version);
  return info;
}

}  // namespace tailor::profiler
