// The profiler agent's probe job end to end against an in-process fake coordinator.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/agent_runtime.h"
#include "common/job_output.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "methods/probe/probe_results.pb.h"
#include "profiler-agent/device.h"
#include "profiler-agent/handlers.h"
#include "tests/testing/status_matchers.h"
#include "tests/unit/agent/fake_agent_service.h"

namespace tailor::profiler {
namespace {

using ::tailor::testing::FakeAgentService;
using ::tailor::testing::FakeCoordinator;
using ::testing::ElementsAre;

AgentRuntimeOptions Options(const std::string& address, const std::string& name) {
  AgentRuntimeOptions o;
  o.coordinator = address;
  DeviceDescription cpu;
  cpu.device = "cpu";
  cpu.device_kind = "cpu";
  cpu.memory_mib = 1024;
  o.info = MakeAgentInfo(cpu, "", "testhost", "tailor-builtin", "1");
  o.work_dir = absl::StrCat(::testing::TempDir(), "/profiler_agent_test_", name, "_", ::getpid());
  o.poll_wait = absl::Milliseconds(200);
  o.rpc_timeout = absl::Seconds(2);
  o.backoff_initial = absl::Milliseconds(20);
  o.backoff_max = absl::Milliseconds(200);
  o.progress_min_interval = absl::Milliseconds(50);
  o.stop_grace = absl::Seconds(2);
  o.completion_grace = absl::Seconds(1);
  return o;
}

v1::AcquireJobResponse ProbeJob(int duration_ms) {
  v1::AcquireJobResponse job;
  job.set_assigned(true);
  job.mutable_lease()->set_id("lease-probe");
  job.mutable_lease()->set_attempt(1);
  job.mutable_job()->set_id("job-probe");
  job.mutable_job()->set_kind("probe");
  job.mutable_contract()->set_method(v1::PROBE);
  job.mutable_contract()->mutable_target()->set_device_kind("cpu");
  job.mutable_contract()->mutable_probe()->set_duration_ms(duration_ms);
  return job;
}

class Agent {
 public:
  explicit Agent(AgentRuntimeOptions options) : runtime_(std::move(options)) {
    DeviceDescription cpu;
    cpu.device = "cpu";
    cpu.device_kind = "cpu";
    RegisterProfilerHandlers(runtime_, cpu);
    thread_ = std::thread([this] { status_ = runtime_.Run(); });
  }
  ~Agent() {
    runtime_.Stop();
    thread_.join();
  }

 private:
  AgentRuntime runtime_;
  absl::Status status_;
  std::thread thread_;
};

TEST(ProfilerAgentTest, ProbeJobReportsProgressUploadsAndCompletes) {
  FakeCoordinator fake;
  ASSERT_TRUE(fake.ok());
  fake.service().AddJob(ProbeJob(300));
  Agent agent(Options(fake.address(), "probe"));
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; },
      absl::Seconds(20)));

  // Register comes first, then the long-poll.
  const auto calls = fake.service().calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls[0], "Register");
  EXPECT_NE(std::find(calls.begin(), calls.end(), "AcquireJob"), calls.end());
  const auto registers = fake.service().registers();
  EXPECT_THAT(registers[0].info().job_kinds(), ElementsAre("probe"));
  EXPECT_EQ(registers[0].info().name(), "testhost:cpu");
  EXPECT_EQ(registers[0].info().device_kind(), "cpu");

  // Progress: at least two reports, fractions increasing, the last one final at 1.0.
  const auto progress = fake.service().progress();
  ASSERT_GE(progress.size(), 2u);
  for (size_t i = 1; i < progress.size(); ++i) {
    EXPECT_GT(progress[i].progress().fraction(), progress[i - 1].progress().fraction()) << i;
  }
  EXPECT_EQ(progress.back().progress().fraction(), 1.0);
  for (const auto& p : progress) {
    EXPECT_EQ(p.lease_id(), "lease-probe");
    EXPECT_TRUE(p.progress().metrics().contains("memcpy_gbps"));
    EXPECT_TRUE(p.progress().metrics().contains("gflops"));
  }

  // The JSON artifact.
  const auto uploads = fake.service().uploads();
  ASSERT_EQ(uploads.size(), 1u);
  EXPECT_EQ(uploads[0].header.kind(), "probe");
  EXPECT_EQ(uploads[0].header.name(), "probe.json");
  EXPECT_EQ(uploads[0].header.lease_id(), "lease-probe");
  EXPECT_EQ(uploads[0].header.sha256(), Sha256::Hex(uploads[0].data));
  // Strict parsing: probe.json holds exactly ProbeResult's fields. Proto JSON leaves out an
  // empty string, so a non-empty cpu_model is one the JSON contained.
  v1::probe::ProbeResult uploaded;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(uploads[0].data, &uploaded).ok());
  EXPECT_FALSE(uploaded.cpu_model().empty());

  // The result.
  const auto completes = fake.service().completes();
  ASSERT_EQ(completes.size(), 1u);
  const v1::CompleteJobRequest& done = completes[0].request;
  EXPECT_TRUE(done.success()) << done.error();
  // Every field the probe reports is one of ProbeResult's, so the detail unpacking is what
  // says they are all there.
  const std::optional<v1::probe::ProbeResult> f =
      DetailOf<v1::probe::ProbeResult>(done.output());
  ASSERT_TRUE(f.has_value()) << done.output().DebugString();
  EXPECT_EQ(f->device_kind(), "cpu");
  EXPECT_GT(f->memcpy_gbps(), 0.0);
  EXPECT_GT(f->gflops(), 0.0);
  EXPECT_GE(f->iterations(), 1);
  EXPECT_GE(f->logical_cores(), 1);
  EXPECT_GT(f->memory_total_mib(), 0);
  EXPECT_EQ(f->artifact_sha256(), uploads[0].header.sha256());
}

TEST(ProfilerAgentTest, CancelledProbeCompletesNotRetryableQuickly) {
  FakeCoordinator fake;
  fake.service().AddJob(ProbeJob(60000));
  std::atomic<bool> cancel_sent{false};
  fake.service().SetHeartbeatHook([&](const v1::HeartbeatRequest& req,
                                      v1::HeartbeatResponse* resp) {
    for (const auto& id : req.lease_ids()) {
      resp->add_cancelled_lease_ids(id);
      cancel_sent = true;
    }
    return grpc::Status::OK;
  });
  Agent agent(Options(fake.address(), "probe_cancel"));
  ASSERT_TRUE(fake.service().WaitUntil(
      [&](const FakeAgentService&) { return cancel_sent.load(); }, absl::Seconds(20)));
  const absl::Time sent = absl::Now();
  ASSERT_TRUE(fake.service().WaitUntil(
      [](const FakeAgentService& s) { return s.accepted_completes_locked() == 1; },
      absl::Seconds(5)));
  EXPECT_LT(absl::Now() - sent, absl::Seconds(2));
  const auto completes = fake.service().completes();
  EXPECT_FALSE(completes[0].request.success());
  EXPECT_FALSE(completes[0].request.retryable());
  EXPECT_EQ(completes[0].request.error(), "cancelled");
  EXPECT_TRUE(fake.service().uploads().empty());
}

}  // namespace
}  // namespace tailor::profiler
