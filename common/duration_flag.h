#ifndef TAILOR_COMMON_DURATION_FLAG_H_
#define TAILOR_COMMON_DURATION_FLAG_H_

// Durations as people type them on command lines (`--expires-in 90d`). Header-only so that the
// CLI and the coordinator share one grammar without another library between them.
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tailor {

// A whole number and one unit: "90d", "12h", "30m", "3600s". absl::ParseDuration has no days,
// and lifetimes are counted in them. Signs, fractions, blanks and compound forms ("1h30m")
// are INVALID_ARGUMENT "'<text>' is not ..."; ranges (is 0 allowed?) are the caller's to
// check. Values too large for absl::Duration saturate to absl::InfiniteDuration().
inline absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view text) {
  const auto malformed = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a duration like 90d, 12h, 30m or 3600s"));
  };
  if (text.size() < 2) return malformed();
  const absl::string_view digits = text.substr(0, text.size() - 1);
  for (char c : digits) {
    if (!absl::ascii_isdigit(c)) return malformed();
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(digits, &n)) return absl::InfiniteDuration();  // more than 19 digits
  switch (text.back()) {
    case 's':
      return absl::Seconds(n);
    case 'm':
      return absl::Minutes(n);
    case 'h':
      return absl::Hours(n);
    case 'd':
      return absl::Hours(24) * n;
    default:
      return malformed();
  }
}

}  // namespace tailor

#endif  // TAILOR_COMMON_DURATION_FLAG_H_
