#include "compression/entropy/gemv.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/compression/entropy_test_util.h"

namespace tailor::entropy {
namespace {

using testing::Dist;
using testing::MakeTensor;

TEST(EntropyGemvTest, FusedEqualsDenseBitForBit) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  struct Case {
    DType dtype;
    int64_t rows, cols;
    CodecConfig config;
  };
  const std::vector<Case> cases = {
      {DType::kBF16, 33, 1000, {1, 12, 256}},   // row slices, partial last slice
      {DType::kBF16, 50, 77, {2, 12, 1024}},    // row groups, unaligned row starts
      {DType::kF32, 9, 300, {1, 10, 64}},
      {DType::kInt8, 64, 512, {2, 16, 4096}},
      {DType::kInt4, 31, 129, {4, 12, 1024}},   // odd weight count
      {DType::kInt4, 16, 4096, {3, 11, 1024}},
  };
  for (const Case& c : cases) {
    const std::vector<uint8_t> dense = MakeTensor(c.dtype, c.rows, c.cols, Dist::kHeavyTailed, 9);
    const TensorView view{c.dtype, c.rows, c.cols, dense};
    auto coded = Parse(*Encode(view, c.config));
    ASSERT_TRUE(coded.ok()) << coded.status();
    std::vector<float> x(c.cols), scale(c.rows);
    for (float& v : x) v = normal(rng);
    for (float& v : scale) v = 0.01f + std::fabs(normal(rng));
    for (int threads : {1, 3}) {
      for (const float* s : {static_cast<const float*>(nullptr), static_cast<const float*>(scale.data())}) {
        std::vector<float> want(c.rows, -1.0f), got(c.rows, -2.0f);
        ASSERT_TRUE(DenseGemv(view, x.data(), s, want.data(), threads).ok());
        ASSERT_TRUE(FusedGemv(*coded, x.data(), s, got.data(), threads).ok());
        ASSERT_EQ(std::memcmp(want.data(), got.data(), 4 * c.rows), 0)
            << DTypeName(c.dtype) << " threads " << threads;
      }
    }
  }
}

// The block kernels the engine uses for one expert of a stacked tensor and for embedding
// rows: fused == dense bit for bit on any block (unaligned starts, odd int4 offsets, both
// chunk geometries), the whole-tensor block equals DenseGemv, and the value reader returns
// exactly what a full decode holds.
TEST(EntropyGemvTest, BlocksAndValuesMatchDense) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  struct Case {
    DType dtype;
    int64_t rows, cols;
    CodecConfig config;
  };
  const std::vector<Case> cases = {
      {DType::kBF16, 6, 1000, {1, 12, 256}},  // row slices
      {DType::kInt4, 12, 77, {2, 12, 1024}},  // row groups
      {DType::kInt8, 4, 300, {1, 10, 64}},
      {DType::kFP8, 8, 130, {2, 10, 512}},
      {DType::kF32, 5, 200, {1, 10, 64}},
  };
  for (const Case& c : cases) {
    const std::vector<uint8_t> dense = MakeTensor(c.dtype, c.rows, c.cols, Dist::kHeavyTailed, 4);
    const TensorView view{c.dtype, c.rows, c.cols, dense};
    auto coded = Parse(*Encode(view, c.config));
    ASSERT_TRUE(coded.ok()) << coded.status();
    const int64_t n = c.rows * c.cols;
    std::vector<float> all(n), part(n);
    ASSERT_TRUE(DenseValues(view, 0, n, all.data()).ok());
    ASSERT_TRUE(FusedValues(*coded, 0, n, part.data()).ok());
    ASSERT_EQ(all, part) << DTypeName(c.dtype);
    for (const auto& [first, count] : std::vector<std::pair<int64_t, int64_t>>{
             {0, n}, {1, 37}, {c.cols - 3, c.cols + 5}, {n - 11, 11}, {c.cols, 2 * c.cols}}) {
      std::vector<float> v(count, -1.0f);
      ASSERT_TRUE(FusedValues(*coded, first, count, v.data()).ok());
      EXPECT_EQ(v, std::vector<float>(all.begin() + first, all.begin() + first + count))
          << DTypeName(c.dtype) << " first " << first;
    }
    EXPECT_FALSE(FusedValues(*coded, n - 1, 2, part.data()).ok());
    // Blocks: the whole tensor, and an "expert" of rows x cols/2 starting mid-row.
    std::vector<float> x(c.cols), scale(c.rows);
    for (float& v : x) v = normal(rng);
    for (float& v : scale) v = 0.01f + std::fabs(normal(rng));
    std::vector<float> want(c.rows), got(c.rows, -2.0f);
    ASSERT_TRUE(DenseGemv(view, x.data(), scale.data(), want.data()).ok());
    ASSERT_TRUE(FusedGemvBlock(*coded, 0, c.rows, c.cols, x.data(), scale.data(), got.data()).ok());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), 4 * c.rows), 0) << DTypeName(c.dtype);
    const int64_t half = c.cols / 2, brows = c.rows - 1, first = c.cols / 2 + 1;
    std::vector<float> b1(brows, -1.0f), b2(brows, -2.0f);
    ASSERT_TRUE(DenseGemvBlock(view, first, brows, half, x.data(), scale.data(), b1.data()).ok());
    ASSERT_TRUE(FusedGemvBlock(*coded, first, brows, half, x.data(), scale.data(), b2.data()).ok());
    EXPECT_EQ(std::memcmp(b1.data(), b2.data(), 4 * brows), 0) << DTypeName(c.dtype);
    // And the block product is the plain GEMV of that block's values.
    std::vector<uint8_t> fblock(4 * brows * half);
    std::memcpy(fblock.data(), all.data() + first, fblock.size());
    std::vector<float> b3(brows);
    ASSERT_TRUE(DenseGemv({DType::kF32, brows, half, fblock}, x.data(), scale.data(), b3.data()).ok());
    EXPECT_EQ(std::memcmp(b1.data(), b3.data(), 4 * brows), 0) << DTypeName(c.dtype);
  }
}

TEST(EntropyGemvTest, DenseMatchesDoubleReferenceWithinTolerance) {
  // int8 values and x = 1..: exact small integers, so the float result is exact.
  const int64_t rows = 3, cols = 20;
  std::vector<uint8_t> w(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) w[i] = static_cast<uint8_t>(static_cast<int8_t>(i % 7 - 3));
  std::vector<float> x(cols);
  for (int64_t c = 0; c < cols; ++c) x[c] = static_cast<float>(c + 1);
  std::vector<float> y(rows);
  ASSERT_TRUE(DenseGemv({DType::kInt8, rows, cols, w}, x.data(), nullptr, y.data()).ok());
  for (int64_t r = 0; r < rows; ++r) {
    double want = 0;
    for (int64_t c = 0; c < cols; ++c) want += static_cast<int8_t>(w[r * cols + c]) * x[c];
    EXPECT_EQ(y[r], static_cast<float>(want));
  }
  EXPECT_EQ(y[0], 21.0f);  // sum_{c} ((c % 7) - 3) * (c + 1) over c = 0..19
}

TEST(EntropyGemvTest, CorruptStreamIsAnErrorInTheKernel) {
  // Five values, all with table slots: no escape stream, so the last bytes are the stream.
  std::vector<uint8_t> dense(8 * 256);
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = static_cast<uint8_t>((i * 7919) % 5);
  std::vector<uint8_t> bytes = *Encode({DType::kInt8, 8, 256, dense}, {1, 10, 64});
  bytes[bytes.size() - 5] ^= 0x40;  // inside the last chunk's stream
  auto coded = Parse(std::move(bytes), {.verify_checksums = false});
  ASSERT_TRUE(coded.ok());
  std::vector<float> x(256, 1.0f), y(8);
  EXPECT_FALSE(FusedGemv(*coded, x.data(), nullptr, y.data(), 2).ok());
}

}  // namespace
}  // namespace tailor::entropy
