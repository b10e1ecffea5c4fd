#include "compression/entropy/codec.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/unit/compression/entropy_test_util.h"

namespace tailor::entropy {
namespace {

using testing::Dist;
using testing::MakeTensor;

struct Shape {
  int64_t rows, cols;
};

TEST(EntropyCodecTest, RoundTripEveryDtypeConfigAndDistribution) {
  // Shapes: row-slice chunks with a partial last chunk, row-group chunks with odd columns
  // (and an odd weight count for int4), a single short row.
  const std::vector<Shape> shapes = {{6, 1100}, {37, 129}, {1, 70}};
  int cases = 0;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kInt8, DType::kInt4}) {
    for (Dist dist : {Dist::kGaussian, Dist::kHeavyTailed, Dist::kUniformBytes}) {
      for (const Shape& shape : shapes) {
        const std::vector<uint8_t> dense =
            MakeTensor(dtype, shape.rows, shape.cols, dist, 7 + cases);
        const TensorView view{dtype, shape.rows, shape.cols, dense};
        for (int k = 1; k <= 4; ++k) {
          for (int tl : {8, 11, 16}) {
            for (int cw : {64, 1024}) {
              for (bool all : {false, true}) {
                CodecConfig config{k, tl, cw};
                config.code_all_planes = all;
                if (!ValidateConfig(dtype, config).ok()) continue;
                const std::string what =
                    absl::StrCat(DTypeName(dtype), " dist ", static_cast<int>(dist), " ",
                                 shape.rows, "x", shape.cols, " k", k, " tl", tl, " cw", cw,
                                 all ? " all" : "");
                auto bytes = Encode(view, config);
                ASSERT_TRUE(bytes.ok()) << what << ": " << bytes.status();
                auto coded = Parse(*std::move(bytes));
                ASSERT_TRUE(coded.ok()) << what << ": " << coded.status();
                auto decoded = Decode(*coded);
                ASSERT_TRUE(decoded.ok()) << what << ": " << decoded.status();
                ASSERT_EQ(*decoded, dense) << what;
                ++cases;
              }
            }
          }
        }
      }
    }
  }
  // F32/BF16/int8 allow k = 1, 2 (16-bit symbol cap); int4 allows k = 1..4.
  EXPECT_EQ(cases, (3 * 2 + 4) * 3 * 3 * 3 * 2 * 2);
}

TEST(EntropyCodecTest, ConstantTensorHasExactLayout) {
  // 16 rows of 64 zeros, k=1, table_log 8, chunk 64: 16 chunks, one symbol owning all 256
  // slots, so the state never moves and each stream is just its 4 states (16 bytes).
  const std::vector<uint8_t> dense(16 * 64, 0);
  auto bytes = Encode({DType::kInt8, 16, 64, dense}, {1, 8, 64});
  ASSERT_TRUE(bytes.ok());
  // header 48 + plane 4 + table 8 + entry 4 + chunk count 4 + directory 16*8 + streams 16*16
  EXPECT_EQ(bytes->size(), 48u + 4 + 8 + 4 + 4 + 128 + 256);
}

TEST(EntropyCodecTest, ConstantPlaneIsCodedEvenWhenRawThresholdWouldKeepOthersRaw) {
  const std::vector<uint8_t> dense(16 * 64, 0);
  auto coded = Parse(*Encode({DType::kInt8, 16, 64, dense}, {1, 8, 64}));
  ASSERT_TRUE(coded.ok());
  EXPECT_TRUE(coded->planes[0].coded);
  EXPECT_FALSE(coded->planes[0].has_escape);
  EXPECT_EQ(coded->planes[0].num_kept_symbols, 1);
}

TEST(EntropyCodecTest, FrequenciesAreNormalisedProportionally) {
  // 48 ones and 16 twos at table_log 8: 192 and 64 slots.
  std::vector<uint8_t> dense(64, 1);
  for (int i = 48; i < 64; ++i) dense[i] = 2;
  auto coded = Parse(*Encode({DType::kInt8, 1, 64, dense}, {1, 8, 64}));
  ASSERT_TRUE(coded.ok());
  const CodedPlane& p = coded->planes[0];
  ASSERT_EQ(p.table.size(), 256u);
  EXPECT_EQ(p.table[0].symbol, 1);
  EXPECT_EQ(p.table[0].freq, 192u);
  EXPECT_EQ(p.table[191].symbol, 1);
  EXPECT_EQ(p.table[191].rank, 191);
  EXPECT_EQ(p.table[192].symbol, 2);
  EXPECT_EQ(p.table[192].freq, 64u);
  EXPECT_EQ(p.table[192].rank, 0);
}

TEST(EntropyCodecTest, RareSymbolsGoToTheEscapeStream) {
  // 1000 zeros and one 77 at table_log 8: 77's share is below one slot, so it is escaped.
  std::vector<uint8_t> dense(1001, 0);
  dense[500] = 77;
  auto coded = Parse(*Encode({DType::kInt8, 1, 1001, dense}, {1, 8, 1024}));
  ASSERT_TRUE(coded.ok());
  const CodedPlane& p = coded->planes[0];
  EXPECT_TRUE(p.has_escape);
  EXPECT_EQ(p.num_kept_symbols, 1);
  EXPECT_EQ(p.escape_count[0], 1u);
  EXPECT_EQ(*Decode(*coded), dense);
}

TEST(EntropyCodecTest, Bf16MantissaPlaneStaysRawAndSizeIsNearEntropy) {
  const int64_t rows = 256, cols = 1024;
  const std::vector<uint8_t> dense = MakeTensor(DType::kBF16, rows, cols, Dist::kGaussian, 3);
  const TensorView view{DType::kBF16, rows, cols, dense};
  auto coded = Parse(*Encode(view, {1, 12, 4096}));
  ASSERT_TRUE(coded.ok());
  EXPECT_FALSE(coded->planes[0].coded);  // low byte: 7 mantissa bits, near uniform
  EXPECT_TRUE(coded->planes[1].coded);   // sign, exponent, top mantissa bit
  // Size floor: the empirical entropy of the high-byte plane.
  std::vector<uint8_t> hi(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) hi[i] = dense[2 * i + 1];
  const double h_hi = EmpiricalBitsPerWeight({DType::kInt8, rows, cols, hi}, 1);
  const double coded_hi_bits = coded->bits_per_weight() - 8.0;
  // Within 2% of the entropy plus table/state overhead (table 4 B/symbol, 24 B/chunk).
  const double overhead_bits = 8.0 * (48 + 8 + 4 * coded->planes[1].num_kept_symbols +
                                      24 * coded->geometry.num_chunks + 8) /
                               (rows * cols);
  EXPECT_LT(coded_hi_bits, 1.02 * h_hi + overhead_bits);
  EXPECT_GT(coded_hi_bits, h_hi);
  EXPECT_NEAR(PredictEncodedBytes(view, {1, 12, 4096}), coded->size_bytes(),
              0.01 * coded->size_bytes());
}

TEST(EntropyCodecTest, RejectsInvalidConfigsAndViews) {
  const std::vector<uint8_t> dense(64, 0);
  EXPECT_FALSE(Encode({DType::kInt8, 1, 64, dense}, {3, 12, 1024}).ok());  // 24-bit symbols
  EXPECT_FALSE(Encode({DType::kInt8, 1, 64, dense}, {1, 7, 1024}).ok());
  EXPECT_FALSE(Encode({DType::kInt8, 1, 64, dense}, {1, 17, 1024}).ok());
  EXPECT_FALSE(Encode({DType::kInt8, 1, 64, dense}, {1, 12, 100}).ok());  // not a multiple of 8
  EXPECT_FALSE(Encode({DType::kInt8, 1, 65, dense}, {1, 12, 1024}).ok());  // wrong size
  EXPECT_TRUE(Encode({DType::kInt4, 1, 128, dense}, {4, 12, 1024}).ok());
}

}  // namespace
}  // namespace tailor::entropy
