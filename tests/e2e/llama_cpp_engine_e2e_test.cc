// A campaign measured in an engine tailor did not write, through real processes: a profiler
// agent started with --engine llama.cpp (node-llama-cpp's prebuilt llama.cpp, every model in a
// child process) registers the engine as node-llama-cpp reports it; an AUTOCOMPRESS campaign
// on a tiny checkpoint naming target.engine llama.cpp gets its cost table profiled from whole
// requests of dummy GGUFs in llama.cpp, and its student verified there: the
// equivalence gate first (llama.cpp's next-token distribution against tailor's), then the
// contract's request batch, latency at the contract's percentile of whole requests; between
// search and distillation, the measured settle serves the search's growth ladder there and
// takes the largest rung within the budget; memory is budgeted relative to the parent (at most
// the parent's, as the profile job measured it there), resolved by the coordinator. Skips,
// saying so, without node or the package (deploy/install-deps.sh installs both). Two parents:
// the quickstart's Nemotron-H checkpoint (tailor-train-parent --layout nemotron-h, two steps:
// pattern M*-M-*M-, per-layer widths in `nemotron_h`), judged at p90, and Qwen3 (one width
// per kind in `qwen3`: profiled on uniform models, searched and exported uniform), judged at
// the default p50. Both profile without serving a model again (--profile-remeasures 0): the
// tiny models' requests spread on node's jitter alone, so each would be served three times
// for nothing (profile 150 s against about 60 s for Nemotron-H); verify still serves until
// calm through the same ServeUntilCalm, which is what the remeasures bound below checks.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/llama_cpp_agreement.h"

namespace tailor::e2e {
namespace {

using ::testing::HasSubstr;

std::string Autocompress(const std::string& parent, const std::string& version,
                         const std::string& percentile) {
  return absl::StrCat(
      "name: \"ac-llama-cpp\"\nmethod: AUTOCOMPRESS\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" engine: \"llama.cpp\" engine_version: \"", version,
      "\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { latency_ms_max: 5000 memory_vs_parent_max: 1 throughput_vs_parent_min: 0.01 "
      "latency_percentile: ", percentile, " }\n",
      "ranking { calibration_samples: 8 }\n",
      "search { steps: 2 sampled_architectures: 4 batch_sequences: 4 sequence_length: 32 "
      "settle_rungs: 3 }\n",
      "recovery { tokens: 256 batch_sequences: 4 sequence_length: 32 "
      "checkpoint_every_steps: 2 }\n",
      "resources { search { ranks_per_node: 2 } distill { ranks_per_node: 2 } }\n");
}

// The report row of `resource`.
nlohmann::json BudgetRow(const nlohmann::json& report, const std::string& resource) {
  for (const nlohmann::json& b : report.value("budgets", nlohmann::json::array())) {
    if (b.value("resource", "") == resource) return b;
  }
  return nlohmann::json();
}

class LlamaCppEngineE2E : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppEngineE2E, AutocompressIsProfiledAndVerifiedInLlamaCpp) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  const std::string architecture = GetParam();
  Cluster cluster("llamacpp", Cluster::WithProductionLeases());
  std::string parent = cluster.dir() + "/" + architecture;
  if (architecture == "NemotronHForCausalLM") {
    // Mamba, attention and MLP layers (`nemotron_h`), as the quickstart trains them.
    parent = cluster.TrainTinyParent("nemotron-h");
    ASSERT_FALSE(parent.empty());
  } else {
    // Qwen3's attention and MLP (`qwen3`), random BF16 weights.
    std::filesystem::create_directories(parent);
    const nlohmann::json config = testing::TinyHfConfig(architecture);
    ASSERT_TRUE(testing::WriteHfCheckpointFiles(
                    parent, config, testing::HfTestTensors(config, model::DType::kBF16, 1))
                    .ok());
  }
  const bool p90 = architecture == "NemotronHForCausalLM";
  // RepetitionsFor: enough requests for five beyond the percentile.
  const std::string percentile = p90 ? "LATENCY_P90" : "LATENCY_P50";
  const std::string statistic = p90 ? "p90 of 50 whole requests" : "p50 of 10 whole requests";
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("llama0", {"--engine", "llama.cpp", "--profile-rounds", "2",
                                "--profile-validation", "4", "--profile-remeasures", "0",
                                "--verify-repetitions", "3", "--verify-task-samples", "4"});
  // The agent registers the engine as node-llama-cpp reports it.
  nlohmann::json agents;
  ASSERT_TRUE(WaitFor(
      [&] {
        RunResult r = cluster.Cli({"agents", "--json"});
        if (r.exit_code != 0) return false;
        agents = nlohmann::json::parse(r.out, nullptr, false);
        return agents.is_object() && agents.value("agents", nlohmann::json::array()).size() == 1;
      },
      absl::Seconds(60)));
  const nlohmann::json info = agents["agents"][0]["info"];
  EXPECT_EQ(info["engine"], "llama.cpp");
  EXPECT_EQ(info["engine_version"], "3.21.1") << info.dump(2);

  const std::string id = cluster.Submit(
      cluster.WriteFile("ac.textproto", Autocompress(parent, "3.21.1", percentile)),
      "ac-llama-cpp");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Minutes(12)))
      << cluster.Status(id).dump(2);
  const nlohmann::json campaign = cluster.Status(id);
  const nlohmann::json profile = JobOf(campaign, "profile")["output"]["detail"];
  std::printf("llama.cpp cost table: %s\n", profile.dump().c_str());
  const nlohmann::json verify = JobOf(campaign, "verify")["output"];
  EXPECT_EQ(verify["engine"]["name"], "llama.cpp");
  EXPECT_EQ(verify["engine"]["version"], "3.21.1");
  EXPECT_TRUE(verify["equivalence"].value("passed", false)) << verify.dump(2);
  EXPECT_EQ(verify["equivalence"]["positions"], 16 * 32);
  // Under a loaded ctest the run may have been served again, or stayed disturbed: the
  // statistic then says so after this.
  EXPECT_THAT(verify["measured"].value("latency_statistic", ""),
              ::testing::StartsWith(statistic));
  EXPECT_TRUE(verify["measured"].contains("request_spread")) << verify["measured"].dump(2);
  // Three serves (the agent's default --verify-serves), each re-served at most twice; the
  // median one judged.
  EXPECT_LE(verify["measured"].value("remeasures", 0), 6);
  EXPECT_EQ(verify["measured"]["latency_ms"],
            verify["measured"][p90 ? "request_p90_ms" : "request_p50_ms"]);
  ASSERT_EQ(verify["measured"]["serve_latency_ms"].size(), 3u) << verify["measured"].dump(2);
  std::vector<double> serves = verify["measured"]["serve_latency_ms"].get<std::vector<double>>();
  std::sort(serves.begin(), serves.end());
  EXPECT_EQ(verify["measured"]["latency_ms"].get<double>(), serves[1]);
  EXPECT_THAT(verify["measured"].value("latency_statistic", ""),
              HasSubstr("; the median of 3 serves ("));

  // The measured settle: the search's ladder served in llama.cpp as verify serves (the same
  // statistic, three interleaved rounds), and with a budget every rung meets, the largest
  // rung taken: the student
  // distillation starts from is the settle's, and the report's architecture is that rung's.
  const nlohmann::json measure = JobOf(campaign, "measure")["output"]["detail"];
  EXPECT_EQ(measure["engine"]["name"], "llama.cpp") << measure.dump(2);
  EXPECT_EQ(measure["rounds"], 3);
  const nlohmann::json settle = JobOf(campaign, "settle")["output"];
  const nlohmann::json rungs = settle["detail"]["settle"]["rungs"];
  // Every rung of the ladder is a candidate; the settle keeps the served ones, in order: at
  // most 3 in the first pass, and none in the second when the budget is above every rung.
  const nlohmann::json candidates = JobOf(campaign, "search")["output"]["candidates"];
  ASSERT_EQ(measure["measured"].size(), candidates.size()) << measure.dump(2);
  ASSERT_EQ(measure["served"].size(), candidates.size()) << measure.dump(2);
  std::vector<size_t> served;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (measure["served"][i].get<bool>()) served.push_back(i);
    EXPECT_EQ(measure["served"][i].get<bool>(), !candidates[i].value("on_demand", false)) << i;
  }
  EXPECT_EQ(measure.value("refined", 0), 0);
  ASSERT_EQ(served.size(), rungs.size()) << settle.dump(2);
  ASSERT_GE(rungs.size(), 1u) << settle.dump(2);
  ASSERT_LE(rungs.size(), 3u);
  for (size_t i = 0; i < rungs.size(); ++i) {
    EXPECT_THAT(rungs[i]["measured"].value("latency_statistic", ""),
                ::testing::StartsWith(statistic));
    EXPECT_THAT(rungs[i]["measured"].value("latency_statistic", ""),
                HasSubstr("; the median of 3 interleaved rounds"));
    EXPECT_EQ(rungs[i]["measured"]["latency_ms"], measure["measured"][served[i]]["latency_ms"]);
    EXPECT_EQ(rungs[i]["architecture"], candidates[served[i]]["architecture"]);
    EXPECT_TRUE(rungs[i].value("fits", false)) << rungs[i].dump(2);
  }
  EXPECT_EQ(settle["detail"]["settle"].value("chosen", 0), static_cast<int>(rungs.size()) - 1);
  // The slow-host check ran on the table's validated worst error (never under the agent's
  // 10% floor): one attempt per pass over the rungs, at most three, the settle's copy the
  // measure job's.
  ASSERT_TRUE(measure.contains("host_scales")) << measure.dump(2);
  EXPECT_GE(measure["host_scales"].size(), 1u);
  EXPECT_LE(measure["host_scales"].size(), 3u);
  EXPECT_GE(measure.value("slow_host_bound", 0.0), 0.10);
  EXPECT_EQ(settle["detail"]["settle"]["host_scales"], measure["host_scales"]);
  EXPECT_EQ(settle["architecture"], rungs.back()["architecture"]);
  EXPECT_EQ(JobOf(campaign, "distill")["state"], "JOB_SUCCEEDED");

  const nlohmann::json report = cluster.Report(id);
  EXPECT_EQ(report["architecture"]["description"], rungs.back()["architecture"]);
  const nlohmann::json latency = BudgetRow(report, "latency_ms");
  ASSERT_FALSE(latency.is_null()) << report.dump(2);
  EXPECT_TRUE(latency.value("met", false));
  EXPECT_GT(latency.value("predicted", 0.0), 0.0) << latency.dump();
  std::printf("latency predicted %.3f ms, measured (%s) %.3f ms in llama.cpp\n",
              latency.value("predicted", 0.0), statistic.c_str(),
              latency.value("measured", 0.0));
  // Memory is budgeted relative to the parent: at most the parent's own, as the profile job
  // measured its architecture in llama.cpp (the median of 3 serves); the settle and verify
  // were held to that figure, and every rung, a part of the parent, is within it.
  const nlohmann::json parent_measured = profile["parent_measured"];
  ASSERT_EQ(parent_measured["serve_latency_ms"].size(), 3u) << profile.dump(2);
  EXPECT_THAT(parent_measured.value("latency_statistic", ""), ::testing::StartsWith(statistic));
  const double parent_mib = parent_measured.value("memory_mib", 0.0);
  EXPECT_GT(parent_mib, 0.0);
  ASSERT_EQ(report["relative_budgets"].size(), 2u) << report.dump(2);
  // Throughput relative to the parent (a floor of 1% of it, met by any student): verify served
  // the parent alongside the student, three serves each, and judged the floor on it.
  const nlohmann::json beside = verify["parent_beside"];
  ASSERT_EQ(beside["serve_latency_ms"].size(), 3u) << beside.dump(2);
  EXPECT_THAT(beside.value("latency_statistic", ""),
              HasSubstr("serves of the parent, alternating ("));
  const nlohmann::json floor = report["relative_budgets"][0];
  EXPECT_EQ(floor["resource"], "throughput_tokens_per_s");
  const double parent_tps = floor.value("verify_parent", 0.0);
  EXPECT_GT(parent_tps, 0.0) << floor.dump();
  EXPECT_NEAR(floor.value("verify_budget", 0.0), 0.01 * parent_tps, 1e-9 * parent_tps);
  const nlohmann::json throughput = BudgetRow(report, "throughput_tokens_per_s");
  EXPECT_EQ(throughput.value("budget", 0.0), floor.value("verify_budget", -1.0));
  EXPECT_TRUE(throughput.value("met", false)) << throughput.dump();
  const nlohmann::json relative = report["relative_budgets"][1];
  EXPECT_EQ(relative["resource"], "memory_mib");
  EXPECT_TRUE(relative.value("resolved", false)) << relative.dump();
  EXPECT_EQ(relative.value("budget", 0.0), parent_mib);
  const nlohmann::json memory = BudgetRow(report, "memory_mib");
  EXPECT_EQ(memory.value("budget", 0.0), parent_mib) << memory.dump();
  EXPECT_TRUE(memory.value("met", false)) << memory.dump();
  EXPECT_TRUE(BudgetRow(report, "equivalence_max_kl").value("met", false)) << report.dump(2);
  EXPECT_TRUE(BudgetRow(report, "equivalence_argmax_agreement").value("met", false));
  RunResult text = cluster.Cli({"report", id});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("measured in llama.cpp 3.21.1"));
  EXPECT_THAT(text.out, HasSubstr("equivalence gate passed over 512 positions"));
  EXPECT_THAT(text.out, HasSubstr("measured settle: "));
  EXPECT_THAT(text.out, HasSubstr("memory_mib <= 1 x the parent's "));
  EXPECT_THAT(text.out,
              HasSubstr("verified against the parent served alongside the student: 0.01 x "));
  std::printf("%s\n", text.out.c_str());
}

INSTANTIATE_TEST_SUITE_P(Parents, LlamaCppEngineE2E,
                         ::testing::Values("NemotronHForCausalLM", "Qwen3ForCausalLM"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace tailor::e2e
