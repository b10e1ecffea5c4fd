// Every method on the Nemotron-H family, through real processes: a tiny NemotronHForCausalLM
// checkpoint (pattern "M*-E": a Mamba-2 layer with 2 B/C groups and a per-group norm, an
// attention layer without RoPE, a relu2 MLP and a sigmoid-routed relu2 MoE with a shared
// expert) is the parent of an AUTOCOMPRESS campaign (with the uniform baseline, under a
// memory ceiling below the parent's) and a BLOCK_REMOVAL campaign run by a real coordinator,
// a CPU profiler agent and 2-rank tailor-worker jobs. Each pruning rule of the variants
// (Mamba heads kept and ranked inside their group, experts ranked per layer, relu2 neurons,
// variants kept by the cost model's grid) is on this path: a wrong one yields a child the
// model refuses and a failed job. docs/model.md, "Pruning rules".
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/testing/hf_test_checkpoint.h"

namespace tailor::e2e {
namespace {

constexpr char kArchitecture[] = "NemotronHForCausalLM";

std::string Autocompress(const std::string& parent) {
  return absl::StrCat(
      "name: \"ac-nemotron-h\"\nmethod: AUTOCOMPRESS\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { latency_ms_max: 5000 memory_mib_max: 0.07 }\n",
      "ranking { calibration_samples: 8 }\n",
      "search { steps: 2 sampled_architectures: 4 batch_sequences: 4 sequence_length: 32 }\n",
      "recovery { tokens: 256 batch_sequences: 4 sequence_length: 32 "
      "checkpoint_every_steps: 2 }\n",
      "compare_uniform_baseline: true\n",
      "resources { search { ranks_per_node: 2 } distill { ranks_per_node: 2 } }\n");
}

std::string BlockRemoval(const std::string& parent) {
  return absl::StrCat(
      "name: \"br-nemotron-h\"\nmethod: BLOCK_REMOVAL\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "block_removal { blocks_to_remove: 1 calibration_samples: 8 candidates: 2 solver: EXACT "
      "distill: true }\n",
      "recovery { tokens: 256 batch_sequences: 4 sequence_length: 32 "
      "checkpoint_every_steps: 2 }\n",
      "resources { block_select { ranks_per_node: 2 } distill { ranks_per_node: 2 } }\n");
}

// "key: error" of every failed job, for the failure message.
std::string FailedJobs(const nlohmann::json& campaign) {
  std::string out;
  for (const nlohmann::json& job : campaign.value("jobs", nlohmann::json::array())) {
    if (job.value("state", "") != "JOB_FAILED") continue;
    absl::StrAppend(&out, job.value("key", ""), ": ", job.value("error", ""), "\n");
  }
  return out.empty() ? campaign.dump(2) : out;
}

TEST(HfNemotronHE2E, AutocompressAndBlockRemovalSucceed) {
  Cluster cluster("hfnemotronh", Cluster::WithProductionLeases());
  const std::string parent = cluster.dir() + "/" + kArchitecture;
  std::filesystem::create_directories(parent);
  const absl::Status written = testing::WriteHfTestCheckpoint(parent, kArchitecture);
  ASSERT_TRUE(written.ok()) << written;
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu0", {"--profile-rounds", "2", "--profile-validation", "4",
                              "--verify-repetitions", "3", "--verify-task-samples", "4"});

  const std::string ac =
      cluster.Submit(cluster.WriteFile("ac.textproto", Autocompress(parent)), "ac-nemotron-h");
  const std::string br =
      cluster.Submit(cluster.WriteFile("br.textproto", BlockRemoval(parent)), "br-nemotron-h");
  ASSERT_FALSE(ac.empty());
  ASSERT_FALSE(br.empty());
  // Stops at the first terminal state: a failed job fails the test at once, naming it.
  for (const std::string& id : {ac, br}) {
    nlohmann::json status;
    ASSERT_TRUE(WaitFor(
        [&] {
          status = cluster.Status(id);
          const std::string state = status.value("state", "");
          return state == "CAMPAIGN_SUCCEEDED" || state == "CAMPAIGN_FAILED" ||
                 state == "CAMPAIGN_CANCELLED";
        },
        absl::Minutes(5)));
    ASSERT_EQ(status["state"], "CAMPAIGN_SUCCEEDED") << FailedJobs(status);
  }
  const nlohmann::json campaign = cluster.Status(ac);
  for (const char* key : {"profile", "rank", "search", "distill", "verify", "baseline_uniform",
                          "distill_baseline", "verify_baseline"}) {
    EXPECT_EQ(JobOf(campaign, key)["state"], "JOB_SUCCEEDED") << key;
  }
  const nlohmann::json blocks = cluster.Status(br);
  for (const char* key : {"gate_gradients", "distill", "verify"}) {
    EXPECT_EQ(JobOf(blocks, key)["state"], "JOB_SUCCEEDED") << key;
  }
  // One block per pattern character: Mamba, attention, MLP, MoE.
  EXPECT_EQ(JobOf(blocks, "gate_gradients")["output"]["detail"]["blocks"], 4);

  // The memory ceiling is below the parent's, so the student and the uniform baseline are
  // pruned children (sliced from the ranked parent, Mamba heads per group) meeting it.
  const nlohmann::json report = cluster.Report(ac);
  ASSERT_EQ(report["quality"].size(), 3u) << report.dump(2);
  EXPECT_EQ(report["quality"][0]["model"], "parent");
  for (int i : {1, 2}) {
    EXPECT_LT(Int64Of(report["quality"][i]["parameters"]),
              Int64Of(report["quality"][0]["parameters"]));
  }
  EXPECT_EQ(report["baseline_unavailable"], "");
  for (const char* field : {"budgets", "baseline_budgets"}) {
    ASSERT_FALSE(report[field].empty()) << field;
    for (const nlohmann::json& b : report[field]) EXPECT_TRUE(b["met"].get<bool>()) << b.dump();
  }
  const std::string mamba = report["architecture"]["layers"][0];
  int heads = 0;
  ASSERT_EQ(std::sscanf(mamba.c_str(), "mamba heads=%d", &heads), 1) << mamba;
  EXPECT_EQ(heads % 2, 0) << mamba;  // the same count in each of the 2 B/C groups

  const nlohmann::json removed = cluster.Report(br);
  ASSERT_EQ(removed["quality"].size(), 2u) << removed.dump(2);
  EXPECT_LT(Int64Of(removed["quality"][1]["parameters"]),
            Int64Of(removed["quality"][0]["parameters"]));
}

}  // namespace
}  // namespace tailor::e2e
