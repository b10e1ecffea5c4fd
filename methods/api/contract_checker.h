#ifndef TAILOR_METHODS_API_CONTRACT_CHECKER_H_
#define TAILOR_METHODS_API_CONTRACT_CHECKER_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::methods {

// One violated rule: the field path as written in a contract ("workload.batch_size",
// "resources.search.nodes", "entropy.table_log[1]") and why.
struct FieldError {
  std::string field;
  std::string reason;  // e.g. "must be >= 1, got 0"
  std::string ToString() const { return field + ": " + reason; }
};

inline constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// The budgets a searching method can steer by, as named in its error messages.
inline constexpr char kSearchBudgets[] =
    "latency_ms_max, throughput_tokens_per_s_min, memory_mib_max (or their *_vs_parent forms)";

// Shortest decimal form that reads back as the same double, so "must be < 0.5, got 0.5" can
// never happen for a value slightly above 0.5.
std::string FormatDouble(double v);

// Quoted, escaped and shortened to one readable line even when the value is long or binary.
std::string Quote(absl::string_view s);

// True when any of latency, throughput or total memory is budgeted.
bool IsSearchBudgetSet(const v1::Budget& b);

// Accumulates violations; every helper names the field exactly as a contract writes it. The
// coordinator's generic sections and each method's own sections write into one checker, so a
// submission gets every violation at once, in contract field order.
class ContractChecker {
 public:
  void Add(std::string field, std::string reason);

  // Integer in [lo, hi]. Returns false (after recording) when out of range.
  bool Int(const std::string& field, int64_t v, int64_t lo, int64_t hi);

  // Finite double between lo and hi, each bound inclusive or not (kUnbounded = no bound).
  bool Double(const std::string& field, double v, double lo, bool lo_inclusive, double hi,
              bool hi_inclusive);

  // Finite and > 0.
  bool Positive(const std::string& field, double v);

  std::vector<FieldError> Take() { return std::move(errors_); }

 private:
  std::vector<FieldError> errors_;
};

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_API_CONTRACT_CHECKER_H_
