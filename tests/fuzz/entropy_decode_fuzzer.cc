// Fuzz target: the entropy-coded weight container (compression/entropy/codec.h): Parse
// (with and without checksums, chosen by the first byte), Decode and the fused GEMV, which
// walk the same streams with the same checks and must agree. Replaces nothing: the unit
// test entropy_fuzz_test.cc keeps its systematic truncation and bit-flip sweeps.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "compression/entropy/codec.h"
#include "compression/entropy/gemv.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// The container format allows up to 2^40 weights; a header claiming that many (with streams
// of a skewed table) would make Decode allocate terabytes, which is the caller's memory
// budget to police, not a parser bug. The harness keeps decodes small.
constexpr int64_t kMaxFuzzWeights = int64_t{1} << 22;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tailor::entropy;
  if (size < 1) return 0;
  ParseOptions options;
  options.verify_checksums = (data[0] & 1) != 0;
  auto coded = Parse(std::vector<uint8_t>(data + 1, data + size), options);
  if (!coded.ok()) return 0;
  FUZZ_CHECK(coded->rows >= 0 && coded->cols >= 0, "negative shape");
  if (coded->rows * coded->cols > kMaxFuzzWeights) return 0;
  auto decoded = Decode(*coded);
  if (decoded.ok()) {
    FUZZ_CHECK(static_cast<int64_t>(decoded->size()) ==
                   DenseBytes(coded->dtype, coded->rows, coded->cols),
               "decoded %zu bytes", decoded->size());
  }
  std::vector<float> x(coded->cols, 1.0f), y(coded->rows);
  const absl::Status gemv = FusedGemv(*coded, x.data(), nullptr, y.data(), 1);
  FUZZ_CHECK(decoded.ok() == gemv.ok(), "Decode %s but FusedGemv %s",
             decoded.status().ToString().c_str(), gemv.ToString().c_str());
  return 0;
}
