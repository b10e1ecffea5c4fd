// Corrupted and truncated containers must give an error (or, where a flip lands in a value
// the format cannot check, different weights), never a crash or an out-of-bounds read. The
// same source also builds with AddressSanitizer (compression_entropy_fuzz_asan_test).
#include <random>
#include <vector>

#include "compression/entropy/codec.h"
#include "compression/entropy/gemv.h"
#include "gtest/gtest.h"
#include "tests/unit/compression/entropy_test_util.h"

namespace tailor::entropy {
namespace {

constexpr int64_t kRows = 8, kCols = 200;

std::vector<uint8_t> Container(CodecConfig config, DType dtype = DType::kBF16) {
  config.code_all_planes = true;  // every plane coded: streams, tables and escapes present
  const std::vector<uint8_t> dense =
      testing::MakeTensor(dtype, kRows, kCols, testing::Dist::kHeavyTailed, 5);
  return *Encode({dtype, kRows, kCols, dense}, config);
}

// Parses, decodes and runs the fused GEMV; true when any step reported an error.
bool Rejected(std::vector<uint8_t> bytes, bool verify) {
  auto coded = Parse(std::move(bytes), {verify});
  if (!coded.ok()) return true;
  auto decoded = Decode(*coded);
  std::vector<float> x(coded->cols, 1.0f), y(coded->rows);
  const absl::Status gemv = FusedGemv(*coded, x.data(), nullptr, y.data(), 2);
  EXPECT_EQ(decoded.ok(), gemv.ok());  // both walk the same streams with the same checks
  return !decoded.ok();
}

TEST(EntropyFuzzTest, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = Container({1, 8, 64});
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + len);
    EXPECT_TRUE(Rejected(cut, true)) << len;
    EXPECT_TRUE(Rejected(cut, false)) << len;
  }
}

TEST(EntropyFuzzTest, TruncatedBodyWithPatchedSizeIsAnError) {
  // Fix up the header's body size so the structural checks, not the size field, catch it.
  const std::vector<uint8_t> full = Container({2, 10, 64});
  for (size_t len = 48; len < full.size(); len += 3) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + len);
    const uint64_t body = len - 48;
    for (int i = 0; i < 8; ++i) cut[32 + i] = (body >> (8 * i)) & 0xFF;
    EXPECT_TRUE(Rejected(cut, false)) << len;
  }
}

TEST(EntropyFuzzTest, EveryHeaderBitFlipIsAnError) {
  const std::vector<uint8_t> full = Container({1, 8, 64});
  for (int bit = 0; bit < 48 * 8; ++bit) {
    std::vector<uint8_t> bad = full;
    bad[bit / 8] ^= 1 << (bit % 8);
    EXPECT_TRUE(Rejected(bad, true)) << bit;
    Rejected(bad, false);  // without checksums: must not crash
  }
}

TEST(EntropyFuzzTest, RandomBodyFlipsNeverCrashAndAreMostlyCaughtStructurally) {
  std::mt19937 rng(11);
  for (const CodecConfig& config : {CodecConfig{1, 8, 64}, CodecConfig{2, 12, 1024},
                                    CodecConfig{1, 16, 64}}) {
    for (DType dtype : {DType::kBF16, DType::kInt4}) {
      if (!ValidateConfig(dtype, config).ok()) continue;
      const std::vector<uint8_t> full = Container(config, dtype);
      int caught = 0;
      const int trials = 400;
      for (int t = 0; t < trials; ++t) {
        std::vector<uint8_t> bad = full;
        const int flips = 1 + rng() % 3;
        for (int f = 0; f < flips; ++f) {
          const size_t pos = 48 + rng() % (full.size() - 48);
          bad[pos] ^= 1 << (rng() % 8);
        }
        EXPECT_TRUE(Rejected(bad, true));
        caught += Rejected(bad, false);
      }
      // Undetectable without the checksum: flips inside escaped values that stay in range
      // (k=2 on BF16 byte planes escapes many symbols: 348 of 400 caught at seed 11).
      EXPECT_GE(caught, trials * 8 / 10) << DTypeName(dtype) << " k" << config.symbols_per_codeword;
    }
  }
}

TEST(EntropyFuzzTest, RandomGarbageIsAnError) {
  std::mt19937 rng(3);
  std::vector<uint8_t> full = Container({1, 8, 64});
  for (int t = 0; t < 200; ++t) {
    std::vector<uint8_t> bad = full;
    for (size_t i = 48; i < bad.size(); ++i) bad[i] = rng() & 0xFF;
    EXPECT_TRUE(Rejected(bad, false));
  }
}

}  // namespace
}  // namespace tailor::entropy
