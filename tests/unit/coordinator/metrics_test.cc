// /metrics text after known events: the core's observer (outcomes, retries, lease waits), the
// scrape-time families (queue depth, agents, Slurm calls), gRPC calls and SQLite commits.
#include "coordinator/metrics.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator {
namespace {

using ::tailor::testing::IsOk;
using ::testing::HasSubstr;

// "name{labels} value" -> value, for every sample line of the text format.
std::map<std::string, double> Parse(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

v1::DeploymentContract Probe(const std::string& name) {
  v1::DeploymentContract c;
  c.set_name(name);
  c.set_method(v1::PROBE);
  c.mutable_target()->set_device_kind("cpu");
  return c;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("metrics-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = storage::CoordinatorStore::Open((dir_ / "tailor.db").string());
    ASSERT_THAT(store, IsOk());
    store_ = *std::move(store);
    auto blobs = storage::BlobStore::Open((dir_ / "blobs").string());
    ASSERT_THAT(blobs, IsOk());
    blobs_ = *std::move(blobs);
    CoordinatorOptions options;
    options.backoff_base = absl::Seconds(2);
    core_ = std::make_unique<Coordinator>(store_.get(), blobs_.get(), &clock_, options);
    ASSERT_THAT(core_->Recover(), IsOk());
    core_->SetObserver(&metrics_);
    store_->db()->set_commit_observer([this](absl::Duration d) { metrics_.ObserveCommit(d); });
  }
  void TearDown() override {
    core_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string Agent() {
    v1::AgentInfo info;
    info.set_name("cpu0");
    info.set_device_kind("cpu");
    info.add_job_kinds("probe");
    auto r = core_->Register(info);
    EXPECT_THAT(r, IsOk());
    return r.ok() ? r->agent_id() : "";
  }
  v1::AcquireJobResponse Acquire(const std::string& agent_id) {
    v1::AcquireJobRequest req;
    req.set_agent_id(agent_id);
    v1::AcquireJobResponse out;
    core_->AcquireJob(req, [&](absl::StatusOr<v1::AcquireJobResponse> r) {
      EXPECT_THAT(r, IsOk());
      if (r.ok()) out = *r;
    });
    return out;
  }
  void Complete(const std::string& lease_id, bool success) {
    v1::CompleteJobRequest req;
    req.set_lease_id(lease_id);
    req.set_success(success);
    req.set_retryable(!success);
    req.set_error(success ? "" : "flaky");
    EXPECT_THAT(core_->CompleteJob(req), IsOk());
  }
  std::map<std::string, double> Scrape() {
    MetricsSnapshot snap;
    auto q = core_->ListQueue(v1::ListQueueRequest());
    EXPECT_THAT(q, IsOk());
    if (q.ok()) snap.queue = *q;
    v1::ListAgentsRequest areq;
    areq.set_include_offline(true);
    auto a = core_->ListAgents(areq);
    EXPECT_THAT(a, IsOk());
    if (a.ok()) snap.agents = *a;
    return Parse(metrics_.Render(snap));
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  CoordinatorMetrics metrics_;
  std::unique_ptr<storage::CoordinatorStore> store_;
  std::unique_ptr<storage::BlobStore> blobs_;
  std::unique_ptr<Coordinator> core_;
};

TEST_F(MetricsTest, CountsOutcomesRetriesAndLeaseWaits) {
  const std::string agent = Agent();
  ASSERT_THAT(core_->Submit(Probe("a"), "r-a"), IsOk());
  ASSERT_THAT(core_->Submit(Probe("b"), "r-b"), IsOk());
  auto m = Scrape();
  EXPECT_EQ(m["tailor_queue_jobs{device_kind=\"cpu\",state=\"runnable\"}"], 2);
  EXPECT_EQ(m["tailor_queue_jobs{device_kind=\"cpu\",state=\"leased\"}"], 0);
  EXPECT_EQ(m["tailor_agents{device_kind=\"cpu\",state=\"online\"}"], 1);

  clock_.Advance(absl::Seconds(3));  // both wait 3 s for their lease
  v1::AcquireJobResponse first = Acquire(agent);
  ASSERT_TRUE(first.assigned());
  m = Scrape();
  EXPECT_EQ(m["tailor_queue_jobs{device_kind=\"cpu\",state=\"runnable\"}"], 1);
  EXPECT_EQ(m["tailor_queue_jobs{device_kind=\"cpu\",state=\"leased\"}"], 1);
  Complete(first.lease().id(), /*success=*/true);

  v1::AcquireJobResponse second = Acquire(agent);
  ASSERT_TRUE(second.assigned());
  Complete(second.lease().id(), /*success=*/false);  // retried after the 2 s backoff
  clock_.Advance(absl::Seconds(2));
  core_->Tick();
  clock_.Advance(absl::Seconds(1));  // 1 s past the backoff
  v1::AcquireJobResponse retry = Acquire(agent);
  ASSERT_TRUE(retry.assigned());
  Complete(retry.lease().id(), /*success=*/true);

  m = Scrape();
  EXPECT_EQ(m["tailor_job_outcomes_total{kind=\"probe\",outcome=\"succeeded\"}"], 2);
  EXPECT_EQ(m.count("tailor_job_outcomes_total{kind=\"probe\",outcome=\"failed\"}"), 0u);
  EXPECT_EQ(m["tailor_job_retries_total{kind=\"probe\"}"], 1);
  EXPECT_EQ(m["tailor_lease_wait_seconds_count{device_kind=\"cpu\"}"], 3);
  // 3 s + 3 s for the first leases; the retry waited 1 s after its backoff ended.
  EXPECT_DOUBLE_EQ(m["tailor_lease_wait_seconds_sum{device_kind=\"cpu\"}"], 7);
  EXPECT_EQ(m["tailor_lease_wait_seconds_bucket{device_kind=\"cpu\",le=\"1\"}"], 1);
  EXPECT_EQ(m["tailor_lease_wait_seconds_bucket{device_kind=\"cpu\",le=\"5\"}"], 3);
  EXPECT_EQ(m["tailor_queue_jobs{device_kind=\"cpu\",state=\"runnable\"}"], 0);
  EXPECT_GT(m["tailor_sqlite_commit_duration_seconds_count"], 5);
}

TEST_F(MetricsTest, CancelledJobsAreOutcomes) {
  auto c = core_->Submit(Probe("a"), "r-a");
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT(core_->Cancel(c->first.id(), "test"), IsOk());
  EXPECT_EQ(Scrape()["tailor_job_outcomes_total{kind=\"probe\",outcome=\"cancelled\"}"], 1);
}

TEST(CoordinatorMetricsTest, GrpcCommitsAndSlurmCallsInTextFormat) {
  CoordinatorMetrics metrics;
  metrics.ObserveGrpc("/tailor.v1.AgentService/Heartbeat", "OK", 0.002);
  metrics.ObserveGrpc("/tailor.v1.AgentService/Heartbeat", "OK", 0.004);
  metrics.ObserveGrpc("/tailor.v1.CampaignService/GetCampaign", "NOT_FOUND", 0.001);
  metrics.ObserveCommit(absl::Microseconds(300));
  MetricsSnapshot snap;
  snap.slurm = MetricsSnapshot::SlurmCalls{2, 7, 1, 0};
  const std::string text = metrics.Render(snap);
  EXPECT_THAT(text, HasSubstr("# TYPE tailor_grpc_requests_total counter"));
  EXPECT_THAT(text, HasSubstr("# TYPE tailor_grpc_request_duration_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("# TYPE tailor_queue_jobs gauge"));
  EXPECT_THAT(text, HasSubstr("# TYPE tailor_slurm_calls_total counter"));
  auto m = Parse(text);
  EXPECT_EQ(m["tailor_grpc_requests_total{code=\"OK\",method=\"/tailor.v1.AgentService/Heartbeat\"}"], 2);
  EXPECT_EQ(m["tailor_grpc_requests_total{code=\"NOT_FOUND\",method=\"/tailor.v1.CampaignService/GetCampaign\"}"], 1);
  EXPECT_DOUBLE_EQ(
      m["tailor_grpc_request_duration_seconds_sum{method=\"/tailor.v1.AgentService/Heartbeat\"}"],
      0.006);
  EXPECT_EQ(m["tailor_grpc_request_duration_seconds_bucket{method=\"/tailor.v1.AgentService/Heartbeat\",le=\"0.0025\"}"], 1);
  EXPECT_EQ(m["tailor_sqlite_commit_duration_seconds_count"], 1);
  EXPECT_EQ(m["tailor_sqlite_commit_duration_seconds_bucket{le=\"0.0005\"}"], 1);
  EXPECT_EQ(m["tailor_slurm_calls_total{call=\"squeue\"}"], 7);
  EXPECT_EQ(m["tailor_slurm_calls_total{call=\"sacct\"}"], 1);
  EXPECT_EQ(m["tailor_slurm_calls_total{call=\"sbatch\"}"], 2);
}

}  // namespace
}  // namespace tailor::coordinator
