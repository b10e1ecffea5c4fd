#include "common/ids.h"

#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

namespace tailor {

std::string NewId(absl::string_view prefix, absl::Time now) {
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng ABSL_GUARDED_BY(mu) ABSL_PT_GUARDED_BY(mu) = nullptr;
  uint64_t r;
  {
    absl::MutexLock lock(&mu);
    if (rng == nullptr) rng = new std::mt19937_64(std::random_device{}());
    r = (*rng)();
  }
  const uint64_t ms = static_cast<uint64_t>(absl::ToUnixMillis(now));
  return absl::StrFormat("%s-%012x%010x", prefix, ms & 0xffffffffffffULL, r & 0xffffffffffULL);
}

bool IsSafeToken(absl::string_view s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace tailor
