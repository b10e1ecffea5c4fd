// The Slurm launcher's logic against a scripted SlurmClient and a FakeClock: what it submits,
// how often it asks the controller, which Slurm states become which coordinator calls, and
// reconciliation after a restart. The last tests run it against the real Coordinator.
#include "coordinator/launchers/slurm_launcher.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

class FakeSlurm : public SlurmClient {
 public:
  absl::StatusOr<std::string> Submit(const std::string& script_path) override {
    submitted.push_back(script_path);
    if (during_submit) during_submit();
    if (!submit_errors.empty()) {
      absl::Status st = submit_errors.front();
      submit_errors.erase(submit_errors.begin());
      return st;
    }
    // Like the controller: an accepted job is in the queue at once, under its script's name.
    std::ifstream in(script_path);
    std::string line, name;
    while (std::getline(in, line)) {
      if (line.rfind("#SBATCH --job-name=", 0) == 0) name = line.substr(19);
    }
    const std::string id = absl::StrCat(next_id++);
    Set(id, "PENDING", "", name);
    return id;
  }
  absl::StatusOr<std::vector<SlurmJobInfo>> Queue() override {
    ++queue_calls;
    if (!queue_error.ok()) return queue_error;
    return queue;
  }
  absl::StatusOr<std::vector<SlurmJobInfo>> Accounting(
      const std::vector<std::string>& ids) override {
    accounting_asked.push_back(ids);
    if (!accounting_error.ok()) return accounting_error;
    return accounting;
  }
  absl::Status Cancel(const std::vector<std::string>& ids) override {
    cancelled.insert(cancelled.end(), ids.begin(), ids.end());
    return absl::OkStatus();
  }

  void Set(const std::string& id, const std::string& state, const std::string& reason = "",
           const std::string& name = "") {
    for (SlurmJobInfo& j : queue) {
      if (j.job_id == id) {
        j.state = state;
        j.reason = reason;
        return;
      }
    }
    SlurmJobInfo j;
    j.job_id = id;
    j.state = state;
    j.reason = reason;
    j.name = name;
    queue.push_back(j);
  }
  void Remove(const std::string& id) {
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->job_id == id) {
        queue.erase(it);
        return;
      }
    }
  }

  int next_id = 101;
  std::vector<std::string> submitted;
  std::vector<absl::Status> submit_errors;
  std::function<void()> during_submit;
  std::vector<SlurmJobInfo> queue;
  absl::Status queue_error;
  int queue_calls = 0;
  std::vector<SlurmJobInfo> accounting;
  absl::Status accounting_error =
      absl::UnimplementedError("sacct: Slurm accounting storage is disabled");
  std::vector<std::vector<std::string>> accounting_asked;
  std::vector<std::string> cancelled;
};

class RecordingSink : public SlurmAttemptSink {
 public:
  struct Record {
    std::string lease, id, state, reason;
    bool operator==(const Record& o) const {
      return lease == o.lease && id == o.id && state == o.state && reason == o.reason;
    }
  };
  struct Failure {
    std::string lease, error;
    bool retryable;
  };
  absl::Status RecordLaunch(const std::string& lease_id, const std::string& id,
                            const std::string& state, const std::string& reason) override {
    if (gone.count(lease_id)) return absl::FailedPreconditionError("lease not active");
    records.push_back({lease_id, id, state, reason});
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> KeepAlive(
      const std::vector<std::string>& lease_ids) override {
    kept.push_back(lease_ids);
    std::vector<std::string> out;
    for (const auto& l : lease_ids) {
      if (gone.count(l)) out.push_back(l);
    }
    return out;
  }
  absl::Status FailAttempt(const std::string& lease_id, const std::string& error,
                           bool retryable) override {
    if (gone.count(lease_id)) return absl::FailedPreconditionError("lease not active");
    failures.push_back({lease_id, error, retryable});
    return absl::OkStatus();
  }
  std::vector<Record> records;
  std::vector<std::vector<std::string>> kept;
  std::vector<Failure> failures;
  std::set<std::string> gone;
};

std::ostream& operator<<(std::ostream& os, const RecordingSink::Record& r) {
  return os << "{" << r.lease << ", " << r.id << ", " << r.state << ", " << r.reason << "}";
}

v1::AcquireJobResponse Assignment(const std::string& lease, const std::string& job, int attempt,
                                  int nodes = 1, int ranks = 2) {
  v1::AcquireJobResponse a;
  a.set_assigned(true);
  a.set_campaign_id("c-1");
  a.mutable_lease()->set_id(lease);
  a.mutable_lease()->set_attempt(attempt);
  a.mutable_lease()->set_job_id(job);
  a.mutable_job()->set_id(job);
  a.mutable_job()->set_kind("rank");
  a.mutable_job()->set_campaign_id("c-1");
  v1::ResourceSpec* r = a.mutable_job()->mutable_resources();
  r->set_nodes(nodes);
  r->set_ranks_per_node(ranks);
  r->set_time_limit_s(3600);
  r->set_placement("launcher");
  return a;
}

class SlurmLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("slurm-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    options_.worker_bin = "/opt/tailor/bin/tailor-worker";
    options_.coordinator = "head:50051";
    options_.data_dir = dir_.string();
    options_.partition = "debug";
    options_.poll_interval = absl::Seconds(10);
    options_.keepalive_interval = absl::Seconds(5);
    Make();
  }
  void TearDown() override {
    launcher_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Make() {
    launcher_ = std::make_unique<SlurmLauncher>(options_, &slurm_, &sink_, &clock_,
                                                /*start_thread=*/false);
  }
  // Advances time in 1 s steps, running the loop each step.
  void Run(absl::Duration d) {
    for (absl::Duration t; t < d; t += absl::Seconds(1)) {
      clock_.Advance(absl::Seconds(1));
      launcher_->RunOnce();
    }
  }

  std::filesystem::path dir_;
  SlurmLauncherOptions options_;
  FakeSlurm slurm_;
  RecordingSink sink_;
  FakeClock clock_;
  std::unique_ptr<SlurmLauncher> launcher_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(SlurmLauncherTest, ScriptCarriesResourcesAndTheWorkerEnvironment) {
  v1::AcquireJobResponse a = Assignment("l-1", "j-1", 3, /*nodes=*/2, /*ranks=*/4);
  v1::ResourceSpec* r = a.mutable_job()->mutable_resources();
  r->set_gpus_per_node(2);
  r->set_gpu_type("h100");
  r->set_memory_mib(1024);
  r->set_time_limit_s(90061);
  options_.account = "ml";
  options_.sbatch_args = {"--qos=high"};
  absl::StatusOr<std::string> script = BuildSbatchScript(options_, a);
  ASSERT_THAT(script, IsOk());
  const std::string base = dir_.string();
  for (const std::string& line : {
           std::string("#SBATCH --job-name=tailor.c-1.j-1.a3"),
           std::string("#SBATCH --nodes=2"),
           std::string("#SBATCH --ntasks-per-node=4"),
           std::string("#SBATCH --gres=gpu:h100:2"),
           std::string("#SBATCH --mem=1024M"),
           std::string("#SBATCH --time=1-01:01:01"),
           std::string("#SBATCH --partition=debug"),
           std::string("#SBATCH --account=ml"),
           absl::StrCat("#SBATCH --output=", base, "/logs/j-1/attempt-3.log"),
           std::string("#SBATCH --open-mode=append"),
           std::string("#SBATCH --no-requeue"),
           std::string("#SBATCH --qos=high"),
           std::string("export TAILOR_COORDINATOR='head:50051'"),
           std::string("export TAILOR_LEASE_ID='l-1'"),
           absl::StrCat("export TAILOR_WORK_DIR='", base, "/work/j-1/attempt-3'"),
           absl::StrCat("export TAILOR_CHECKPOINT_DIR='", base, "/work/j-1/checkpoints'"),
           std::string("export TAILOR_LAUNCHER=slurm"),
           std::string("export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))"),
           std::string("unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR"),
       }) {
    EXPECT_THAT(*script, HasSubstr(line + "\n")) << *script;
  }
  EXPECT_THAT(*script, HasSubstr("exec srun --kill-on-bad-exit=1 --ntasks-per-node=4 /bin/sh -c"));
  EXPECT_THAT(*script, HasSubstr(absl::StrCat(" tailor-rank '/opt/tailor/bin/tailor-worker' '",
                                              base, "/logs/j-1/attempt-3'\n")));
  // No GPUs asked: no --gres line at all; an untyped request asks for any GPU.
  r->set_gpus_per_node(0);
  EXPECT_THAT(*BuildSbatchScript(options_, a), ::testing::Not(HasSubstr("--gres")));
  r->set_gpus_per_node(1);
  r->set_gpu_type("");
  EXPECT_THAT(*BuildSbatchScript(options_, a), HasSubstr("#SBATCH --gres=gpu:1\n"));
  options_.requeue = true;
  EXPECT_THAT(*BuildSbatchScript(options_, a), HasSubstr("#SBATCH --requeue\n"));
}

TEST_F(SlurmLauncherTest, ScriptRefusesValuesThatWouldEscapeTheirLine) {
  v1::AcquireJobResponse a = Assignment("l-1", "j-1", 1);
  a.mutable_job()->mutable_resources()->set_gpus_per_node(1);
  a.mutable_job()->mutable_resources()->set_gpu_type("h100\n#SBATCH --uid=0");
  EXPECT_THAT(BuildSbatchScript(options_, a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("resources.gpu_type: must be a GRES type name")));
  a.mutable_job()->mutable_resources()->set_gpu_type("h100");
  options_.sbatch_args = {"-p x"};
  EXPECT_THAT(BuildSbatchScript(options_, a),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sbatch argument '-p x'")));
  // Launch refuses it too (not retryable: the coordinator fails the job with this message).
  Make();
  a.mutable_job()->mutable_resources()->set_gpu_type("h100 --x");
  EXPECT_THAT(launcher_->Launch(a), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

TEST_F(SlurmLauncherTest, LaunchKeepsTheScriptAndRecordsTheJobId) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  const std::string script = (dir_ / "logs/j-1/attempt-1.sbatch").string();
  EXPECT_THAT(ReadAll(script), HasSubstr("#SBATCH --job-name=tailor.c-1.j-1.a1"));
  EXPECT_THAT(slurm_.submitted, IsEmpty()) << "Launch must not block on sbatch";
  launcher_->RunOnce();
  EXPECT_THAT(slurm_.submitted, ElementsAre(script));
  EXPECT_THAT(sink_.records, ElementsAre(RecordingSink::Record{"l-1", "101", "PENDING", ""}));
  EXPECT_EQ(launcher_->stats().sbatch, 1);
  EXPECT_EQ(launcher_->stats().squeue, 0);
  EXPECT_EQ(launcher_->TrackedForTest(), 1u);
}

TEST_F(SlurmLauncherTest, RefusedSubmissionFailsTheJobForGoodWithSlurmsMessage) {
  slurm_.submit_errors = {absl::FailedPreconditionError(
      "Slurm refused the job: sbatch: error: Batch job submission failed: Requested node "
      "configuration is not available")};
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  ASSERT_EQ(sink_.failures.size(), 1u);
  EXPECT_EQ(sink_.failures[0].lease, "l-1");
  EXPECT_EQ(sink_.failures[0].error,
            "Slurm refused the job: sbatch: error: Batch job submission failed: Requested node "
            "configuration is not available");
  EXPECT_FALSE(sink_.failures[0].retryable);
  EXPECT_EQ(launcher_->TrackedForTest(), 0u);
  Run(absl::Seconds(30));
  EXPECT_EQ(slurm_.queue_calls, 0) << "nothing tracked, nothing to ask";
}

TEST_F(SlurmLauncherTest, UnreachableControllerIsARetryableFailure) {
  slurm_.submit_errors = {absl::UnavailableError(
      "Slurm did not take the job: sbatch: error: Batch job submission failed: Unable to "
      "contact slurm controller (connect failure)")};
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  ASSERT_EQ(sink_.failures.size(), 1u);
  EXPECT_TRUE(sink_.failures[0].retryable);
  EXPECT_THAT(sink_.failures[0].error, HasSubstr("Unable to contact slurm controller"));
}

TEST_F(SlurmLauncherTest, OneSqueuePerIntervalWhateverTheNumberOfJobs) {
  for (int i = 0; i < 200; ++i) {
    ASSERT_THAT(launcher_->Launch(Assignment(absl::StrCat("l-", i), absl::StrCat("j-", i), 1)),
                IsOk());
  }
  launcher_->RunOnce();
  ASSERT_EQ(slurm_.submitted.size(), 200u);
  for (int i = 0; i < 200; ++i) slurm_.Set(absl::StrCat(101 + i), "PENDING", "Priority");
  Run(absl::Seconds(60));
  EXPECT_EQ(slurm_.queue_calls, 6);
  EXPECT_THAT(slurm_.accounting_asked, IsEmpty());
  // Leases are extended for all 200 in one call, every keepalive interval.
  ASSERT_FALSE(sink_.kept.empty());
  EXPECT_EQ(sink_.kept.back().size(), 200u);
  EXPECT_GE(sink_.kept.size(), 12u);
}

TEST_F(SlurmLauncherTest, StateChangesAreRecordedOnceEach) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  slurm_.Set("101", "PENDING", "Priority");
  Run(absl::Seconds(10));
  slurm_.Set("101", "PENDING", "Resources");
  Run(absl::Seconds(10));
  Run(absl::Seconds(10));  // no change: no write
  slurm_.Set("101", "RUNNING", "");
  Run(absl::Seconds(10));
  EXPECT_THAT(sink_.records, ElementsAre(RecordingSink::Record{"l-1", "101", "PENDING", ""},
                                         RecordingSink::Record{"l-1", "101", "PENDING", "Priority"},
                                         RecordingSink::Record{"l-1", "101", "PENDING", "Resources"},
                                         RecordingSink::Record{"l-1", "101", "RUNNING", ""}));
  EXPECT_THAT(sink_.failures, IsEmpty());
}

TEST_F(SlurmLauncherTest, JobThatEndsWithoutACompletionReportIsRetried) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"CANCELLED", "Slurm job 101 was cancelled outside tailor (scancel or an administrator)"},
      {"TIMEOUT", "Slurm job 102 reached its time limit (TIMEOUT)"},
      {"NODE_FAIL", "Slurm job 103 lost a node (NODE_FAIL)"},
      {"PREEMPTED", "Slurm job 104 was preempted (PREEMPTED)"},
      {"COMPLETED", "Slurm job 105 completed without a completion report from rank 0"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_THAT(launcher_->Launch(Assignment(absl::StrCat("l-", i), absl::StrCat("j-", i), 1)),
                IsOk());
  }
  launcher_->RunOnce();
  for (size_t i = 0; i < cases.size(); ++i) slurm_.Set(absl::StrCat(101 + i), cases[i].first);
  SlurmJobInfo failed;
  Run(absl::Seconds(10));
  ASSERT_EQ(sink_.failures.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(sink_.failures[i].lease, absl::StrCat("l-", i));
    EXPECT_EQ(sink_.failures[i].error, cases[i].second);
    EXPECT_TRUE(sink_.failures[i].retryable);
  }
  // The final Slurm state is recorded before the failure, for `tailor status`.
  EXPECT_EQ(sink_.records.back(),
            (RecordingSink::Record{"l-4", "105", "COMPLETED", ""}));
  EXPECT_EQ(launcher_->TrackedForTest(), 0u);
}

TEST_F(SlurmLauncherTest, FailedJobNamesItsExitCodeAndReason) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  slurm_.Set("101", "FAILED", "NonZeroExitCode");
  slurm_.queue[0].exit_code = 256;  // wait status of exit(1)
  Run(absl::Seconds(10));
  ASSERT_EQ(sink_.failures.size(), 1u);
  EXPECT_EQ(sink_.failures[0].error,
            "Slurm job 101 ended FAILED (exit code 1) without a completion report from rank 0, "
            "reason NonZeroExitCode");
}

TEST_F(SlurmLauncherTest, JobThatLeftTheQueueIsLookedUpInAccounting) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  ASSERT_THAT(launcher_->Launch(Assignment("l-2", "j-2", 1)), IsOk());
  launcher_->RunOnce();
  slurm_.accounting_error = absl::OkStatus();
  SlurmJobInfo done;
  done.job_id = "101";
  done.state = "TIMEOUT";
  slurm_.accounting = {done};
  slurm_.Remove("101");
  slurm_.Remove("102");
  Run(absl::Seconds(10));
  // Both left the queue: one batched sacct for the two.
  ASSERT_EQ(slurm_.accounting_asked.size(), 1u);
  EXPECT_THAT(slurm_.accounting_asked[0], UnorderedElementsAre("101", "102"));
  ASSERT_EQ(sink_.failures.size(), 2u);
  EXPECT_EQ(sink_.failures[0].error, "Slurm job 101 reached its time limit (TIMEOUT)");
  EXPECT_EQ(sink_.failures[1].error,
            "Slurm job 102 left the queue without a completion report from rank 0 (final state "
            "unknown: sacct has no record of it)");
}

TEST_F(SlurmLauncherTest, WithoutAccountingAVanishedJobFailsRetryable) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  slurm_.Remove("101");
  Run(absl::Seconds(10));
  ASSERT_EQ(sink_.failures.size(), 1u);
  EXPECT_EQ(sink_.failures[0].error,
            "Slurm job 101 left the queue without a completion report from rank 0 (final state "
            "unknown: sacct: Slurm accounting storage is disabled)");
  EXPECT_TRUE(sink_.failures[0].retryable);
}

TEST_F(SlurmLauncherTest, CompletionByRank0EndsTrackingWithoutAnyCancel) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  slurm_.Set("101", "RUNNING");
  Run(absl::Seconds(10));
  sink_.gone.insert("l-1");  // rank 0 completed the lease
  Run(absl::Seconds(5));
  EXPECT_EQ(launcher_->TrackedForTest(), 0u);
  const int polls = slurm_.queue_calls;
  Run(absl::Seconds(60));
  EXPECT_EQ(slurm_.queue_calls, polls) << "an idle launcher makes no controller calls";
  EXPECT_THAT(slurm_.cancelled, IsEmpty());
  EXPECT_THAT(sink_.failures, IsEmpty());
}

TEST_F(SlurmLauncherTest, LateFailureAfterCompletionChangesNothing) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  slurm_.Set("101", "COMPLETED");
  sink_.gone.insert("l-1");  // completed between the keepalive and the poll
  clock_.Advance(absl::Seconds(10));
  launcher_->RunOnce();
  EXPECT_THAT(sink_.failures, IsEmpty());
  EXPECT_EQ(launcher_->TrackedForTest(), 0u);
}

TEST_F(SlurmLauncherTest, CancelReachesScancel) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  launcher_->Cancel("l-1");
  launcher_->RunOnce();
  EXPECT_THAT(slurm_.cancelled, ElementsAre("101"));
  EXPECT_EQ(launcher_->TrackedForTest(), 0u);
  EXPECT_EQ(launcher_->stats().scancel, 1);
}

TEST_F(SlurmLauncherTest, CancelBeforeSubmissionSubmitsNothing) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->Cancel("l-1");
  launcher_->RunOnce();
  EXPECT_THAT(slurm_.submitted, IsEmpty());
  EXPECT_THAT(slurm_.cancelled, IsEmpty());
}

TEST_F(SlurmLauncherTest, CancelDuringSbatchCancelsTheNewJob) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  slurm_.during_submit = [this] { launcher_->Cancel("l-1"); };
  launcher_->RunOnce();
  EXPECT_THAT(slurm_.cancelled, ElementsAre("101"));
  EXPECT_THAT(sink_.records, IsEmpty());
  EXPECT_EQ(launcher_->TrackedForTest(), 0u);
}

TEST_F(SlurmLauncherTest, LeaseGoneBeforeTheRecordCancelsTheAllocation) {
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  sink_.gone.insert("l-1");  // expired while sbatch ran
  launcher_->RunOnce();
  EXPECT_THAT(slurm_.cancelled, ElementsAre("101"));
  EXPECT_EQ(launcher_->TrackedForTest(), 0u);
}

TEST_F(SlurmLauncherTest, AdoptMatchesByIdAndByNameWithoutResubmitting) {
  slurm_.Set("101", "RUNNING");
  slurm_.Set("205", "PENDING", "Resources", "tailor.c-1.j-2.a1");
  slurm_.Set("206", "RUNNING", "", "tailor.c-1.j-9.a1");  // someone else's
  launcher_->Adopt({{"l-1", "j-1", "c-1", 1, "101"},
                    {"l-2", "j-2", "c-1", 1, ""},
                    {"l-3", "j-3", "c-1", 2, ""}});
  launcher_->RunOnce();
  EXPECT_EQ(slurm_.queue_calls, 1) << "reconciliation polls at once";
  EXPECT_THAT(sink_.records,
              UnorderedElementsAre(RecordingSink::Record{"l-1", "101", "RUNNING", ""},
                                   RecordingSink::Record{"l-2", "205", "PENDING", "Resources"}));
  EXPECT_THAT(sink_.failures, IsEmpty());
  // l-3 is not in the queue, but its sbatch may still be in flight: keep its lease for now.
  ASSERT_FALSE(sink_.kept.empty());
  EXPECT_THAT(sink_.kept.back(), UnorderedElementsAre("l-1", "l-2", "l-3"));
  Run(absl::Seconds(30));
  ASSERT_EQ(sink_.failures.size(), 1u);
  EXPECT_EQ(sink_.failures[0].lease, "l-3");
  EXPECT_EQ(sink_.failures[0].error,
            "no Slurm job named tailor.c-1.j-3.a2 exists: the coordinator stopped (or sbatch "
            "timed out) before Slurm accepted it");
  EXPECT_TRUE(sink_.failures[0].retryable);
  EXPECT_THAT(slurm_.submitted, IsEmpty()) << "reconciliation never submits";
  EXPECT_THAT(slurm_.cancelled, IsEmpty());
}

TEST_F(SlurmLauncherTest, AdoptKeepsOneJobWhenANameAppearsTwice) {
  slurm_.Set("300", "CANCELLED", "", "tailor.c-1.j-1.a1");
  slurm_.Set("301", "RUNNING", "", "tailor.c-1.j-1.a1");
  slurm_.Set("302", "PENDING", "Priority", "tailor.c-1.j-1.a1");
  launcher_->Adopt({{"l-1", "j-1", "c-1", 1, ""}});
  launcher_->RunOnce();
  EXPECT_THAT(sink_.records, ElementsAre(RecordingSink::Record{"l-1", "301", "RUNNING", ""}));
  EXPECT_THAT(slurm_.cancelled, ElementsAre("302"));
}

TEST_F(SlurmLauncherTest, SbatchWithoutAnswerIsFoundByName) {
  slurm_.submit_errors = {absl::DeadlineExceededError("sbatch gave no answer")};
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  EXPECT_THAT(sink_.failures, IsEmpty());
  slurm_.Set("777", "RUNNING", "", "tailor.c-1.j-1.a1");
  Run(absl::Seconds(10));
  EXPECT_THAT(sink_.records, ElementsAre(RecordingSink::Record{"l-1", "777", "RUNNING", ""}));
  EXPECT_EQ(slurm_.submitted.size(), 1u) << "never submitted twice";
}

TEST_F(SlurmLauncherTest, ControllerOutageKeepsLeasesOnlyForTheGracePeriod) {
  options_.controller_grace = absl::Minutes(1);
  Make();
  ASSERT_THAT(launcher_->Launch(Assignment("l-1", "j-1", 1)), IsOk());
  launcher_->RunOnce();
  slurm_.queue_error = absl::UnavailableError("squeue --json failed (exit 1): connect failure");
  Run(absl::Seconds(55));
  EXPECT_THAT(sink_.kept.back(), ElementsAre("l-1"));
  EXPECT_THAT(sink_.failures, IsEmpty());
  const size_t calls = sink_.kept.size();
  Run(absl::Seconds(30));
  // No more extensions: the coordinator's TTL expires the lease and retries the job.
  EXPECT_LE(sink_.kept.size(), calls + 1);
  slurm_.queue_error = absl::OkStatus();
  slurm_.Set("101", "RUNNING");
  Run(absl::Seconds(10));
  EXPECT_THAT(sink_.kept.back(), ElementsAre("l-1")) << "seen alive again: extended again";
}

// --- parsing ---------------------------------------------------------------------------------

TEST(SlurmParseTest, SqueueJson) {
  auto jobs = ParseSqueueJson(R"({"meta": {}, "errors": [], "jobs": [
    {"job_id": 12, "name": "tailor.c.j.a1", "job_state": "PENDING", "state_reason": "Resources",
     "exit_code": 0, "restart_cnt": 0, "start_time": 0, "end_time": 0},
    {"job_id": 13, "name": "x", "job_state": ["RUNNING", "COMPLETING"], "state_reason": "None",
     "exit_code": {"set": true, "number": 0}, "start_time": 1700000000}]})");
  ASSERT_THAT(jobs, IsOk());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].job_id, "12");
  EXPECT_EQ((*jobs)[0].name, "tailor.c.j.a1");
  EXPECT_EQ((*jobs)[0].state, "PENDING");
  EXPECT_EQ((*jobs)[0].reason, "Resources");
  EXPECT_EQ((*jobs)[0].start_time, absl::InfinitePast());
  EXPECT_EQ((*jobs)[1].state, "RUNNING");
  EXPECT_EQ((*jobs)[1].reason, "") << "Slurm's None means no reason";
  EXPECT_EQ((*jobs)[1].start_time, absl::FromUnixSeconds(1700000000));
  EXPECT_THAT(ParseSqueueJson("slurm_load_jobs error: Unable to contact slurm controller"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("not JSON")));
  EXPECT_THAT(ParseSqueueJson(R"({"errors": [{"error": "boom"}], "jobs": []})"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("boom")));
  EXPECT_THAT(ParseSqueueJson(R"({"meta": {}})"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("no \"jobs\" array")));
}

TEST(SlurmParseTest, SacctJson) {
  auto jobs = ParseSacctJson(R"({"jobs": [{"job_id": 7, "name": "n",
    "state": {"current": "NODE_FAIL", "reason": "None"},
    "exit_code": {"status": "FAILED", "return_code": 1},
    "time": {"start": 1700000000, "end": 1700000100}}]})");
  ASSERT_THAT(jobs, IsOk());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].state, "NODE_FAIL");
  EXPECT_EQ((*jobs)[0].exit_code, 1);
  EXPECT_EQ((*jobs)[0].end_time, absl::FromUnixSeconds(1700000100));
}

TEST(SlurmParseTest, SbatchOutputAndFailures) {
  EXPECT_EQ(*ParseSbatchParsable("4242\n"), "4242");
  EXPECT_EQ(*ParseSbatchParsable("sbatch: warning: x\n77;cluster\n"), "77");
  EXPECT_THAT(ParseSbatchParsable("Submitted batch job"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("printed no job id")));
  CommandResult refused{1, "",
                        "sbatch: error: Batch job submission failed: Requested node "
                        "configuration is not available\n"};
  EXPECT_THAT(SbatchFailure(refused),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "Slurm refused the job: sbatch: error: Batch job submission failed: "
                       "Requested node configuration is not available"));
  CommandResult down{1, "",
                     "sbatch: error: Batch job submission failed: Unable to contact slurm "
                     "controller (connect failure)"};
  EXPECT_THAT(SbatchFailure(down), StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
  CommandResult missing{-1, "", "cannot run sbatch: No such file or directory"};
  EXPECT_THAT(SbatchFailure(missing),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("cannot run sbatch")));
  CommandResult killed{137, "", "sbatch did not finish within 1m and was killed"};
  EXPECT_THAT(SbatchFailure(killed), StatusIs(absl::StatusCode::kDeadlineExceeded, ::testing::_));
}

TEST(SlurmParseTest, RunCommandCapturesBothStreamsAndKillsOnTimeout) {
  CommandResult r = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"},
                               absl::Seconds(10));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  const absl::Time start = absl::Now();
  CommandResult slow = RunCommand({"/bin/sh", "-c", "sleep 30"}, absl::Milliseconds(300));
  EXPECT_EQ(slow.exit_code, 128 + 9);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  CommandResult none = RunCommand({"/nonexistent/sbatch"}, absl::Seconds(1));
  EXPECT_NE(none.exit_code, 0);
}

// --- with the real coordinator ------------------------------------------------------------

v1::DeploymentContract RankContract() {
  v1::DeploymentContract c;
  c.set_name("npc");
  c.set_method(v1::AUTOCOMPRESS);
  c.mutable_parent()->set_path("models/parent");
  c.mutable_target()->set_device_kind("cpu");
  c.mutable_workload()->set_batch_size(1);
  c.mutable_workload()->set_input_tokens(128);
  c.mutable_workload()->set_output_tokens(32);
  c.mutable_workload()->set_cached_prefix_tokens(0);
  c.mutable_budget()->set_latency_ms_max(40);
  c.mutable_resources()->mutable_rank()->set_ranks_per_node(2);
  return c;
}

class SlurmCoordinatorTest : public SlurmLauncherTest {
 protected:
  void SetUp() override {
    SlurmLauncherTest::SetUp();
    OpenCore();
  }
  void TearDown() override {
    if (core_) core_->SetLauncher(nullptr);
    launcher_.reset();
    core_.reset();
    SlurmLauncherTest::TearDown();
  }
  void OpenCore() {
    if (core_) core_->SetLauncher(nullptr);
    core_.reset();
    store_.reset();
    auto store = storage::CoordinatorStore::Open((dir_ / "tailor.db").string());
    ASSERT_THAT(store, IsOk());
    store_ = *std::move(store);
    auto blobs = storage::BlobStore::Open((dir_ / "blobs").string());
    ASSERT_THAT(blobs, IsOk());
    blobs_ = *std::move(blobs);
    CoordinatorOptions o;
    o.lease_ttl = absl::Seconds(15);
    o.backoff_base = absl::Seconds(2);
    core_ = std::make_unique<Coordinator>(store_.get(), blobs_.get(), &clock_, o);
    ASSERT_THAT(core_->Recover(), IsOk());
    real_sink_ = std::make_unique<CoordinatorSlurmSink>(core_.get());
    launcher_ = std::make_unique<SlurmLauncher>(options_, &slurm_, real_sink_.get(), &clock_,
                                                /*start_thread=*/false);
    core_->SetLauncher(launcher_.get());
  }
  v1::Job RankJob(const std::string& campaign_id) {
    auto c = core_->GetCampaign(campaign_id);
    EXPECT_THAT(c, IsOk());
    for (const auto& j : c->jobs()) {
      if (j.key() == "rank") return j;
    }
    return v1::Job();
  }
  void Step(absl::Duration d) {
    for (absl::Duration t; t < d; t += absl::Seconds(1)) {
      clock_.Advance(absl::Seconds(1));
      core_->Tick();
      launcher_->RunOnce();
    }
  }

  std::unique_ptr<storage::CoordinatorStore> store_;
  std::unique_ptr<storage::BlobStore> blobs_;
  std::unique_ptr<Coordinator> core_;
  std::unique_ptr<CoordinatorSlurmSink> real_sink_;
};

TEST_F(SlurmCoordinatorTest, JobIdStateAndRetryGoThroughTheCoordinator) {
  auto submitted = core_->Submit(RankContract(), "r1");
  ASSERT_THAT(submitted, IsOk());
  const std::string cid = submitted->first.id();
  launcher_->RunOnce();  // sbatch
  v1::Job job = RankJob(cid);
  EXPECT_EQ(job.state(), v1::JOB_LEASED);
  EXPECT_EQ(job.launcher(), "slurm");
  EXPECT_EQ(job.external_id(), "101");
  EXPECT_EQ(job.external_state(), "PENDING");
  auto attempts = store_->AttemptsOfJob(job.id());
  ASSERT_THAT(attempts, IsOk());
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ((*attempts)[0].external_id, "101");
  EXPECT_EQ((*attempts)[0].launcher, "slurm");

  // Pending for a minute: no worker heartbeats, yet the lease (TTL 15 s) stays alive.
  slurm_.Set("101", "PENDING", "Resources");
  Step(absl::Seconds(60));
  job = RankJob(cid);
  EXPECT_EQ(job.state(), v1::JOB_LEASED);
  EXPECT_EQ(job.external_reason(), "Resources");
  auto queue = core_->ListQueue(v1::ListQueueRequest());
  ASSERT_THAT(queue, IsOk());

  // scancel from outside: a retry with a new Slurm job under a new name.
  slurm_.Set("101", "CANCELLED");
  Step(absl::Seconds(13));  // seen within one poll interval, retried after the 2 s backoff
  job = RankJob(cid);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.state(), v1::JOB_LEASED);
  EXPECT_EQ(job.external_id(), "102");
  EXPECT_THAT(slurm_.submitted.back(), HasSubstr("attempt-2.sbatch"));
  EXPECT_THAT(ReadAll(slurm_.submitted.back()), HasSubstr("--job-name=tailor." + cid + "." +
                                                          job.id() + ".a2"));
  attempts = store_->AttemptsOfJob(job.id());
  ASSERT_EQ(attempts->size(), 2u);
  EXPECT_EQ((*attempts)[0].state, "failed");

  bool final = false;
  auto events = core_->ReadEvents(cid, 0, 1000, &final);
  ASSERT_THAT(events, IsOk());
  std::vector<std::string> slurm_events;
  for (const auto& e : *events) {
    if (e.job_id() == job.id() && e.type() != "job_runnable") {
      slurm_events.push_back(absl::StrCat(e.type(), ": ", e.message()));
    }
  }
  EXPECT_THAT(slurm_events,
              ElementsAre(HasSubstr("job_leased: attempt 1/3 on launcher:slurm"),
                          "job_launched: attempt 1 is slurm job 101 PENDING",
                          "job_external_state: slurm job 101 CANCELLED",
                          HasSubstr("job_retry: attempt 1/3 failed (Slurm job 101 was cancelled "
                                    "outside tailor (scancel or an administrator)); retry in"),
                          HasSubstr("job_leased: attempt 2/3 on launcher:slurm"),
                          "job_launched: attempt 2 is slurm job 102 PENDING"));
}

TEST_F(SlurmCoordinatorTest, RefusalFailsTheCampaignWithSlurmsMessage) {
  slurm_.submit_errors = {absl::FailedPreconditionError(
      "Slurm refused the job: sbatch: error: Batch job submission failed: Requested node "
      "configuration is not available")};
  auto submitted = core_->Submit(RankContract(), "r1");
  ASSERT_THAT(submitted, IsOk());
  launcher_->RunOnce();
  v1::Job job = RankJob(submitted->first.id());
  EXPECT_EQ(job.state(), v1::JOB_FAILED);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.error(),
            "Slurm refused the job: sbatch: error: Batch job submission failed: Requested node "
            "configuration is not available");
  auto c = core_->GetCampaign(submitted->first.id());
  EXPECT_EQ(c->state(), v1::CAMPAIGN_FAILED);
  EXPECT_THAT(c->error(), HasSubstr("Requested node configuration is not available"));
}

TEST_F(SlurmCoordinatorTest, CancellingTheCampaignScancelsItsJob) {
  auto submitted = core_->Submit(RankContract(), "r1");
  ASSERT_THAT(submitted, IsOk());
  launcher_->RunOnce();
  ASSERT_THAT(core_->Cancel(submitted->first.id(), "user"), IsOk());
  launcher_->RunOnce();
  EXPECT_THAT(slurm_.cancelled, ElementsAre("101"));
}

TEST_F(SlurmCoordinatorTest, RestartReconcilesRecordedAndUnrecordedAttempts) {
  auto submitted = core_->Submit(RankContract(), "r1");
  ASSERT_THAT(submitted, IsOk());
  const std::string cid = submitted->first.id();
  launcher_->RunOnce();
  slurm_.Set("101", "RUNNING");
  Step(absl::Seconds(10));
  const std::string lease = RankJob(cid).lease_id();

  // Restart: the new launcher is handed the attempt with its recorded Slurm id.
  OpenCore();
  const int polls = slurm_.queue_calls;
  launcher_->RunOnce();
  EXPECT_EQ(slurm_.queue_calls, polls + 1);
  EXPECT_EQ(launcher_->TrackedForTest(), 1u);
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  Step(absl::Seconds(60));  // running for a minute across the restart: still one attempt
  v1::Job job = RankJob(cid);
  EXPECT_EQ(job.state(), v1::JOB_LEASED);
  EXPECT_EQ(job.attempt(), 1);
  // Rank 0 completes: accepted once.
  v1::CompleteJobRequest done;
  done.set_lease_id(lease);
  done.set_success(true);
  ASSERT_THAT(core_->CompleteJob(done), IsOk());
  EXPECT_THAT(core_->CompleteJob(done), StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  slurm_.Set("101", "COMPLETED");
  Step(absl::Seconds(20));
  const v1::Job succeeded = RankJob(cid);
  EXPECT_EQ(succeeded.state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(succeeded.external_id(), "101");
  EXPECT_EQ(succeeded.external_state(), "") << "Slurm's last polled state is stale after success";
  EXPECT_EQ(launcher_->TrackedForTest(), 0u);
}

TEST_F(SlurmCoordinatorTest, CrashBetweenSbatchAndRecordIsMatchedByName) {
  // The coordinator leased the job, sbatch ran, and it died before recording the id: simulated
  // by a sink that drops the record.
  class DroppingSink : public CoordinatorSlurmSink {
   public:
    using CoordinatorSlurmSink::CoordinatorSlurmSink;
    absl::Status RecordLaunch(const std::string&, const std::string&, const std::string&,
                              const std::string&) override {
      return absl::UnavailableError("killed");
    }
  };
  core_->SetLauncher(nullptr);
  DroppingSink dropping(core_.get());
  launcher_ = std::make_unique<SlurmLauncher>(options_, &slurm_, &dropping, &clock_, false);
  core_->SetLauncher(launcher_.get());
  auto submitted = core_->Submit(RankContract(), "r1");
  ASSERT_THAT(submitted, IsOk());
  const std::string cid = submitted->first.id();
  launcher_->RunOnce();
  ASSERT_EQ(slurm_.submitted.size(), 1u);
  const v1::Job before = RankJob(cid);
  EXPECT_EQ(before.external_id(), "");
  slurm_.Set("101", "RUNNING", "", SlurmLauncher::JobName(cid, before.id(), 1));

  core_->SetLauncher(nullptr);
  launcher_.reset();
  OpenCore();
  launcher_->RunOnce();
  const v1::Job after = RankJob(cid);
  EXPECT_EQ(after.external_id(), "101");
  EXPECT_EQ(after.external_state(), "RUNNING");
  EXPECT_EQ(after.attempt(), 1);
  EXPECT_EQ(slurm_.submitted.size(), 1u) << "no second allocation";
  EXPECT_THAT(slurm_.cancelled, IsEmpty());
}

}  // namespace
}  // namespace tailor::coordinator
