#include "compression/engine/workload.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::engine {

absl::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "FP32";
    case Precision::kBf16:
      return "BF16";
    case Precision::kFp16:
      return "FP16";
  }
  return "FP32";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name == "FP32") return Precision::kFp32;
  if (name == "BF16") return Precision::kBf16;
  if (name == "FP16") return Precision::kFp16;
  return absl::InvalidArgumentError(absl::StrCat(
      "precision: the built-in engine serves FP32, BF16 and FP16, got '", name, "'"));
}

int64_t PrecisionBytes(Precision precision) { return precision == Precision::kFp32 ? 4 : 2; }

absl::Status ValidateWorkload(const Workload& w) {
  auto check = [](const char* field, int64_t v, int64_t min) -> absl::Status {
    if (v < min) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload.", field, ": must be >= ", min, ", got ", v));
    }
    return absl::OkStatus();
  };
  TAILOR_RETURN_IF_ERROR(check("batch_size", w.batch_size, 1));
  TAILOR_RETURN_IF_ERROR(check("input_tokens", w.input_tokens, 1));
  TAILOR_RETURN_IF_ERROR(check("output_tokens", w.output_tokens, 1));
  TAILOR_RETURN_IF_ERROR(check("cached_prefix_tokens", w.cached_prefix_tokens, 0));
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  // Rank ceil(p n / 100), 1-based: at least p% of the n samples at or below it. p n before
  // the division keeps whole ranks exact (0.7 * 10 is not 7 in binary, 70 * 10 / 100 is).
  const double rank = std::ceil(std::clamp(p, 0.0, 100.0) * static_cast<double>(n) / 100.0);
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return samples[std::min(index, n - 1)];
}

}  // namespace tailor::engine
