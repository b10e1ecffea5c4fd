#include "compression/costmodel/calm_serving.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::costmodel {
namespace {

using ::testing::HasSubstr;
using ::tailor::testing::StatusIs;

// A run of requests of these wall times, each with `cpu_per_wall` of its wall time in CPU.
ServedModel RunOf(const std::vector<double>& request_ms, double cpu_per_wall) {
  ServedModel s;
  for (double t : request_ms) s.requests.push_back({t, t / 4, t - t / 4, t * cpu_per_wall});
  return s;
}

TEST(CalmServingTest, JudgesSpreadAndThreadUse) {
  CalmServingOptions o;
  o.threads = 2;
  Disturbance d = JudgeDisturbance(RunOf({20, 21, 20.5}, 1.9), o);
  EXPECT_FALSE(d.disturbed);
  EXPECT_DOUBLE_EQ(d.spread, 1.0 / 20.5);
  EXPECT_DOUBLE_EQ(d.thread_utilization, 0.95);
  EXPECT_EQ(d.why, "");

  d = JudgeDisturbance(RunOf({20, 24, 20}, 1.9), o);  // one preempted request
  EXPECT_TRUE(d.disturbed);
  EXPECT_EQ(d.why, "request times spread 20% (max 10%)");

  d = JudgeDisturbance(RunOf({20, 20, 20}, 0.6), o);  // starved: 30% of 2 threads
  EXPECT_TRUE(d.disturbed);
  EXPECT_DOUBLE_EQ(d.spread, 0);
  EXPECT_DOUBLE_EQ(d.thread_utilization, 0.3);
  EXPECT_EQ(d.why, "the engine used 30% of its 2 threads (min 50%)");

  d = JudgeDisturbance(RunOf({20, 24, 20}, 0.6), o);
  EXPECT_EQ(d.why,
            "request times spread 20% (max 10%); the engine used 30% of its 2 threads (min 50%)");

  o.min_thread_utilization = 0;  // a GPU: the host thread waits
  EXPECT_FALSE(JudgeDisturbance(RunOf({20, 20, 20}, 0.6), o).disturbed);
  // An engine that cannot tell its CPU time is judged on spread alone.
  o.min_thread_utilization = 0.5;
  d = JudgeDisturbance(RunOf({20, 20, 20}, 0), o);
  EXPECT_FALSE(d.disturbed);
  EXPECT_EQ(d.thread_utilization, 0);
}

// A verify of many requests judges a percentile: one slow request of 20 is part of what it
// measures, and only the interquartile spread (spread_quantile 0.75) leaves it calm.
TEST(CalmServingTest, InterquartileSpreadIgnoresASingleOutlier) {
  std::vector<double> t(20, 20.0);
  for (size_t i = 0; i < t.size(); ++i) t[i] += 0.1 * static_cast<double>(i % 5);
  t[7] = 60;
  const ServedModel s = RunOf(t, 1);
  CalmServingOptions o;
  EXPECT_DOUBLE_EQ(RequestSpread(s), (60 - 20) / 20.2);
  EXPECT_TRUE(JudgeDisturbance(s, o).disturbed);
  o.spread_quantile = 0.75;
  EXPECT_NEAR(RequestSpread(s, 0.75), (20.3 - 20.1) / 20.2, 1e-12);
  EXPECT_FALSE(JudgeDisturbance(s, o).disturbed);
  // Interference through a quarter of the run is not an outlier any more.
  for (int i = 0; i < 6; ++i) t[i] = 26;
  EXPECT_TRUE(JudgeDisturbance(RunOf(t, 1), o).disturbed);
}

TEST(CalmServingTest, ServesAgainUntilCalm) {
  std::vector<ServedModel> runs = {RunOf({20, 30, 20}, 1), RunOf({22, 22, 22}, 1),
                                   RunOf({21, 21, 21}, 1)};
  int served = 0;
  auto serve = [&]() -> absl::StatusOr<ServedModel> { return runs[served++]; };
  absl::StatusOr<CalmServed> r = ServeUntilCalm(serve, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(served, 2);
  EXPECT_EQ(r->remeasures, 1);
  EXPECT_EQ(r->kept_try, 1);
  EXPECT_FALSE(r->disturbance.disturbed);
  EXPECT_EQ(r->served.requests[0].request_ms, 22);
}

TEST(CalmServingTest, KeepsTheCalmestWhenInterferencePersists) {
  std::vector<ServedModel> runs = {RunOf({20, 30, 20}, 1), RunOf({20, 24, 20}, 1),
                                   RunOf({20, 26, 20}, 1)};
  int served = 0;
  auto serve = [&]() -> absl::StatusOr<ServedModel> { return runs[served++]; };
  absl::StatusOr<CalmServed> r = ServeUntilCalm(serve, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(served, 3);
  EXPECT_EQ(r->remeasures, 2);
  EXPECT_EQ(r->kept_try, 1);
  EXPECT_TRUE(r->disturbance.disturbed);
  EXPECT_EQ(r->disturbance.why, "request times spread 20% (max 10%)");
}

TEST(CalmServingTest, ErrorsAndEmptyRunsAreReturned) {
  auto failing = []() -> absl::StatusOr<ServedModel> {
    return absl::FailedPreconditionError("llama.cpp killed by signal 6");
  };
  EXPECT_THAT(ServeUntilCalm(failing, {}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("signal 6")));
  auto empty = []() -> absl::StatusOr<ServedModel> { return ServedModel{}; };
  EXPECT_THAT(ServeUntilCalm(empty, {}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("timed no request")));
  CalmServingOptions bad;
  bad.max_spread = 0;
  EXPECT_THAT(ValidateCalmServingOptions(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_spread > 0")));
  bad = {};
  bad.spread_quantile = 0.5;
  EXPECT_THAT(ValidateCalmServingOptions(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("spread_quantile")));
  EXPECT_TRUE(ValidateCalmServingOptions({}).ok());
}

}  // namespace
}  // namespace tailor::costmodel
