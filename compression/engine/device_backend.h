#ifndef TAILOR_COMPRESSION_ENGINE_DEVICE_BACKEND_H_
#define TAILOR_COMPRESSION_ENGINE_DEVICE_BACKEND_H_

// What the built-in engine needs from a device besides running LibTorch ops: a clock that
// can split the timeline at layer boundaries and a real measurement of allocated bytes.
//
//   CPU:  steady clock (ops run synchronously, so a host timestamp is the device time) and
//         a counting CPU allocator installed into c10 (every tensor's bytes pass through it).
//   CUDA: CUDA events recorded on the current stream (host timestamps would measure kernel
//         launches, not kernels), NVTX ranges so an Nsight timeline shows the same split,
//         and the caching allocator's allocated-bytes statistics.

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::engine {

// Wraps c10's default CPU allocator and counts the bytes every live tensor holds. Installed
// once per process with a priority above the default, so every CPU tensor allocated after
// Install() is counted; it is never uninstalled (tensors it allocated must be freed by it).
// Each block carries a 64-byte header with its size, which keeps the returned pointer as
// aligned as the default allocator's and lets raw_allocate/raw_deallocate work.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  // Idempotent and thread-safe; returns the process-wide instance.
  static CountingCpuAllocator* Install();
  // The instance if installed, else null.
  static CountingCpuAllocator* Get();

  c10::DataPtr allocate(size_t n) const override;
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  int64_t current_bytes() const { return current_.load(std::memory_order_relaxed); }
  // Highest current_bytes() since the last ResetPeak().
  int64_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }
  void ResetPeak() { peak_.store(current_bytes(), std::memory_order_relaxed); }
  int64_t allocations() const { return allocations_.load(std::memory_order_relaxed); }

 private:
  explicit CountingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}
  static void Delete(void* ptr);
  void Add(int64_t n) const;

  c10::Allocator* const inner_;
  mutable std::atomic<int64_t> current_{0};
  mutable std::atomic<int64_t> peak_{0};
  mutable std::atomic<int64_t> allocations_{0};
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual const at::Device& device() const = 0;
  virtual std::string name() const = 0;  // "cpu", "cuda:0"

  // Waits until the device finished all queued work.
  virtual void Synchronize() = 0;

  // Timeline marks for splitting a request at step and layer boundaries: Mark() records
  // "now" on the device's stream and returns its index; ElapsedMs(a, b) is valid after
  // Synchronize(). Cheap enough to call twice per layer per step (CPU: the vDSO steady
  // clock, ~30 ns and no syscall; CUDA: an event record). ClearMarks() forgets them all.
  virtual int Mark() = 0;
  virtual double ElapsedMs(int from, int to) = 0;
  virtual void ClearMarks() = 0;

  // Profiler ranges (NVTX on CUDA; no-ops on CPU).
  virtual void RangePush(const char* name) {}
  virtual void RangePop() {}

  // Bytes currently allocated by tensors on this device, and the highest value since
  // ResetPeak(). CPU counts only what was allocated after the counting allocator was
  // installed (MakeDeviceBackend installs it).
  virtual int64_t AllocatedBytes() const = 0;
  virtual int64_t PeakBytes() const = 0;
  virtual void ResetPeak() = 0;
};

// "cpu" or "cuda:N". CUDA needs a build with TAILOR_WITH_CUDA and a CUDA LibTorch;
// otherwise FAILED_PRECONDITION.
absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeDeviceBackend(absl::string_view device);

// CPU time the calling thread has used, in ms (CLOCK_THREAD_CPUTIME_ID; a syscall, so read
// it per request, not per layer: syscalls also flush branch predictors under the CPU's
// speculation mitigations).
double ThreadCpuMs();

}  // namespace tailor::engine

#endif  // TAILOR_COMPRESSION_ENGINE_DEVICE_BACKEND_H_
