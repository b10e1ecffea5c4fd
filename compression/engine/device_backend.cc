#include "compression/engine/device_backend.h"

#include <c10/core/CPUAllocator.h>

#include <time.h>

#include <chrono>
#include <mutex>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tailor::engine {

#ifdef TAILOR_ENGINE_CUDA
// cuda_backend.cc
absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeCudaBackend(int index);
#endif

namespace {

// Keeps the returned pointer 64-byte aligned (what c10's default CPU allocator guarantees).
constexpr size_t kHeader = 64;

std::atomic<CountingCpuAllocator*> g_counting{nullptr};

}  // namespace

CountingCpuAllocator* CountingCpuAllocator::Install() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked on purpose: tensors allocated through it may outlive any owner we could pick.
    auto* alloc = new CountingCpuAllocator(c10::GetDefaultCPUAllocator());
    // Priority above the default registration (0), so a later default registration
    // cannot silently replace us.
    c10::SetCPUAllocator(alloc, /*priority=*/10);
    g_counting.store(alloc);
  });
  return g_counting.load();
}

CountingCpuAllocator* CountingCpuAllocator::Get() { return g_counting.load(); }

void CountingCpuAllocator::Add(int64_t n) const {
  const int64_t now = current_.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

c10::DataPtr CountingCpuAllocator::allocate(size_t n) const {
  if (n == 0) return {nullptr, nullptr, &Delete, c10::Device(c10::DeviceType::CPU)};
  // raw_allocate: the default allocator's block is freed by its raw deleter in Delete.
  char* base = static_cast<char*>(inner_->raw_allocate(n + kHeader));
  *reinterpret_cast<size_t*>(base) = n;
  Add(static_cast<int64_t>(n));
  allocations_.fetch_add(1, std::memory_order_relaxed);
  void* data = base + kHeader;
  return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
}

void CountingCpuAllocator::Delete(void* ptr) {
  if (ptr == nullptr) return;
  CountingCpuAllocator* self = g_counting.load();
  char* base = static_cast<char*>(ptr) - kHeader;
  const size_t n = *reinterpret_cast<size_t*>(base);
  self->current_.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
  self->inner_->raw_deallocate(base);
}

namespace {

class CpuBackend final : public DeviceBackend {
 public:
  explicit CpuBackend(CountingCpuAllocator* alloc) : alloc_(alloc) {}

  const at::Device& device() const override { return device_; }
  std::string name() const override { return "cpu"; }
  void Synchronize() override {}  // CPU ops complete before they return

  int Mark() override {
    marks_.push_back(std::chrono::steady_clock::now());
    return static_cast<int>(marks_.size()) - 1;
  }
  double ElapsedMs(int from, int to) override {
    return std::chrono::duration<double, std::milli>(marks_[to] - marks_[from]).count();
  }
  void ClearMarks() override { marks_.clear(); }

  int64_t AllocatedBytes() const override { return alloc_->current_bytes(); }
  int64_t PeakBytes() const override { return alloc_->peak_bytes(); }
  void ResetPeak() override { alloc_->ResetPeak(); }

 private:
  const at::Device device_{at::kCPU};
  CountingCpuAllocator* const alloc_;
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeDeviceBackend(absl::string_view device) {
  if (device == "cpu") {
    std::unique_ptr<DeviceBackend> cpu =
        std::make_unique<CpuBackend>(CountingCpuAllocator::Install());
    return cpu;
  }
  if (absl::StartsWith(device, "cuda:")) {
    int index = -1;
    if (!absl::SimpleAtoi(device.substr(5), &index) || index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("device: want cpu or cuda:N, got '", device, "'"));
    }
#ifdef TAILOR_ENGINE_CUDA
    return MakeCudaBackend(index);
#else
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", device, ": this build has no CUDA (configure with -DTAILOR_WITH_CUDA=ON "
        "against a CUDA LibTorch)"));
#endif
  }
  return absl::InvalidArgumentError(absl::StrCat("device: want cpu or cuda:N, got '", device, "'"));
}

}  // namespace tailor::engine
