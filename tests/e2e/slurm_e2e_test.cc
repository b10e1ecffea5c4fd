// Cluster jobs through a real Slurm: the test starts the single-node dev cluster
// (deploy/dev-slurm/start.sh: munge, slurmctld, slurmd, fake h100 GPUs) and a coordinator with
// --launcher slurm, then checks submission, tracking, refusal, external scancel, restart and
// cancellation end to end. Skipped, with the reason, only when Slurm cannot be started.
//
// GPU-holding cases use a "blocker" batch job that takes both fake h100s, so tailor's job waits
// in PENDING (Resources) for exactly as long as the test wants.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
#include "tests/e2e/cluster.h"

namespace tailor::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kSlurmDir[] = "/tmp/tailor-dev-slurm";

// The harness execs without a PATH lookup.
std::string Which(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "/usr/bin/" + name;
}

std::string Contract(const std::string& name, const std::string& parent, int ranks,
                     int gpus = 0, const std::string& gpu_type = "") {
  // GPUs are only valid on a GPU target; the rank job itself runs on the CPU either way.
  const std::string device = gpus > 0 ? "NVIDIA H100" : "cpu";
  std::string rank = absl::StrCat("ranks_per_node: ", ranks);
  if (gpus > 0) absl::StrAppend(&rank, " gpus_per_node: ", gpus, " gpu_type: \"", gpu_type, "\"");
  return absl::StrCat(
      "name: \"", name, "\"\nmethod: AUTOCOMPRESS\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"", device, "\" }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { latency_ms_max: 40 }\n", "ranking { calibration_samples: 32 }\n",
      "resources { rank { ", rank, " } }\n");
}

std::string Str(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

int Int(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<int>() : 0;
}

// What squeue --json says about the jobs whose name starts with `prefix`: id -> state.
std::map<std::string, std::string> SlurmJobs(const std::string& prefix) {
  std::map<std::string, std::string> out;
  RunResult r = e2e::Run({Which("squeue"), "--json"}, absl::Seconds(30));
  if (r.exit_code != 0) return out;
  auto doc = nlohmann::json::parse(r.out, nullptr, false);
  if (doc.is_discarded() || !doc.contains("jobs")) return out;
  for (const auto& j : doc["jobs"]) {
    const std::string name = j.value("name", "");
    if (name.rfind(prefix, 0) != 0) continue;
    std::string state = j["job_state"].is_string() ? j["job_state"].get<std::string>() : "";
    out[absl::StrCat(j["job_id"].get<int64_t>())] = state;
  }
  return out;
}

// Holds both fake h100s until destroyed.
class Blocker {
 public:
  Blocker() {
    RunResult r = e2e::Run({Which("sbatch"), "--parsable", "--job-name=tailor-e2e-blocker",
                       "--gres=gpu:h100:2", "--output=/dev/null", "--wrap", "sleep 900"},
                      absl::Seconds(30));
    id_ = std::string(absl::StripAsciiWhitespace(r.out));
    running_ = WaitFor([&] { return SlurmJobs("tailor-e2e-blocker")[id_] == "RUNNING"; },
                       absl::Seconds(30));
  }
  ~Blocker() { Release(); }
  bool running() const { return running_; }
  void Release() {
    if (!id_.empty()) e2e::Run({Which("scancel"), id_}, absl::Seconds(30));
    id_.clear();
  }

 private:
  std::string id_;
  bool running_ = false;
};

class SlurmE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "Slurm e2e tests need root to run slurmd (deploy/dev-slurm/start.sh)";
    }
    RunResult start =
        e2e::Run({Which("bash"), SourceDir() + "/deploy/dev-slurm/start.sh"}, absl::Seconds(300));
    if (start.exit_code != 0) {
      GTEST_SKIP() << "Slurm could not be started (deploy/dev-slurm/start.sh exit "
                   << start.exit_code << "): " << start.err << start.out;
    }
    // Everything this process starts (coordinator, CLI, sbatch) talks to the dev cluster.
    setenv("SLURM_CONF", absl::StrCat(kSlurmDir, "/etc/slurm.conf").c_str(), 1);
    // A blocker left by a crashed run would hold the GPUs for 15 minutes.
    e2e::Run({Which("scancel"), "--name=tailor-e2e-blocker"}, absl::Seconds(30));
  }

  void TearDown() override {
    // Leave no allocation behind, whatever the test did.
    for (const std::string& cid : campaigns_) {
      for (const auto& [id, state] : SlurmJobs("tailor." + cid)) {
        e2e::Run({Which("scancel"), id}, absl::Seconds(30));
      }
    }
  }

  Cluster::Options SlurmOptions() {
    Cluster::Options o;
    o.coordinator_args = {"--launcher", "slurm", "--slurm-partition", "debug",
                          "--slurm-poll-interval", "1"};
    return o;
  }

  std::string Submit(Cluster& cluster, const std::string& name, const std::string& contract) {
    const std::string id = cluster.Submit(cluster.WriteFile(name + ".textproto", contract), name);
    if (!id.empty()) campaigns_.push_back(id);
    return id;
  }

  // The rank job once `pred` holds for it (null json on timeout).
  nlohmann::json WaitJob(Cluster& cluster, const std::string& cid,
                         const std::function<bool(const nlohmann::json&)>& pred,
                         absl::Duration timeout = absl::Seconds(120)) {
    nlohmann::json job;
    const bool ok = WaitFor(
        [&] {
          job = JobOf(cluster.Status(cid), "rank");
          return !job.is_null() && pred(job);
        },
        timeout);
    return ok ? job : nlohmann::json(nullptr);
  }

  static bool Done(const nlohmann::json& j) {
    return j["state"] == "JOB_SUCCEEDED" || j["state"] == "JOB_FAILED";
  }

  std::vector<std::string> campaigns_;
};

TEST_F(SlurmE2E, TwoRankJobThroughSbatchAndSrunMatchesTheLocalLauncher) {
  Cluster slurm("slurm-rank", SlurmOptions());
  const std::string parent = slurm.TrainTinyParent();
  ASSERT_TRUE(slurm.StartCoordinator());
  const std::string cid = Submit(slurm, "rank2-slurm", Contract("rank2-slurm", parent, 2));
  ASSERT_FALSE(cid.empty());
  nlohmann::json job = WaitJob(slurm, cid, Done);
  ASSERT_FALSE(job.is_null()) << "rank job did not finish";
  ASSERT_EQ(job["state"], "JOB_SUCCEEDED") << job.dump();
  EXPECT_EQ(job["output"]["world_size"], 2);
  EXPECT_EQ(Int(job, "attempt"), 1);
  EXPECT_EQ(Str(job, "launcher"), "slurm");
  const std::string slurm_id = Str(job, "external_id");
  ASSERT_FALSE(slurm_id.empty()) << job.dump();
  const std::string jid = Str(job, "id");

  // The submitted script is kept with the attempt's logs.
  const std::string logs = absl::StrCat(slurm.dir(), "/data/logs/", jid);
  const std::string script = ReadFile(logs + "/attempt-1.sbatch");
  EXPECT_THAT(script, HasSubstr(absl::StrCat("#SBATCH --job-name=tailor.", cid, ".", jid, ".a1")));
  EXPECT_THAT(script, HasSubstr("#SBATCH --ntasks-per-node=2\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --partition=debug\n"));
  EXPECT_THAT(script, HasSubstr("srun --kill-on-bad-exit=1"));
  // Rank 0's log is the attempt log (with Slurm's own line on top); rank 1 has its own.
  RunResult log = slurm.Cli({"logs", jid});
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_THAT(log.out, HasSubstr(absl::StrCat("tailor: Slurm job ", slurm_id, " on ")));
  EXPECT_THAT(log.out, HasSubstr("rank 0/2"));
  EXPECT_THAT(ReadFile(logs + "/attempt-1.rank1.log"), HasSubstr("rank 1/2"));

  // Same contract through the local launcher: the same importance. Production leases: this
  // half tests no expiry, and under ctest -j2 on 2 cores a 3 s lease can starve.
  Cluster local("slurm-rank-local", Cluster::WithProductionLeases());
  ASSERT_TRUE(local.StartCoordinator());
  const std::string lid = local.Submit(
      local.WriteFile("local.textproto", Contract("rank2-local", parent, 2)), "rank2-local");
  ASSERT_FALSE(lid.empty());
  nlohmann::json ljob = WaitJob(local, lid, Done);
  ASSERT_FALSE(ljob.is_null());
  ASSERT_EQ(ljob["state"], "JOB_SUCCEEDED") << ljob.dump();
  const double a = job["output"]["detail"]["hidden_importance_sum"];
  const double b = ljob["output"]["detail"]["hidden_importance_sum"];
  EXPECT_NEAR(a, b, 1e-9 * std::abs(b));
  EXPECT_EQ(Int64Of(job["output"]["detail"]["calibration_samples"]),
            Int64Of(ljob["output"]["detail"]["calibration_samples"]));
  slurm.Cli({"cancel", cid});
  local.Cli({"cancel", lid});
}

TEST_F(SlurmE2E, GpuTypeTheClusterLacksFailsAtOnceWithSlurmsReason) {
  Cluster slurm("slurm-gb200", SlurmOptions());
  ASSERT_TRUE(slurm.StartCoordinator());
  const std::string cid =
      Submit(slurm, "gb200", Contract("gb200", "/nonexistent/parent", 1, 1, "gb200"));
  ASSERT_FALSE(cid.empty());
  ASSERT_TRUE(slurm.WaitForState(cid, "CAMPAIGN_FAILED", absl::Seconds(60)));
  nlohmann::json job = JobOf(slurm.Status(cid), "rank");
  EXPECT_EQ(job["state"], "JOB_FAILED");
  EXPECT_EQ(Int(job, "attempt"), 1) << "a refusal is not retried";
  EXPECT_THAT(Str(job, "error"),
              HasSubstr("Slurm refused the job: sbatch: error: Batch job submission failed: "
                        "Requested node configuration is not available"));
  EXPECT_THAT(ReadFile(absl::StrCat(slurm.dir(), "/data/logs/", Str(job, "id"),
                                    "/attempt-1.sbatch")),
              HasSubstr("#SBATCH --gres=gpu:gb200:1\n"));
  RunResult status = slurm.Cli({"status", cid});
  EXPECT_THAT(status.out, HasSubstr("Requested node configuration is not available"));
}

TEST_F(SlurmE2E, ExternalScancelIsSeenAndRetried) {
  Cluster slurm("slurm-scancel", SlurmOptions());
  const std::string parent = slurm.TrainTinyParent();
  ASSERT_TRUE(slurm.StartCoordinator());
  Blocker blocker;
  ASSERT_TRUE(blocker.running());
  const std::string cid = Submit(slurm, "scancel", Contract("scancel", parent, 2, 2, "h100"));
  ASSERT_FALSE(cid.empty());
  // Waiting for the GPUs: `tailor queue` shows the Slurm id, state and reason.
  nlohmann::json job = WaitJob(slurm, cid, [](const nlohmann::json& j) {
    return Str(j, "external_state") == "PENDING" && !Str(j, "external_reason").empty();
  });
  ASSERT_FALSE(job.is_null());
  const std::string first = Str(job, "external_id");
  RunResult queue = slurm.Cli({"queue"});
  EXPECT_THAT(queue.out, ::testing::ContainsRegex("slurm " + first +
                                                  " PENDING \\((Resources|Priority)\\)"))
      << queue.out;

  ASSERT_EQ(e2e::Run({Which("scancel"), first}, absl::Seconds(30)).exit_code, 0);
  job = WaitJob(slurm, cid, [&](const nlohmann::json& j) {
    return Int(j, "attempt") == 2 && !Str(j, "external_id").empty() &&
           Str(j, "external_id") != first;
  }, absl::Seconds(60));
  ASSERT_FALSE(job.is_null()) << "the scancel was not retried";
  EXPECT_THAT(Str(job, "error"),
              HasSubstr(absl::StrCat("Slurm job ", first,
                                     " was cancelled outside tailor (scancel or an "
                                     "administrator)")));
  blocker.Release();
  job = WaitJob(slurm, cid, Done);
  ASSERT_FALSE(job.is_null());
  EXPECT_EQ(job["state"], "JOB_SUCCEEDED") << job.dump();
  EXPECT_EQ(Int(job, "attempt"), 2);
  auto jobs = SlurmJobs(absl::StrCat("tailor.", cid, "."));
  EXPECT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[first], "CANCELLED");
}

TEST_F(SlurmE2E, CoordinatorKilledWhileTheSlurmJobRunsCompletesItExactlyOnce) {
  Cluster slurm("slurm-restart", SlurmOptions());
  const std::string parent = slurm.TrainTinyParent();
  ASSERT_TRUE(slurm.StartCoordinator());
  Blocker blocker;
  ASSERT_TRUE(blocker.running());
  const std::string cid = Submit(slurm, "restart", Contract("restart", parent, 2, 2, "h100"));
  ASSERT_FALSE(cid.empty());
  nlohmann::json job = WaitJob(slurm, cid, [](const nlohmann::json& j) {
    return !Str(j, "external_id").empty();
  });
  ASSERT_FALSE(job.is_null());
  const std::string slurm_id = Str(job, "external_id");

  slurm.KillCoordinator();  // SIGKILL
  // The job starts while the coordinator is down; its ranks wait for it to come back.
  blocker.Release();
  ASSERT_TRUE(WaitFor([&] { return SlurmJobs("tailor." + cid)[slurm_id] == "RUNNING"; },
                      absl::Seconds(30)));
  absl::SleepFor(absl::Seconds(2));
  ASSERT_TRUE(slurm.StartCoordinator());

  job = WaitJob(slurm, cid, Done);
  ASSERT_FALSE(job.is_null());
  EXPECT_EQ(job["state"], "JOB_SUCCEEDED") << job.dump();
  EXPECT_EQ(Int(job, "attempt"), 1) << "the running job was adopted, not retried";
  EXPECT_EQ(Str(job, "external_id"), slurm_id);
  // Exactly one allocation, and exactly one success.
  auto jobs = SlurmJobs(absl::StrCat("tailor.", cid, "."));
  EXPECT_EQ(jobs.size(), 1u);
  // The database agrees: one attempt, succeeded once, one success event, and the attempt row
  // carries the Slurm id recorded before the restart.
  storage::Database::Options ro;
  ro.read_only = true;
  auto db = storage::Database::Open(slurm.db_path(), ro);
  ASSERT_TRUE(db.ok()) << db.status();
  auto attempts = (*db)->Prepare(
      "SELECT state, external_id FROM job_attempts WHERE job_id = ? ORDER BY attempt");
  ASSERT_TRUE(attempts.ok());
  attempts->Bind(1, Str(job, "id"));
  std::vector<std::string> rows;
  while (*attempts->Step()) {
    rows.push_back(absl::StrCat(attempts->ColumnText(0), " ", attempts->ColumnText(1)));
  }
  EXPECT_THAT(rows, ::testing::ElementsAre("succeeded " + slurm_id));
  auto events = (*db)->Prepare(
      "SELECT COUNT(*) FROM events WHERE job_id = ? AND type = 'job_succeeded'");
  ASSERT_TRUE(events.ok());
  events->Bind(1, Str(job, "id"));
  ASSERT_TRUE(*events->Step());
  EXPECT_EQ(events->ColumnInt(0), 1);
}

TEST_F(SlurmE2E, CancellingTheCampaignScancelsItsSlurmJob) {
  Cluster slurm("slurm-cancel", SlurmOptions());
  ASSERT_TRUE(slurm.StartCoordinator());
  Blocker blocker;
  ASSERT_TRUE(blocker.running());
  const std::string cid =
      Submit(slurm, "cancel", Contract("cancel", "/nonexistent/parent", 2, 2, "h100"));
  ASSERT_FALSE(cid.empty());
  nlohmann::json job = WaitJob(slurm, cid, [](const nlohmann::json& j) {
    return !Str(j, "external_id").empty();
  });
  ASSERT_FALSE(job.is_null());
  const std::string slurm_id = Str(job, "external_id");
  EXPECT_EQ(SlurmJobs("tailor." + cid)[slurm_id], "PENDING");
  RunResult cancel = slurm.Cli({"cancel", cid});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_TRUE(WaitFor([&] {
    auto jobs = SlurmJobs("tailor." + cid);
    return jobs.count(slurm_id) == 0 || jobs[slurm_id] == "CANCELLED";
  }, absl::Seconds(20))) << "scancel did not reach Slurm job " << slurm_id;
}

}  // namespace
}  // namespace tailor::e2e
