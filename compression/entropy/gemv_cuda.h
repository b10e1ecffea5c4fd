#ifndef TAILOR_COMPRESSION_ENTROPY_GEMV_CUDA_H_
#define TAILOR_COMPRESSION_ENTROPY_GEMV_CUDA_H_

// CUDA fused decode + matrix-vector product over entropy-coded weights (issue #7,
// docs/entropy.md "CUDA kernel"). Built only with TAILOR_WITH_CUDA (library
// tailor_entropy_cuda); the CPU kernels in gemv.h are the reference.
//
// Exactness: the decoded weights are exactly CPU Decode's (DecodeValuesCuda is tested bit
// for bit against FusedValues). The products are not bit-equal to the CPU kernels: the GPU
// sums a row as per-(chunk, rANS lane) partials, each a sequential non-FMA sum in column
// order, then a fixed warp-shuffle tree over the partials. Both GPU kernels are
// deterministic (no atomics in the sums); the tests bound |y_gpu - y_cpu| by
// (cols/8 + cols/4 + 64) * 2^-24 * sum_c |w_c x_c| * |scale|.

#include <cstdint>
#include <memory>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compression/entropy/codec.h"

namespace tailor::entropy {

// Owning device allocation (cudaFree on destruction); move-only.
class CudaBuffer {
 public:
  CudaBuffer() = default;
  static absl::StatusOr<CudaBuffer> Alloc(size_t bytes);
  void* get() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t size_ = 0;
};

// A coded tensor resident on the device: the container bytes as they are, one directory
// entry per (plane, chunk), the decode tables expanded to 2^table_log slots per coded plane,
// the row-partial scratch and the corruption flag.
struct CudaCodedMatrix {
  DType dtype = DType::kBF16;
  int64_t rows = 0;
  int64_t cols = 0;
  CodecConfig config;
  ChunkGeometry geometry;
  int num_planes = 0;
  bool plane_coded[4] = {false, false, false, false};
  int64_t raw_offset[4] = {0, 0, 0, 0};  // raw planes: offset into `bytes`
  int64_t container_bytes = 0;
  int partial_slots = 0;  // partial sums per row: 4 rANS lanes x chunks per row
  CudaBuffer bytes;       // the container
  CudaBuffer tables;      // uint2 per slot, coded planes in plane order
  CudaBuffer directory;   // per coded plane, per chunk: offsets and sizes
  CudaBuffer partials;    // rows * partial_slots floats
  CudaBuffer error;       // int: OR of the kernel's corruption bits (0 = clean)
};

// Validates `coded` on the host (every offset and size against the container, table
// contents, geometry), then copies it to the device. Synchronous.
absl::StatusOr<CudaCodedMatrix> UploadCoded(const CodedTensor& coded);

// y = diag(scale) W x on `stream` (asynchronous). x_dev: cols floats, scale_dev: rows floats
// or null, y_dev: rows floats, all device pointers. Corrupt streams never make the kernel
// read or write out of bounds; they set the matrix's error flag, which CudaDecodeStatus
// reports (y is then unspecified).
absl::Status FusedGemvCuda(const CudaCodedMatrix& w, const float* x_dev, const float* scale_dev,
                           float* y_dev, cudaStream_t stream);

// Decodes the weights as floats before any scale (FusedValues' values) into out_dev
// (rows * cols floats). Tests only: this is the one path that writes weights to memory.
absl::Status DecodeValuesCuda(const CudaCodedMatrix& w, float* out_dev, cudaStream_t stream);

// Synchronises `stream`, then reads and clears the error flag: DATA_LOSS naming the
// corruption the kernel saw, OK otherwise.
absl::Status CudaDecodeStatus(const CudaCodedMatrix& w, cudaStream_t stream);

// The dense baseline: the storage bytes on the device and a coalesced warp-per-row kernel
// (16-byte loads when rows are 16-byte multiples).
struct CudaDenseMatrix {
  DType dtype = DType::kBF16;
  int64_t rows = 0;
  int64_t cols = 0;
  CudaBuffer data;
};
absl::StatusOr<CudaDenseMatrix> UploadDense(const TensorView& view);
absl::Status DenseGemvCuda(const CudaDenseMatrix& w, const float* x_dev, const float* scale_dev,
                           float* y_dev, cudaStream_t stream);

// Number of CUDA devices (0 when there is no driver or device).
int CudaDeviceCount();

}  // namespace tailor::entropy

#endif  // TAILOR_COMPRESSION_ENTROPY_GEMV_CUDA_H_
