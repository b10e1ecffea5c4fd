#include "common/agent_runtime.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/finished_result.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/unit/agent/fake_agent_service.h"

namespace tailor {
namespace {

using ::tailor::testing::FakeAgentService;
using ::tailor::testing::FakeCoordinator;
using ::tailor::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TestWorkDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/agent_runtime_test_", name, "_",
                                       ::getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

AgentRuntimeOptions TestOptions(const std::string& address, const std::string& work_dir) {
  AgentRuntimeOptions o;
  o.coordinator = address;
  o.info.set_name("test-agent");
  o.info.set_device_kind("cpu");
  o.info.set_device("cpu");
  o.work_dir = work_dir;
  o.poll_wait = absl::Milliseconds(200);
  o.poll_slack = absl::Seconds(2);
  o.rpc_timeout = absl::Seconds(2);
  o.backoff_initial = absl::Milliseconds(20);
  o.backoff_max = absl::Milliseconds(200);
  o.progress_min_interval = absl::ZeroDuration();
  o.stop_grace = absl::Seconds(2);
  o.completion_grace = absl::Seconds(1);
  o.default_heartbeat_interval = absl::Milliseconds(50);
  return o;
}

v1::AcquireJobResponse MakeJob(const std::string& kind, const std::string& lease = "lease-1") {
  v1::AcquireJobResponse job;
  job.set_assigned(true);
  job.mutable_lease()->set_id(lease);
  job.mutable_lease()->set_job_id("job-1");
  job.mutable_lease()->set_attempt(1);
  job.mutable_job()->set_id("job-1");
  job.mutable_job()->set_kind(kind);
  job.set_campaign_id("campaign-1");
  return job;
}

// A successful job's output; `feasible` is just a bool the tests can see come back.
v1::JobOutput OkResult() {
  v1::JobOutput output;
  output.set_feasible(true);
  return output;
}

// Runs AgentRuntime::Run() on a thread; Stop()s and joins on destruction.
class RunningAgent {
 public:
  explicit RunningAgent(AgentRuntime* runtime) : runtime_(runtime) {
    thread_ = std::thread([this] { status_ = runtime_->Run(); });
  }
  ~RunningAgent() { StopAndJoin().IgnoreError(); }
  absl::Status StopAndJoin() {
    if (thread_.joinable()) {
      runtime_->Stop();
      thread_.join();
    }
    return status_;
  }

 private:
  AgentRuntime* runtime_;
  absl::Status status_;
  std::thread thread_;
};

// A handler that runs until the job is stopped, then returns success (which must not matter).
JobHandler UntilStopped(std::atomic<bool>* returned) {
  return [returned](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    while (ctx.SleepUnlessCancelled(absl::Milliseconds(10))) {
    }
    returned->store(true);
    return OkResult();
  };
}

TEST(BackoffTest, DoublesWithJitterUpToTheCap) {
  Backoff b(absl::Milliseconds(100), absl::Seconds(5));
  const double expected_ms[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000};
  for (double e : expected_ms) {
    const double got = absl::ToDoubleMilliseconds(b.Next());
    EXPECT_GE(got, 0.8 * e - 1e-6);
    EXPECT_LE(got, 1.2 * e + 1e-6);
  }
  b.Reset();
  EXPECT_LE(absl::ToDoubleMilliseconds(b.Next()), 120.0 + 1e-6);
}

TEST(RetryableTest, TransientCodesAreRetryable) {
  EXPECT_TRUE(IsRetryableJobError(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(IsRetryableJobError(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(IsRetryableJobError(absl::StatusCode::kAborted));
  EXPECT_TRUE(IsRetryableJobError(absl::StatusCode::kResourceExhausted));
  EXPECT_TRUE(IsRetryableJobError(absl::StatusCode::kInternal));
  EXPECT_TRUE(IsRetryableJobError(absl::StatusCode::kUnknown));
  EXPECT_FALSE(IsRetryableJobError(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(IsRetryableJobError(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(IsRetryableJobError(absl::StatusCode::kCancelled));
}

TEST(AgentRuntimeTest, RunWithoutHandlersIsAnError) {
  AgentRuntime runtime(TestOptions("127.0.0.1:1", TestWorkDir("nohandlers")));
  EXPECT_THAT(runtime.Run(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no job handlers")));
}

TEST(AgentRuntimeTest, RunsJobAndCompletesWithHandlerResult) {
  FakeCoordinator fake;
  ASSERT_TRUE(fake.ok());
  fake.service().AddJob(MakeJob("echo"));
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("echo")));
  std::string seen_work_dir;
  runtime.RegisterHandler("echo", [&](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    seen_work_dir = ctx.work_dir();
    EXPECT_TRUE(std::filesystem::is_directory(ctx.work_dir()));
    EXPECT_EQ(ctx.job().kind(), "echo");
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_TRUE(completes[0].request.success());
  EXPECT_EQ(completes[0].request.lease_id(), "lease-1");
  EXPECT_TRUE(completes[0].request.output().feasible());
  const auto registers = fake.service().registers();
  ASSERT_GE(registers.size(), 1u);
  EXPECT_THAT(registers[0].info().job_kinds(), ElementsAre("echo"));
  EXPECT_EQ(registers[0].info().max_concurrent_jobs(), 1);
  EXPECT_EQ(runtime.agent_id(), "agent-test-agent");
  TAILOR_EXPECT_OK(agent.StopAndJoin());
  // The per-job scratch dir is removed after completion.
  EXPECT_FALSE(seen_work_dir.empty());
  EXPECT_FALSE(std::filesystem::exists(seen_work_dir));
}

TEST(AgentRuntimeTest, HandlerErrorsMapToRetryable) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("flaky", "lease-a"));
  fake.service().AddJob(MakeJob("bad", "lease-b"));
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("errors")));
  runtime.RegisterHandler("flaky", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return absl::UnavailableError("device busy");
  });
  runtime.RegisterHandler("bad", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return absl::InvalidArgumentError("model has no layers");
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 2; }));
  for (const auto& c : fake.service().completes()) {
    EXPECT_FALSE(c.request.success());
    if (c.request.lease_id() == "lease-a") {
      EXPECT_TRUE(c.request.retryable());
      EXPECT_EQ(c.request.error(), "device busy");
    } else {
      EXPECT_FALSE(c.request.retryable());
      EXPECT_EQ(c.request.error(), "model has no layers");
    }
  }
}

TEST(AgentRuntimeTest, HeartbeatCancellationStopsTheJobQuickly) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("long"));
  std::atomic<bool> cancel_sent{false};
  fake.service().SetHeartbeatHook(
      [&](const v1::HeartbeatRequest& req, v1::HeartbeatResponse* resp) {
        for (const auto& id : req.lease_ids()) {
          resp->add_cancelled_lease_ids(id);
          cancel_sent = true;
        }
        return grpc::Status::OK;
      });
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("cancel")));
  std::atomic<bool> returned{false};
  runtime.RegisterHandler("long", UntilStopped(&returned));
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil([&](const FakeAgentService&) { return cancel_sent.load(); }));
  const absl::Time sent = absl::Now();
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; },
      absl::Seconds(3)));
  EXPECT_LT(absl::Now() - sent, absl::Seconds(2));
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_FALSE(completes[0].request.success());
  EXPECT_FALSE(completes[0].request.retryable());
  EXPECT_EQ(completes[0].request.error(), "cancelled");
  EXPECT_TRUE(returned.load());
}

TEST(AgentRuntimeTest, ProgressResponseCancellationStopsTheJob) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("reporter"));
  fake.service().SetProgressHook([](const v1::ReportProgressRequest&,
                                    v1::ReportProgressResponse* resp) {
    resp->set_cancelled(true);
    return grpc::Status::OK;
  });
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("progress_cancel")));
  absl::Status progress_status;
  runtime.RegisterHandler("reporter", [&](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    progress_status = ctx.ReportProgress(0.5, "half");
    EXPECT_TRUE(ctx.Cancelled());
    return progress_status;
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  EXPECT_THAT(progress_status, StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  EXPECT_EQ(fake.service().completes()[0].request.error(), "cancelled");
}

TEST(AgentRuntimeTest, UnknownLeaseIsAbandonedWithoutCompleting) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("long"));
  fake.service().SetHeartbeatHook(
      [](const v1::HeartbeatRequest& req, v1::HeartbeatResponse* resp) {
        for (const auto& id : req.lease_ids()) resp->add_unknown_lease_ids(id);
        return grpc::Status::OK;
      });
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("unknown")));
  std::atomic<bool> returned{false};
  runtime.RegisterHandler("long", UntilStopped(&returned));
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil([&](const FakeAgentService&) { return returned.load(); }));
  ASSERT_TRUE(fake.service().WaitUntil(
      [&](const FakeAgentService&) { return runtime.ActiveJobCountForTest() == 0; }));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(fake.service().completes().size(), 0u);
}

TEST(AgentRuntimeTest, ProgressLeaseLostIsAbandoned) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("reporter"));
  fake.service().SetProgressHook([](const v1::ReportProgressRequest&,
                                    v1::ReportProgressResponse*) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "lease expired");
  });
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("progress_lost")));
  std::atomic<bool> returned{false};
  runtime.RegisterHandler("reporter", [&](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    absl::Status st = ctx.ReportProgress(0.1, "start");
    EXPECT_THAT(st, StatusIs(absl::StatusCode::kCancelled, HasSubstr("lease lost")));
    EXPECT_EQ(ctx.stop_reason(), JobStopReason::kLeaseLost);
    returned = true;
    return st;
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil([&](const FakeAgentService&) { return returned.load(); }));
  ASSERT_TRUE(fake.service().WaitUntil(
      [&](const FakeAgentService&) { return runtime.ActiveJobCountForTest() == 0; }));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(fake.service().completes().size(), 0u);
}

TEST(AgentRuntimeTest, ConnectsOnceTheCoordinatorComesUp) {
  int port = 0;
  {
    FakeCoordinator probe_port;  // find a free port, then free it
    port = probe_port.port();
  }
  ASSERT_GT(port, 0);
  AgentRuntime runtime(TestOptions(absl::StrCat("127.0.0.1:", port), TestWorkDir("down")));
  runtime.RegisterHandler("echo", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return OkResult();
  });
  RunningAgent agent(&runtime);
  absl::SleepFor(absl::Milliseconds(500));  // several failed Register attempts
  FakeCoordinator fake(port);
  ASSERT_TRUE(fake.ok()) << "port " << port << " was taken meanwhile";
  fake.service().AddJob(MakeJob("echo"));
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  EXPECT_GE(fake.service().registers().size(), 1u);
  EXPECT_TRUE(fake.service().completes()[0].request.success());
}

TEST(AgentRuntimeTest, CompleteJobIsRetriedWhileUnavailable) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("echo"));
  fake.service().FailNextCompletes(2, grpc::StatusCode::UNAVAILABLE);
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("complete_retry")));
  runtime.RegisterHandler("echo", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 3u);
  for (const auto& c : completes) {
    EXPECT_TRUE(c.request.success());
    EXPECT_EQ(c.request.lease_id(), "lease-1");
  }
  EXPECT_FALSE(completes[0].accepted);
  EXPECT_FALSE(completes[1].accepted);
  EXPECT_TRUE(completes[2].accepted);
}

TEST(AgentRuntimeTest, CompletionSurvivesACoordinatorRestart) {
  auto first = std::make_unique<FakeCoordinator>();
  const int port = first->port();
  first->service().AddJob(MakeJob("gated"));
  AgentRuntime runtime(TestOptions(first->address(), TestWorkDir("restart")));
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  runtime.RegisterHandler("gated", [&](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    started = true;
    while (!release.load()) absl::SleepFor(absl::Milliseconds(5));
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(first->service().WaitUntil([&](const FakeAgentService&) { return started.load(); }));
  first.reset();  // the coordinator goes down mid-job
  release = true;
  absl::SleepFor(absl::Milliseconds(300));  // completion attempts fail meanwhile
  FakeCoordinator second(port);
  ASSERT_TRUE(second.ok()) << "port " << port << " was taken meanwhile";
  second.service().AddLease("lease-1");  // leases survive restarts until their TTL
  ASSERT_TRUE(second.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  EXPECT_TRUE(second.service().completes().back().request.success());
}

TEST(AgentRuntimeTest, CompleteJobGivesUpWhenTheLeaseIsGone) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("echo"));
  fake.service().FailNextCompletes(1, grpc::StatusCode::FAILED_PRECONDITION);
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("complete_lost")));
  runtime.RegisterHandler("echo", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.completes_locked() >= 1; }));
  ASSERT_TRUE(fake.service().WaitUntil(
      [&](const FakeAgentService&) { return runtime.ActiveJobCountForTest() == 0; }));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(fake.service().completes().size(), 1u);
}

TEST(AgentRuntimeTest, RejectedResultIsReportedAsFailure) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("echo"));
  fake.service().FailNextCompletes(1, grpc::StatusCode::INVALID_ARGUMENT);
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("rejected")));
  runtime.RegisterHandler("echo", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 2u);
  EXPECT_FALSE(completes[1].request.success());
  EXPECT_THAT(completes[1].request.error(), HasSubstr("coordinator rejected the result"));
}

TEST(AgentRuntimeTest, HeartbeatNotFoundReRegisters) {
  FakeCoordinator fake;
  std::atomic<int> beats{0};
  fake.service().SetHeartbeatHook([&](const v1::HeartbeatRequest&, v1::HeartbeatResponse*) {
    if (beats++ == 0) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown agent");
    return grpc::Status::OK;
  });
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("reregister")));
  runtime.RegisterHandler("echo", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.registers_locked() >= 2; }));
  const auto registers = fake.service().registers();
  EXPECT_EQ(registers[0].info().name(), registers[1].info().name());
}

TEST(AgentRuntimeTest, DrainStopsAcquiring) {
  FakeCoordinator fake;
  fake.service().SetHeartbeatHook([](const v1::HeartbeatRequest&, v1::HeartbeatResponse* resp) {
    resp->set_drain(true);
    return grpc::Status::OK;
  });
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("drain")));
  runtime.RegisterHandler("echo", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil([&](const FakeAgentService&) { return runtime.draining(); }));
  absl::SleepFor(absl::Milliseconds(300));  // let an in-flight poll finish
  const int acquires = fake.service().acquires();
  fake.service().AddJob(MakeJob("echo"));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(fake.service().acquires(), acquires);
  EXPECT_FALSE(fake.service().WaitUntil([](const FakeAgentService& s) {
    return s.queue_empty_locked();
  }, absl::Milliseconds(10)));
}

TEST(AgentRuntimeTest, StopCancelsTheLongPollPromptly) {
  FakeCoordinator fake;
  fake.service().SetIdlePoll(absl::Seconds(30));
  AgentRuntimeOptions options = TestOptions(fake.address(), TestWorkDir("stop_poll"));
  options.poll_wait = absl::Seconds(10);
  AgentRuntime runtime(options);
  runtime.RegisterHandler("echo", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil([](const FakeAgentService& s) {
    return s.registers_locked() >= 1;
  }));
  absl::SleepFor(absl::Milliseconds(100));  // now inside the long-poll
  const absl::Time start = absl::Now();
  TAILOR_EXPECT_OK(agent.StopAndJoin());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(AgentRuntimeTest, StopLetsTheJobFinishWithinTheGracePeriod) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("slow"));
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("grace_ok")));
  std::atomic<bool> started{false};
  runtime.RegisterHandler("slow", [&](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    started = true;
    if (!ctx.SleepUnlessCancelled(absl::Milliseconds(300))) return absl::CancelledError("x");
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil([&](const FakeAgentService&) { return started.load(); }));
  TAILOR_EXPECT_OK(agent.StopAndJoin());
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_TRUE(completes[0].request.success());
}

TEST(AgentRuntimeTest, StopCancelsJobsAfterTheGracePeriodAsRetryable) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("long"));
  AgentRuntimeOptions options = TestOptions(fake.address(), TestWorkDir("grace_over"));
  options.stop_grace = absl::Milliseconds(200);
  AgentRuntime runtime(options);
  std::atomic<bool> returned{false};
  runtime.RegisterHandler("long", UntilStopped(&returned));
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [&](const FakeAgentService&) { return runtime.ActiveJobCountForTest() == 1; }));
  const absl::Time start = absl::Now();
  TAILOR_EXPECT_OK(agent.StopAndJoin());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_FALSE(completes[0].request.success());
  EXPECT_TRUE(completes[0].request.retryable());
  EXPECT_THAT(completes[0].request.error(), HasSubstr("agent stopped"));
}

TEST(AgentRuntimeTest, UploadsAreChunkedAndHashed) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("upload"));
  const std::string dir = TestWorkDir("upload");
  AgentRuntime runtime(TestOptions(fake.address(), dir));
  std::string bytes(2 * (1 << 20) + 12345, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 31) % 251);
  runtime.RegisterHandler("upload", [&](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    absl::StatusOr<v1::Artifact> a = ctx.UploadArtifactBytes("checkpoint", "ckpt.bin", bytes);
    if (!a.ok()) return a.status();
    EXPECT_EQ(a->digest(), Sha256::Hex(bytes));
    const std::string path = ctx.work_dir() + "/f.txt";
    std::ofstream(path) << "hello";
    absl::StatusOr<v1::Artifact> f = ctx.UploadArtifactFile("log", "f.txt", path);
    if (!f.ok()) return f.status();
    EXPECT_THAT(ctx.UploadArtifactFile("log", "missing", ctx.work_dir() + "/nope"),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot open")));
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  EXPECT_TRUE(fake.service().completes()[0].request.success());
  const auto uploads = fake.service().uploads();
  ASSERT_EQ(uploads.size(), 2u);
  EXPECT_EQ(uploads[0].header.lease_id(), "lease-1");
  EXPECT_EQ(uploads[0].header.kind(), "checkpoint");
  EXPECT_EQ(uploads[0].header.size_bytes(), static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(uploads[0].header.sha256(), Sha256::Hex(uploads[0].data));
  EXPECT_EQ(uploads[0].data, bytes);
  EXPECT_THAT(uploads[0].chunk_sizes, ElementsAre(1u << 20, 1u << 20, 12345u));
  EXPECT_EQ(uploads[1].data, "hello");
  EXPECT_EQ(uploads[1].header.sha256(), Sha256::Hex("hello"));
}

TEST(AgentRuntimeTest, DownloadsVerifyResumeAndRejectCorruption) {
  FakeCoordinator fake;
  std::string blob(300 * 1024, 'x');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i % 97);
  const std::string digest = Sha256::Hex(blob);
  fake.service().PutBlob(digest, blob);
  const std::string bad_digest = Sha256::Hex("something else");
  fake.service().PutBlob(bad_digest, "corrupted bytes");
  fake.service().FailNextDownloadsAfterFirstChunk(1);
  fake.service().AddJob(MakeJob("download"));
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("download")));
  runtime.RegisterHandler("download", [&](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    const std::string path = ctx.work_dir() + "/sub/model.bin";
    EXPECT_THAT(ctx.DownloadArtifact(digest, path), ::tailor::testing::IsOk());
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str(), blob);
    EXPECT_FALSE(std::filesystem::exists(path + ".part"));

    const std::string bad = ctx.work_dir() + "/bad.bin";
    EXPECT_THAT(ctx.DownloadArtifact(bad_digest, bad),
                StatusIs(absl::StatusCode::kDataLoss, HasSubstr("sha256 mismatch")));
    EXPECT_FALSE(std::filesystem::exists(bad));
    EXPECT_FALSE(std::filesystem::exists(bad + ".part"));
    EXPECT_THAT(ctx.DownloadArtifact("nothex", bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("64 lowercase hex")));
    EXPECT_THAT(ctx.DownloadArtifact(Sha256::Hex("absent"), bad),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr("no such blob")));
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  const auto downloads = fake.service().downloads();
  ASSERT_GE(downloads.size(), 2u);
  EXPECT_EQ(downloads[0].offset(), 0);
  EXPECT_EQ(downloads[1].offset(), 64 * 1024);  // resumed after the first chunk
}

TEST(AgentRuntimeTest, PutCostTableCarriesTheLease) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("profile"));
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("costs")));
  runtime.RegisterHandler("profile", [](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    v1::CostTable table;
    table.set_device_kind("cpu");
    absl::StatusOr<v1::CostTable> stored = ctx.PutCostTable(table);
    if (!stored.ok()) return stored.status();
    EXPECT_EQ(stored->id(), "table-1");
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  EXPECT_TRUE(fake.service().completes()[0].request.success());
}

TEST(AgentRuntimeTest, ProgressIsRateLimitedExceptFinal) {
  FakeCoordinator fake;
  fake.service().AddJob(MakeJob("chatty"));
  AgentRuntimeOptions options = TestOptions(fake.address(), TestWorkDir("ratelimit"));
  options.progress_min_interval = absl::Seconds(10);
  AgentRuntime runtime(options);
  runtime.RegisterHandler("chatty", [](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    for (int i = 0; i < 50; ++i) {
      absl::Status st = ctx.ReportProgress(i / 50.0, "step", i, 50, {{"loss", 1.0 / (i + 1)}});
      if (!st.ok()) return st;
    }
    absl::Status st = ctx.ReportProgress(1.0, "done", 50, 50, {}, /*final=*/true);
    if (!st.ok()) return st;
    return OkResult();
  });
  RunningAgent agent(&runtime);
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; }));
  const auto progress = fake.service().progress();
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress[0].progress().step(), 0);
  EXPECT_EQ(progress[0].progress().metrics().at("loss"), 1.0);
  EXPECT_EQ(progress[1].progress().fraction(), 1.0);
  EXPECT_EQ(progress[1].progress().message(), "done");
}

TEST(AgentRuntimeTest, RunAssignedKeepsTheLeaseAliveAndCompletes) {
  FakeCoordinator fake;
  v1::AcquireJobResponse assignment = MakeJob("distill", "lease-w");
  assignment.mutable_lease()->set_ttl_ms(300);  // keepalive every 100 ms
  fake.service().AddJob(assignment);  // registers the lease with the fake
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("assigned")));
  const absl::Status status = runtime.RunAssigned(
      assignment, [](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
        EXPECT_TRUE(ctx.ReportProgress(0.25, "started").ok());
        ctx.SleepUnlessCancelled(absl::Milliseconds(450));
        return OkResult();
      });
  TAILOR_EXPECT_OK(status);
  EXPECT_TRUE(fake.service().registers().empty());
  EXPECT_TRUE(fake.service().heartbeats().empty());
  const auto progress = fake.service().progress();
  ASSERT_GE(progress.size(), 3u);  // the report plus keepalive re-sends
  for (const auto& p : progress) {
    EXPECT_EQ(p.lease_id(), "lease-w");
    EXPECT_EQ(p.progress().fraction(), 0.25);
  }
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_TRUE(completes[0].accepted);
}

TEST(AgentRuntimeTest, RunAssignedReportsCancellation) {
  FakeCoordinator fake;
  v1::AcquireJobResponse assignment = MakeJob("distill", "lease-c");
  assignment.mutable_lease()->set_ttl_ms(150);
  fake.service().AddJob(assignment);
  fake.service().SetProgressHook([](const v1::ReportProgressRequest&,
                                    v1::ReportProgressResponse* resp) {
    resp->set_cancelled(true);
    return grpc::Status::OK;
  });
  AgentRuntime runtime(TestOptions(fake.address(), TestWorkDir("assigned_cancel")));
  std::atomic<bool> returned{false};
  EXPECT_THAT(runtime.RunAssigned(assignment, UntilStopped(&returned)),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  EXPECT_TRUE(returned.load());
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_EQ(completes[0].request.error(), "cancelled");
  EXPECT_FALSE(completes[0].request.retryable());
}

TEST(AgentRuntimeTest, RunAssignedRejectsAnEmptyAssignment) {
  AgentRuntime runtime(TestOptions("127.0.0.1:1", TestWorkDir("assigned_empty")));
  EXPECT_THAT(runtime.RunAssigned(v1::AcquireJobResponse(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lease id")));
}

// One retry policy for every call a job makes: transient errors are retried until they have
// lasted the configured outage, anything else ends at once; success resets the outage.
TEST(OutageRetryTest, RetriesTransientErrorsUntilTheOutageLimit) {
  FakeClock clock;
  AgentRuntimeOptions options;
  options.clock = &clock;
  options.unreachable_give_up = absl::Seconds(10);
  OutageRetry retry(options);
  const absl::Status down = absl::UnavailableError("connection refused");
  EXPECT_TRUE(retry.ShouldRetry(down));
  clock.Advance(absl::Seconds(9));
  EXPECT_TRUE(retry.ShouldRetry(down));
  EXPECT_EQ(retry.outage(), absl::Seconds(9));
  EXPECT_FALSE(retry.ShouldRetry(absl::OkStatus()));
  EXPECT_EQ(retry.outage(), absl::ZeroDuration());
  EXPECT_TRUE(retry.ShouldRetry(down));  // a new outage starts now
  clock.Advance(absl::Seconds(10));
  EXPECT_FALSE(retry.ShouldRetry(down));
  EXPECT_TRUE(retry.gave_up());
  EXPECT_FALSE(OutageRetry(options).ShouldRetry(absl::InvalidArgumentError("bad")));

  options.unreachable_give_up = absl::ZeroDuration();  // as long as the job runs
  OutageRetry unbounded(options);
  EXPECT_TRUE(unbounded.ShouldRetry(down));
  clock.Advance(absl::Hours(24));
  EXPECT_TRUE(unbounded.ShouldRetry(down));
}

// The bound is per outage, not per call: a job's upload that waited out 7 s of a 10 s bound
// leaves its failure report 3 s (one OutageClock per job), and no backoff step sleeps past
// the bound.
TEST(OutageRetryTest, CallsOfOneJobShareTheOutage) {
  FakeClock clock;
  AgentRuntimeOptions options;
  options.clock = &clock;
  options.unreachable_give_up = absl::Seconds(10);
  options.backoff_initial = absl::Seconds(4);
  options.backoff_max = absl::Seconds(4);
  OutageClock job_outage;
  const absl::Status down = absl::UnavailableError("connection refused");
  OutageRetry upload(options, &job_outage);
  EXPECT_TRUE(upload.ShouldRetry(down));
  clock.Advance(absl::Seconds(7));
  EXPECT_TRUE(upload.ShouldRetry(down));
  // The backoff would wait 4 s (x0.8-1.2 jitter); only 3 s of the bound are left.
  EXPECT_LE(upload.NextDelay(), absl::Seconds(3));

  OutageRetry completion(options, &job_outage);
  EXPECT_TRUE(completion.ShouldRetry(down));
  EXPECT_EQ(completion.outage(), absl::Seconds(7));
  clock.Advance(absl::Seconds(3));
  EXPECT_FALSE(completion.ShouldRetry(down));
  EXPECT_TRUE(completion.gave_up());

  // Any call that gets through ends the job's outage for all of them.
  EXPECT_FALSE(upload.ShouldRetry(absl::OkStatus()));
  EXPECT_EQ(completion.outage(), absl::ZeroDuration());
  // Without a shared clock each retry keeps its own, as before.
  OutageRetry alone(options);
  EXPECT_EQ(alone.outage(), absl::ZeroDuration());
}

// A rank whose coordinator never answers again stops calling after the configured outage
// instead of retrying forever.
TEST(AgentRuntimeTest, RunAssignedGivesUpOnACoordinatorThatNeverAnswers) {
  FakeCoordinator fake;
  v1::AcquireJobResponse assignment = MakeJob("distill", "lease-gone");
  assignment.mutable_lease()->set_ttl_ms(300);
  fake.service().AddJob(assignment);
  fake.service().FailNextCompletes(1000000, grpc::StatusCode::UNAVAILABLE);
  AgentRuntimeOptions options = TestOptions(fake.address(), TestWorkDir("give_up"));
  options.unreachable_give_up = absl::Milliseconds(500);
  AgentRuntime runtime(options);
  EXPECT_THAT(runtime.RunAssigned(assignment,
                                  [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
                                    return OkResult();
                                  }),
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("the coordinator did not accept the completion")));
  EXPECT_GE(fake.service().completes().size(), 2u);
}

TEST(RegistrationSecretTest, CreatedOnceKeptPrivateAndCheckedWhenRead) {
  const std::string dir = TestWorkDir("secret");
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::string> first = LoadOrCreateRegistrationSecret(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size(), 64u);
  EXPECT_EQ(std::filesystem::status(dir + "/agent.secret").permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(*LoadOrCreateRegistrationSecret(dir), *first);
  const std::string other = TestWorkDir("secret_other");
  std::filesystem::create_directories(other);
  EXPECT_NE(*LoadOrCreateRegistrationSecret(other), *first) << "another work dir, another agent";
  std::ofstream(dir + "/agent.secret") << "not hex\n";
  EXPECT_THAT(LoadOrCreateRegistrationSecret(dir),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("agent.secret: not a registration secret")));
}

TEST(AgentRuntimeTest, RegistersWithTheSecretKeptInItsWorkDir) {
  FakeCoordinator fake;
  const std::string dir = TestWorkDir("registers_secret");
  AgentRuntime runtime(TestOptions(fake.address(), dir));
  runtime.RegisterHandler("echo", [](JobContext&) -> absl::StatusOr<v1::JobOutput> {
    return OkResult();
  });
  {
    RunningAgent agent(&runtime);
    ASSERT_TRUE(fake.service().WaitUntil(
        [](const FakeAgentService& s) { return s.registers_locked() > 0; }));
  }
  std::stringstream secret;
  secret << std::ifstream(dir + "/agent.secret").rdbuf();
  ASSERT_EQ(secret.str().size(), 65u);
  EXPECT_EQ(fake.service().registers()[0].registration_secret(), secret.str().substr(0, 64));
}

TEST(FinishedResultTest, StoredUntilDroppedAndCheckedWhenRead) {
  const std::string dir = TestWorkDir("finished");
  EXPECT_THAT(LoadFinishedResult(dir, "j-1"), StatusIs(absl::StatusCode::kNotFound));
  v1::JobOutput result;
  result.set_model_digest("abc");
  ASSERT_TRUE(StoreFinishedResult(dir, "j-1", result).ok());
  absl::StatusOr<v1::JobOutput> loaded = LoadFinishedResult(dir, "j-1");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->model_digest(), "abc");
  EXPECT_THAT(LoadFinishedResult(dir, "j-2"), StatusIs(absl::StatusCode::kNotFound));
  DropFinishedResult(dir, "j-1");
  EXPECT_THAT(LoadFinishedResult(dir, "j-1"), StatusIs(absl::StatusCode::kNotFound));
  std::ofstream(dir + "/finished-j-3.pb") << "\xff\xff\xff";
  EXPECT_THAT(LoadFinishedResult(dir, "j-3"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not a stored job result")));
}

}  // namespace
}  // namespace tailor
