// The real tailor-worker against a coordinator it cannot finish with (a scripted in-process
// AgentService): rank 0 keeps a finished result in the job's checkpoint dir until the
// coordinator has it, gives up after TAILOR_GIVE_UP_AFTER_S of unanswered calls instead of
// retrying forever, and the job's next attempt reports the stored result without running the
// job again (docs/reliability.md "A coordinator that never returns").
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/finished_result.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/process.h"
#include "tailor/v1/job_output.pb.h"
#include "tests/unit/agent/fake_agent_service.h"

namespace tailor::e2e {
namespace {

using ::testing::HasSubstr;

class WorkerOutageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/worker-outage-", ::getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/work");
    checkpoints_ = dir_ + "/checkpoints";
    // A rank job whose parent does not exist: running it would fail, so a success can only be
    // the stored result.
    assignment_.mutable_job()->set_id("j-rank");
    assignment_.mutable_job()->set_kind("rank");
    assignment_.mutable_lease()->set_id("lease-2");
    assignment_.mutable_lease()->set_job_id("j-rank");
    assignment_.mutable_lease()->set_attempt(2);
    assignment_.mutable_contract()->mutable_parent()->set_path(dir_ + "/no-such-parent");
    // What the worker reports is opaque to it; a model digest stands for the rank's output.
    stored_.set_model_digest(std::string(64, 'a'));
    stored_.set_world_size(1);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::map<std::string, std::string> RankEnv(const std::string& coordinator, int rank,
                                             int world, const std::string& port,
                                             const std::string& give_up_s) {
    return {{"TAILOR_COORDINATOR", coordinator},
            {"TAILOR_LEASE_ID", "lease-2"},
            {"TAILOR_WORK_DIR", dir_ + "/work"},
            {"TAILOR_CHECKPOINT_DIR", checkpoints_},
            {"TAILOR_LAUNCHER", "local"},
            {"RANK", absl::StrCat(rank)},
            {"WORLD_SIZE", absl::StrCat(world)},
            {"LOCAL_RANK", absl::StrCat(rank)},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", port},
            {"TAILOR_GIVE_UP_AFTER_S", give_up_s},
            // A rank waiting for a peer that never comes fails in seconds, not minutes.
            {"TAILOR_COLLECTIVE_TIMEOUT_S", "20"}};
  }

  RunResult RunWorker(const std::string& coordinator, const std::string& give_up_s) {
    return e2e::Run({BinDir() + "/tailor-worker"}, absl::Seconds(120),
                    RankEnv(coordinator, 0, 1, FreePort(), give_up_s));
  }

  // A port nothing listens on now (the kernel's pick for an ephemeral bind).
  static std::string FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    int port = 29599;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    close(fd);
    return absl::StrCat(port);
  }

  std::string dir_;
  std::string checkpoints_;
  v1::AcquireJobResponse assignment_;
  v1::JobOutput stored_;
};

TEST_F(WorkerOutageTest, NextAttemptReportsTheStoredResultWithoutRunningTheJob) {
  testing::FakeCoordinator fake;
  ASSERT_TRUE(fake.ok());
  fake.service().AddAssignment(assignment_);
  ASSERT_TRUE(StoreFinishedResult(checkpoints_, "j-rank", stored_).ok());

  RunResult r = RunWorker(fake.address(), "60");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out + r.err, HasSubstr("reporting its stored result (attempt 2)"));
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_TRUE(completes[0].accepted);
  EXPECT_TRUE(completes[0].request.success());
  EXPECT_EQ(completes[0].request.lease_id(), "lease-2");
  EXPECT_EQ(completes[0].request.output().model_digest(), std::string(64, 'a'));
  // Accepted: nothing is kept for a later attempt.
  EXPECT_EQ(LoadFinishedResult(checkpoints_, "j-rank").status().code(),
            absl::StatusCode::kNotFound);
}

// Rank 1 of the reporting attempt starts after rank 0 has had all the time it needs to report
// and drop the stored result. Had rank 1 looked for the file itself, it would find none, run
// the job and wait in the group for a rank 0 that had already left; rank 0 decides for both.
TEST_F(WorkerOutageTest, ALateRankLearnsOfTheStoredResultFromRankZero) {
  testing::FakeCoordinator fake;
  ASSERT_TRUE(fake.ok());
  fake.service().AddAssignment(assignment_);
  stored_.set_world_size(2);
  ASSERT_TRUE(StoreFinishedResult(checkpoints_, "j-rank", stored_).ok());

  const std::string port = FreePort();
  Process rank0({BinDir() + "/tailor-worker"}, dir_ + "/rank0.log",
                RankEnv(fake.address(), 0, 2, port, "60"));
  absl::SleepFor(absl::Seconds(3));
  Process rank1({BinDir() + "/tailor-worker"}, dir_ + "/rank1.log",
                RankEnv(fake.address(), 1, 2, port, "60"));
  EXPECT_EQ(rank1.Wait(absl::Seconds(90)), 0) << ReadFile(rank1.log_path());
  EXPECT_EQ(rank0.Wait(absl::Seconds(30)), 0) << ReadFile(rank0.log_path());
  EXPECT_THAT(ReadFile(rank1.log_path()), HasSubstr("reporting its stored result (attempt 2)"));
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_TRUE(completes[0].request.success());
  EXPECT_EQ(completes[0].request.output().model_digest(), std::string(64, 'a'));
  EXPECT_EQ(LoadFinishedResult(checkpoints_, "j-rank").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(WorkerOutageTest, RankZeroGivesUpOnAnUnansweringCoordinatorAndKeepsTheResult) {
  testing::FakeCoordinator fake;
  ASSERT_TRUE(fake.ok());
  fake.service().AddAssignment(assignment_);
  fake.service().FailNextCompletes(1000000, grpc::StatusCode::UNAVAILABLE);
  ASSERT_TRUE(StoreFinishedResult(checkpoints_, "j-rank", stored_).ok());

  const absl::Time start = absl::Now();
  RunResult r = RunWorker(fake.address(), "2");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_LT(absl::Now() - start, absl::Seconds(60)) << "the rank should give up, not retry on";
  EXPECT_THAT(r.out + r.err, HasSubstr("giving up on completing"));
  EXPECT_GE(fake.service().completes().size(), 2u);
  // Still there for the attempt after this one.
  auto kept = LoadFinishedResult(checkpoints_, "j-rank");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->model_digest(), std::string(64, 'a'));
}

}  // namespace
}  // namespace tailor::e2e
