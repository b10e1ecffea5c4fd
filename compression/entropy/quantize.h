#ifndef TAILOR_COMPRESSION_ENTROPY_QUANTIZE_H_
#define TAILOR_COMPRESSION_ENTROPY_QUANTIZE_H_

// The simple weight formats an ENTROPY_CODE campaign can code (docs/entropy.md, "Weight
// formats"). Entropy coding is lossless with respect to the quantised tensor; the
// quantisation itself is the documented, deterministic scheme below.
//
//   f32   the parent's weights as they are.
//   bf16  round to nearest even of the top 16 bits; no scale.
//   int8  per output channel (row) r: s_r = max|w_r| / 127, q = clamp(rint(w / s_r), -127, 127).
//   int4  per row: s_r = max|w_r| / 7, q = clamp(rint(w / s_r), -7, 7), two's complement
//         nibbles, two per byte, low nibble first.
//   fp8   OCP e4m3 per row: s_r = max|w_r| / 448, q = e4m3(w / s_r) rounded to nearest even.
// An all-zero row gets s_r = 1. The dequantised weight is float(q) * s_r (one float
// multiply, so every reader computes the same value); the GEMV kernels apply s_r after the
// row sum instead, which is why they are only bit-exact against each other.
//
// No LibTorch here.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/entropy/codec.h"

namespace tailor::entropy {

// A row-major tensor in a storage format plus its per-row scales (empty for f32 and bf16).
struct QuantizedTensor {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> data;  // DenseBytes(dtype, rows, cols)
  std::vector<float> scales;  // rows entries for int8/int4/fp8

  TensorView view() const { return TensorView{dtype, rows, cols, data}; }
  const float* scale_data() const { return scales.empty() ? nullptr : scales.data(); }
};

// "f32", "bf16", "int8", "int4", "fp8" (DTypeName's spelling).
absl::StatusOr<DType> ParseDType(absl::string_view name);
// Whether a format stores per-row scales.
bool HasScales(DType dtype);

// The 256 e4m3 values as floats (NaN for 0x7F and 0xFF).
const float* Fp8E4M3Table();
// Nearest e4m3 code (ties to even); saturates to +-448. `v` must be finite.
uint8_t FloatToE4M3(float v);
// BF16 bits of `v` rounded to nearest even.
uint16_t FloatToBF16(float v);

// Quantises `rows * cols` finite floats into `dtype`. INVALID_ARGUMENT for a non-finite
// weight (it has no per-channel scale) or a bad shape.
absl::StatusOr<QuantizedTensor> Quantize(const float* w, int64_t rows, int64_t cols, DType dtype);

// The weights the tensor stands for: value(q) * s_r, row-major floats.
absl::StatusOr<std::vector<float>> Dequantize(const QuantizedTensor& q);

}  // namespace tailor::entropy

#endif  // TAILOR_COMPRESSION_ENTROPY_QUANTIZE_H_
