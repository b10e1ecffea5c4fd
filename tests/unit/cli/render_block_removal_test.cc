// The block-removal section of `tailor report`: spectrum table, ground state, parent loss,
// CBO vs Block Influence, and the M search of a budget-driven campaign.
#include "methods/block_removal/render.h"

#include "cli/render.h"

#include <google/protobuf/util/json_util.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tailor::methods {
namespace {

using cli::RenderOptions;
using cli::RenderReport;

using ::testing::HasSubstr;

v1::CampaignReport ReportWith(const std::string& details_json) {
  v1::CampaignReport r;
  r.set_campaign_id("c1");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(details_json, &s).ok())
      << details_json;
  (*r.mutable_details()->mutable_fields())["block_removal"].mutable_struct_value()->Swap(&s);
  return r;
}

const char kEvaluated[] = R"({
  "blocks": 8, "blocks_to_remove": 2, "removed_fraction": 0.25, "m_source": "contract",
  "solver": "exact", "solve_seconds": 0.0000426, "states_total": 28,
  "ground_state": {"energy": 0.005927, "removed_layers": [6, 7], "loss": 0.4829},
  "spectrum": [
    {"rank": 0, "level": 0, "removed_layers": [6, 7], "energy": 0.005927,
     "gap_to_ground": 0, "loss": 0.4829, "chosen": false},
    {"rank": 1, "level": 1, "removed_layers": [5, 6], "energy": 0.00719,
     "gap_to_ground": 0.001263, "loss": 0.498, "chosen": false},
    {"rank": 2, "level": 2, "removed_layers": [5, 7], "energy": 0.008759,
     "gap_to_ground": 0.002832, "loss": 0.444, "chosen": true}],
  "chosen": {"rank": 2, "level": 2, "removed_layers": [5, 7], "energy": 0.008759,
             "gap_to_ground": 0.002832, "loss": 0.444},
  "baseline": {"method": "block_influence", "removed_layers": [4, 7], "energy": 0.02,
               "gap_to_ground": 0.014073, "loss": 0.5, "same_as_chosen": false},
  "comparison": {"cbo_loss": 0.444, "baseline_loss": 0.5, "loss_difference": 0.056,
                 "beats_baseline": true},
  "parent_loss": 0.3652, "held_out_samples": 96})";

TEST(RenderBlockRemovalTest, SpectrumTableAndBaselineLine) {
  EXPECT_EQ(RenderBlockRemoval(ReportWith(kEvaluated), RenderOptions{}),
            "\n"
            "block removal: 2 of 8 blocks (25%), M from the contract; solver exact, 28 states, "
            "4.26e-05 s\n"
            "      RANK  BLOCKS REMOVED    ENERGY  GAP TO GROUND  EVAL LOSS  CHOSEN\n"
            "0 (ground)  6,7             0.005927              0     0.4829\n"
            "         1  5,6              0.00719       0.001263      0.498\n"
            "         2  5,7             0.008759       0.002832      0.444  *\n"
            "parent eval loss 0.3652 on 96 held-out samples\n"
            "CBO (rank 2, blocks 5,7) eval loss 0.444 vs Block Influence (blocks 4,7, energy "
            "0.02) eval loss 0.5 at M=2: CBO better by 0.056\n");
}

TEST(RenderBlockRemovalTest, SameBlocksAndNotYetEvaluated) {
  std::string same = kEvaluated;
  same.replace(same.find("\"same_as_chosen\": false"), 23, "\"same_as_chosen\": true");
  EXPECT_THAT(RenderBlockRemoval(ReportWith(same), RenderOptions{}),
              HasSubstr("at M=2: same blocks\n"));
  const std::string solved_only = R"({
    "blocks": 8, "blocks_to_remove": 2, "removed_fraction": 0.25, "m_source": "contract",
    "solver": "exact", "solve_seconds": 0.5, "states_total": 28,
    "ground_state": {"energy": 0.5, "removed_layers": [6, 7]},
    "spectrum": [{"rank": 0, "level": 0, "removed_layers": [6, 7], "energy": 0.5,
                  "gap_to_ground": 0, "chosen": false}],
    "baseline": {"method": "block_influence", "removed_layers": [4, 7], "energy": 2,
                 "gap_to_ground": 1.5}})";
  const std::string out = RenderBlockRemoval(ReportWith(solved_only), RenderOptions{});
  EXPECT_THAT(out, HasSubstr("0 (ground)  6,7                0.5              0          -\n"));
  EXPECT_THAT(out, HasSubstr("Block Influence at M=2: blocks 4,7, energy 2 (not evaluated yet)\n"));
}

TEST(RenderBlockRemovalTest, BudgetDrivenShowsTheMSearchAndAnUnkeptGround) {
  const std::string budget = R"({
    "blocks": 4, "blocks_to_remove": 2, "removed_fraction": 0.5, "m_source": "budget",
    "m_search": [{"m": 1, "states": 4, "fitting": 0, "min_latency_ms": 11.25,
                  "min_memory_mib": 3.5},
                 {"m": 2, "states": 4, "fitting": 1, "min_latency_ms": 9,
                  "min_memory_mib": 3}],
    "solver": "exact", "solve_seconds": 0.25, "states_total": 6,
    "ground_state": {"energy": 0.125, "removed_layers": [0, 1]},
    "spectrum": [{"rank": 0, "level": 0, "removed_layers": [2, 3], "energy": 0.5,
                  "gap_to_ground": 0.375, "loss": 1.5, "chosen": true}]})";
  const std::string out = RenderBlockRemoval(ReportWith(budget), RenderOptions{});
  EXPECT_THAT(out, HasSubstr("block removal: 2 of 4 blocks (50%), M chosen by the budget;"));
  EXPECT_THAT(out, HasSubstr("  M=1: 0/4 states fit (best predicted 11.25 ms, 3.5 MiB)\n"
                             "  M=2: 1/4 states fit (best predicted 9 ms, 3 MiB)\n"));
  EXPECT_THAT(out, HasSubstr("ground state (not within the budget): blocks 0,1, energy 0.125\n"));
}

// Staged removal: the spectrum is the first stage's (1 block), a table of stages follows and
// the comparison names the final set.
TEST(RenderBlockRemovalTest, StagedRemovalListsItsStages) {
  const std::string staged = R"({
    "blocks": 8, "blocks_to_remove": 2, "removed_fraction": 0.25, "m_source": "contract",
    "solver": "exact", "solve_seconds": 0.00001, "states_total": 8, "stages": 2,
    "stage_blocks": 1,
    "ground_state": {"energy": 0.001, "removed_layers": [7], "loss": 0.41},
    "spectrum": [
      {"rank": 0, "level": 0, "removed_layers": [7], "energy": 0.001, "gap_to_ground": 0,
       "loss": 0.41, "chosen": false},
      {"rank": 1, "level": 1, "removed_layers": [5], "energy": 0.002, "gap_to_ground": 0.001,
       "loss": 0.43, "chosen": false}],
    "stages_detail": [
      {"stage": 1, "added_layers": [7], "removed_layers": [7], "loss": 0.41},
      {"stage": 2, "added_layers": [3], "removed_layers": [3, 7], "loss": 0.47}],
    "chosen": {"removed_layers": [3, 7], "loss": 0.47, "stages": 2},
    "baseline": {"method": "block_influence", "removed_layers": [5, 7], "energy": 0.004,
                 "gap_to_ground": 0.003, "loss": 0.5, "same_as_chosen": false},
    "comparison": {"cbo_loss": 0.47, "baseline_loss": 0.5, "loss_difference": 0.03,
                   "beats_baseline": true},
    "parent_loss": 0.3652, "held_out_samples": 96})";
  EXPECT_EQ(RenderBlockRemoval(ReportWith(staged), RenderOptions{}),
            "\n"
            "block removal: 2 of 8 blocks (25%), M from the contract; solver exact, 8 states, "
            "1e-05 s\n"
            "in 2 stages, gradients recomputed after each; the spectrum is the first stage's "
            "(1 block per state)\n"
            "      RANK  BLOCKS REMOVED  ENERGY  GAP TO GROUND  EVAL LOSS  CHOSEN\n"
            "0 (ground)  7                0.001              0       0.41\n"
            "         1  5                0.002          0.001       0.43\n"
            "STAGE  BLOCKS ADDED  REMOVED SO FAR  EVAL LOSS\n"
            "    1  7             7                    0.41\n"
            "    2  3             3,7                  0.47\n"
            "parent eval loss 0.3652 on 96 held-out samples\n"
            "staged CBO (2 stages, blocks 3,7) eval loss 0.47 vs Block Influence (blocks 5,7, "
            "energy 0.004) eval loss 0.5 at M=2: CBO better by 0.03\n");
}

TEST(RenderBlockRemovalTest, ReportsWithoutDetailsRenderNothing) {
  EXPECT_EQ(RenderBlockRemoval(v1::CampaignReport(), RenderOptions{}), "");
  // The whole report includes the section.
  EXPECT_THAT(RenderReport(ReportWith(kEvaluated), RenderOptions{}),
              HasSubstr("CBO (rank 2, blocks 5,7)"));
}

}  // namespace
}  // namespace tailor::methods
