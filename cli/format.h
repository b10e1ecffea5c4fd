#ifndef TAILOR_CLI_FORMAT_H_
#define TAILOR_CLI_FORMAT_H_

// Small value formatters shared by every human view of the CLI. All are pure so that the
// rendered tables can be asserted line by line in tests.

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"
#include "tailor/v1/agent.pb.h"
#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::cli {

// Terminal columns taken by `s`: UTF-8 code points, so "✓" counts as one column.
size_t DisplayWidth(absl::string_view s);

// `s` cut to at most `width` columns; a cut string ends in "…" so truncation is visible.
std::string TruncateToWidth(absl::string_view s, size_t width);

// Enum names without their redundant prefix: JOB_LEASED -> "LEASED", CAMPAIGN_FAILED ->
// "FAILED", AGENT_ONLINE -> "ONLINE". Unknown values print as their number.
std::string JobStateName(v1::JobState state);
std::string CampaignStateName(v1::CampaignState state);
std::string AgentStateName(v1::AgentState state);
std::string MethodName(v1::Method method);
std::string PrecisionName(v1::Precision precision);

bool IsFinal(v1::CampaignState state);

// "2023-11-14 22:13:20 UTC"; "-" for an unset timestamp.
std::string FormatTimestamp(const google::protobuf::Timestamp& ts, absl::TimeZone tz);
// "22:13:20" (the watch line prefix).
std::string FormatClock(const google::protobuf::Timestamp& ts, absl::TimeZone tz);
// "1:02:03" or "2:03" (elapsed time in the watch header).
std::string FormatElapsed(absl::Duration d);
// "3s ago", "5m ago", "2h ago", "4d ago"; "never" for an unset timestamp.
std::string FormatAge(const google::protobuf::Timestamp& ts, absl::Time now);

// 1536 -> "1.5 KiB"; below 1 KiB exact bytes ("512 B").
std::string FormatBytes(int64_t bytes);
// 1234567 -> "1.23M"; 950 -> "950".
std::string FormatCount(int64_t n);
// 0.423 -> "42%"; clamps to 0..100.
std::string FormatPercent(double fraction);
// A number with `digits` decimals and no trailing noise: 40 -> "40", 38.25 -> "38.25";
// NaN (not computed) -> "-".
std::string FormatNumber(double v, int digits = 2);

// "[#########-----------]" of `width` cells including the brackets.
std::string ProgressBar(double fraction, int width);

// The first 12 characters of a digest or fingerprint (enough to be unique in listings).
std::string ShortHash(absl::string_view hex);

// "1/128/32/0": batch, input, output and cached-prefix tokens.
std::string FormatWorkload(const v1::Workload& workload);

}  // namespace tailor::cli

#endif  // TAILOR_CLI_FORMAT_H_
