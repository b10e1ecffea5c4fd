// details["block_removal"]: the spectrum by energy with real losses joined by removal set,
// the chosen state, the ground state, the Block Influence comparison and how M was chosen.
#include "methods/block_removal/report.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "common/job_output.h"
#include "coordinator/report.h"
#include "methods/block_removal/block_removal_results.pb.h"

namespace tailor::coordinator {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using v1::block_removal::EvaluateCandidatesResult;
using v1::block_removal::SolveResult;

// A finished job whose output holds `detail_json` as its T detail and the JobOutput fields
// of `output_json`.
template <typename T>
v1::Job JobWith(const std::string& key, const std::string& detail_json,
                const std::string& output_json = "{}") {
  v1::Job j;
  j.set_key(key);
  j.set_state(v1::JOB_SUCCEEDED);
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(output_json, j.mutable_output()).ok())
      << output_json;
  T detail;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(detail_json, &detail).ok())
      << detail_json;
  SetDetail(*j.mutable_output(), detail);
  return j;
}

v1::Job Solve(const std::string& detail_json) {
  return JobWith<SolveResult>("solve", detail_json);
}
v1::Job Eval(const std::string& detail_json, const std::string& output_json = "{}") {
  return JobWith<EvaluateCandidatesResult>("evaluate_candidates", detail_json, output_json);
}

v1::Campaign BlockCampaign() {
  v1::Campaign c;
  c.set_id("c1");
  c.set_state(v1::CAMPAIGN_SUCCEEDED);
  c.mutable_contract()->set_method(v1::BLOCK_REMOVAL);
  return c;
}

// The spectrum is deliberately out of energy order (levels 1 and 2 swapped) to check the
// report sorts; losses are joined by removal set, not by position.
const char kSolve[] = R"({
  "blocks": 8, "blocks_to_remove": 2, "solver": "exact", "solve_seconds": 0.5,
  "states_total": 28, "budget_driven": false,
  "spectrum": [
    {"level": 0, "energy": 0.25, "removed_layers": [6, 7]},
    {"level": 2, "energy": 1.5, "removed_layers": [5, 7]},
    {"level": 1, "energy": 0.75, "removed_layers": [5, 6],
     "predicted": {"latency_ms": 12.5}}],
  "baseline": {"method": "block_influence", "removed_layers": [5, 7], "energy": 1.5}})";

const char kEval[] = R"({
  "candidates": [
    {"level": 0, "energy": 0.25, "loss": 0.5, "removed_layers": [6, 7]},
    {"level": 1, "energy": 1.5, "loss": 0.375, "removed_layers": [5, 7]},
    {"level": 2, "energy": 0.75, "loss": 0.625, "removed_layers": [5, 6]}],
  "chosen_level": 1, "loss": 0.375, "removed_layers": [5, 7], "parent_loss": 0.25,
  "held_out_samples": 96,
  "baseline": {"method": "block_influence", "removed_layers": [5, 7], "energy": 1.5,
               "loss": 0.375}})";
// evaluate_candidates' JobOutput fields: the student it built.
const char kEvalOutput[] = R"({
  "architecture": "hidden=128 | L5 mlp removed",
  "layers": ["attention", "mlp removed"], "parameters": 1000})";

const Struct& Details(const v1::CampaignReport& r) {
  return r.details().fields().at("block_removal").struct_value();
}
double Num(const Struct& s, const std::string& k) { return s.fields().at(k).number_value(); }
const Struct& Row(const Struct& d, int i) {
  return d.fields().at("spectrum").list_value().values(i).struct_value();
}
std::vector<int> Blocks(const Struct& s) {
  std::vector<int> out;
  for (const Value& v : s.fields().at("removed_layers").list_value().values()) {
    out.push_back(static_cast<int>(v.number_value()));
  }
  return out;
}

TEST(ReportBlockRemovalTest, SpectrumLossesChosenAndBaseline) {
  v1::CampaignReport r =
      BuildReport(BlockCampaign(), {Solve(kSolve), Eval(kEval, kEvalOutput)}, {});
  const Struct& d = Details(r);
  EXPECT_EQ(Num(d, "blocks"), 8);
  EXPECT_EQ(Num(d, "blocks_to_remove"), 2);
  EXPECT_EQ(Num(d, "removed_fraction"), 0.25);
  EXPECT_EQ(d.fields().at("m_source").string_value(), "contract");
  EXPECT_FALSE(d.fields().contains("m_search"));
  EXPECT_EQ(d.fields().at("solver").string_value(), "exact");
  EXPECT_EQ(Num(d, "states_total"), 28);
  EXPECT_EQ(Num(d, "parent_loss"), 0.25);
  EXPECT_EQ(Num(d, "held_out_samples"), 96);

  ASSERT_EQ(d.fields().at("spectrum").list_value().values_size(), 3);
  const std::vector<std::vector<int>> blocks = {{6, 7}, {5, 6}, {5, 7}};
  const double energy[] = {0.25, 0.75, 1.5}, gap[] = {0, 0.5, 1.25};
  const double loss[] = {0.5, 0.625, 0.375}, level[] = {0, 1, 2};
  for (int i = 0; i < 3; ++i) {
    const Struct& row = Row(d, i);
    EXPECT_EQ(Num(row, "rank"), i);
    EXPECT_EQ(Num(row, "level"), level[i]);
    EXPECT_EQ(Blocks(row), blocks[i]);
    EXPECT_EQ(Num(row, "energy"), energy[i]);
    EXPECT_EQ(Num(row, "gap_to_ground"), gap[i]);
    EXPECT_EQ(Num(row, "loss"), loss[i]);
    EXPECT_EQ(row.fields().at("chosen").bool_value(), i == 2);
  }
  EXPECT_EQ(Num(Row(d, 1).fields().at("predicted").struct_value(), "latency_ms"), 12.5);

  const Struct& ground = d.fields().at("ground_state").struct_value();
  EXPECT_EQ(Num(ground, "energy"), 0.25);
  EXPECT_EQ(Blocks(ground), (std::vector<int>{6, 7}));
  EXPECT_EQ(Num(ground, "loss"), 0.5);

  const Struct& chosen = d.fields().at("chosen").struct_value();
  EXPECT_EQ(Num(chosen, "rank"), 2);
  EXPECT_EQ(Num(chosen, "loss"), 0.375);
  EXPECT_EQ(Num(chosen, "gap_to_ground"), 1.25);
  EXPECT_FALSE(chosen.fields().contains("chosen"));

  const Struct& b = d.fields().at("baseline").struct_value();
  EXPECT_EQ(b.fields().at("method").string_value(), "block_influence");
  EXPECT_EQ(Blocks(b), (std::vector<int>{5, 7}));
  EXPECT_EQ(Num(b, "loss"), 0.375);
  EXPECT_EQ(Num(b, "gap_to_ground"), 1.25);
  EXPECT_TRUE(b.fields().at("same_as_chosen").bool_value());

  const Struct& cmp = d.fields().at("comparison").struct_value();
  EXPECT_EQ(Num(cmp, "cbo_loss"), 0.375);
  EXPECT_EQ(Num(cmp, "baseline_loss"), 0.375);
  EXPECT_EQ(Num(cmp, "loss_difference"), 0);
  EXPECT_TRUE(cmp.fields().at("beats_baseline").bool_value());

  // The student's architecture comes from evaluate_candidates (solve chose no model).
  EXPECT_EQ(r.architecture().fields().at("description").string_value(),
            "hidden=128 | L5 mlp removed");
  EXPECT_EQ(r.architecture().fields().at("parameters").number_value(), 1000);
  // The jobs' outputs stay beside the summary.
  EXPECT_TRUE(r.outputs().contains("solve"));
  EXPECT_TRUE(r.outputs().contains("evaluate_candidates"));
}

TEST(ReportBlockRemovalTest, BeforeEvaluationOnlyEnergies) {
  v1::CampaignReport r = BuildReport(BlockCampaign(), {Solve(kSolve)}, {});
  const Struct& d = Details(r);
  ASSERT_EQ(d.fields().at("spectrum").list_value().values_size(), 3);
  EXPECT_FALSE(Row(d, 0).fields().contains("loss"));
  EXPECT_FALSE(Row(d, 0).fields().at("chosen").bool_value());
  EXPECT_FALSE(d.fields().contains("chosen"));
  EXPECT_FALSE(d.fields().contains("comparison"));
  const Struct& b = d.fields().at("baseline").struct_value();
  EXPECT_FALSE(b.fields().contains("loss"));
  EXPECT_FALSE(b.fields().contains("same_as_chosen"));
  EXPECT_EQ(Num(b, "energy"), 1.5);
}

TEST(ReportBlockRemovalTest, BudgetDrivenMAndAGroundStateOutsideTheBudget) {
  v1::Campaign c = BlockCampaign();
  c.mutable_contract()->mutable_budget()->set_latency_ms_max(10);
  const char solve[] = R"({
    "blocks": 4, "blocks_to_remove": 2, "solver": "exact", "states_total": 6,
    "budget_driven": true, "ground_energy": 0.125, "ground_removed_layers": [0, 1],
    "m_search": [{"m": 1, "states": 4, "fitting": 0, "min_latency_ms": 11},
                 {"m": 2, "states": 4, "fitting": 1, "min_latency_ms": 9}],
    "spectrum": [{"level": 0, "energy": 0.5, "removed_layers": [2, 3]}],
    "baseline": {"method": "block_influence", "removed_layers": [1, 3], "energy": 2}})";
  const char eval[] = R"({
    "candidates": [{"level": 0, "energy": 0.5, "loss": 1.5, "removed_layers": [2, 3]}],
    "loss": 1.5, "removed_layers": [2, 3],
    "baseline": {"method": "block_influence", "removed_layers": [1, 3], "energy": 2,
                 "loss": 2.5}})";
  v1::CampaignReport r =
      BuildReport(c, {Solve(solve), Eval(eval)}, {});
  const Struct& d = Details(r);
  EXPECT_EQ(d.fields().at("m_source").string_value(), "budget");
  EXPECT_EQ(d.fields().at("m_search").list_value().values_size(), 2);
  EXPECT_EQ(Num(d.fields().at("budget").struct_value(), "latency_ms_max"), 10);
  EXPECT_EQ(Num(Row(d, 0), "gap_to_ground"), 0.375);  // 0.5 - the unkept ground 0.125
  const Struct& ground = d.fields().at("ground_state").struct_value();
  EXPECT_EQ(Blocks(ground), (std::vector<int>{0, 1}));
  EXPECT_FALSE(ground.fields().contains("loss"));  // not evaluated: outside the budget
  const Struct& cmp = d.fields().at("comparison").struct_value();
  EXPECT_EQ(Num(cmp, "loss_difference"), 1);
  EXPECT_TRUE(cmp.fields().at("beats_baseline").bool_value());
  EXPECT_FALSE(d.fields().at("baseline").struct_value().fields().at("same_as_chosen")
                   .bool_value());
}

// Staged removal: the spectrum is the first stage's, so its row marked chosen is the first
// stage's pick ([6, 7]); `chosen` is the final set with the number of stages, and the
// comparison uses the final loss.
TEST(ReportBlockRemovalTest, StagedRemovalMarksTheFirstStagePickAndReportsTheFinalSet) {
  const char solve[] = R"({
    "blocks": 8, "blocks_to_remove": 4, "stages": 2, "stage_blocks": 2, "solver": "exact",
    "solve_seconds": 0.5, "states_total": 28, "budget_driven": false,
    "spectrum": [
      {"level": 0, "energy": 0.25, "removed_layers": [6, 7]},
      {"level": 1, "energy": 0.75, "removed_layers": [5, 6]}],
    "baseline": {"method": "block_influence", "removed_layers": [2, 5, 6, 7], "energy": 3}})";
  const char eval[] = R"({
    "candidates": [
      {"level": 0, "energy": 0.25, "loss": 0.5, "removed_layers": [6, 7]},
      {"level": 1, "energy": 0.75, "loss": 0.625, "removed_layers": [5, 6]}],
    "chosen_level": 0, "loss": 0.875, "removed_layers": [1, 3, 6, 7], "parent_loss": 0.25,
    "held_out_samples": 96,
    "stages": [
      {"stage": 1, "added_layers": [6, 7], "removed_layers": [6, 7], "loss": 0.5},
      {"stage": 2, "added_layers": [1, 3], "removed_layers": [1, 3, 6, 7], "loss": 0.875}],
    "baseline": {"method": "block_influence", "removed_layers": [2, 5, 6, 7], "energy": 3,
                 "loss": 1.0}})";
  v1::CampaignReport r = BuildReport(BlockCampaign(), {Solve(solve), Eval(eval)}, {});
  const Struct& d = Details(r);
  EXPECT_EQ(Num(d, "stages"), 2);
  EXPECT_EQ(Num(d, "stage_blocks"), 2);
  EXPECT_EQ(d.fields().at("stages_detail").list_value().values_size(), 2);
  EXPECT_TRUE(Row(d, 0).fields().at("chosen").bool_value());
  EXPECT_FALSE(Row(d, 1).fields().at("chosen").bool_value());
  const Struct& chosen = d.fields().at("chosen").struct_value();
  EXPECT_EQ(Blocks(chosen), (std::vector<int>{1, 3, 6, 7}));
  EXPECT_EQ(Num(chosen, "loss"), 0.875);
  EXPECT_EQ(Num(chosen, "stages"), 2);
  EXPECT_FALSE(chosen.fields().contains("rank"));
  const Struct& cmp = d.fields().at("comparison").struct_value();
  EXPECT_EQ(Num(cmp, "cbo_loss"), 0.875);
  EXPECT_EQ(Num(cmp, "baseline_loss"), 1.0);
  EXPECT_EQ(Num(cmp, "loss_difference"), 0.125);
  EXPECT_TRUE(cmp.fields().at("beats_baseline").bool_value());
  EXPECT_FALSE(d.fields().at("baseline").struct_value().fields().at("same_as_chosen").bool_value());
}

TEST(ReportBlockRemovalTest, OtherMethodsAndNoSolveGetNoSummary) {
  v1::Campaign c = BlockCampaign();
  EXPECT_FALSE(BuildReport(c, {}, {}).details().fields().contains("block_removal"));
  c.mutable_contract()->set_method(v1::AUTOCOMPRESS);
  EXPECT_FALSE(BuildReport(c, {Solve(kSolve)}, {})
                   .details()
                   .fields()
                   .contains("block_removal"));
}

}  // namespace
}  // namespace tailor::coordinator
