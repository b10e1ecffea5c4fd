// End to end with real processes on loopback: tailor-coordinator, tailor-profiler-agent and
// the tailor CLI, talking real gRPC and writing a real SQLite file.
#include <signal.h>

#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/blob_store.h"
#include "storage/database.h"
#include "tests/e2e/cluster.h"

namespace tailor::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ProbeContract(const std::string& name, int duration_ms) {
  return absl::StrCat("name: \"", name, "\"\nmethod: PROBE\n",
                      "target { device_kind: \"cpu\" }\n",
                      "probe { duration_ms: ", duration_ms, " }\n");
}

// Invariants that must hold after any run, read straight from the database.
void CheckInvariants(const std::string& db_path) {
  storage::Database::Options ro;
  ro.read_only = true;
  auto db = storage::Database::Open(db_path, ro);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_TRUE((*db)->IntegrityCheck().ok());
  // No job completed twice.
  auto twice = (*db)->Prepare(
      "SELECT job_id, COUNT(*) FROM job_attempts WHERE state = 'succeeded' GROUP BY job_id "
      "HAVING COUNT(*) > 1");
  ASSERT_TRUE(twice.ok());
  auto row = twice->Step();
  ASSERT_TRUE(row.ok());
  EXPECT_FALSE(*row) << "job " << twice->ColumnText(0) << " succeeded "
                     << twice->ColumnInt(1) << " times";
  // Event log without gaps: per campaign, seq runs 1..count.
  auto gaps = (*db)->Prepare(
      "SELECT campaign_id, COUNT(*), MIN(seq), MAX(seq) FROM events GROUP BY campaign_id");
  ASSERT_TRUE(gaps.ok());
  while (*gaps->Step()) {
    EXPECT_EQ(gaps->ColumnInt(2), 1) << gaps->ColumnText(0);
    EXPECT_EQ(gaps->ColumnInt(3), gaps->ColumnInt(1)) << "gap in events of "
                                                       << gaps->ColumnText(0);
  }
}

int SucceededAttempts(const std::string& db_path, const std::string& campaign_id,
                      int* total_attempts) {
  storage::Database::Options ro;
  ro.read_only = true;
  auto db = storage::Database::Open(db_path, ro);
  EXPECT_TRUE(db.ok());
  auto s = (*db)->Prepare(
      "SELECT SUM(a.state = 'succeeded'), COUNT(*) FROM job_attempts a JOIN jobs j ON "
      "j.id = a.job_id WHERE j.campaign_id = ?");
  s->Bind(1, campaign_id);
  EXPECT_TRUE(*s->Step());
  *total_attempts = static_cast<int>(s->ColumnInt(1));
  return static_cast<int>(s->ColumnInt(0));
}

TEST(SpineE2E, ProbeCampaignThroughCliAndAgent) {
  Cluster cluster("probe");
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu-1");
  const std::string contract = SourceDir() + "/examples/contracts/probe-cpu.textproto";
  RunResult submit = cluster.Cli({"submit", contract, "--wait", "--request-id", "e2e-probe-1"},
                                 absl::Seconds(90));
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  EXPECT_THAT(submit.out, HasSubstr("submitted"));

  RunResult list = cluster.Cli({"list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  auto campaigns = nlohmann::json::parse(list.out)["campaigns"];
  ASSERT_EQ(campaigns.size(), 1u);
  const std::string id = campaigns[0]["id"];
  nlohmann::json status = cluster.Status(id);
  ASSERT_FALSE(status.is_null());
  EXPECT_EQ(status["state"], "CAMPAIGN_SUCCEEDED");
  ASSERT_EQ(status["jobs"].size(), 1u);
  EXPECT_EQ(status["jobs"][0]["kind"], "probe");
  EXPECT_EQ(status["jobs"][0]["state"], "JOB_SUCCEEDED");
  const auto& result = status["jobs"][0]["output"]["detail"];  // a tailor.v1.probe.ProbeResult
  EXPECT_GT(result["logical_cores"].get<double>(), 0);
  EXPECT_GT(result["memcpy_gbps"].get<double>(), 0);
  EXPECT_FALSE(result["cpu_model"].get<std::string>().empty());

  // The same request id again is the same campaign.
  RunResult again = cluster.Cli({"submit", contract, "--request-id", "e2e-probe-1", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["id"], id);

  // The probe's report is an artifact that downloads intact.
  RunResult arts = cluster.Cli({"artifacts", "list", id, "--json"});
  ASSERT_EQ(arts.exit_code, 0) << arts.err;
  auto artifacts = nlohmann::json::parse(arts.out)["artifacts"];
  ASSERT_EQ(artifacts.size(), 1u);
  EXPECT_EQ(artifacts[0]["kind"], "probe");
  const std::string out_path = cluster.dir() + "/probe.json";
  RunResult get = cluster.Cli({"artifacts", "get", artifacts[0]["digest"], "-o", out_path});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  auto probe = nlohmann::json::parse(ReadFile(out_path), nullptr, false);
  ASSERT_FALSE(probe.is_discarded());
  EXPECT_EQ(probe["device_kind"], "cpu");

  RunResult agents = cluster.Cli({"agents", "--json"});
  ASSERT_EQ(agents.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(agents.out)["agents"].size(), 1u);
  CheckInvariants(cluster.db_path());
}

TEST(SpineE2E, InvalidContractNamesFieldAndWritesNothing) {
  Cluster cluster("invalid");
  ASSERT_TRUE(cluster.StartCoordinator());
  const std::string bad = cluster.WriteFile(
      "bad.textproto",
      "name: \"bad\"\nmethod: AUTOCOMPRESS\nparent { path: \"x\" }\n"
      "target { device_kind: \"cpu\" }\n"
      "workload { batch_size: 0 input_tokens: 8 output_tokens: 8 cached_prefix_tokens: 0 }\n"
      "budget { latency_ms_max: 10 }\n");
  RunResult r = cluster.Cli({"submit", bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("workload.batch_size: must be >= 1, got 0"));
  const std::string typo = cluster.WriteFile("typo.textproto", "name: \"t\"\nmethd: PROBE\n");
  RunResult t = cluster.Cli({"submit", typo});
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_THAT(t.err, HasSubstr("typo.textproto:2:"));
  RunResult list = cluster.Cli({"list", "--json"});
  ASSERT_EQ(list.exit_code, 0);
  auto j = nlohmann::json::parse(list.out);
  EXPECT_TRUE(!j.contains("campaigns") || j["campaigns"].empty());
  RunResult usage = cluster.Cli({"submit"});
  EXPECT_EQ(usage.exit_code, 2);
}

// SIGKILL the coordinator while campaigns run; restart it: everything accepted completes,
// no job succeeds twice, the event log has no gaps.
TEST(SpineE2E, CoordinatorSigkillLosesNothing) {
  Cluster cluster("sigkill", Cluster::WithShortLeases());
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu-1");
  cluster.StartAgent("cpu-2");
  const std::string contract = cluster.WriteFile("p.textproto", ProbeContract("crash", 1500));
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(cluster.Submit(contract, absl::StrCat("sigkill-", i)));
    ASSERT_FALSE(ids.back().empty());
  }
  // Let the agents get into the middle of jobs, then kill.
  ASSERT_TRUE(WaitFor(
      [&] {
        nlohmann::json s = cluster.Status(ids[0]);
        return !s.is_null() && s["jobs"][0]["state"] == "JOB_LEASED";
      },
      absl::Seconds(20)));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  cluster.KillCoordinator();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  ASSERT_TRUE(cluster.StartCoordinator());
  // A watch started after the restart replays from the start and ends at the final state.
  for (const std::string& id : ids) {
    ASSERT_TRUE(cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Seconds(60))) << id;
  }
  RunResult watch = cluster.Cli({"watch", ids[0]}, absl::Seconds(30));
  EXPECT_EQ(watch.exit_code, 0) << watch.err;
  EXPECT_THAT(watch.out, HasSubstr("SUCCEEDED all jobs done"));
  for (const std::string& id : ids) {
    int attempts = 0;
    EXPECT_EQ(SucceededAttempts(cluster.db_path(), id, &attempts), 1) << id;
  }
  CheckInvariants(cluster.db_path());
}

// An agent dies mid-job: its lease expires and another agent finishes the job.
TEST(SpineE2E, AgentDeathRequeuesToAnotherAgent) {
  Cluster cluster("agent-death", Cluster::WithShortLeases());
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("doomed");
  const std::string contract = cluster.WriteFile("p.textproto", ProbeContract("long", 4000));
  const std::string id = cluster.Submit(contract, "agent-death-1");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitFor(
      [&] {
        nlohmann::json s = cluster.Status(id);
        return !s.is_null() && s["jobs"][0]["state"] == "JOB_LEASED";
      },
      absl::Seconds(20)));
  cluster.KillAgent("doomed");
  cluster.StartAgent("survivor");
  ASSERT_TRUE(cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Seconds(60)));
  nlohmann::json s = cluster.Status(id);
  EXPECT_EQ(s["jobs"][0]["attempt"], 2);
  int attempts = 0;
  EXPECT_EQ(SucceededAttempts(cluster.db_path(), id, &attempts), 1);
  EXPECT_EQ(attempts, 2);
  CheckInvariants(cluster.db_path());
}

// Cancelling a campaign reaches the agent running its job, which stops early.
TEST(SpineE2E, CancelStopsRunningJob) {
  Cluster cluster("cancel");
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu-1");
  const std::string contract = cluster.WriteFile("p.textproto", ProbeContract("slow", 30000));
  const std::string id = cluster.Submit(contract, "cancel-1");
  ASSERT_TRUE(WaitFor(
      [&] {
        nlohmann::json s = cluster.Status(id);
        return !s.is_null() && s["jobs"][0]["state"] == "JOB_LEASED";
      },
      absl::Seconds(20)));
  RunResult cancel = cluster.Cli({"cancel", id, "--reason", "test"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cluster.Status(id)["state"], "CAMPAIGN_CANCELLED");
  // The agent is free again well before the 30 s probe would have ended.
  const std::string quick = cluster.WriteFile("q.textproto", ProbeContract("quick", 100));
  const std::string id2 = cluster.Submit(quick, "cancel-2");
  EXPECT_TRUE(cluster.WaitForState(id2, "CAMPAIGN_SUCCEEDED", absl::Seconds(20)));
  CheckInvariants(cluster.db_path());
}

// One coordinator per data dir: a second one on the same dir is refused naming the holder's
// pid, one on the same port fails to listen (no SO_REUSEPORT), and neither changes anything.
TEST(SpineE2E, SecondCoordinatorIsRefusedAndTheFirstKeepsServing) {
  Cluster cluster("second-coordinator");
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu-1");
  const std::string data_dir = cluster.dir() + "/data";
  RunResult same_dir =
      e2e::Run({BinDir() + "/tailor-coordinator", "--data-dir", data_dir, "--listen",
                "127.0.0.1:0", "--launcher", "none"},
               absl::Seconds(30));
  EXPECT_EQ(same_dir.exit_code, 1);
  EXPECT_THAT(same_dir.err,
              HasSubstr(absl::StrCat("data dir '", data_dir,
                                     "' is in use by another tailor-coordinator (pid ",
                                     cluster.coordinator()->pid(), " on host ")));
  RunResult same_port =
      e2e::Run({BinDir() + "/tailor-coordinator", "--data-dir", cluster.dir() + "/other-data",
           "--listen", absl::StrCat("127.0.0.1:", cluster.port()), "--launcher", "none"},
          absl::Seconds(30));
  EXPECT_EQ(same_port.exit_code, 1);
  EXPECT_THAT(same_port.err, HasSubstr("cannot listen on 127.0.0.1:"));
  // Every call still reaches the first coordinator.
  const std::string contract = cluster.WriteFile("p.textproto", ProbeContract("after", 100));
  for (int i = 0; i < 4; ++i) {
    const std::string id = cluster.Submit(contract, absl::StrCat("after-", i));
    ASSERT_FALSE(id.empty());
    EXPECT_TRUE(cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Seconds(30)));
  }
  CheckInvariants(cluster.db_path());
}

// A database lost beside its blobs is refused with the recovery steps, not started empty
// (where an old request id would create a new campaign).
TEST(SpineE2E, EmptiedDatabaseBesideBlobsIsRefused) {
  Cluster cluster("lost-db");
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu-1");
  const std::string id = cluster.Submit(
      cluster.WriteFile("p.textproto", ProbeContract("before", 100)), "lost-1");
  ASSERT_TRUE(cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Seconds(30)));
  cluster.KillCoordinator();
  {  // an artifact of an earlier campaign
    auto blobs = storage::BlobStore::Open(cluster.dir() + "/data/blobs");
    ASSERT_TRUE(blobs.ok()) << blobs.status();
    ASSERT_TRUE((*blobs)->Put("artifact bytes").ok());
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::resize_file(cluster.db_path() + suffix, 0);
  }
  RunResult start =
      e2e::Run({BinDir() + "/tailor-coordinator", "--data-dir", cluster.dir() + "/data",
                "--listen", "127.0.0.1:0", "--launcher", "none"},
               absl::Seconds(30));
  EXPECT_EQ(start.exit_code, 1);
  EXPECT_THAT(start.err, HasSubstr("tailor.db is empty (0 bytes) but blobs/ holds artifacts"));
  EXPECT_THAT(start.err, HasSubstr("restore the latest tailor-backup"));
  EXPECT_EQ(std::filesystem::file_size(cluster.db_path()), 0u);  // nothing was written
}

// A live agent's name cannot be taken over by another process (another work dir, so another
// registration secret): it is refused with the live agent named, and the first keeps working.
TEST(SpineE2E, LiveAgentNameIsNotTakenOver) {
  Cluster cluster("agent-identity");
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu-1");
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(cluster.dir() + "/agent-cpu-1.log").find("registered with") !=
                   std::string::npos; },
      absl::Seconds(20)));
  std::filesystem::create_directories(cluster.dir() + "/impostor-work");
  Process impostor({BinDir() + "/tailor-profiler-agent", "--coordinator",
                    absl::StrCat("127.0.0.1:", cluster.port()), "--device", "cpu", "--name",
                    "cpu-1", "--work-dir", cluster.dir() + "/impostor-work"},
                   cluster.dir() + "/impostor.log");
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(cluster.dir() + "/impostor.log").find("belongs to live agent") !=
                   std::string::npos; },
      absl::Seconds(20)))
      << ReadFile(cluster.dir() + "/impostor.log");
  const std::string id = cluster.Submit(
      cluster.WriteFile("p.textproto", ProbeContract("mine", 100)), "identity-1");
  ASSERT_TRUE(cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Seconds(30)));
  EXPECT_THAT(ReadFile(cluster.dir() + "/impostor.log"), Not(HasSubstr("registered with")));
  nlohmann::json job = cluster.Status(id)["jobs"][0];
  RunResult agents = cluster.Cli({"agents", "--json"});
  ASSERT_EQ(agents.exit_code, 0) << agents.err;
  EXPECT_EQ(nlohmann::json::parse(agents.out)["agents"].size(), 1u) << agents.out;
  EXPECT_EQ(job["agent_id"], nlohmann::json::parse(agents.out)["agents"][0]["id"]);
  impostor.Signal(SIGKILL);
}

}  // namespace
}  // namespace tailor::e2e
