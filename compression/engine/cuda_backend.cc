// CUDA side of DeviceBackend. Compiled only with TAILOR_WITH_CUDA against a CUDA LibTorch
// (TAILOR_ENGINE_CUDA); the CPU build never sees these headers.

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/engine/device_backend.h"

namespace tailor::engine {

namespace {

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(int index)
      : index_(index), device_(at::kCUDA, static_cast<c10::DeviceIndex>(index)) {}
  ~CudaBackend() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  const at::Device& device() const override { return device_; }
  std::string name() const override { return absl::StrCat("cuda:", index_); }

  void Synchronize() override {
    c10::cuda::CUDAGuard guard(device_.index());
    cudaDeviceSynchronize();
  }

  // Events are pooled: a profiled request records two per layer per step.
  int Mark() override {
    c10::cuda::CUDAGuard guard(device_.index());
    if (used_ == events_.size()) {
      cudaEvent_t e;
      cudaEventCreate(&e);
      events_.push_back(e);
    }
    cudaEventRecord(events_[used_], at::cuda::getCurrentCUDAStream(device_.index()).stream());
    return static_cast<int>(used_++);
  }
  double ElapsedMs(int from, int to) override {
    float ms = 0;
    cudaEventElapsedTime(&ms, events_[from], events_[to]);
    return ms;
  }
  void ClearMarks() override { used_ = 0; }

  void RangePush(const char* name) override { nvtxRangePushA(name); }
  void RangePop() override { nvtxRangePop(); }

  // Index 0 of the stat arrays is StatType::AGGREGATE in every LibTorch version we target.
  int64_t AllocatedBytes() const override {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index())
        .allocated_bytes[0]
        .current;
  }
  int64_t PeakBytes() const override {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index())
        .allocated_bytes[0]
        .peak;
  }
  void ResetPeak() override {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
  }

 private:
  const int index_;
  const at::Device device_;
  std::vector<cudaEvent_t> events_;
  size_t used_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeCudaBackend(int index) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || index >= count) {
    return absl::NotFoundError(
        absl::StrCat("cuda:", index, " is not visible (", count, " CUDA devices)"));
  }
  std::unique_ptr<DeviceBackend> backend = std::make_unique<CudaBackend>(index);
  return backend;
}

}  // namespace tailor::engine
