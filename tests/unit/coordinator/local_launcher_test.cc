// The local launcher with a stand-in worker (a shell script): rank wiring, logs, failure
// detection and cancellation. The real tailor-worker is covered by the end-to-end tests.
#include "coordinator/launchers/local_launcher.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

class LocalLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("launcher-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Script(const std::string& body) {
    const std::string path = (dir_ / "worker.sh").string();
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }

  std::unique_ptr<LocalLauncher> Make(const std::string& worker) {
    LocalLauncherOptions o;
    o.worker_bin = worker;
    o.coordinator = "127.0.0.1:1";
    o.data_dir = dir_.string();
    return std::make_unique<LocalLauncher>(o, [this](const std::string& lease,
                                                     const std::string& why) {
      absl::MutexLock lock(&mu_);
      failures_.emplace_back(lease, why);
    });
  }

  v1::AcquireJobResponse Assignment(int ranks, int nodes = 1) {
    v1::AcquireJobResponse a;
    a.set_assigned(true);
    a.mutable_lease()->set_id("l-1");
    a.mutable_lease()->set_attempt(2);
    a.mutable_job()->set_id("j-1");
    a.mutable_job()->mutable_resources()->set_nodes(nodes);
    a.mutable_job()->mutable_resources()->set_ranks_per_node(ranks);
    return a;
  }

  bool WaitDone(LocalLauncher& l) {
    for (int i = 0; i < 100 && l.RunningForTest() > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return l.RunningForTest() == 0;
  }

  std::filesystem::path dir_;
  absl::Mutex mu_;
  // Written by the launcher's reaper thread through the failure callback.
  std::vector<std::pair<std::string, std::string>> failures_ ABSL_GUARDED_BY(mu_);
};

TEST_F(LocalLauncherTest, StartsEveryRankWithRendezvousEnvironment) {
  auto launcher = Make(Script("echo rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK "
                              "lease=$TAILOR_LEASE_ID coord=$TAILOR_COORDINATOR "
                              "master=$MASTER_ADDR port_set=${MASTER_PORT:+yes}"));
  ASSERT_THAT(launcher->Launch(Assignment(2)), IsOk());
  ASSERT_TRUE(WaitDone(*launcher));
  const std::string log0 = (dir_ / "logs/j-1/attempt-2.log").string();
  const std::string log1 = (dir_ / "logs/j-1/attempt-2.rank1.log").string();
  std::stringstream s0, s1;
  s0 << std::ifstream(log0).rdbuf();
  s1 << std::ifstream(log1).rdbuf();
  EXPECT_EQ(s0.str(),
            "rank=0 world=2 local=0 lease=l-1 coord=127.0.0.1:1 master=127.0.0.1 port_set=yes\n");
  EXPECT_THAT(s1.str(), HasSubstr("rank=1 world=2 local=1"));
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(failures_.empty());
}

TEST(ThreadsPerRankTest, SplitsTheCoresEvenlyAndGivesEveryRankOne) {
  EXPECT_EQ(ThreadsPerRank(2, 2), 1);
  EXPECT_EQ(ThreadsPerRank(1, 2), 2);
  EXPECT_EQ(ThreadsPerRank(2, 16), 8);
  EXPECT_EQ(ThreadsPerRank(3, 16), 5);
  EXPECT_EQ(ThreadsPerRank(4, 2), 1);
  EXPECT_EQ(ThreadsPerRank(0, 2), 2);
  EXPECT_GE(ThreadsPerRank(1), 1);
}

// Ranks share the host's cores instead of each starting a pool as wide as the host; an
// operator's own OMP_NUM_THREADS is passed through unchanged.
TEST_F(LocalLauncherTest, RanksShareTheCoresUnlessTheOperatorSetsThreads) {
  const std::string script = Script("echo threads=$OMP_NUM_THREADS");
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string saved_value = saved == nullptr ? "" : saved;
  ::unsetenv("OMP_NUM_THREADS");
  auto launcher = Make(script);
  ASSERT_THAT(launcher->Launch(Assignment(2)), IsOk());
  ASSERT_TRUE(WaitDone(*launcher));
  std::stringstream shared;
  shared << std::ifstream((dir_ / "logs/j-1/attempt-2.rank1.log").string()).rdbuf();
  EXPECT_EQ(shared.str(), absl::StrCat("threads=", ThreadsPerRank(2), "\n"));

  ::setenv("OMP_NUM_THREADS", "7", 1);
  v1::AcquireJobResponse again = Assignment(2);
  again.mutable_lease()->set_attempt(3);
  ASSERT_THAT(launcher->Launch(again), IsOk());
  ASSERT_TRUE(WaitDone(*launcher));
  std::stringstream operator_set;
  operator_set << std::ifstream((dir_ / "logs/j-1/attempt-3.rank1.log").string()).rdbuf();
  EXPECT_EQ(operator_set.str(), "threads=7\n");
  if (saved == nullptr) {
    ::unsetenv("OMP_NUM_THREADS");
  } else {
    ::setenv("OMP_NUM_THREADS", saved_value.c_str(), 1);
  }
}

TEST_F(LocalLauncherTest, DeadRankFailsTheAttemptAndStopsTheOthers) {
  auto launcher = Make(Script("if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 30"));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_THAT(launcher->Launch(Assignment(2)), IsOk());
  ASSERT_TRUE(WaitDone(*launcher));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10))
      << "rank 0 must be stopped, not left in its 30 s sleep";
  absl::MutexLock lock(&mu_);
  ASSERT_EQ(failures_.size(), 1u);
  EXPECT_EQ(failures_[0].first, "l-1");
  EXPECT_EQ(failures_[0].second, "rank 1 exited with code 3");
}

TEST_F(LocalLauncherTest, CancelStopsRanksWithoutReportingFailure) {
  auto launcher = Make(Script("sleep 30"));
  ASSERT_THAT(launcher->Launch(Assignment(2)), IsOk());
  launcher->Cancel("l-1");
  ASSERT_TRUE(WaitDone(*launcher));
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(failures_.empty());
}

TEST_F(LocalLauncherTest, RefusesMultiNodeAndMissingBinary) {
  auto launcher = Make(Script("true"));
  EXPECT_THAT(launcher->Launch(Assignment(1, 2)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("runs single-node jobs; this one asks for 2 nodes")));
  auto missing = Make((dir_ / "nope").string());
  EXPECT_THAT(missing->Launch(Assignment(1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is not executable")));
}

}  // namespace
}  // namespace tailor::coordinator
