#include "compression/entropy/quantize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tailor::entropy {
namespace {

std::array<float, 256> BuildE4M3() {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> 3) & 0xF;
    const int m = b & 7;
    float v;
    if (e == 0xF && m == 7) {
      v = std::numeric_limits<float>::quiet_NaN();
    } else if (e == 0) {
      v = std::ldexp(static_cast<float>(m) / 8.0f, -6);  // subnormal
    } else {
      v = std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
    }
    t[b] = (b & 0x80) ? -v : v;
  }
  return t;
}

float RowMaxAbs(const float* w, int64_t cols) {
  float m = 0;
  for (int64_t c = 0; c < cols; ++c) m = std::max(m, std::fabs(w[c]));
  return m;
}

}  // namespace

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kInt8, DType::kInt4, DType::kFP8}) {
    if (DTypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown weight format '", name, "' (want f32, bf16, int8, int4 or fp8)"));
}

bool HasScales(DType dtype) {
  return dtype == DType::kInt8 || dtype == DType::kInt4 || dtype == DType::kFP8;
}

const float* Fp8E4M3Table() {
  static const std::array<float, 256> table = BuildE4M3();
  return table.data();
}

uint8_t FloatToE4M3(float v) {
  const float* t = Fp8E4M3Table();
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const float a = std::fabs(v);
  // Codes 0..126 are the non-negative finite values in increasing order: binary search for
  // the first code >= a, then pick the nearer neighbour (ties to the even code, whose
  // mantissa is even).
  int lo = 0, hi = 126;
  if (a >= t[126]) return sign | 126;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (t[mid] < a) lo = mid + 1; else hi = mid;
  }
  int code = lo;
  if (code > 0) {
    const float up = t[code] - a, down = a - t[code - 1];
    if (down < up || (down == up && ((code - 1) & 1) == 0)) code = code - 1;
  }
  return sign | static_cast<uint8_t>(code);
}

uint16_t FloatToBF16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (std::isnan(v)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // stay a NaN
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

absl::StatusOr<QuantizedTensor> Quantize(const float* w, int64_t rows, int64_t cols,
                                         DType dtype) {
  if (rows < 0 || cols < 0 || rows * cols > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("bad tensor shape ", rows, "x", cols));
  }
  QuantizedTensor q;
  q.dtype = dtype;
  q.rows = rows;
  q.cols = cols;
  const int64_t n = rows * cols;
  q.data.assign(DenseBytes(dtype, rows, cols), 0);
  if (dtype == DType::kF32) {
    std::memcpy(q.data.data(), w, n * 4);
    return q;
  }
  if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t b = FloatToBF16(w[i]);
      q.data[2 * i] = b & 0xFF;
      q.data[2 * i + 1] = b >> 8;
    }
    return q;
  }
  const float qmax = dtype == DType::kInt8 ? 127.0f : dtype == DType::kInt4 ? 7.0f : 448.0f;
  q.scales.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      if (!std::isfinite(row[c])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "weight [", r, ", ", c, "] is not finite: ", DTypeName(dtype), " has no scale for it"));
      }
    }
    const float m = RowMaxAbs(row, cols);
    const float s = m > 0 ? m / qmax : 1.0f;
    q.scales[r] = s;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const float x = row[c] / s;
      if (dtype == DType::kFP8) {
        q.data[i] = FloatToE4M3(x);
        continue;
      }
      const int v = static_cast<int>(std::clamp(std::nearbyint(x), -qmax, qmax));
      if (dtype == DType::kInt8) {
        q.data[i] = static_cast<uint8_t>(static_cast<int8_t>(v));
      } else {
        q.data[i / 2] |= static_cast<uint8_t>((v & 0xF) << ((i & 1) ? 4 : 0));
      }
    }
  }
  return q;
}

absl::StatusOr<std::vector<float>> Dequantize(const QuantizedTensor& q) {
  if (absl::Status s = ValidateView(q.view()); !s.ok()) return s;
  const int64_t n = q.rows * q.cols;
  if (HasScales(q.dtype) != !q.scales.empty() ||
      (HasScales(q.dtype) && static_cast<int64_t>(q.scales.size()) != q.rows)) {
    return absl::InvalidArgumentError(absl::StrCat(DTypeName(q.dtype), " tensor with ",
                                                   q.scales.size(), " scales for ", q.rows,
                                                   " rows"));
  }
  std::vector<float> out(n);
  const uint8_t* d = q.data.data();
  const float* fp8 = Fp8E4M3Table();
  for (int64_t i = 0; i < n; ++i) {
    float v;
    switch (q.dtype) {
      case DType::kF32: std::memcpy(&v, d + 4 * i, 4); break;
      case DType::kBF16: {
        const uint32_t bits = (uint32_t{d[2 * i]} | (uint32_t{d[2 * i + 1]} << 8)) << 16;
        std::memcpy(&v, &bits, 4);
        break;
      }
      case DType::kInt8: v = static_cast<float>(static_cast<int8_t>(d[i])); break;
      case DType::kInt4: {
        const int nib = (i & 1) ? (d[i / 2] >> 4) : (d[i / 2] & 0xF);
        v = static_cast<float>((nib ^ 8) - 8);
        break;
      }
      case DType::kFP8: v = fp8[d[i]]; break;
      default: return absl::InvalidArgumentError("unknown dtype");
    }
    out[i] = q.scales.empty() ? v : v * q.scales[i / q.cols];
  }
  return out;
}

}  // namespace tailor::entropy
