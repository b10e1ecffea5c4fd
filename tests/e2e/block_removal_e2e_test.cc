// BLOCK_REMOVAL through real processes: a coordinator, a CPU profiler agent and the local
// launcher's tailor-worker jobs run gate_gradients (2 ranks) -> solve -> evaluate_candidates
// -> distill (2 ranks) -> verify on a barely trained parent, then the report shows the
// spectrum of kept states and the Block Influence comparison. A second campaign adds the
// entropy-coded package as the last step.
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace tailor::e2e {
namespace {

// The 6-block student of the tiny parent is 2,081,632 bytes dense (1.985 MiB of f32 weights);
// a budget below that makes the selector code some tensors.
constexpr double kTailBudgetMib = 1.85;

std::string Contract(const std::string& parent) {
  return absl::StrCat(
      "name: \"blocks\"\nmethod: BLOCK_REMOVAL\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "block_removal { blocks_to_remove: 2 calibration_samples: 16 candidates: 4 solver: EXACT "
      "distill: true }\n",
      "recovery { tokens: 1024 batch_sequences: 8 sequence_length: 32 "
      "checkpoint_every_steps: 2 }\n",
      "resources { block_select { ranks_per_node: 2 } distill { ranks_per_node: 2 } }\n");
}

TEST(BlockRemovalE2E, ExactSolveEvaluateDistillVerify) {
  Cluster cluster("blockremoval", Cluster::WithProductionLeases());
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu0", {"--verify-repetitions", "3", "--verify-task-samples", "4"});

  const std::string id =
      cluster.Submit(cluster.WriteFile("blocks.textproto", Contract(parent)), "blocks-1");
  ASSERT_FALSE(id.empty());
  const bool done = cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Minutes(10));
  nlohmann::json campaign = cluster.Status(id);
  ASSERT_TRUE(done) << campaign.dump(2);
  for (const char* key : {"gate_gradients", "solve", "evaluate_candidates", "distill", "verify"}) {
    EXPECT_EQ(JobOf(campaign, key)["state"], "JOB_SUCCEEDED") << key;
  }
  EXPECT_TRUE(JobOf(campaign, "profile").is_null());  // fixed M needs no cost model

  const nlohmann::json grads_out = JobOf(campaign, "gate_gradients")["output"];
  const nlohmann::json& grads = grads_out["detail"];
  EXPECT_EQ(grads_out["world_size"], 2);
  EXPECT_EQ(Int64Of(grads["calibration_samples"]), 16);
  EXPECT_EQ(grads["blocks"], 8);  // the demo parent's 8 blocks
  EXPECT_EQ(grads["fisher_digest"].get<std::string>().size(), 64u);

  const nlohmann::json solve = JobOf(campaign, "solve")["output"]["detail"];
  EXPECT_EQ(solve["solver"], "exact");
  EXPECT_EQ(solve["blocks_to_remove"], 2);
  EXPECT_EQ(solve["states_total"], 28);  // C(8, 2)
  ASSERT_EQ(solve["spectrum"].size(), 4u) << solve.dump(2);
  std::set<std::vector<int>> distinct;
  for (size_t i = 0; i < 4; ++i) {
    const auto& s = solve["spectrum"][i];
    EXPECT_EQ(s["level"], static_cast<int>(i));
    EXPECT_EQ(s["removed_layers"].size(), 2u);
    distinct.insert(s["removed_layers"].get<std::vector<int>>());
    if (i > 0) EXPECT_LE(solve["spectrum"][i - 1]["energy"], s["energy"]);
  }
  EXPECT_EQ(distinct.size(), 4u);
  EXPECT_EQ(solve["baseline"]["removed_layers"].size(), 2u);

  const nlohmann::json eval_out = JobOf(campaign, "evaluate_candidates")["output"];
  const nlohmann::json& eval = eval_out["detail"];
  ASSERT_EQ(eval["candidates"].size(), 4u) << eval.dump(2);
  double best = 1e300;
  for (const auto& c : eval["candidates"]) best = std::min(best, c["loss"].get<double>());
  EXPECT_EQ(eval["loss"].get<double>(), best);
  EXPECT_TRUE(std::isfinite(eval["baseline"]["loss"].get<double>()));
  EXPECT_EQ(eval_out["teacher_digest"], grads_out["teacher_digest"]);
  EXPECT_EQ(eval_out["student_digest"], eval_out["model_digest"]);
  EXPECT_THAT(eval_out["architecture"].get<std::string>(), ::testing::HasSubstr("removed"));
  const nlohmann::json distill = JobOf(campaign, "distill")["output"];
  EXPECT_EQ(distill["student_digest"], eval_out["student_digest"]);
  EXPECT_EQ(distill["model_digest"].get<std::string>().size(), 64u);

  RunResult report = cluster.Cli({"report", id, "--json"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  nlohmann::json r = nlohmann::json::parse(report.out);
  EXPECT_EQ(r["outputs"]["solve"]["detail"]["spectrum"].size(), 4u) << r.dump(2);
  EXPECT_TRUE(r["outputs"]["evaluate_candidates"]["detail"]["baseline"].contains("loss"));
  bool student = false;
  for (const auto& q : r["quality"]) student |= q["model"] == "student";
  EXPECT_TRUE(student) << r.dump(2);

  // The block-removal summary: the kept states by energy with their real losses, the chosen
  // one, and Block Influence at the same M with its own loss.
  const nlohmann::json& br = r["details"]["block_removal"];
  EXPECT_EQ(br["blocks"], 8);
  EXPECT_EQ(br["blocks_to_remove"], 2);
  EXPECT_EQ(br["m_source"], "contract");
  ASSERT_EQ(br["spectrum"].size(), 4u) << br.dump(2);
  int chosen = 0;
  for (size_t i = 0; i < 4; ++i) {
    const auto& s = br["spectrum"][i];
    EXPECT_EQ(s["rank"], static_cast<int>(i));
    if (i > 0) EXPECT_LE(br["spectrum"][i - 1]["energy"], s["energy"]);
    EXPECT_DOUBLE_EQ(s["gap_to_ground"].get<double>(),
                     s["energy"].get<double>() - br["ground_state"]["energy"].get<double>());
    EXPECT_TRUE(std::isfinite(s["loss"].get<double>()));
    chosen += s["chosen"].get<bool>() ? 1 : 0;
  }
  EXPECT_EQ(chosen, 1);
  EXPECT_EQ(br["chosen"]["loss"], eval["loss"]);
  EXPECT_EQ(br["chosen"]["removed_layers"], eval["removed_layers"]);
  EXPECT_EQ(br["baseline"]["method"], "block_influence");
  EXPECT_EQ(br["baseline"]["removed_layers"].size(), 2u);
  EXPECT_EQ(br["baseline"]["loss"], eval["baseline"]["loss"]);
  EXPECT_EQ(br["comparison"]["cbo_loss"], eval["loss"]);
  EXPECT_EQ(br["comparison"]["beats_baseline"], eval["beats_baseline"]);
  EXPECT_EQ(br["parent_loss"], eval["parent_loss"]);

  // `tailor report` (text) shows the table and the comparison line.
  RunResult text = cluster.Cli({"report", id});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, ::testing::HasSubstr("block removal: 2 of 8 blocks (25%)"));
  // (columns are right-aligned to their widest cell, so only the fixed-width tail is exact)
  EXPECT_THAT(text.out, ::testing::HasSubstr("RANK  BLOCKS REMOVED"));
  EXPECT_THAT(text.out, ::testing::HasSubstr("GAP TO GROUND  EVAL LOSS  CHOSEN\n"));
  EXPECT_THAT(text.out, ::testing::HasSubstr("0 (ground)"));
  EXPECT_THAT(text.out, ::testing::HasSubstr("vs Block Influence (blocks "));
  EXPECT_THAT(text.out, ::testing::HasSubstr("architecture: hidden="));
}

// The entropy tail (package { entropy_code: true }): after the student is verified, the agent
// autotunes its codes, a worker selects them under the weight budget and the agent verifies
// the package against its dense twin. No distillation, to keep the run short.
TEST(BlockRemovalE2E, EntropyCodedPackageTail) {
  Cluster cluster("blockremoval-entropy", Cluster::WithProductionLeases());
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu0", {"--verify-repetitions", "3", "--verify-task-samples", "2"});
  const std::string contract = absl::StrCat(
      "name: \"blocks-packaged\"\nmethod: BLOCK_REMOVAL\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { weight_memory_mib_max: ", kTailBudgetMib, " }\n",
      "block_removal { blocks_to_remove: 2 calibration_samples: 16 candidates: 2 solver: EXACT "
      "distill: false }\n",
      "package { entropy_code: true }\n",
      "entropy { symbols_per_codeword: [1, 2] table_log: [10] chunk_width: [1024] }\n");
  const std::string id =
      cluster.Submit(cluster.WriteFile("packaged.textproto", contract), "packaged-1");
  ASSERT_FALSE(id.empty());
  const bool done = cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Minutes(8));
  nlohmann::json campaign = cluster.Status(id);
  ASSERT_TRUE(done) << campaign.dump(2);
  for (const char* key : {"gate_gradients", "solve", "evaluate_candidates", "verify",
                          "entropy_autotune", "entropy_select", "entropy_verify"}) {
    EXPECT_EQ(JobOf(campaign, key)["state"], "JOB_SUCCEEDED") << key;
  }
  EXPECT_TRUE(JobOf(campaign, "distill").is_null());
  // The package is built from the verified student, not from the parent.
  const nlohmann::json eval = JobOf(campaign, "evaluate_candidates")["output"];
  const nlohmann::json select_out = JobOf(campaign, "entropy_select")["output"];
  const nlohmann::json& select = select_out["detail"];
  EXPECT_EQ(select["source_model_digest"], eval["model_digest"]) << select.dump(2);
  EXPECT_GT(Int64Of(select["dense_bytes"]), kTailBudgetMib * (1 << 20)) << select.dump(2);
  EXPECT_GT(Int64Of(select["coded_tensors"]), 0) << select.dump(2);
  EXPECT_LE(Int64Of(select["resident_bytes"]), kTailBudgetMib * (1 << 20));
  EXPECT_EQ(select["exact"], true);

  nlohmann::json r = cluster.Report(id);
  ASSERT_FALSE(r.is_null());
  const nlohmann::json& e = r["details"]["entropy"];
  EXPECT_EQ(e["outputs_identical"], true) << e.dump(2);
  EXPECT_EQ(e["fused_equals_dense"], true) << e.dump(2);
  EXPECT_LE(e["resident_bytes"].get<double>(), kTailBudgetMib * (1 << 20));
  // The block-removal summary is still there beside the package's.
  EXPECT_EQ(r["details"]["block_removal"]["blocks_to_remove"], 2) << r.dump(2);
  // The weight budget is judged on the package alone (the plain student exceeds it).
  ASSERT_EQ(r["budgets"].size(), 1u) << r.dump(2);
  const nlohmann::json& b = r["budgets"][0];
  EXPECT_EQ(b["resource"], "weight_memory_mib (package)");
  EXPECT_EQ(b["met"], true) << b.dump();
  EXPECT_LE(b["measured"].get<double>(), kTailBudgetMib);
  EXPECT_EQ(b["predicted"].get<double>(),
            select_out["predicted"]["weight_memory_mib"].get<double>());
}

// block_removal { stages: 2 }: solve chooses the first block among the k lowest states,
// evaluate_candidates recomputes the gate gradients on the 7-block model (2 ranks) and adds
// the second; the report lists both stages and compares the final set with Block Influence
// at M = 2.
TEST(BlockRemovalE2E, StagedRemovalRecomputesGradientsBetweenStages) {
  Cluster cluster("blockremoval-staged", Cluster::WithProductionLeases());
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu0", {"--verify-repetitions", "3", "--verify-task-samples", "2"});
  const std::string contract = absl::StrCat(
      "name: \"blocks-staged\"\nmethod: BLOCK_REMOVAL\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "block_removal { blocks_to_remove: 2 stages: 2 calibration_samples: 16 candidates: 3 "
      "solver: EXACT distill: false }\n",
      "resources { block_select { ranks_per_node: 2 } }\n");
  const std::string id = cluster.Submit(cluster.WriteFile("staged.textproto", contract), "st-1");
  ASSERT_FALSE(id.empty());
  const bool done = cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Minutes(8));
  nlohmann::json campaign = cluster.Status(id);
  ASSERT_TRUE(done) << campaign.dump(2);

  const nlohmann::json solve = JobOf(campaign, "solve")["output"]["detail"];
  EXPECT_EQ(solve["blocks_to_remove"], 2);
  EXPECT_EQ(solve["stages"], 2);
  EXPECT_EQ(solve["stage_blocks"], 1);
  EXPECT_EQ(solve["states_total"], 8);  // C(8, 1)
  ASSERT_EQ(solve["spectrum"].size(), 3u) << solve.dump(2);
  for (const auto& st : solve["spectrum"]) EXPECT_EQ(st["removed_layers"].size(), 1u);
  EXPECT_EQ(solve["baseline"]["removed_layers"].size(), 2u);  // Block Influence at the full M

  const nlohmann::json eval_out = JobOf(campaign, "evaluate_candidates")["output"];
  const nlohmann::json& eval = eval_out["detail"];
  ASSERT_EQ(eval["stages"].size(), 2u) << eval.dump(2);
  const nlohmann::json& s1 = eval["stages"][0];
  const nlohmann::json& s2 = eval["stages"][1];
  EXPECT_EQ(s1["stage"], 1);
  EXPECT_EQ(s1["removed_layers"].size(), 1u);
  EXPECT_EQ(s1["candidates"], 3);
  EXPECT_EQ(s2["stage"], 2);
  ASSERT_EQ(s2["added_layers"].size(), 1u);
  EXPECT_NE(s2["added_layers"][0], s1["removed_layers"][0]);
  EXPECT_EQ(s2["removed_layers"].size(), 2u);
  EXPECT_EQ(s2["candidates"], 3);  // 7 blocks left, k = 3
  EXPECT_EQ(eval["removed_layers"], s2["removed_layers"]);
  EXPECT_EQ(eval["loss"], s2["loss"]);
  EXPECT_EQ(eval["beats_baseline"],
            eval["loss"].get<double>() <= eval["baseline"]["loss"].get<double>());
  EXPECT_THAT(eval_out["architecture"].get<std::string>(), ::testing::HasSubstr("removed"));

  nlohmann::json r = cluster.Report(id);
  ASSERT_FALSE(r.is_null());
  const nlohmann::json& br = r["details"]["block_removal"];
  EXPECT_EQ(br["stages"], 2);
  EXPECT_EQ(br["stages_detail"].size(), 2u) << br.dump(2);
  EXPECT_EQ(br["chosen"]["removed_layers"], eval["removed_layers"]);
  EXPECT_EQ(br["chosen"]["stages"], 2);
  EXPECT_EQ(br["comparison"]["cbo_loss"], eval["loss"]);
  RunResult text = cluster.Cli({"report", id});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, ::testing::HasSubstr("in 2 stages, gradients recomputed after each"));
  EXPECT_THAT(text.out, ::testing::HasSubstr("STAGE  BLOCKS ADDED"));
  EXPECT_THAT(text.out, ::testing::HasSubstr("staged CBO (2 stages, blocks "));
}

}  // namespace
}  // namespace tailor::e2e
