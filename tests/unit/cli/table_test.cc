#include "cli/table.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/time/time.h"
#include "cli/format.h"
#include "common/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tailor::cli {
namespace {

TEST(TableTest, AlignsColumnsAndDropsTrailingSpaces) {
  Table t({{"NAME"}, {"COUNT", Align::kRight}, {"NOTE"}});
  t.AddRow({"a", "1", "x"});
  t.AddRow({"longer", "1234", ""});
  EXPECT_EQ(t.Render(),
            "NAME    COUNT  NOTE\n"
            "a           1  x\n"
            "longer   1234\n");
}

TEST(TableTest, MissingCellsAreEmptyAndExtraCellsDropped) {
  Table t({{"A"}, {"B"}});
  t.AddRow({"1"});
  t.AddRow({"2", "3", "ignored"});
  EXPECT_EQ(t.Render(), "A  B\n1\n2  3\n");
}

TEST(TableTest, MaxWidthTruncatesWithEllipsis) {
  Table t({{"ID", Align::kLeft, 5}, {"X"}});
  t.AddRow({"abcdefgh", "1"});
  EXPECT_EQ(t.Render(), "ID     X\nabcd…  1\n");
}

TEST(TableTest, ShrinksShrinkableColumnToFitWidth) {
  Table t({{"ID"}, {"MESSAGE", Align::kLeft, 0, true}});
  t.AddRow({"job-1", "a very long message that will not fit"});
  // ID (5) + gap (2) + MESSAGE shrunk to 13 = 20 columns.
  EXPECT_EQ(t.Render(20),
            "ID     MESSAGE\n"
            "job-1  a very long …\n");
}

TEST(TableTest, ShrinkStopsAtMinimumWidth) {
  Table t({{"ID"}, {"MESSAGE", Align::kLeft, 0, true}});
  t.AddRow({"identifier-that-is-long", "0123456789abcdef"});
  const std::string out = t.Render(10);
  EXPECT_EQ(out,
            "ID                       MESSAGE\n"
            "identifier-that-is-long  0123456…\n");
}

TEST(TableTest, CountsUtf8AsOneColumn) {
  Table t({{"MET"}, {"X"}});
  t.AddRow({"✓", "1"});
  t.AddRow({"✗", "2"});
  EXPECT_EQ(t.Render(), "MET  X\n✓    1\n✗    2\n");
}

TEST(TableTest, ControlCharactersBecomeSpaces) {
  Table t({{"A"}, {"B"}});
  t.AddRow({"line1\nline2", "tab\there"});
  EXPECT_EQ(t.Render(), "A            B\nline1 line2  tab here\n");
}

TEST(TableTest, HeaderOnlyWhenNoRows) {
  Table t({{"A"}, {"B", Align::kRight}});
  EXPECT_EQ(t.Render(), "A  B\n");
  EXPECT_EQ(t.num_rows(), 0u);
}

TEST(FormatTest, DisplayWidthAndTruncate) {
  EXPECT_EQ(DisplayWidth("abc"), 3u);
  EXPECT_EQ(DisplayWidth("✓✗"), 2u);
  EXPECT_EQ(TruncateToWidth("abcdef", 6), "abcdef");
  EXPECT_EQ(TruncateToWidth("abcdef", 4), "abc…");
  EXPECT_EQ(TruncateToWidth("✓✓✓✓", 3), "✓✓…");
  EXPECT_EQ(TruncateToWidth("abc", 0), "");
}

TEST(FormatTest, StateNames) {
  EXPECT_EQ(JobStateName(v1::JOB_LEASED), "LEASED");
  EXPECT_EQ(CampaignStateName(v1::CAMPAIGN_FAILED), "FAILED");
  EXPECT_EQ(AgentStateName(v1::AGENT_DRAINED), "DRAINED");
  EXPECT_EQ(JobStateName(static_cast<v1::JobState>(42)), "42");
  EXPECT_EQ(MethodName(v1::AUTOCOMPRESS), "AUTOCOMPRESS");
  EXPECT_EQ(PrecisionName(v1::BF16), "BF16");
}

TEST(FormatTest, Numbers) {
  EXPECT_EQ(FormatNumber(40), "40");
  EXPECT_EQ(FormatNumber(38.25), "38.25");
  EXPECT_EQ(FormatNumber(38.2), "38.2");
  EXPECT_EQ(FormatNumber(-0.001), "0");
  EXPECT_EQ(FormatNumber(1.23456, 4), "1.2346");
  EXPECT_EQ(FormatNumber(std::nan("")), "-");
  EXPECT_EQ(FormatNumber(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(FormatPercent(0.423), "42%");
  EXPECT_EQ(FormatPercent(0.999), "99%");
  EXPECT_EQ(FormatPercent(1.0), "100%");
  EXPECT_EQ(FormatPercent(1.7), "100%");
  EXPECT_EQ(FormatPercent(-1), "0%");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(64LL << 20), "64.0 MiB");
  EXPECT_EQ(FormatCount(950), "950");
  EXPECT_EQ(FormatCount(25'000), "25.0k");
  EXPECT_EQ(FormatCount(2'000'000), "2.00M");
  EXPECT_EQ(FormatCount(1'230'000'000), "1.23G");
}

TEST(FormatTest, ProgressBar) {
  EXPECT_EQ(ProgressBar(0, 12), "[----------]");
  EXPECT_EQ(ProgressBar(0.42, 12), "[####------]");
  EXPECT_EQ(ProgressBar(1, 12), "[##########]");
  EXPECT_EQ(ProgressBar(2, 7), "[#####]");
  EXPECT_EQ(ProgressBar(0.5, 2), "");
}

TEST(FormatTest, TimesAndDurations) {
  const absl::Time t = absl::FromUnixSeconds(1'700'000'000);  // 2023-11-14 22:13:20 UTC
  EXPECT_EQ(FormatTimestamp(ToProto(t), absl::UTCTimeZone()), "2023-11-14 22:13:20 UTC");
  EXPECT_EQ(FormatTimestamp(google::protobuf::Timestamp(), absl::UTCTimeZone()), "-");
  EXPECT_EQ(FormatClock(ToProto(t), absl::UTCTimeZone()), "22:13:20");
  EXPECT_EQ(FormatElapsed(absl::Seconds(75)), "1:15");
  EXPECT_EQ(FormatElapsed(absl::Seconds(3723)), "1:02:03");
  EXPECT_EQ(FormatElapsed(-absl::Seconds(5)), "0:00");
  EXPECT_EQ(FormatAge(ToProto(t), t + absl::Seconds(3)), "3s ago");
  EXPECT_EQ(FormatAge(ToProto(t), t + absl::Minutes(5)), "5m ago");
  EXPECT_EQ(FormatAge(ToProto(t), t + absl::Hours(3)), "3h ago");
  EXPECT_EQ(FormatAge(ToProto(t), t + absl::Hours(72)), "3d ago");
  EXPECT_EQ(FormatAge(google::protobuf::Timestamp(), t), "never");
}

TEST(FormatTest, HashesAndWorkload) {
  EXPECT_EQ(ShortHash("0123456789abcdef0123"), "0123456789ab");
  EXPECT_EQ(ShortHash("abc"), "abc");
  v1::Workload w;
  w.set_batch_size(1);
  w.set_input_tokens(128);
  w.set_output_tokens(32);
  w.set_cached_prefix_tokens(0);
  EXPECT_EQ(FormatWorkload(w), "1/128/32/0");
}

}  // namespace
}  // namespace tailor::cli
