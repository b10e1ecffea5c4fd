#ifndef TAILOR_COMPRESSION_ENTROPY_GEMV_H_
#define TAILOR_COMPRESSION_ENTROPY_GEMV_H_

// Batch-1 matrix-vector products y = diag(scale) W x over dense and entropy-coded weights.
//
// Both kernels share one accumulation order: each row keeps 8 float lanes, weight at column
// c adds into lane c % 8 in increasing c, and the lanes are reduced as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). The fused kernel therefore equals the dense kernel
// on the decoded weights bit for bit (no FMA contraction: the library builds without
// -ffast-math and without -march flags that would enable it).

#include <cstdint>

#include "absl/status/status.h"
#include "compression/entropy/codec.h"

namespace tailor::entropy {

// Weights decoded per step into a stack buffer before they are multiplied (per plane).
inline constexpr int kDecodeBlock = 240;  // multiple of 8 and of k = 1..4

// `scale` (per row, may be null = 1) is applied after the row sum; int8/int4 weights are the
// integers themselves (int4: two's complement nibbles).
absl::Status DenseGemv(const TensorView& w, const float* x, const float* scale, float* y,
                       int threads = 1);

// Decodes chunk by chunk into a stack buffer and accumulates; W is never materialised.
// Threads own disjoint row ranges (chunks never straddle rows across threads).
absl::Status FusedGemv(const CodedTensor& w, const float* x, const float* scale, float* y,
                       int threads = 1);

// The same products over a block of `rows` x `cols` consecutive weights starting at weight
// `first` of the tensor (row-major, so one expert of a stacked [experts, out, in] tensor is
// the block first = e * out * in, rows = out, cols = in). `scale` has one entry per block
// row (may be null). Both walk the block in the kernels' accumulation order, so
// FusedGemvBlock equals DenseGemvBlock bit for bit, and the full-tensor block equals
// DenseGemv. The coded variant decodes only the chunks that overlap the block (a chunk is
// decoded from its start, rANS cannot seek). One thread.
absl::Status DenseGemvBlock(const TensorView& w, int64_t first, int64_t rows, int64_t cols,
                            const float* x, const float* scale, float* y);
absl::Status FusedGemvBlock(const CodedTensor& w, int64_t first, int64_t rows, int64_t cols,
                            const float* x, const float* scale, float* y);

// Values of weights [first, first + count) as floats before any per-row scale (int8/int4
// as the integers, fp8 through the table): exactly the `v` of Dequantize's `v * s_r`. The
// engine decompresses prefill weights and embedding rows with these.
absl::Status DenseValues(const TensorView& w, int64_t first, int64_t count, float* out);
absl::Status FusedValues(const CodedTensor& w, int64_t first, int64_t count, float* out);

}  // namespace tailor::entropy

#endif  // TAILOR_COMPRESSION_ENTROPY_GEMV_H_
