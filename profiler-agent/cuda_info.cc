#include "profiler-agent/cuda_info.h"

#ifdef TAILOR_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tailor::profiler {

bool BuiltWithCuda() {
#ifdef TAILOR_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::string CudaVersionString(int version) {
  if (version <= 0) return "";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

CudaInfo QueryCuda() {
  CudaInfo info;
#ifdef TAILOR_WITH_CUDA
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info.error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    return info;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      info.error = "cudaGetDeviceProperties(" + std::to_string(i) + "): " + cudaGetErrorString(err);
      return info;
    }
    CudaDeviceInfo d;
    d.index = i;
    d.name = prop.name;
    d.memory_mib = static_cast<int64_t>(prop.totalGlobalMem / (1024 * 1024));
    d.compute_capability_major = prop.major;
    d.compute_capability_minor = prop.minor;
    d.multiprocessors = prop.multiProcessorCount;
    info.devices.push_back(d);
  }
  info.available = count > 0;
  if (count == 0) info.error = "no CUDA devices visible";
#else
  info.error = "this build has no CUDA; rebuild with -DTAILOR_WITH_CUDA=ON";
#endif
  return info;
}

}  // namespace tailor::profiler
