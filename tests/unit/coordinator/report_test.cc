// BuildReport: budgets from the chooser's prediction and verify's measurement, quality rows
// merged from verify (accuracy) and distill (KD loss), the architecture in either form.
#include "coordinator/report.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "methods/legacy_results.h"

namespace tailor::coordinator {
namespace {

// A finished job whose output is `result_json` written the schema-5 way (one flat object),
// typed by the same conversion storage migration 6 applies.
v1::Job JobWith(const std::string& key, const std::string& result_json) {
  static const auto* kinds = new std::map<std::string, std::string>{
      {"entropy_select", "select"},
      {"entropy_verify", "verify"},
      {"distill_baseline", "distill"},
      {"verify_baseline", "verify"}};
  v1::Job j;
  j.set_key(key);
  j.set_kind(kinds->count(key) ? kinds->at(key) : key);
  j.set_state(v1::JOB_SUCCEEDED);
  google::protobuf::Struct result;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result_json, &result).ok())
      << result_json;
  absl::StatusOr<v1::JobOutput> output = methods::UpgradeLegacyResult(j.kind(), result);
  EXPECT_TRUE(output.ok()) << output.status();
  if (output.ok()) *j.mutable_output() = *output;
  return j;
}

v1::Campaign Campaign() {
  v1::Campaign c;
  c.set_id("c1");
  c.set_state(v1::CAMPAIGN_SUCCEEDED);
  // The method names the job that chose the student (methods/autocompress: search).
  c.mutable_contract()->set_method(v1::AUTOCOMPRESS);
  c.mutable_contract()->mutable_budget()->set_latency_ms_max(40);
  c.mutable_contract()->mutable_budget()->set_memory_mib_max(64);
  return c;
}

TEST(ReportTest, AutocompressBudgetsQualityAndArchitecture) {
  std::vector<v1::Job> jobs = {
      JobWith("search", R"({"predicted": {"latency_ms": 38.5, "memory_mib": 3.25},
                            "architecture": "hidden=96 | attention heads=2",
                            "layers": ["attention heads=2", "mlp ffn=128"],
                            "parameters": 51234, "search_tokens": 1024000})"),
      JobWith("distill", R"({"kd_loss": 0.125, "recovery_tokens": 2000000,
                             "model_digest": "ab"})"),
      JobWith("verify", R"({"measured": {"latency_ms": 41.0, "memory_mib": 3.5},
                            "quality": {"task_accuracy": 0.5, "parameters": 51234},
                            "parent_quality": {"task_accuracy": 0.625, "parameters": 90000}})"),
      JobWith("distill_baseline", R"({"kd_loss": 0.25})"),
      JobWith("verify_baseline", R"({"quality": {"task_accuracy": 0.375,
                                                 "parameters": 40000}})"),
  };
  v1::CampaignReport r = BuildReport(Campaign(), jobs, {});
  ASSERT_EQ(r.budgets_size(), 2);
  EXPECT_EQ(r.budgets(0).resource(), "latency_ms");
  EXPECT_DOUBLE_EQ(r.budgets(0).predicted(), 38.5);
  EXPECT_DOUBLE_EQ(r.budgets(0).measured(), 41.0);
  EXPECT_FALSE(r.budgets(0).met());  // measured over the ceiling: not met whatever predicted
  EXPECT_EQ(r.budgets(1).resource(), "memory_mib");
  EXPECT_TRUE(r.budgets(1).met());

  ASSERT_EQ(r.quality_size(), 3);
  EXPECT_EQ(r.quality(0).model(), "parent");
  EXPECT_DOUBLE_EQ(r.quality(0).task_accuracy(), 0.625);
  EXPECT_DOUBLE_EQ(r.quality(0).kd_loss(), 0.0);
  EXPECT_EQ(r.quality(1).model(), "student");
  EXPECT_DOUBLE_EQ(r.quality(1).kd_loss(), 0.125);
  EXPECT_DOUBLE_EQ(r.quality(1).task_accuracy(), 0.5);
  EXPECT_EQ(r.quality(2).model(), "baseline");
  EXPECT_DOUBLE_EQ(r.quality(2).kd_loss(), 0.25);
  EXPECT_EQ(r.quality(2).parameters(), 40000);

  EXPECT_EQ(r.architecture().fields().at("description").string_value(),
            "hidden=96 | attention heads=2");
  EXPECT_EQ(r.architecture().fields().at("layers").list_value().values_size(), 2);
  EXPECT_EQ(r.search_tokens(), 1024000);
  EXPECT_EQ(r.recovery_tokens(), 2000000);
  EXPECT_TRUE(r.outputs().contains("verify_baseline"));
}

TEST(ReportTest, MissingMeasurementIsNotMet) {
  std::vector<v1::Job> jobs = {JobWith("search", R"({"predicted": {"latency_ms": 10}})")};
  v1::CampaignReport r = BuildReport(Campaign(), jobs, {});
  ASSERT_EQ(r.budgets_size(), 2);
  EXPECT_FALSE(r.budgets(0).has_measured());
  EXPECT_FALSE(r.budgets(0).met());
  EXPECT_TRUE(std::isnan(r.budgets(1).predicted()));
  EXPECT_EQ(r.quality_size(), 0);
}

// The weight budget of a campaign with the entropy tail is the package's: one row, predicted
// by entropy_select and measured by entropy_verify; the plain student (verify measured 1.985
// MiB, over the budget) is not held to it. Without the tail the student's row is there.
TEST(ReportTest, WeightBudgetOfAPackagedStudentIsThePackages) {
  v1::Campaign c;
  c.set_id("c2");
  c.mutable_contract()->set_method(v1::BLOCK_REMOVAL);
  c.mutable_contract()->mutable_budget()->set_weight_memory_mib_max(1.85);
  std::vector<v1::Job> jobs = {
      JobWith("solve", R"({"predicted": {"weight_memory_mib": 1.985}})"),
      JobWith("verify", R"({"measured": {"weight_memory_mib": 1.985}})"),
      JobWith("entropy_select", R"({"predicted": {"weight_memory_mib": 1.75},
                                    "resident_bytes": 1835008})"),
      JobWith("entropy_verify", R"({"measured": {"weight_memory_mib": 1.75},
                                    "entropy": {"outputs_identical": true}})"),
  };
  c.mutable_contract()->mutable_package()->set_entropy_code(true);
  v1::CampaignReport packaged = BuildReport(c, jobs, {});
  ASSERT_EQ(packaged.budgets_size(), 1);
  EXPECT_EQ(packaged.budgets(0).resource(), "weight_memory_mib (package)");
  EXPECT_DOUBLE_EQ(packaged.budgets(0).predicted(), 1.75);
  EXPECT_DOUBLE_EQ(packaged.budgets(0).measured(), 1.75);
  EXPECT_TRUE(packaged.budgets(0).met());

  c.mutable_contract()->mutable_package()->set_entropy_code(false);
  v1::CampaignReport plain = BuildReport(c, {jobs[0], jobs[1]}, {});
  ASSERT_EQ(plain.budgets_size(), 1);
  EXPECT_EQ(plain.budgets(0).resource(), "weight_memory_mib");
  EXPECT_DOUBLE_EQ(plain.budgets(0).measured(), 1.985);
  EXPECT_FALSE(plain.budgets(0).met());
}

// The uniform baseline's rows: its verify job's judged budgets with the baseline selection's
// prediction (the CLI renders them as they are), or why there is no baseline.
TEST(ReportTest, UniformBaselineBudgetsAreJudgedInTheReport) {
  std::vector<v1::Job> jobs = {
      JobWith("baseline_uniform", R"({"predicted": {"latency_ms": 35}})"),
      JobWith("verify_baseline", R"({"budgets": [{"resource": "latency_ms", "budget": 40,
                                                  "measured": 36.5, "met": true}]})"),
  };
  v1::CampaignReport r = BuildReport(Campaign(), jobs, {});
  ASSERT_EQ(r.baseline_budgets_size(), 1);
  EXPECT_EQ(r.baseline_budgets(0).resource(), "latency_ms");
  EXPECT_DOUBLE_EQ(r.baseline_budgets(0).budget(), 40);
  EXPECT_DOUBLE_EQ(r.baseline_budgets(0).predicted(), 35);
  EXPECT_DOUBLE_EQ(r.baseline_budgets(0).measured(), 36.5);
  EXPECT_TRUE(r.baseline_budgets(0).has_measured());
  EXPECT_TRUE(r.baseline_budgets(0).met());
  EXPECT_EQ(r.baseline_unavailable(), "");

  v1::CampaignReport none = BuildReport(
      Campaign(),
      {JobWith("baseline_uniform", R"({"feasible": false,
                                       "reason": "no uniform architecture of 12 meets"})")},
      {});
  EXPECT_EQ(none.baseline_budgets_size(), 0);
  EXPECT_EQ(none.baseline_unavailable(), "no uniform architecture of 12 meets");
}

}  // namespace
}  // namespace tailor::coordinator
