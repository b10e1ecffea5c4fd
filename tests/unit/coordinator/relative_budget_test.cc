#include "coordinator/relative_budget.h"

#include <cmath>
#include <string>

#include "common/job_output.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;

// The parent as the quickstart's profile measures it in llama.cpp on a fast host: 15
// requests of 128 + 32 tokens, p50 13.9 ms, 2.96 MiB.
v1::ModelCosts Parent() {
  v1::ModelCosts m;
  m.set_latency_ms(13.9);
  m.set_request_p50_ms(13.9);
  m.set_request_p90_ms(15.0);
  m.set_request_p99_ms(16.0);
  m.set_throughput_tokens_per_s(32 * 1000.0 / 13.9);
  m.set_memory_mib(2.96);
  m.set_repetitions(15);
  m.set_latency_statistic("p50 of 15 whole requests; the median of 3 serves of the parent");
  return m;
}

TEST(ResolveRelativeBudgetsTest, FactorsTimesTheParentsFigures) {
  v1::Budget b;
  b.set_latency_vs_parent_max(0.7);
  b.set_memory_vs_parent_max(0.9);
  b.set_throughput_vs_parent_min(1.25);
  absl::StatusOr<v1::Budget> r = ResolveRelativeBudgets(b, Parent());
  ASSERT_THAT(r, IsOk());
  EXPECT_DOUBLE_EQ(r->latency_ms_max(), 0.7 * 13.9);
  EXPECT_DOUBLE_EQ(r->memory_mib_max(), 0.9 * 2.96);
  EXPECT_DOUBLE_EQ(r->throughput_tokens_per_s_min(), 1.25 * 32 * 1000.0 / 13.9);
  EXPECT_DOUBLE_EQ(r->latency_vs_parent_max(), 0.7);  // kept, for the report
  EXPECT_FALSE(r->has_weight_memory_mib_max());
}

TEST(ResolveRelativeBudgetsTest, LatencyAtTheContractsPercentileWithEnoughRequests) {
  v1::Budget b;
  b.set_latency_vs_parent_max(0.5);
  b.set_throughput_vs_parent_min(1);
  b.set_latency_percentile(v1::LATENCY_P90);
  EXPECT_THAT(ResolveRelativeBudgets(b, Parent()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "budget.latency_vs_parent_max: the parent was measured over 15 "
                       "requests, too few for its p90 (needs 50)"));
  v1::Budget throughput_only = b;
  throughput_only.clear_latency_vs_parent_max();
  EXPECT_THAT(ResolveRelativeBudgets(throughput_only, Parent()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "budget.throughput_vs_parent_min: the parent was measured over 15 "
                       "requests, too few for its p90 (needs 50)"));
  v1::ModelCosts parent = Parent();
  parent.set_repetitions(50);
  absl::StatusOr<v1::Budget> r = ResolveRelativeBudgets(b, parent);
  ASSERT_THAT(r, IsOk());
  EXPECT_DOUBLE_EQ(r->latency_ms_max(), 7.5);
  // The same tokens per request over the p90 request.
  EXPECT_DOUBLE_EQ(r->throughput_tokens_per_s_min(), 32 * 1000.0 / 15.0);
}

TEST(ResolveRelativeBudgetsTest, AMissingFigureNamesTheBudget) {
  v1::Budget b;
  b.set_memory_vs_parent_max(0.9);
  v1::ModelCosts parent = Parent();
  parent.clear_memory_mib();
  EXPECT_THAT(ResolveRelativeBudgets(b, parent),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "budget.memory_vs_parent_max: the parent's measurement in the target "
                       "engine has no memory (a cost table profiled before tailor measured "
                       "the parent, or a bad agent result)"));
  v1::Budget latency;
  latency.set_latency_vs_parent_max(0.9);
  parent = Parent();
  parent.set_request_p50_ms(NAN);
  EXPECT_THAT(ResolveRelativeBudgets(latency, parent),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr("has no p50 request latency")));
}

TEST(ResolvedContractTest, UnchangedWithoutAMeasuredParent) {
  v1::DeploymentContract c;
  c.mutable_budget()->set_latency_vs_parent_max(0.7);
  EXPECT_FALSE(ResolvedContract(c, nullptr).budget().has_latency_ms_max());
  v1::ProfileResult profile;
  profile.set_cost_table_id("ct-1");
  EXPECT_FALSE(ResolvedContract(c, &profile).budget().has_latency_ms_max());
  *profile.mutable_parent_measured() = Parent();
  EXPECT_DOUBLE_EQ(ResolvedContract(c, &profile).budget().latency_ms_max(), 0.7 * 13.9);
  v1::DeploymentContract absolute;
  absolute.mutable_budget()->set_latency_ms_max(20);
  EXPECT_DOUBLE_EQ(ResolvedContract(absolute, &profile).budget().latency_ms_max(), 20);
}

TEST(DescribeRelativeBudgetsTest, OneRowPerBudgetResolvedOnceMeasured) {
  v1::Budget b;
  b.set_latency_vs_parent_max(0.7);
  b.set_memory_vs_parent_max(0.9);
  std::vector<v1::RelativeBudget> rows = DescribeRelativeBudgets(b, nullptr);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].resource(), "latency_ms");
  EXPECT_DOUBLE_EQ(rows[0].factor(), 0.7);
  EXPECT_FALSE(rows[0].resolved());
  EXPECT_EQ(rows[1].resource(), "memory_mib");

  v1::ProfileResult profile;
  profile.set_cost_table_id("ct-1");
  *profile.mutable_parent_measured() = Parent();
  rows = DescribeRelativeBudgets(b, &profile);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].resolved());
  EXPECT_DOUBLE_EQ(rows[0].parent(), 13.9);
  EXPECT_DOUBLE_EQ(rows[0].budget(), 0.7 * 13.9);
  EXPECT_EQ(rows[0].cost_table_id(), "ct-1");
  EXPECT_EQ(rows[0].parent_statistic(), Parent().latency_statistic());
  EXPECT_DOUBLE_EQ(rows[1].parent(), 2.96);
  EXPECT_DOUBLE_EQ(rows[1].budget(), 0.9 * 2.96);
  EXPECT_EQ(rows[1].parent_statistic(), "");  // memory is not of the requests
}

TEST(UnresolvableProfileTest, SaysWhyAProfileResultCannotServeTheContract) {
  v1::DeploymentContract c;
  c.mutable_budget()->set_latency_vs_parent_max(0.7);
  v1::JobOutput out;
  v1::ProfileResult profile;
  profile.set_cost_table_id("ct-1");
  SetDetail(out, profile);
  EXPECT_EQ(UnresolvableProfile(c, out),
            "profile result holds no measurement of the parent, which the contract's budgets "
            "relative to the parent need (an agent older than those budgets?)");
  *profile.mutable_parent_measured() = Parent();
  profile.mutable_parent_measured()->set_repetitions(3);
  SetDetail(out, profile);
  EXPECT_EQ(UnresolvableProfile(c, out),
            "profile result: budget.latency_vs_parent_max: the parent was measured over 3 "
            "requests, too few for its p50 (needs 10)");
  profile.mutable_parent_measured()->set_repetitions(15);
  SetDetail(out, profile);
  EXPECT_EQ(UnresolvableProfile(c, out), "");
  v1::DeploymentContract absolute;
  absolute.mutable_budget()->set_latency_ms_max(20);
  EXPECT_EQ(UnresolvableProfile(absolute, v1::JobOutput()), "");
}

TEST(ProfileOfTableTest, CarriesTheTablesFiguresAndItsParent) {
  v1::CostTable t;
  t.set_id("ct-9");
  t.add_entries();
  t.add_entries();
  t.set_t0_ms(1.5);
  t.set_latency_mape(0.03);
  t.set_latency_max_error(0.08);
  t.set_memory_mape(0.01);
  t.set_validated_architectures(12);
  *t.mutable_parent_measured() = Parent();
  const v1::ProfileResult p = ProfileOfTable(t);
  EXPECT_EQ(p.cost_table_id(), "ct-9");
  EXPECT_EQ(p.entries(), 2);
  EXPECT_DOUBLE_EQ(p.t0_ms(), 1.5);
  EXPECT_DOUBLE_EQ(p.latency_max_error(), 0.08);
  EXPECT_EQ(p.validated_architectures(), 12);
  EXPECT_DOUBLE_EQ(p.parent_measured().memory_mib(), 2.96);
}

}  // namespace
}  // namespace tailor::coordinator
