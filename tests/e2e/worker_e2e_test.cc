// Launcher-started multi-rank jobs through real processes: the coordinator's local launcher
// starts tailor-worker ranks that rendezvous over a c10d TCPStore and all-reduce with Gloo.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace tailor::e2e {
namespace {

std::string Contract(const std::string& name, const std::string& parent, int ranks) {
  return absl::StrCat(
      "name: \"", name, "\"\nmethod: AUTOCOMPRESS\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { latency_ms_max: 40 }\n", "ranking { calibration_samples: 32 }\n",
      "resources { rank { ranks_per_node: ", ranks, " } }\n");
}

nlohmann::json WaitJobDone(Cluster& cluster, const std::string& id, const std::string& key) {
  nlohmann::json job;
  WaitFor(
      [&] {
        nlohmann::json s = cluster.Status(id);
        if (s.is_null() || s.is_discarded()) return false;
        job = JobOf(s, key);
        return !job.is_null() && (job["state"] == "JOB_SUCCEEDED" || job["state"] == "JOB_FAILED");
      },
      absl::Seconds(180));
  return job;
}

TEST(WorkerE2E, TwoRankRankingMatchesOneRank) {
  Cluster cluster("worker", Cluster::WithProductionLeases());
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  ASSERT_TRUE(cluster.StartCoordinator());

  const std::string two = cluster.Submit(
      cluster.WriteFile("two.textproto", Contract("rank2", parent, 2)), "rank-two");
  ASSERT_FALSE(two.empty());
  nlohmann::json job2 = WaitJobDone(cluster, two, "rank");
  ASSERT_FALSE(job2.is_null());
  ASSERT_EQ(job2["state"], "JOB_SUCCEEDED") << job2.dump();
  EXPECT_EQ(job2["output"]["world_size"], 2);
  EXPECT_EQ(Int64Of(job2["output"]["detail"]["calibration_samples"]), 32);
  EXPECT_EQ(job2["output"]["detail"]["ranked_model_digest"].get<std::string>().size(), 64u);
  // Rank 0 kept the result until the coordinator accepted it, then dropped it.
  const std::string checkpoints = absl::StrCat(cluster.dir(), "/data/work/",
                                               job2["id"].get<std::string>(), "/checkpoints");
  EXPECT_FALSE(std::filesystem::exists(
      absl::StrCat(checkpoints, "/finished-", job2["id"].get<std::string>(), ".pb")));

  const std::string one = cluster.Submit(
      cluster.WriteFile("one.textproto", Contract("rank1", parent, 1)), "rank-one");
  nlohmann::json job1 = WaitJobDone(cluster, one, "rank");
  ASSERT_EQ(job1["state"], "JOB_SUCCEEDED") << job1.dump();
  EXPECT_EQ(job1["output"]["world_size"], 1);
  // The same calibration set split over two ranks gives the same importance.
  const double a = job1["output"]["detail"]["hidden_importance_sum"];
  const double b = job2["output"]["detail"]["hidden_importance_sum"];
  EXPECT_NEAR(a, b, 1e-6 * std::abs(a));

  RunResult arts = cluster.Cli({"artifacts", "list", two, "--json"});
  ASSERT_EQ(arts.exit_code, 0);
  auto artifacts = nlohmann::json::parse(arts.out)["artifacts"];
  ASSERT_EQ(artifacts.size(), 1u);
  EXPECT_EQ(artifacts[0]["kind"], "ranked_parent");
  EXPECT_EQ(artifacts[0]["name"], "ranked-parent.tar");
  // The rank-0 log of the attempt is served by `tailor logs`.
  RunResult logs = cluster.Cli({"logs", job2["id"]});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_THAT(logs.out, ::testing::HasSubstr("rank 0/2"));
  for (const std::string& id : {one, two}) cluster.Cli({"cancel", id});
}

// Every core busy with other work (a spinning process per hardware thread) while a 2-rank
// job runs for longer than one 15 s lease (16384 calibration samples: about 20 s on 2 busy
// cores): the ranks' keepalive still reaches the coordinator within its lease, so the job
// finishes on its first attempt (issue #19 item 8: a starved heartbeat cost landings).
TEST(WorkerE2E, RankKeepaliveHoldsTheLeaseWithEveryCoreBusy) {
  Cluster cluster("worker-busy");  // the production 15 s lease
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  ASSERT_TRUE(cluster.StartCoordinator());
  std::vector<std::unique_ptr<Process>> burners;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i) {
    burners.push_back(std::make_unique<Process>(
        std::vector<std::string>{"/bin/sh", "-c", "while :; do :; done"},
        absl::StrCat(cluster.dir(), "/burner-", i, ".log")));
  }
  std::string contract = Contract("busy", parent, 2);
  contract.replace(contract.find("calibration_samples: 32"), 23, "calibration_samples: 16384");
  const std::string id =
      cluster.Submit(cluster.WriteFile("busy.textproto", contract), "rank-busy");
  ASSERT_FALSE(id.empty());
  nlohmann::json job = WaitJobDone(cluster, id, "rank");
  burners.clear();  // SIGKILLed and reaped
  ASSERT_FALSE(job.is_null());
  EXPECT_EQ(job["state"], "JOB_SUCCEEDED") << job.dump();
  EXPECT_EQ(job["attempt"], 1) << "a lease was lost: " << job.dump();
  cluster.Cli({"cancel", id});
}

}  // namespace
}  // namespace tailor::e2e
