// ENTROPY_CODE through real processes: a coordinator, a CPU profiler agent (autotune,
// verify) and the local launcher's tailor-worker (select) on a barely trained parent, with a
// weight budget below the parent's dense f32 size so coding is required. The package must
// fit the budget and serve greedy outputs identical to its dense twin.
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace tailor::e2e {
namespace {

std::string Contract(const std::string& parent) {
  return absl::StrCat(
      "name: \"entropy\"\nmethod: ENTROPY_CODE\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 }\n",
      "budget { weight_memory_mib_max: 3 }\n",
      "entropy { symbols_per_codeword: [1, 2] table_log: [10, 12] chunk_width: [1024, 4096] }\n");
}

TEST(EntropyE2E, AutotuneSelectVerifyWithinBudget) {
  Cluster cluster("entropy", Cluster::WithProductionLeases());
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu0", {"--verify-repetitions", "3", "--verify-task-samples", "2"});

  const std::string id =
      cluster.Submit(cluster.WriteFile("entropy.textproto", Contract(parent)), "entropy-1");
  ASSERT_FALSE(id.empty());
  const bool done = cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Minutes(5));
  nlohmann::json campaign = cluster.Status(id);
  ASSERT_TRUE(done) << campaign.dump(2);
  for (const char* key : {"autotune", "select", "verify"}) {
    EXPECT_EQ(JobOf(campaign, key)["state"], "JOB_SUCCEEDED") << key;
  }
  const nlohmann::json tune = JobOf(campaign, "autotune")["output"]["detail"];
  EXPECT_EQ(tune["weight_format"], "keep");
  EXPECT_EQ(tune["frontiers_digest"].get<std::string>().size(), 64u);
  const nlohmann::json select = JobOf(campaign, "select")["output"];
  EXPECT_EQ(select["package_digest"].get<std::string>().size(), 64u);
  EXPECT_GT(Int64Of(select["detail"]["coded_tensors"]), 0);  // the budget forces coding
  EXPECT_EQ(select["detail"]["exact"], true);

  nlohmann::json r = cluster.Report(id);
  ASSERT_FALSE(r.is_null());
  const nlohmann::json& e = r["details"]["entropy"];
  EXPECT_EQ(e["outputs_identical"], true) << e.dump(2);
  EXPECT_EQ(e["fused_equals_dense"], true);
  EXPECT_GT(e["prompts_compared"].get<double>(), 0);
  EXPECT_LE(e["resident_bytes"].get<double>(), 3.0 * (1 << 20));
  EXPECT_LT(e["bits_per_weight"].get<double>(), 32.0);
  EXPECT_LT(e["entropy_bits_per_weight"].get<double>(), e["bits_per_weight"].get<double>());
  ASSERT_FALSE(e["tensors"].empty());
  bool weight_budget = false;
  for (const auto& b : r["budgets"]) {
    if (b["resource"] == "weight_memory_mib") {
      weight_budget = true;
      EXPECT_EQ(b["met"], true) << b.dump();
      EXPECT_LE(b["measured"].get<double>(), 3.0);
    }
  }
  EXPECT_TRUE(weight_budget) << r.dump(2);

  RunResult text = cluster.Cli({"report", id});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, ::testing::HasSubstr("entropy coding"));
  EXPECT_THAT(text.out, ::testing::HasSubstr("greedy outputs"));
  EXPECT_THAT(text.out, ::testing::HasSubstr("identical ("));
}

}  // namespace
}  // namespace tailor::e2e
