#include "cli/format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/proto_time.h"

namespace tailor::cli {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

std::string StripPrefix(const std::string& name, absl::string_view prefix, int value) {
  if (name.empty()) return absl::StrCat(value);
  if (absl::StartsWith(name, prefix)) return name.substr(prefix.size());
  return name;
}

}  // namespace

size_t DisplayWidth(absl::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if (!IsContinuationByte(c)) ++n;
  }
  return n;
}

std::string TruncateToWidth(absl::string_view s, size_t width) {
  if (DisplayWidth(s) <= width) return std::string(s);
  if (width == 0) return "";
  // Keep width-1 code points and mark the cut with an ellipsis.
  size_t kept = 0;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if (!IsContinuationByte(s[i])) {
      if (kept == width - 1) break;
      ++kept;
    }
  }
  return absl::StrCat(s.substr(0, i), "…");
}

std::string JobStateName(v1::JobState state) {
  return StripPrefix(v1::JobState_Name(state), "JOB_", state);
}
std::string CampaignStateName(v1::CampaignState state) {
  return StripPrefix(v1::CampaignState_Name(state), "CAMPAIGN_", state);
}
std::string AgentStateName(v1::AgentState state) {
  return StripPrefix(v1::AgentState_Name(state), "AGENT_", state);
}
std::string MethodName(v1::Method method) {
  const std::string name = v1::Method_Name(method);
  return name.empty() ? absl::StrCat(static_cast<int>(method)) : name;
}
std::string PrecisionName(v1::Precision precision) {
  const std::string name = v1::Precision_Name(precision);
  return name.empty() ? absl::StrCat(static_cast<int>(precision)) : name;
}

bool IsFinal(v1::CampaignState state) {
  return state == v1::CAMPAIGN_SUCCEEDED || state == v1::CAMPAIGN_FAILED ||
         state == v1::CAMPAIGN_CANCELLED;
}

std::string FormatTimestamp(const google::protobuf::Timestamp& ts, absl::TimeZone tz) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", FromProto(ts), tz);
}

std::string FormatClock(const google::protobuf::Timestamp& ts, absl::TimeZone tz) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "--:--:--";
  return absl::FormatTime("%H:%M:%S", FromProto(ts), tz);
}

std::string FormatElapsed(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  const int64_t total = absl::ToInt64Seconds(d);
  const int64_t h = total / 3600, m = (total / 60) % 60, s = total % 60;
  if (h > 0) return absl::StrFormat("%d:%02d:%02d", h, m, s);
  return absl::StrFormat("%d:%02d", m, s);
}

std::string FormatAge(const google::protobuf::Timestamp& ts, absl::Time now) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "never";
  int64_t s = absl::ToInt64Seconds(now - FromProto(ts));
  if (s < 0) s = 0;
  if (s < 120) return absl::StrCat(s, "s ago");
  if (s < 2 * 3600) return absl::StrCat(s / 60, "m ago");
  if (s < 2 * 86400) return absl::StrCat(s / 3600, "h ago");
  return absl::StrCat(s / 86400, "d ago");
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", v, kUnits[unit]);
}

std::string FormatCount(int64_t n) {
  const double v = static_cast<double>(n);
  if (std::llabs(n) >= 1'000'000'000) return absl::StrFormat("%.2fG", v / 1e9);
  if (std::llabs(n) >= 1'000'000) return absl::StrFormat("%.2fM", v / 1e6);
  if (std::llabs(n) >= 10'000) return absl::StrFormat("%.1fk", v / 1e3);
  return absl::StrCat(n);
}

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) fraction = 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  // Floor, so that "100%" only appears when the job is really done.
  return absl::StrCat(static_cast<int>(std::floor(fraction * 100 + 1e-9)), "%");
}

std::string FormatNumber(double v, int digits) {
  // The coordinator reports NaN for values it could not compute (e.g. no prediction yet).
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = absl::StrFormat("%.*f", digits, v);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string ProgressBar(double fraction, int width) {
  if (width < 3) return "";
  if (!std::isfinite(fraction)) fraction = 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int cells = width - 2;
  const int filled = static_cast<int>(std::floor(fraction * cells + 1e-9));
  return absl::StrCat("[", std::string(filled, '#'), std::string(cells - filled, '-'), "]");
}

std::string ShortHash(absl::string_view hex) { return std::string(hex.substr(0, 12)); }

std::string FormatWorkload(const v1::Workload& w) {
  return absl::StrCat(w.batch_size(), "/", w.input_tokens(), "/", w.output_tokens(), "/",
                      w.cached_prefix_tokens());
}

}  // namespace tailor::cli
