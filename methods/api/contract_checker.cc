#include "methods/api/contract_checker.h"

#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tailor::methods {

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  for (int precision = 6; precision < 17; ++precision) {
    std::string s = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

std::string Quote(absl::string_view s) {
  constexpr size_t kMax = 64;
  std::string body = absl::CEscape(s.substr(0, kMax));
  if (s.size() > kMax) absl::StrAppend(&body, "...");
  return absl::StrCat("\"", body, "\"");
}

bool IsSearchBudgetSet(const v1::Budget& b) {
  return b.has_latency_ms_max() || b.has_throughput_tokens_per_s_min() || b.has_memory_mib_max() ||
         b.has_latency_vs_parent_max() || b.has_throughput_vs_parent_min() ||
         b.has_memory_vs_parent_max();
}

void ContractChecker::Add(std::string field, std::string reason) {
  errors_.push_back({std::move(field), std::move(reason)});
}

bool ContractChecker::Int(const std::string& field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo) {
    Add(field, absl::StrCat("must be >= ", lo, ", got ", v));
    return false;
  }
  if (v > hi) {
    Add(field, absl::StrCat("must be <= ", hi, ", got ", v));
    return false;
  }
  return true;
}

bool ContractChecker::Double(const std::string& field, double v, double lo, bool lo_inclusive,
                             double hi, bool hi_inclusive) {
  if (!std::isfinite(v)) {
    Add(field, absl::StrCat("must be finite, got ", FormatDouble(v)));
    return false;
  }
  if (lo_inclusive ? v < lo : v <= lo) {
    Add(field, absl::StrCat("must be ", lo_inclusive ? ">= " : "> ", FormatDouble(lo), ", got ",
                            FormatDouble(v)));
    return false;
  }
  if (hi_inclusive ? v > hi : v >= hi) {
    Add(field, absl::StrCat("must be ", hi_inclusive ? "<= " : "< ", FormatDouble(hi), ", got ",
                            FormatDouble(v)));
    return false;
  }
  return true;
}

bool ContractChecker::Positive(const std::string& field, double v) {
  return Double(field, v, 0, /*lo_inclusive=*/false, kUnbounded, /*hi_inclusive=*/true);
}

}  // namespace tailor::methods
