#ifndef TAILOR_TESTS_UNIT_COMPRESSION_ENTROPY_TEST_UTIL_H_
#define TAILOR_TESTS_UNIT_COMPRESSION_ENTROPY_TEST_UTIL_H_

// Synthetic weight tensors for the entropy tests: Gaussian and heavy-tailed (Student t, 3
// degrees of freedom) values as real checkpoints have them, per-row quantised int8/int4,
// and uniform random bytes (incompressible; exercises the escape stream).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "compression/entropy/codec.h"
#include "compression/entropy/quantize.h"

namespace tailor::entropy::testing {

enum class Dist { kGaussian, kHeavyTailed, kUniformBytes };

inline uint16_t ToBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7FFF + ((b >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(b >> 16);
}

inline std::vector<uint8_t> MakeTensor(DType dtype, int64_t rows, int64_t cols, Dist dist,
                                       uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n = rows * cols;
  std::vector<uint8_t> out(DenseBytes(dtype, rows, cols), 0);
  if (dist == Dist::kUniformBytes) {
    for (auto& b : out) b = rng() & 0xFF;
    if (dtype == DType::kInt4 && n % 2 == 1) out.back() &= 0x0F;  // padding nibble is zero
    return out;
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::student_t_distribution<float> heavy(3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = 0.02f * (dist == Dist::kGaussian ? normal(rng) : heavy(rng));
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 1e-12f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(v[r * cols + c]));
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      switch (dtype) {
        case DType::kF32: std::memcpy(&out[4 * i], &v[i], 4); break;
        case DType::kBF16: {
          const uint16_t h = ToBf16(v[i]);
          std::memcpy(&out[2 * i], &h, 2);
          break;
        }
        case DType::kInt8:
          out[i] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(v[i] / amax * 127)));
          break;
        case DType::kInt4: {
          const uint8_t q = static_cast<uint8_t>(std::lround(v[i] / amax * 7)) & 0xF;
          out[i / 2] |= (i & 1) ? q << 4 : q;
          break;
        }
        case DType::kFP8:
          out[i] = FloatToE4M3(v[i] / amax * 448.0f);
          break;
      }
    }
  }
  return out;
}

}  // namespace tailor::entropy::testing

#endif  // TAILOR_TESTS_UNIT_COMPRESSION_ENTROPY_TEST_UTIL_H_
