#ifndef TAILOR_COMMON_IDS_H_
#define TAILOR_COMMON_IDS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tailor {

// Sortable unique ids: "<prefix>-<12 hex ms since epoch><10 hex random>". Sorting ids sorts by
// creation time, which keeps SQLite's b-trees append-mostly and listings chronological.
std::string NewId(absl::string_view prefix, absl::Time now);

// True if `s` is 1..max_len characters of [A-Za-z0-9._:-].
bool IsSafeToken(absl::string_view s, size_t max_len);

}  // namespace tailor

#endif  // TAILOR_COMMON_IDS_H_
