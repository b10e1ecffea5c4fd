// The coordinator core with a real SQLite file and a FakeClock: leases, retries and backoff
// are driven by advancing time, never by sleeping.
#include "coordinator/coordinator.h"

#include <filesystem>
#include <map>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/job_output.h"
#include "common/proto_time.h"
#include "compression/hf/parent_architecture.h"
#include "compression/model/config.h"
#include "gmock/gmock.h"
#include "google/protobuf/unknown_field_set.h"
#include "storage/database.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

v1::DeploymentContract ProbeContract(const std::string& name = "probe", int priority = 0) {
  v1::DeploymentContract c;
  c.set_name(name);
  c.set_method(v1::PROBE);
  c.mutable_target()->set_device_kind("cpu");
  c.set_priority(priority);
  return c;
}

v1::DeploymentContract AutocompressContract() {
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
  return c;
}

// Records launches; the test plays the workers by completing the leases it was given.
class RecordingLauncher : public Launcher {
 public:
  std::string name() const override { return "test"; }
  absl::Status Launch(const v1::AcquireJobResponse& a) override {
    launched.push_back(a);
    return absl::OkStatus();
  }
  void Cancel(const std::string& lease_id) override { cancelled.push_back(lease_id); }
  std::vector<v1::AcquireJobResponse> launched;
  std::vector<std::string> cancelled;
};

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("coord-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Open();
  }
  void TearDown() override {
    core_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Open(bool isolate_measurements = false, int64_t max_listing_bytes = 4 << 20) {
    core_.reset();
    store_.reset();
    auto store = storage::CoordinatorStore::Open((dir_ / "tailor.db").string());
    ASSERT_THAT(store, IsOk());
    store_ = *std::move(store);
    auto blobs = storage::BlobStore::Open((dir_ / "blobs").string());
    ASSERT_THAT(blobs, IsOk());
    blobs_ = *std::move(blobs);
    CoordinatorOptions options;
    options.lease_ttl = absl::Seconds(15);
    options.backoff_base = absl::Seconds(2);
    options.backoff_max = absl::Seconds(5);
    options.isolate_measurements = isolate_measurements;
    options.max_listing_bytes = max_listing_bytes;
    core_ = std::make_unique<Coordinator>(store_.get(), blobs_.get(), &clock_, options);
    ASSERT_THAT(core_->Recover(), IsOk());
  }

  std::string RegisterAgent(const std::string& name, const std::string& device_kind = "cpu",
                            std::vector<std::string> kinds = {"probe", "profile", "verify"}) {
    v1::AgentInfo info;
    info.set_name(name);
    info.set_device_kind(device_kind);
    for (auto& k : kinds) info.add_job_kinds(k);
    auto r = core_->Register(info);
    EXPECT_THAT(r, IsOk());
    return r.ok() ? r->agent_id() : "";
  }

  // Acquire without waiting.
  v1::AcquireJobResponse TryAcquire(const std::string& agent_id) {
    v1::AcquireJobRequest req;
    req.set_agent_id(agent_id);
    v1::AcquireJobResponse out;
    bool called = false;
    core_->AcquireJob(req, [&](absl::StatusOr<v1::AcquireJobResponse> r) {
      called = true;
      EXPECT_THAT(r, IsOk());
      if (r.ok()) out = *r;
    });
    EXPECT_TRUE(called);
    return out;
  }

  v1::Campaign Submit(const v1::DeploymentContract& c, const std::string& rid) {
    auto r = core_->Submit(c, rid);
    EXPECT_THAT(r, IsOk());
    return r.ok() ? r->first : v1::Campaign();
  }

  absl::Status Complete(const std::string& lease_id, bool success, bool retryable = false,
                        const std::string& error = "") {
    v1::CompleteJobRequest req;
    req.set_lease_id(lease_id);
    req.set_success(success);
    req.set_retryable(retryable);
    req.set_error(error);
    return core_->CompleteJob(req).status();
  }

  std::vector<std::string> EventTypes(const std::string& campaign_id) {
    bool final = false;
    auto events = core_->ReadEvents(campaign_id, 0, 1000, &final);
    EXPECT_THAT(events, IsOk());
    std::vector<std::string> types;
    int64_t expect_seq = 1;
    for (const auto& e : *events) {
      EXPECT_EQ(e.seq(), expect_seq++) << "event log has a gap";
      types.push_back(e.type());
    }
    return types;
  }

  v1::Campaign Get(const std::string& id) {
    auto c = core_->GetCampaign(id);
    EXPECT_THAT(c, IsOk());
    return c.ok() ? *c : v1::Campaign();
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<storage::CoordinatorStore> store_;
  std::unique_ptr<storage::BlobStore> blobs_;
  std::unique_ptr<Coordinator> core_;
};

TEST_F(CoordinatorTest, SubmitProbePlansOneRunnableJob) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  EXPECT_EQ(c.state(), v1::CAMPAIGN_QUEUED);
  ASSERT_EQ(c.jobs_size(), 1);
  EXPECT_EQ(c.jobs(0).kind(), "probe");
  EXPECT_EQ(c.jobs(0).state(), v1::JOB_RUNNABLE);
  EXPECT_EQ(c.jobs(0).waiting_reason(), "no online agent with device kind 'cpu'");
  EXPECT_THAT(EventTypes(c.id()), ElementsAre("campaign_submitted", "job_runnable"));
}

TEST_F(CoordinatorTest, SameRequestIdSameContractReturnsSameCampaign) {
  v1::Campaign a = Submit(ProbeContract(), "same");
  auto again = core_->Submit(ProbeContract(), "same");
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(again->second);
  EXPECT_EQ(again->first.id(), a.id());
  v1::ListCampaignsRequest list;
  EXPECT_EQ(core_->ListCampaigns(list)->campaigns_size(), 1);
}

TEST_F(CoordinatorTest, SameRequestIdDifferentContractIsAlreadyExists) {
  v1::Campaign a = Submit(ProbeContract("one"), "same");
  EXPECT_THAT(core_->Submit(ProbeContract("two"), "same"),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("request id 'same' was already used for campaign " + a.id() +
                                 " with a different contract")));
}

// Request ids are scoped per team: another team's id neither collides nor reveals anything.
TEST_F(CoordinatorTest, RequestIdsAreScopedPerTeam) {
  v1::DeploymentContract vision = ProbeContract("one");
  vision.set_team("vision");
  v1::DeploymentContract speech = ProbeContract("two");
  speech.set_team("speech");
  v1::Campaign a = Submit(vision, "nightly");
  auto b = core_->Submit(speech, "nightly");
  ASSERT_THAT(b, IsOk());
  EXPECT_TRUE(b->second);
  EXPECT_NE(b->first.id(), a.id());
  EXPECT_EQ(b->first.team(), "speech");
  // Within a team the id still names its campaign.
  auto again = core_->Submit(vision, "nightly");
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(again->second);
  EXPECT_EQ(again->first.id(), a.id());
  v1::DeploymentContract changed = speech;
  changed.set_name("three");
  EXPECT_THAT(core_->Submit(changed, "nightly"),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("already used for campaign " + b->first.id())));
  EXPECT_EQ(core_->ListCampaigns(v1::ListCampaignsRequest())->campaigns_size(), 2);
}

// Whatever the client: an oversized contract or one with unknown fields is refused before
// anything is stored (a gRPC client need not go through the CLI's file parser).
TEST_F(CoordinatorTest, WireLimitsAreEnforcedByTheCoordinator) {
  v1::DeploymentContract padded = ProbeContract();
  v1::Workload* workload = padded.mutable_workload();
  workload->GetReflection()->MutableUnknownFields(workload)->AddLengthDelimited(
      999, std::string(64, 'x'));
  EXPECT_THAT(core_->Submit(padded, "padded"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("contract.workload: unknown field number 999: not a field of "
                                 "this coordinator's contract")));
  v1::DeploymentContract huge = ProbeContract();
  (*huge.mutable_labels())["blob"] = std::string(300 * 1024, 'x');
  EXPECT_THAT(core_->Submit(huge, "huge"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bytes encoded; the limit is 262144 bytes")));
  v1::DeploymentContract absent = ProbeContract();
  absent.mutable_parent()->set_artifact_digest(std::string(64, 'e'));
  EXPECT_THAT(core_->Submit(absent, "absent"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("parent.artifact_digest: no artifact sha256:" +
                                 std::string(64, 'e') + " in this coordinator's blob store")));
  auto blob = blobs_->Put("parent bytes");
  ASSERT_THAT(blob, IsOk());
  v1::DeploymentContract present = ProbeContract();
  present.mutable_parent()->set_artifact_digest(blob->digest);
  EXPECT_THAT(core_->Submit(present, "present"), IsOk());
  EXPECT_EQ(core_->ListCampaigns(v1::ListCampaignsRequest())->campaigns_size(), 1);
}

// Listings carry summaries (no results, report or contract sections) and stop at their byte
// bound with a page token, so no stored row can break `tailor list` for everyone.
TEST_F(CoordinatorTest, ListingsCarrySummariesWithinTheByteBound) {
  v1::DeploymentContract labelled = ProbeContract("big");
  (*labelled.mutable_labels())["note"] = std::string(200, 'n');
  const v1::Campaign big = Submit(labelled, "big");
  const std::string agent = RegisterAgent("box-1");
  const v1::AcquireJobResponse a = TryAcquire(agent);
  v1::CompleteJobRequest done;
  done.set_lease_id(a.lease().id());
  done.set_success(true);
  done.mutable_output()->set_reason(std::string(500000, 'r'));
  ASSERT_THAT(core_->CompleteJob(done), IsOk());
  ASSERT_EQ(Get(big.id()).jobs(0).output().reason().size(), 500000u);

  auto listed = core_->ListCampaigns(v1::ListCampaignsRequest());
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->campaigns_size(), 1);
  const v1::Campaign& summary = listed->campaigns(0);
  EXPECT_EQ(summary.contract().name(), "big");
  EXPECT_EQ(summary.contract().method(), v1::PROBE);
  EXPECT_EQ(summary.contract().target().device_kind(), "cpu");
  EXPECT_TRUE(summary.contract().labels().empty());
  ASSERT_EQ(summary.jobs_size(), 1);
  EXPECT_EQ(summary.jobs(0).state(), v1::JOB_SUCCEEDED);
  EXPECT_FALSE(summary.jobs(0).has_output());
  EXPECT_LT(listed->ByteSizeLong(), 2000u);

  // A bound of one summary's size: every page holds one campaign, and the token walks them.
  for (int i = 0; i < 3; ++i) Submit(ProbeContract(absl::StrCat("p", i)), absl::StrCat("p", i));
  Open(/*isolate_measurements=*/false, /*max_listing_bytes=*/1);
  std::vector<std::string> names;
  v1::ListCampaignsRequest page;
  for (int pages = 0; pages < 10; ++pages) {
    auto r = core_->ListCampaigns(page);
    ASSERT_THAT(r, IsOk());
    ASSERT_EQ(r->campaigns_size(), 1);
    names.push_back(r->campaigns(0).name());
    if (r->next_page_token().empty()) break;
    page.set_page_token(r->next_page_token());
  }
  EXPECT_THAT(names, UnorderedElementsAre("p2", "p1", "p0", "big"));
}

// An admin deletes a finished campaign's record; a live one must be cancelled first.
TEST_F(CoordinatorTest, DeleteCampaignRemovesAFinishedRecordOnly) {
  const v1::Campaign c = Submit(ProbeContract("doomed"), "doomed");
  EXPECT_THAT(core_->DeleteCampaign(c.id()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is CAMPAIGN_QUEUED; cancel it first")));
  ASSERT_THAT(core_->Cancel(c.id(), "test"), IsOk());
  auto deleted = core_->DeleteCampaign(c.id());
  ASSERT_THAT(deleted, IsOk());
  EXPECT_EQ(deleted->campaign_id(), c.id());
  EXPECT_EQ(deleted->jobs(), 1);
  EXPECT_GE(deleted->events(), 2);
  EXPECT_EQ(deleted->artifacts(), 0);
  EXPECT_THAT(core_->GetCampaign(c.id()), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(core_->ListCampaigns(v1::ListCampaignsRequest())->campaigns_size(), 0);
  EXPECT_THAT(core_->DeleteCampaign(c.id()), StatusIs(absl::StatusCode::kNotFound));
  // Its request id is free again, and the database is consistent.
  auto again = core_->Submit(ProbeContract("doomed"), "doomed");
  ASSERT_THAT(again, IsOk());
  EXPECT_TRUE(again->second);
  EXPECT_THAT(store_->db()->IntegrityCheck(), IsOk());
}

// An artifact is recorded with the attempt that uploaded it, and only while that attempt's
// lease lives: an upload that outlived its lease is refused, not listed beside the retry's.
TEST_F(CoordinatorTest, ArtifactsAreRecordedUnderALiveLeaseWithTheirAttempt) {
  const v1::Campaign c = Submit(ProbeContract(), "artifacts");
  const std::string agent = RegisterAgent("box-1");
  const v1::AcquireJobResponse first = TryAcquire(agent);
  auto lease = core_->CheckLease(first.lease().id());
  ASSERT_THAT(lease, IsOk());
  const storage::BlobInfo blob{std::string(64, 'b'), 10};
  auto recorded = core_->RecordArtifact(*lease, "log", "one.txt", blob);
  ASSERT_THAT(recorded, IsOk());
  EXPECT_EQ(recorded->attempt(), 1);

  // The lease expires while a second upload is on the wire.
  clock_.Advance(absl::Seconds(16));
  core_->Tick();
  EXPECT_THAT(core_->RecordArtifact(*lease, "log", "two.txt", blob),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("ended while its upload ran (expired, completed or cancelled): "
                                 "artifact 'two.txt' is not recorded")));
  // The retry's artifact carries its own attempt.
  clock_.Advance(absl::Seconds(10));
  core_->Tick();
  const v1::AcquireJobResponse second = TryAcquire(agent);
  ASSERT_EQ(second.lease().attempt(), 2);
  auto retry = core_->CheckLease(second.lease().id());
  ASSERT_THAT(retry, IsOk());
  ASSERT_THAT(core_->RecordArtifact(*retry, "log", "three.txt", blob), IsOk());
  auto listed = core_->ListArtifacts(c.id());
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->artifacts_size(), 2);
  EXPECT_EQ(listed->artifacts(0).name(), "one.txt");
  EXPECT_EQ(listed->artifacts(0).attempt(), 1);
  EXPECT_EQ(listed->artifacts(1).name(), "three.txt");
  EXPECT_EQ(listed->artifacts(1).attempt(), 2);
}

TEST_F(CoordinatorTest, InvalidContractWritesNothing) {
  v1::DeploymentContract bad = ProbeContract();
  bad.mutable_target()->clear_device_kind();
  EXPECT_THAT(core_->Submit(bad, "r1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target.device_kind")));
  EXPECT_THAT(core_->Submit(ProbeContract(), "bad id!"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("request_id")));
  EXPECT_EQ(core_->ListCampaigns(v1::ListCampaignsRequest())->campaigns_size(), 0);
  auto count = store_->db()->Prepare("SELECT COUNT(*) FROM events");
  ASSERT_THAT(count, IsOk());
  ASSERT_TRUE(*count->Step());
  EXPECT_EQ(count->ColumnInt(0), 0);
}

// Group commit (storage/group_commit.h): concurrent submissions share transactions, and each
// is answered only once its campaign is in the file, as a fresh connection (a restarted
// coordinator) sees it.
TEST_F(CoordinatorTest, ConcurrentSubmissionsAreDurableWhenAnswered) {
  constexpr int kThreads = 16;
  constexpr int kEach = 10;
  std::vector<std::thread> threads;
  std::vector<int> missing(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto reader = storage::Database::Open((dir_ / "tailor.db").string());
      ASSERT_THAT(reader, IsOk());
      for (int i = 0; i < kEach; ++i) {
        auto r = core_->Submit(ProbeContract(), absl::StrCat("t", t, "-", i));
        ASSERT_THAT(r, IsOk());
        EXPECT_TRUE(r->second);
        auto q = (*reader)->Prepare("SELECT COUNT(*) FROM jobs WHERE campaign_id = ?");
        ASSERT_THAT(q, IsOk());
        q->Bind(1, r->first.id());
        ASSERT_TRUE(*q->Step());
        if (q->ColumnInt(0) != 1) ++missing[t];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(missing[t], 0) << "thread " << t;
  EXPECT_EQ(core_->RunnableCountForTest(), size_t{kThreads * kEach});
  // What memory holds is what the file holds.
  Open();
  EXPECT_EQ(core_->RunnableCountForTest(), size_t{kThreads * kEach});
}

// The same request id from many callers at once: one campaign, and every caller gets it.
TEST_F(CoordinatorTest, ConcurrentRepeatsOfARequestIdCreateOneCampaign) {
  constexpr int kThreads = 12;
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<std::pair<v1::Campaign, bool>>> out(
      kThreads, absl::UnknownError("not run"));
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { out[t] = core_->Submit(ProbeContract("same"), "same-id"); });
  }
  for (auto& t : threads) t.join();
  int created = 0;
  for (const auto& r : out) {
    ASSERT_THAT(r, IsOk());
    created += r->second ? 1 : 0;
    EXPECT_EQ(r->first.id(), out[0]->first.id());
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(core_->ListCampaigns(v1::ListCampaignsRequest())->campaigns_size(), 1);
}

// An asynchronous submission answers exactly once; a refused one answers at once.
TEST_F(CoordinatorTest, SubmitAsyncAnswersOnce) {
  absl::Mutex mu;
  int answers = 0;
  absl::Notification done;
  core_->SubmitAsync(ProbeContract(), "async", [&](auto r) {
    EXPECT_THAT(r, IsOk());
    absl::MutexLock lock(&mu);
    ++answers;
    done.Notify();
  });
  done.WaitForNotification();
  bool refused = false;
  core_->SubmitAsync(ProbeContract(), "bad id!", [&](auto r) {
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("request_id")));
    refused = true;
  });
  EXPECT_TRUE(refused);  // answered before SubmitAsync returned
  core_.reset();  // joins the completion thread: no late second answer
  absl::MutexLock lock(&mu);
  EXPECT_EQ(answers, 1);
}

TEST_F(CoordinatorTest, AgentLeasesMatchingJobAndCompletes) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  const std::string wrong = RegisterAgent("gpu-box", "NVIDIA H200");
  EXPECT_FALSE(TryAcquire(wrong).assigned());
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobResponse a = TryAcquire(agent);
  ASSERT_TRUE(a.assigned());
  EXPECT_EQ(a.job().kind(), "probe");
  EXPECT_EQ(a.lease().attempt(), 1);
  EXPECT_EQ(a.contract().name(), "probe");
  EXPECT_EQ(Get(c.id()).state(), v1::CAMPAIGN_RUNNING);
  EXPECT_THAT(Complete(a.lease().id(), true), IsOk());
  EXPECT_EQ(Get(c.id()).state(), v1::CAMPAIGN_SUCCEEDED);
  // The same completion again is refused, never applied twice.
  EXPECT_THAT(Complete(a.lease().id(), true),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is no longer active (attempt 1 succeeded)")));
  EXPECT_THAT(EventTypes(c.id()),
              ElementsAre("campaign_submitted", "job_runnable", "job_leased", "campaign_running",
                          "job_succeeded", "campaign_succeeded"));
}

TEST_F(CoordinatorTest, AgentJobsGoOnlyToTheContractsEngineAndVersion) {
  auto register_engine = [&](const std::string& name, const std::string& engine,
                             const std::string& version) {
    v1::AgentInfo info;
    info.set_name(name);
    info.set_device_kind("cpu");
    info.set_engine(engine);
    info.set_engine_version(version);
    info.add_job_kinds("probe");
    auto r = core_->Register(info);
    EXPECT_THAT(r, IsOk());
    return r.ok() ? r->agent_id() : "";
  };
  v1::DeploymentContract contract = ProbeContract();
  contract.mutable_target()->set_engine("llama.cpp");
  contract.mutable_target()->set_engine_version("3.21.1");
  const v1::Campaign c = Submit(contract, "r1");
  EXPECT_EQ(Get(c.id()).jobs(0).resources().engine(), "llama.cpp");
  EXPECT_EQ(Get(c.id()).jobs(0).resources().engine_version(), "3.21.1");
  EXPECT_FALSE(TryAcquire(register_engine("builtin", "tailor-builtin", "1")).assigned());
  EXPECT_FALSE(TryAcquire(register_engine("older", "llama.cpp", "3.20.0")).assigned());
  auto queue = core_->ListQueue(v1::ListQueueRequest());
  ASSERT_THAT(queue, IsOk());
  ASSERT_EQ(queue->entries_size(), 1);
  EXPECT_THAT(queue->entries(0).job().waiting_reason(),
              HasSubstr(", the job needs llama.cpp 3.21.1"));
  EXPECT_TRUE(TryAcquire(register_engine("current", "llama.cpp", "3.21.1")).assigned());
}

TEST_F(CoordinatorTest, RegisterIsIdempotentByName) {
  EXPECT_EQ(RegisterAgent("box"), RegisterAgent("box"));
}

TEST_F(CoordinatorTest, LongPollIsAnsweredWhenAJobArrives) {
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobRequest req;
  req.set_agent_id(agent);
  req.set_wait_ms(10000);
  std::optional<v1::AcquireJobResponse> got;
  core_->AcquireJob(req, [&](absl::StatusOr<v1::AcquireJobResponse> r) { got = *r; });
  EXPECT_FALSE(got.has_value());
  Submit(ProbeContract(), "r1");
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->assigned());
}

TEST_F(CoordinatorTest, LongPollTimesOutEmpty) {
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobRequest req;
  req.set_agent_id(agent);
  req.set_wait_ms(5000);
  std::optional<v1::AcquireJobResponse> got;
  core_->AcquireJob(req, [&](absl::StatusOr<v1::AcquireJobResponse> r) { got = *r; });
  clock_.Advance(absl::Seconds(4));
  core_->Tick();
  EXPECT_FALSE(got.has_value());
  clock_.Advance(absl::Seconds(1));
  core_->Tick();
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->assigned());
}

TEST_F(CoordinatorTest, CancelledLongPollIsNeverAnswered) {
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobRequest req;
  req.set_agent_id(agent);
  req.set_wait_ms(5000);
  int calls = 0;
  uint64_t id = core_->AcquireJob(req, [&](absl::StatusOr<v1::AcquireJobResponse>) { ++calls; });
  EXPECT_TRUE(core_->CancelAcquire(id));
  Submit(ProbeContract(), "r1");
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(core_->RunnableCountForTest(), 1u);
}

TEST_F(CoordinatorTest, ExpiredLeaseRetriesWithBackoffThenFails) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobResponse first = TryAcquire(agent);
  ASSERT_TRUE(first.assigned());
  clock_.Advance(absl::Seconds(15));
  core_->Tick();
  v1::Job job = Get(c.id()).jobs(0);
  EXPECT_EQ(job.state(), v1::JOB_RUNNABLE);
  EXPECT_EQ(FromProto(job.not_before()), clock_.Now() + absl::Seconds(2));
  EXPECT_THAT(job.error(), HasSubstr("lease expired: no heartbeat from " + agent));
  EXPECT_FALSE(TryAcquire(agent).assigned()) << "backoff must hold the job back";
  clock_.Advance(absl::Seconds(2));
  v1::AcquireJobResponse second = TryAcquire(agent);
  ASSERT_TRUE(second.assigned());
  EXPECT_EQ(second.lease().attempt(), 2);
  // The old lease is dead: its completion is refused.
  EXPECT_THAT(Complete(first.lease().id(), true),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("attempt 1 expired")));
  clock_.Advance(absl::Seconds(15));
  core_->Tick();
  EXPECT_EQ(FromProto(Get(c.id()).jobs(0).not_before()), clock_.Now() + absl::Seconds(4));
  clock_.Advance(absl::Seconds(4));
  ASSERT_TRUE(TryAcquire(agent).assigned());
  clock_.Advance(absl::Seconds(15));
  core_->Tick();  // third attempt expires: max_attempts (3) reached
  v1::Campaign done = Get(c.id());
  EXPECT_EQ(done.jobs(0).state(), v1::JOB_FAILED);
  EXPECT_THAT(done.jobs(0).error(), HasSubstr("gave up after 3 attempts"));
  EXPECT_EQ(done.state(), v1::CAMPAIGN_FAILED);
  EXPECT_THAT(done.error(), HasSubstr("job probe failed"));
}

TEST_F(CoordinatorTest, HeartbeatKeepsLeaseAlive) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobResponse a = TryAcquire(agent);
  v1::HeartbeatRequest hb;
  hb.set_agent_id(agent);
  hb.add_lease_ids(a.lease().id());
  hb.add_lease_ids("l-unknown");
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(10));
    auto r = core_->Heartbeat(hb);
    ASSERT_THAT(r, IsOk());
    ASSERT_EQ(r->extended_size(), 1);
    EXPECT_THAT(r->unknown_lease_ids(), ElementsAre("l-unknown"));
    core_->Tick();
  }
  EXPECT_EQ(Get(c.id()).jobs(0).state(), v1::JOB_LEASED);
  v1::HeartbeatRequest unknown_agent;
  unknown_agent.set_agent_id("a-nope");
  EXPECT_THAT(core_->Heartbeat(unknown_agent),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("register again")));
}

TEST_F(CoordinatorTest, NonRetryableFailureFailsCampaignAtOnce) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  v1::AcquireJobResponse a = TryAcquire(RegisterAgent("cpu-box"));
  EXPECT_THAT(Complete(a.lease().id(), false, false, "model file corrupt"), IsOk());
  v1::Campaign done = Get(c.id());
  EXPECT_EQ(done.state(), v1::CAMPAIGN_FAILED);
  EXPECT_EQ(done.jobs(0).error(), "model file corrupt");
  EXPECT_EQ(done.error(), "job probe failed: model file corrupt");
}

TEST_F(CoordinatorTest, RetryableFailureRequeues) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobResponse a = TryAcquire(agent);
  EXPECT_THAT(Complete(a.lease().id(), false, true, "out of memory"), IsOk());
  v1::Job job = Get(c.id()).jobs(0);
  EXPECT_EQ(job.state(), v1::JOB_RUNNABLE);
  EXPECT_THAT(job.waiting_reason(), HasSubstr("retry 2 after backoff"));
}

TEST_F(CoordinatorTest, CancelReachesRunningLease) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobResponse a = TryAcquire(agent);
  auto cancelled = core_->Cancel(c.id(), "wrong target");
  ASSERT_THAT(cancelled, IsOk());
  EXPECT_EQ(cancelled->state(), v1::CAMPAIGN_CANCELLED);
  EXPECT_EQ(cancelled->jobs(0).state(), v1::JOB_CANCELLED);
  v1::HeartbeatRequest hb;
  hb.set_agent_id(agent);
  hb.add_lease_ids(a.lease().id());
  EXPECT_THAT(core_->Heartbeat(hb)->cancelled_lease_ids(), ElementsAre(a.lease().id()));
  v1::ReportProgressRequest progress;
  progress.set_lease_id(a.lease().id());
  EXPECT_TRUE(core_->ReportProgress(progress)->cancelled());
  // The agent's final report after stopping is accepted and changes nothing.
  EXPECT_THAT(Complete(a.lease().id(), false, false, "cancelled"), IsOk());
  EXPECT_EQ(Get(c.id()).jobs(0).state(), v1::JOB_CANCELLED);
  EXPECT_THAT(core_->Cancel(c.id(), ""), IsOk()) << "cancelling twice is harmless";
}

TEST_F(CoordinatorTest, HigherPriorityFirstThenOlder) {
  v1::Campaign low = Submit(ProbeContract("low", 0), "r-low");
  clock_.Advance(absl::Seconds(1));
  v1::Campaign low2 = Submit(ProbeContract("low2", 0), "r-low2");
  v1::Campaign high = Submit(ProbeContract("high", 10), "r-high");
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobResponse a = TryAcquire(agent);
  EXPECT_EQ(a.campaign_id(), high.id());
  ASSERT_THAT(Complete(a.lease().id(), true), IsOk());
  a = TryAcquire(agent);
  EXPECT_EQ(a.campaign_id(), low.id());
  ASSERT_THAT(Complete(a.lease().id(), true), IsOk());
  EXPECT_EQ(TryAcquire(agent).campaign_id(), low2.id());
}

TEST_F(CoordinatorTest, OneJobAtATimePerAgentByDefault) {
  Submit(ProbeContract("a"), "r1");
  Submit(ProbeContract("b"), "r2");
  const std::string agent = RegisterAgent("cpu-box");
  EXPECT_TRUE(TryAcquire(agent).assigned());
  EXPECT_FALSE(TryAcquire(agent).assigned());
}

TEST_F(CoordinatorTest, DrainedAgentGetsNoWork) {
  Submit(ProbeContract(), "r1");
  const std::string agent = RegisterAgent("cpu-box");
  v1::DrainAgentRequest drain;
  drain.set_agent_id(agent);
  ASSERT_THAT(core_->DrainAgent(drain), IsOk());
  EXPECT_FALSE(TryAcquire(agent).assigned());
  drain.set_undrain(true);
  ASSERT_THAT(core_->DrainAgent(drain), IsOk());
  EXPECT_TRUE(TryAcquire(agent).assigned());
}

TEST_F(CoordinatorTest, RestartKeepsLeasesCampaignsAndEventOrder) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  const std::string agent = RegisterAgent("cpu-box");
  v1::AcquireJobResponse a = TryAcquire(agent);
  clock_.Advance(absl::Seconds(14));
  Open();  // a new coordinator over the same database
  clock_.Advance(absl::Seconds(10));
  core_->Tick();  // the recovered lease got a fresh TTL, so it has not expired
  v1::HeartbeatRequest hb;
  hb.set_agent_id(agent);
  hb.add_lease_ids(a.lease().id());
  EXPECT_EQ(core_->Heartbeat(hb)->extended_size(), 1);
  EXPECT_THAT(Complete(a.lease().id(), true), IsOk());
  EXPECT_EQ(Get(c.id()).state(), v1::CAMPAIGN_SUCCEEDED);
  EXPECT_THAT(EventTypes(c.id()),
              ElementsAre("campaign_submitted", "job_runnable", "job_leased", "campaign_running",
                          "job_succeeded", "campaign_succeeded"));
  bool final = false;
  ASSERT_THAT(core_->ReadEvents(c.id(), 0, 1000, &final), IsOk());
  EXPECT_TRUE(final);
}

TEST_F(CoordinatorTest, RestartRequeuesRunnableJobs) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  Open();
  EXPECT_EQ(core_->RunnableCountForTest(), 1u);
  EXPECT_TRUE(TryAcquire(RegisterAgent("cpu-box")).assigned());
}

TEST_F(CoordinatorTest, AutocompressGraphRunsThroughLauncherAndAgents) {
  RecordingLauncher launcher;
  core_->SetLauncher(&launcher);
  v1::DeploymentContract contract = AutocompressContract();
  v1::Campaign c = Submit(contract, "r1");
  const std::string agent = RegisterAgent("cpu-box");
  // profile (agent) and rank (launcher) start at once; the rest wait for them.
  core_->Tick();
  int guard = 0;
  while (Get(c.id()).state() != v1::CAMPAIGN_SUCCEEDED && guard++ < 20) {
    v1::AcquireJobResponse a = TryAcquire(agent);
    if (a.assigned()) {
      v1::CompleteJobRequest done;
      done.set_lease_id(a.lease().id());
      done.set_success(true);
      ASSERT_THAT(core_->CompleteJob(done), IsOk());
      continue;
    }
    core_->Tick();
    ASSERT_FALSE(launcher.launched.empty()) << "nothing runnable for agent or launcher";
    v1::AcquireJobResponse l = launcher.launched.front();
    launcher.launched.erase(launcher.launched.begin());
    EXPECT_EQ(l.job().resources().placement(), "launcher");
    v1::CompleteJobRequest done;
    done.set_lease_id(l.lease().id());
    done.set_success(true);
    done.mutable_output()->set_world_size(1);
    ASSERT_THAT(core_->CompleteJob(done), IsOk());
  }
  EXPECT_EQ(Get(c.id()).state(), v1::CAMPAIGN_SUCCEEDED);
  auto report = core_->GetReport(c.id());
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->budgets_size(), 1);
  EXPECT_EQ(report->budgets(0).resource(), "latency_ms");

  // Same fingerprint: the second campaign skips profiling once a table exists.
  v1::Campaign c2 = Submit(contract, "r2");
  EXPECT_EQ(c2.jobs(0).kind(), "profile");
  EXPECT_NE(c2.jobs(0).state(), v1::JOB_SKIPPED) << "no cost table was stored yet";
}

// With isolation, the agent's measurements and the launcher's jobs never overlap: whichever
// starts first holds the other back until it completes.
TEST_F(CoordinatorTest, IsolatedMeasurementsNeverOverlapLauncherJobs) {
  Open(/*isolate_measurements=*/true);
  RecordingLauncher launcher;
  core_->SetLauncher(&launcher);
  const std::string agent = RegisterAgent("cpu-box");
  // No agent is waiting at submission: the launcher starts rank, and profile waits for it.
  v1::Campaign c = Submit(AutocompressContract(), "iso");
  ASSERT_EQ(launcher.launched.size(), 1u);
  EXPECT_EQ(launcher.launched[0].job().kind(), "rank");
  EXPECT_FALSE(TryAcquire(agent).assigned());
  ASSERT_THAT(Complete(launcher.launched[0].lease().id(), true), IsOk());
  launcher.launched.clear();
  v1::AcquireJobResponse profile = TryAcquire(agent);
  ASSERT_TRUE(profile.assigned());
  EXPECT_EQ(profile.job().kind(), "profile");

  // While profile runs, a second campaign's rank is not launched beside it.
  v1::DeploymentContract other = AutocompressContract();
  other.mutable_workload()->set_batch_size(2);
  v1::Campaign c2 = Submit(other, "iso-2");
  core_->Tick();
  EXPECT_TRUE(launcher.launched.empty());
  ASSERT_THAT(Complete(profile.lease().id(), true), IsOk());
  core_->Tick();
  ASSERT_EQ(launcher.launched.size(), 2u);  // c's search waits for nothing more, c2's rank
  EXPECT_EQ(launcher.launched[0].job().campaign_id() == c.id() ? "search" : "rank",
            launcher.launched[0].job().kind());
  EXPECT_TRUE(launcher.launched[0].job().campaign_id() == c2.id() ||
              launcher.launched[1].job().campaign_id() == c2.id());
}

// A parent directory holding only a tailor config.json with `mlp_ffn` in its one MLP layer
// (the coordinator reads nothing else of a parent); returns the parent's path.
std::string WriteParentConfig(const std::filesystem::path& dir, int64_t mlp_ffn) {
  std::filesystem::create_directories(dir);
  model::HybridConfig config;
  config.vocab = 64;
  config.hidden = 32;
  config.max_seq = 256;
  config.layers = {model::LayerSpec::Attention(4, 2, 8), model::LayerSpec::Mlp(mlp_ffn)};
  EXPECT_THAT(model::WriteHybridConfig(config, (dir / "config.json").string()), IsOk());
  return dir.string();
}

// The profile job's lease completed as the agent does: the table carries the key of the
// parent it measured.
absl::StatusOr<v1::CostTable> PutTable(Coordinator& core, const v1::AcquireJobResponse& a,
                                       const std::string& parent_dir) {
  v1::PutCostTableRequest put;
  put.set_lease_id(a.lease().id());
  v1::CostEntry* e = put.mutable_table()->add_entries();
  e->set_layer_kind("mlp");
  e->set_time_ms(1.5);
  absl::StatusOr<std::string> text = model::ReadFileToString(parent_dir + "/config.json");
  if (!text.ok()) return text.status();
  absl::StatusOr<std::string> key = hf::ParentArchitectureKey(*text);
  if (!key.ok()) return key.status();
  put.mutable_table()->set_parent_architecture(*key);
  return core.PutCostTable(put);
}

TEST_F(CoordinatorTest, ProfileSkippedWhenCostTableExists) {
  v1::DeploymentContract contract = AutocompressContract();
  contract.mutable_parent()->set_path(WriteParentConfig(dir_ / "parent", 64));
  v1::Campaign c = Submit(contract, "r1");
  v1::AcquireJobResponse a = TryAcquire(RegisterAgent("cpu-box"));
  ASSERT_EQ(a.job().kind(), "profile");
  auto table = PutTable(*core_, a, contract.parent().path());
  ASSERT_THAT(table, IsOk());
  EXPECT_EQ(table->fingerprint(), c.fingerprint());
  v1::Campaign c2 = Submit(contract, "r2");
  EXPECT_EQ(c2.jobs(0).state(), v1::JOB_SKIPPED);
  EXPECT_EQ(c2.jobs(0).skipped_reason(), "cost table " + table->id() + " reused");
  v1::DeploymentContract other = contract;
  other.mutable_target()->set_engine_version("2");
  EXPECT_NE(Submit(other, "r3").jobs(0).state(), v1::JOB_SKIPPED);
}

// The cost table is keyed by the parent's architecture too: before schema 7 the second
// parent (another MLP width, same target and workload) was served the first one's table.
TEST_F(CoordinatorTest, ParentOfAnotherShapeProfilesAgain) {
  v1::DeploymentContract first = AutocompressContract();
  first.mutable_parent()->set_path(WriteParentConfig(dir_ / "parent-a", 64));
  v1::Campaign c = Submit(first, "a1");
  v1::AcquireJobResponse a = TryAcquire(RegisterAgent("cpu-box"));
  ASSERT_EQ(a.job().kind(), "profile");
  ASSERT_THAT(PutTable(*core_, a, first.parent().path()), IsOk());

  v1::DeploymentContract second = first;
  second.mutable_parent()->set_path(WriteParentConfig(dir_ / "parent-b", 96));
  v1::Campaign c2 = Submit(second, "b1");
  EXPECT_EQ(c2.fingerprint(), c.fingerprint());  // same target: only the parent differs
  EXPECT_EQ(c2.jobs(0).kind(), "profile");
  EXPECT_EQ(c2.jobs(0).state(), v1::JOB_RUNNABLE);

  // Same shape under another path (other weights) reuses; an unreadable parent does not.
  v1::DeploymentContract copy = first;
  copy.mutable_parent()->set_path(WriteParentConfig(dir_ / "parent-a-copy", 64));
  EXPECT_EQ(Submit(copy, "a2").jobs(0).state(), v1::JOB_SKIPPED);
  v1::DeploymentContract unreadable = first;
  unreadable.mutable_parent()->set_path((dir_ / "not-here").string());
  EXPECT_EQ(Submit(unreadable, "x1").jobs(0).state(), v1::JOB_RUNNABLE);
}

// Runs an AUTOCOMPRESS campaign to the end as its agent and workers would: the profile job
// stores a table validated at 2% MAPE (worst 5%), search predicts `predicted_ms` and verify
// measures `measured_ms`.
class CostTableCheckTest : public CoordinatorTest {
 protected:
  // With `parent`, the profile job measured the parent (ProfileResult and table); every
  // contract a job was handed is kept in handed_ under the job's key.
  v1::Campaign RunCampaign(const v1::DeploymentContract& contract, const std::string& rid,
                           double predicted_ms, double measured_ms,
                           const std::string& disturbance = "",
                           const v1::ModelCosts* parent = nullptr) {
    RecordingLauncher launcher;
    core_->SetLauncher(&launcher);
    v1::Campaign c = Submit(contract, rid);
    const std::string agent = RegisterAgent("cpu-box");
    for (int guard = 0; Get(c.id()).state() != v1::CAMPAIGN_SUCCEEDED && guard < 40; ++guard) {
      core_->Tick();
      v1::AcquireJobResponse a = TryAcquire(agent);
      if (!a.assigned()) {
        if (launcher.launched.empty()) break;
        a = launcher.launched.front();
        launcher.launched.erase(launcher.launched.begin());
      }
      handed_[a.job().key()] = a.contract();
      v1::CompleteJobRequest done;
      done.set_lease_id(a.lease().id());
      done.set_success(true);
      done.mutable_output()->set_world_size(1);
      if (a.job().kind() == "profile") {
        v1::PutCostTableRequest put;
        put.set_lease_id(a.lease().id());
        put.mutable_table()->add_entries()->set_layer_kind("mlp");
        put.mutable_table()->set_latency_mape(0.02);
        put.mutable_table()->set_latency_max_error(0.05);
        put.mutable_table()->set_validated_architectures(8);
        put.mutable_table()->set_parent_architecture(ParentKey(contract));
        if (parent != nullptr) *put.mutable_table()->mutable_parent_measured() = *parent;
        auto table = core_->PutCostTable(put);
        EXPECT_THAT(table, IsOk());
        v1::ProfileResult result;
        result.set_cost_table_id(table.ok() ? table->id() : "");
        if (parent != nullptr) *result.mutable_parent_measured() = *parent;
        SetDetail(*done.mutable_output(), result);
      } else if (a.job().key() == "search") {
        done.mutable_output()->mutable_predicted()->set_latency_ms(predicted_ms);
      } else if (a.job().key() == "verify") {
        done.mutable_output()->MergeFrom(verify_extra_);
        done.mutable_output()->mutable_measured()->set_latency_ms(measured_ms);
        if (!disturbance.empty()) {
          done.mutable_output()->mutable_measured()->set_disturbed(true);
          done.mutable_output()->mutable_measured()->set_disturbance(disturbance);
        }
      } else if (a.job().key() == "distill") {
        done.mutable_output()->set_model_digest(std::string(64, 'd'));
      }
      EXPECT_THAT(core_->CompleteJob(done), IsOk());
    }
    core_->SetLauncher(nullptr);
    return Get(c.id());
  }

  static std::string ParentKey(const v1::DeploymentContract& contract) {
    auto text = model::ReadFileToString(contract.parent().path() + "/config.json");
    auto key = text.ok() ? hf::ParentArchitectureKey(*text) : text.status();
    return key.ok() ? *key : "";
  }

  std::map<std::string, v1::DeploymentContract> handed_;
  v1::JobOutput verify_extra_;  // merged into the verify job's output
};

// An agent of the built-in engine's next version that runs drift checks: an engine upgrade.
v1::AgentInfo UpgradedAgent(const std::string& name) {
  v1::AgentInfo info;
  info.set_name(name);
  info.set_device_kind("cpu");
  info.set_engine("tailor-builtin");
  info.set_engine_version("2");
  for (const char* kind : {"drift_check", "profile", "verify"}) info.add_job_kinds(kind);
  return info;
}

// The parent as a profile job measures it: p50 20 ms over 15 requests, 3.0 MiB.
v1::ModelCosts MeasuredParent() {
  v1::ModelCosts m;
  m.set_latency_ms(20);
  m.set_request_p50_ms(20);
  m.set_request_p90_ms(22);
  m.set_request_p99_ms(23);
  m.set_throughput_tokens_per_s(1600);
  m.set_memory_mib(3.0);
  m.set_repetitions(15);
  m.set_latency_statistic("p50 of 15 whole requests");
  return m;
}

v1::DeploymentContract RelativeContract(const std::string& parent_dir) {
  v1::DeploymentContract c = AutocompressContract();
  c.mutable_parent()->set_path(parent_dir);
  c.mutable_budget()->clear_latency_ms_max();
  c.mutable_budget()->set_latency_vs_parent_max(0.7);
  c.mutable_budget()->set_memory_vs_parent_max(0.9);
  return c;
}

// Every job after the profile is handed the budgets resolved against the parent the profile
// measured; the report lists both; a later campaign reusing the table resolves the same.
TEST_F(CostTableCheckTest, BudgetsRelativeToTheParentResolveAgainstItsMeasurement) {
  const v1::DeploymentContract contract = RelativeContract(WriteParentConfig(dir_ / "p", 64));
  const v1::ModelCosts parent = MeasuredParent();
  const v1::Campaign c = RunCampaign(contract, "r1", 13.5, 13.8, "", &parent);
  ASSERT_EQ(c.state(), v1::CAMPAIGN_SUCCEEDED);
  EXPECT_FALSE(handed_.at("profile").budget().has_latency_ms_max());
  for (const char* key : {"search", "distill", "verify"}) {
    const v1::Budget& b = handed_.at(key).budget();
    EXPECT_DOUBLE_EQ(b.latency_ms_max(), 0.7 * 20) << key;
    EXPECT_DOUBLE_EQ(b.memory_mib_max(), 0.9 * 3.0) << key;
    EXPECT_DOUBLE_EQ(b.latency_vs_parent_max(), 0.7) << key;
  }
  EXPECT_FALSE(c.contract().budget().has_latency_ms_max()) << "the stored contract is as sent";
  auto report = core_->GetReport(c.id());
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->relative_budgets_size(), 2);
  EXPECT_EQ(report->relative_budgets(0).resource(), "latency_ms");
  EXPECT_TRUE(report->relative_budgets(0).resolved());
  EXPECT_DOUBLE_EQ(report->relative_budgets(0).parent(), 20);
  EXPECT_DOUBLE_EQ(report->relative_budgets(0).budget(), 14);
  EXPECT_EQ(report->relative_budgets(0).cost_table_id(), c.cost_table_check().cost_table_id());
  ASSERT_GE(report->budgets_size(), 1);
  EXPECT_EQ(report->budgets(0).resource(), "latency_ms");
  EXPECT_DOUBLE_EQ(report->budgets(0).budget(), 14);
  EXPECT_DOUBLE_EQ(report->budgets(0).measured(), 13.8);
  EXPECT_TRUE(report->budgets(0).met());

  handed_.clear();
  const v1::Campaign c2 = RunCampaign(contract, "r2", 13.5, 13.8);
  ASSERT_EQ(c2.state(), v1::CAMPAIGN_SUCCEEDED);
  EXPECT_EQ(c2.jobs(0).state(), v1::JOB_SKIPPED);
  EXPECT_EQ(handed_.count("profile"), 0u);
  EXPECT_DOUBLE_EQ(handed_.at("search").budget().latency_ms_max(), 14);
}

// A verify that served the parent alongside the student judged the latency budget against
// that parent (0.7 x 22 ms, where the profile's parent gave 14): the report holds the student
// to the verify's budget and lists both parents; memory stays the profile's.
TEST_F(CostTableCheckTest, AVerifyBesideTheParentSetsTheTimedBudget) {
  const v1::DeploymentContract contract = RelativeContract(WriteParentConfig(dir_ / "p", 64));
  const v1::ModelCosts parent = MeasuredParent();
  v1::ModelCosts beside = MeasuredParent();
  beside.set_request_p50_ms(22);
  beside.set_latency_ms(22);
  *verify_extra_.mutable_parent_beside() = beside;
  v1::BudgetCheck* check = verify_extra_.add_budgets();
  check->set_resource("latency_ms");
  check->set_budget(0.7 * 22);
  check->set_measured(14.9);
  check->set_met(true);
  check->set_parent(22);
  const v1::Campaign c = RunCampaign(contract, "r1", 14.5, 14.9, "", &parent);
  ASSERT_EQ(c.state(), v1::CAMPAIGN_SUCCEEDED);
  auto report = core_->GetReport(c.id());
  ASSERT_THAT(report, IsOk());
  ASSERT_GE(report->budgets_size(), 2);
  EXPECT_EQ(report->budgets(0).resource(), "latency_ms");
  EXPECT_DOUBLE_EQ(report->budgets(0).budget(), 0.7 * 22);
  EXPECT_DOUBLE_EQ(report->budgets(0).measured(), 14.9);
  EXPECT_TRUE(report->budgets(0).met()) << "14.9 is over the profile's 14, under 15.4";
  EXPECT_EQ(report->budgets(1).resource(), "memory_mib");
  EXPECT_DOUBLE_EQ(report->budgets(1).budget(), 0.9 * 3.0);
  ASSERT_EQ(report->relative_budgets_size(), 2);
  const v1::RelativeBudget& latency = report->relative_budgets(0);
  EXPECT_DOUBLE_EQ(latency.parent(), 20);
  EXPECT_DOUBLE_EQ(latency.budget(), 14);
  EXPECT_DOUBLE_EQ(latency.verify_parent(), 22);
  EXPECT_DOUBLE_EQ(latency.verify_budget(), 0.7 * 22);
  EXPECT_FALSE(report->relative_budgets(1).has_verify_budget()) << "memory";
}

// The cost table check puts a verify that served the parent alongside on the table's
// footing: measured 16.5 ms against a prediction of 13.5 (22% off, beyond the table's 5%)
// with the parent at 24 ms where the profile had 20 is 13.75 ms as the table was profiled:
// the host was slower, not the table wrong. The same measurement with the parent at 20 ms
// marks the table suspect.
TEST_F(CostTableCheckTest, TheParentAlongsidePutsTheCheckOnTheTablesFooting) {
  const v1::DeploymentContract contract = RelativeContract(WriteParentConfig(dir_ / "p", 64));
  const v1::ModelCosts parent = MeasuredParent();
  v1::ModelCosts beside = MeasuredParent();
  beside.set_request_p50_ms(24);
  *verify_extra_.mutable_parent_beside() = beside;
  verify_extra_.mutable_measured()->set_request_p50_ms(16.5);
  v1::Campaign c = RunCampaign(contract, "r1", 13.5, 16.5, "", &parent);
  ASSERT_EQ(c.state(), v1::CAMPAIGN_SUCCEEDED);
  const v1::CostTableCheck& check = c.cost_table_check();
  EXPECT_DOUBLE_EQ(check.host_scale(), 20.0 / 24);
  EXPECT_DOUBLE_EQ(check.measured_as_served(), 16.5);
  EXPECT_DOUBLE_EQ(check.measured(), 16.5 * 20 / 24);
  EXPECT_FALSE(check.suspect()) << check.reason();

  verify_extra_.mutable_parent_beside()->set_request_p50_ms(20);
  c = RunCampaign(contract, "r2", 13.5, 16.5, "", &parent);
  ASSERT_EQ(c.state(), v1::CAMPAIGN_SUCCEEDED);
  EXPECT_TRUE(c.cost_table_check().suspect());
  EXPECT_THAT(c.cost_table_check().reason(),
              HasSubstr("predicted 13.50 ms, measured 16.50 ms on the table's footing (16.50 ms "
                        "as served; the parent served alongside at 20.00 ms, 20.00 ms when the "
                        "table was profiled) (18.2% off;"));
}

// A table stored before the parent was measured cannot resolve the budgets: the campaign
// profiles again, and says why.
TEST_F(CostTableCheckTest, ATableWithoutTheParentIsNotReusedForRelativeBudgets) {
  v1::DeploymentContract absolute = AutocompressContract();
  absolute.mutable_parent()->set_path(WriteParentConfig(dir_ / "p", 64));
  ASSERT_EQ(RunCampaign(absolute, "a1", 38, 37).state(), v1::CAMPAIGN_SUCCEEDED);
  const v1::Campaign c = Submit(RelativeContract(absolute.parent().path()), "r1");
  EXPECT_EQ(c.jobs(0).kind(), "profile");
  EXPECT_NE(c.jobs(0).state(), v1::JOB_SKIPPED);
  EXPECT_THAT(EventTypes(c.id()), ::testing::Contains("cost_table_not_reused"));
}

// A profile result without the parent would leave the later jobs without budgets: refused,
// and the campaign fails naming why rather than search unbounded.
TEST_F(CoordinatorTest, AProfileWithoutTheParentFailsARelativeCampaign) {
  const v1::DeploymentContract contract = RelativeContract(WriteParentConfig(dir_ / "p", 64));
  const v1::Campaign c = Submit(contract, "r1");
  v1::AcquireJobResponse a = TryAcquire(RegisterAgent("cpu-box"));
  ASSERT_EQ(a.job().kind(), "profile");
  v1::CompleteJobRequest done;
  done.set_lease_id(a.lease().id());
  done.set_success(true);
  SetDetail(*done.mutable_output(), v1::ProfileResult());
  ASSERT_THAT(core_->CompleteJob(done), IsOk());
  const v1::Campaign after = Get(c.id());
  EXPECT_EQ(after.state(), v1::CAMPAIGN_FAILED);
  EXPECT_EQ(after.jobs(0).state(), v1::JOB_FAILED);
  EXPECT_EQ(after.jobs(0).error(),
            "profile result holds no measurement of the parent, which the contract's budgets "
            "relative to the parent need (an agent older than those budgets?)");
}

TEST_F(CoordinatorTest, CostTableParentMeasurementMustHoldFigures) {
  Submit(RelativeContract(WriteParentConfig(dir_ / "p", 64)), "r1");
  v1::AcquireJobResponse a = TryAcquire(RegisterAgent("cpu-box"));
  ASSERT_EQ(a.job().kind(), "profile");
  v1::PutCostTableRequest put;
  put.set_lease_id(a.lease().id());
  put.mutable_table()->add_entries()->set_layer_kind("mlp");
  *put.mutable_table()->mutable_parent_measured() = MeasuredParent();
  put.mutable_table()->mutable_parent_measured()->set_memory_mib(-1);
  EXPECT_THAT(core_->PutCostTable(put),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "table.parent_measured.memory_mib: must be finite and > 0, got -1"));
}

TEST_F(CostTableCheckTest, VerifyWithinTheValidatedErrorKeepsTheTable) {
  v1::DeploymentContract contract = AutocompressContract();
  contract.mutable_parent()->set_path(WriteParentConfig(dir_ / "parent", 64));
  const v1::Campaign c = RunCampaign(contract, "r1", 38.0, 36.5);  // 4.1% off, worst 5%
  ASSERT_EQ(c.state(), v1::CAMPAIGN_SUCCEEDED);
  const v1::CostTableCheck& check = c.cost_table_check();
  EXPECT_FALSE(check.suspect());
  EXPECT_DOUBLE_EQ(check.error(), 1.5 / 36.5);
  EXPECT_DOUBLE_EQ(check.validated_max_error(), 0.05);
  auto report = core_->GetReport(c.id());
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->cost_table_check().cost_table_id(), check.cost_table_id());
  EXPECT_EQ(Submit(contract, "r2").jobs(0).state(), v1::JOB_SKIPPED);
}

// The quickstart's case: a table validated at 2% that predicted 38.3 ms for a student measured
// at 36.2 ms. The table is marked, said in the events and the report, and not reused.
TEST_F(CostTableCheckTest, VerifyBeyondTheValidatedErrorMarksTheTableSuspect) {
  v1::DeploymentContract contract = AutocompressContract();
  contract.mutable_parent()->set_path(WriteParentConfig(dir_ / "parent", 64));
  const v1::Campaign c = RunCampaign(contract, "r1", 38.3, 36.2);
  ASSERT_EQ(c.state(), v1::CAMPAIGN_SUCCEEDED);
  const v1::CostTableCheck& check = c.cost_table_check();
  EXPECT_TRUE(check.suspect());
  const std::string reason = absl::StrCat(
      "campaign ", c.id(), ": predicted 38.30 ms, measured 36.20 ms (5.8% off; the table was "
      "validated at 2.0% MAPE, worst 5.0%, over 8 held-out architectures)");
  EXPECT_EQ(check.reason(), reason);
  auto table = core_->GetCostTable([&] {
    v1::GetCostTableRequest r;
    r.set_id(check.cost_table_id());
    return r;
  }());
  ASSERT_THAT(table, IsOk());
  EXPECT_EQ(table->suspect_reason(), reason);
  EXPECT_THAT(EventTypes(c.id()), ::testing::Contains("cost_table_suspect"));
  const v1::Campaign again = Submit(contract, "r2");
  EXPECT_EQ(again.jobs(0).kind(), "profile");
  EXPECT_EQ(again.jobs(0).state(), v1::JOB_RUNNABLE) << "a suspect table is never reused";
}

// The same disagreement in a measurement the agent reports as disturbed (another process ran
// on the engine's threads through every re-serve) measured the host: said, not held against
// the table, which stays in use.
TEST_F(CostTableCheckTest, DisturbedVerifyDoesNotMarkTheTableSuspect) {
  v1::DeploymentContract contract = AutocompressContract();
  contract.mutable_parent()->set_path(WriteParentConfig(dir_ / "parent", 64));
  const v1::Campaign c =
      RunCampaign(contract, "r1", 38.3, 36.2, "the engine used 31% of its 2 threads (min 50%)");
  ASSERT_EQ(c.state(), v1::CAMPAIGN_SUCCEEDED);
  const v1::CostTableCheck& check = c.cost_table_check();
  EXPECT_FALSE(check.suspect());
  EXPECT_TRUE(check.measurement_disturbed());
  EXPECT_EQ(check.reason(),
            absl::StrCat("campaign ", c.id(),
                         ": predicted 38.30 ms, measured 36.20 ms (5.8% off), but the "
                         "measurement was disturbed (the engine used 31% of its 2 threads (min "
                         "50%)): the table is not judged on it"));
  EXPECT_THAT(EventTypes(c.id()), ::testing::Not(::testing::Contains("cost_table_suspect")));
  EXPECT_EQ(Submit(contract, "r2").jobs(0).state(), v1::JOB_SKIPPED);
}

// Recompression after an engine upgrade: the drift check in the new version (played here by
// the test: the agent's measurement is tested in drift_check_test) decides per source
// campaign. Campaign "tight": its table drifted and its student misses the budget, so it is
// profiled and compressed again. Campaign "loose": table and student still hold, so the
// table is carried over and nothing runs.
TEST_F(CostTableCheckTest, RecompressRedoesOnlyWhatTheDriftCheckFoundChanged) {
  v1::DeploymentContract tight = AutocompressContract();
  tight.set_name("tight");
  tight.set_recurring(true);
  tight.mutable_parent()->set_path(WriteParentConfig(dir_ / "parent-a", 64));
  v1::DeploymentContract loose = tight;
  loose.set_name("loose");
  loose.mutable_parent()->set_path(WriteParentConfig(dir_ / "parent-b", 96));
  loose.mutable_budget()->set_latency_ms_max(80);
  const v1::Campaign a = RunCampaign(tight, "a", 38, 37);
  const v1::Campaign b = RunCampaign(loose, "b", 38, 37);
  ASSERT_EQ(a.state(), v1::CAMPAIGN_SUCCEEDED);
  ASSERT_EQ(b.state(), v1::CAMPAIGN_SUCCEEDED);
  const std::string table_b = b.cost_table_check().cost_table_id();

  auto upgraded = core_->Register(UpgradedAgent("upgraded"));
  ASSERT_THAT(upgraded, IsOk());
  auto upgraded2 = core_->Register(UpgradedAgent("upgraded-2"));
  ASSERT_THAT(upgraded2, IsOk());
  v1::RecompressRequest req;
  req.set_engine_version("2");
  auto recompress = core_->Recompress(req);
  ASSERT_THAT(recompress, IsOk());
  ASSERT_EQ(recompress->entries_size(), 2);
  std::map<std::string, std::string> next;  // source campaign -> its recompression
  for (const auto& e : recompress->entries()) next[e.source_campaign_id()] = e.new_campaign_id();
  for (const auto& [source, id] : next) {
    const v1::Campaign c = Get(id);
    EXPECT_EQ(c.recompress().source_campaign_id(), source);
    EXPECT_EQ(c.recompress().old_engine_version(), "1");
    EXPECT_EQ(c.jobs(0).key(), "drift_check");
    for (const v1::Job& job : c.jobs()) {
      EXPECT_TRUE(job.key() == "drift_check" || job.state() == v1::JOB_PENDING) << job.key();
    }
  }

  // Both drift checks leased before either completes (a completed one makes its campaign's
  // next jobs runnable beside the other check).
  const v1::AcquireJobResponse checks[] = {TryAcquire(upgraded->agent_id()),
                                           TryAcquire(upgraded2->agent_id())};
  for (const v1::AcquireJobResponse& check : checks) {
    ASSERT_TRUE(check.assigned());
    ASSERT_EQ(check.job().kind(), "drift_check");
    const bool is_tight = check.campaign_id() == next[a.id()];
    EXPECT_EQ(check.source_cost_table().id(),
              (is_tight ? a : b).cost_table_check().cost_table_id());
    ASSERT_EQ(check.inputs().count("source_distill"), 1u);
    EXPECT_EQ(check.inputs().at("source_distill").model_digest(), std::string(64, 'd'));
    v1::CompleteJobRequest done;
    done.set_lease_id(check.lease().id());
    done.set_success(true);
    v1::DriftCheckResult d;
    d.set_cost_table_id(check.source_cost_table().id());
    d.add_architectures()->set_description("L0 attention ...");
    d.set_latency_mape(is_tight ? 0.21 : 0.012);
    d.set_latency_max_error(is_tight ? 0.25 : 0.02);
    d.set_bound(0.05);
    d.set_table_holds(!is_tight);
    d.set_budgets_hold(!is_tight);
    SetDetail(*done.mutable_output(), d);
    v1::BudgetCheck* budget = done.mutable_output()->add_budgets();
    budget->set_resource("latency_ms");
    budget->set_budget(is_tight ? 40 : 80);
    budget->set_measured(is_tight ? 45 : 39);
    budget->set_met(!is_tight);
    done.mutable_output()->mutable_measured()->set_latency_ms(is_tight ? 45 : 39);
    ASSERT_THAT(core_->CompleteJob(done), IsOk());
  }

  // "tight": profiled again in version 2, then compressed again.
  const v1::Campaign redo = Get(next[a.id()]);
  EXPECT_EQ(redo.state(), v1::CAMPAIGN_RUNNING);
  EXPECT_TRUE(redo.recompress().table_reprofiled());
  EXPECT_TRUE(redo.recompress().recompressed());
  for (const v1::Job& job : redo.jobs()) {
    if (job.key() == "profile") {
      EXPECT_EQ(job.state(), v1::JOB_RUNNABLE);
    }
    if (job.key() == "search") {
      EXPECT_EQ(job.state(), v1::JOB_PENDING);
    }
  }
  EXPECT_THAT(redo.recompress().reason(),
              HasSubstr("drifted in tailor-builtin 2: 1 architectures re-measured, latency MAPE "
                        "21.0% (worst 25.0%) against its validated 5.0%"));
  // "loose": nothing runs; the table is carried over and the next campaign reuses it.
  const v1::Campaign kept = Get(next[b.id()]);
  EXPECT_EQ(kept.state(), v1::CAMPAIGN_SUCCEEDED);
  EXPECT_FALSE(kept.recompress().table_reprofiled());
  EXPECT_FALSE(kept.recompress().recompressed());
  EXPECT_EQ(kept.recompress().reason(),
            absl::StrCat("cost table ", table_b, " still holds in tailor-builtin 2: 1 "
                         "architectures re-measured, latency MAPE 1.2% (worst 2.0%) against "
                         "its validated 5.0%; the student of ", b.id(),
                         " still meets every budget: not recompressed"));
  for (const v1::Job& job : kept.jobs()) {
    EXPECT_TRUE(job.key() == "drift_check" || job.state() == v1::JOB_SKIPPED) << job.key();
  }
  v1::GetCostTableRequest get;
  get.set_id(kept.recompress().carried_cost_table_id());
  auto carried = core_->GetCostTable(get);
  ASSERT_THAT(carried, IsOk());
  EXPECT_EQ(carried->carried_from(), table_b);
  EXPECT_EQ(carried->engine_version(), "2");
  EXPECT_EQ(carried->fingerprint(), kept.fingerprint());
  auto report = core_->GetReport(kept.id());
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->budgets_size(), 1);
  EXPECT_EQ(report->budgets(0).measured(), 39);
  EXPECT_TRUE(report->budgets(0).met());
  EXPECT_EQ(report->recompress().reason(), kept.recompress().reason());
  v1::DeploymentContract later = loose;
  later.mutable_target()->set_engine_version("2");
  EXPECT_EQ(Submit(later, "b2").jobs(0).state(), v1::JOB_SKIPPED);
}

// A drift check judges the source student on the budgets the source campaign resolved; a
// table carried over keeps the parent it measured, so the recompression resolves the same.
TEST_F(CostTableCheckTest, RecompressJudgesRelativeBudgetsOnTheSourcesParent) {
  v1::DeploymentContract contract = RelativeContract(WriteParentConfig(dir_ / "p", 64));
  contract.set_recurring(true);
  const v1::ModelCosts parent = MeasuredParent();
  const v1::Campaign source = RunCampaign(contract, "s", 13.5, 13.8, "", &parent);
  ASSERT_EQ(source.state(), v1::CAMPAIGN_SUCCEEDED);
  auto upgraded = core_->Register(UpgradedAgent("upgraded"));
  ASSERT_THAT(upgraded, IsOk());
  v1::RecompressRequest req;
  req.set_engine_version("2");
  auto recompress = core_->Recompress(req);
  ASSERT_THAT(recompress, IsOk());
  ASSERT_EQ(recompress->entries_size(), 1);
  const v1::AcquireJobResponse check = TryAcquire(upgraded->agent_id());
  ASSERT_EQ(check.job().kind(), "drift_check");
  EXPECT_DOUBLE_EQ(check.contract().budget().latency_ms_max(), 14);
  EXPECT_DOUBLE_EQ(check.contract().budget().memory_mib_max(), 2.7);
  v1::CompleteJobRequest done;
  done.set_lease_id(check.lease().id());
  done.set_success(true);
  v1::DriftCheckResult d;
  d.set_cost_table_id(check.source_cost_table().id());
  d.set_bound(0.05);
  d.set_table_holds(true);
  d.set_budgets_hold(true);
  SetDetail(*done.mutable_output(), d);
  for (const auto& [resource, budget, measured] :
       {std::tuple<const char*, double, double>{"latency_ms", 14, 13.9},
        {"memory_mib", 2.7, 2.6}}) {
    v1::BudgetCheck* row = done.mutable_output()->add_budgets();
    row->set_resource(resource);
    row->set_budget(budget);
    row->set_measured(measured);
    row->set_met(true);
  }
  ASSERT_THAT(core_->CompleteJob(done), IsOk());
  const v1::Campaign kept = Get(recompress->entries(0).new_campaign_id());
  ASSERT_EQ(kept.state(), v1::CAMPAIGN_SUCCEEDED);
  auto report = core_->GetReport(kept.id());
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->relative_budgets_size(), 2);
  EXPECT_TRUE(report->relative_budgets(0).resolved());
  EXPECT_DOUBLE_EQ(report->relative_budgets(0).budget(), 14);
  EXPECT_EQ(report->relative_budgets(0).cost_table_id(),
            kept.recompress().carried_cost_table_id());
}

TEST_F(CoordinatorTest, CostTableParentArchitectureMustBeAKey) {
  Submit(AutocompressContract(), "r1");
  v1::AcquireJobResponse a = TryAcquire(RegisterAgent("cpu-box"));
  ASSERT_EQ(a.job().kind(), "profile");
  v1::PutCostTableRequest put;
  put.set_lease_id(a.lease().id());
  put.mutable_table()->add_entries()->set_layer_kind("mlp");
  put.mutable_table()->set_parent_architecture("Z");
  EXPECT_THAT(core_->PutCostTable(put),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "table.parent_architecture: must be empty or 64 lowercase hex digits, "
                       "got 1 bytes"));
}

TEST_F(CoordinatorTest, RecompressSubmitsOncePerVersion) {
  v1::DeploymentContract contract = ProbeContract("nightly");
  contract.set_recurring(true);
  v1::Campaign c = Submit(contract, "r1");
  v1::RecompressRequest req;
  req.set_engine_version("2");
  req.set_dry_run(true);
  auto dry = core_->Recompress(req);
  ASSERT_THAT(dry, IsOk());
  ASSERT_EQ(dry->entries_size(), 1);
  EXPECT_FALSE(dry->entries(0).submitted());
  req.set_dry_run(false);
  auto first = core_->Recompress(req);
  ASSERT_EQ(first->entries_size(), 1);
  EXPECT_TRUE(first->entries(0).submitted());
  EXPECT_EQ(first->entries(0).source_campaign_id(), c.id());
  // The new campaign is the newest for its target and already on version 2: nothing to do.
  auto second = core_->Recompress(req);
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->entries_size(), 0);
  EXPECT_EQ(core_->ListCampaigns(v1::ListCampaignsRequest())->campaigns_size(), 2);
}

TEST_F(CoordinatorTest, AgentWithNewEngineVersionMarksCampaignsStaleUntilRecompressed) {
  auto register_engine = [&](const std::string& name, const std::string& version) {
    v1::AgentInfo info;
    info.set_name(name);
    info.set_device_kind("cpu");
    info.set_engine("tailor-builtin");
    info.set_engine_version(version);
    info.add_job_kinds("probe");
    ASSERT_THAT(core_->Register(info), IsOk());
  };
  register_engine("old-box", "1");
  v1::DeploymentContract contract = ProbeContract("nightly");
  contract.set_recurring(true);
  const v1::Campaign c = Submit(contract, "r1");
  EXPECT_EQ(core_->GetCampaign(c.id())->stale_reason(), "");

  // A GPU agent's upgrade says nothing about CPU measurements.
  clock_.Advance(absl::Seconds(1));
  v1::AgentInfo gpu;
  gpu.set_name("gpu-box");
  gpu.set_device_kind("NVIDIA H200");
  gpu.set_engine("tailor-builtin");
  gpu.set_engine_version("2");
  gpu.add_job_kinds("probe");
  ASSERT_THAT(core_->Register(gpu), IsOk());
  EXPECT_EQ(core_->GetCampaign(c.id())->stale_reason(), "");

  clock_.Advance(absl::Seconds(1));
  register_engine("new-box", "2");
  EXPECT_EQ(core_->GetCampaign(c.id())->stale_reason(),
            "agent new-box registered tailor-builtin 2 on cpu; this target was measured with 1");
  auto listed = core_->ListCampaigns(v1::ListCampaignsRequest());
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->campaigns_size(), 1);
  EXPECT_NE(listed->campaigns(0).stale_reason(), "");

  v1::RecompressRequest req;
  req.set_engine_version("2");
  auto submitted = core_->Recompress(req);
  ASSERT_THAT(submitted, IsOk());
  ASSERT_EQ(submitted->entries_size(), 1);
  EXPECT_EQ(core_->GetCampaign(submitted->entries(0).new_campaign_id())->stale_reason(), "");
  EXPECT_NE(core_->GetCampaign(c.id())->stale_reason(), "");
}

TEST_F(CoordinatorTest, ListQueueOrdersByPriorityAndExplainsWaiting) {
  Submit(ProbeContract("a", 0), "r1");
  Submit(ProbeContract("b", 5), "r2");
  auto q = core_->ListQueue(v1::ListQueueRequest());
  ASSERT_THAT(q, IsOk());
  ASSERT_EQ(q->entries_size(), 2);
  EXPECT_EQ(q->entries(0).campaign_name(), "b");
  EXPECT_EQ(q->entries(0).position(), 1);
  EXPECT_EQ(q->entries(1).position(), 2);
  ASSERT_EQ(q->summary_size(), 1);
  EXPECT_EQ(q->summary(0).runnable(), 2);
}

// A live agent's name answers only to that agent (its registration secret, and its agent
// token under token auth); once it is offline a replacement may take the name.
TEST_F(CoordinatorTest, LiveAgentNameCannotBeTakenOverUntilOffline) {
  v1::AgentInfo info;
  info.set_name("box-1");
  info.set_hostname("host-a");
  info.set_device_kind("cpu");
  info.add_job_kinds("probe");
  const std::string secret_a(64, 'a'), secret_b(64, 'b');
  auto first = core_->Register(info, "", secret_a);
  ASSERT_THAT(first, IsOk());
  const std::string id = first->agent_id();

  clock_.Advance(absl::Seconds(3));
  EXPECT_THAT(core_->Register(info, "", secret_b),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr(absl::StrCat("info.name: 'box-1' belongs to live agent ", id,
                                              " (host host-a, last heartbeat 3.0s ago); this "
                                              "registration does not prove to be it (another "
                                              "registration secret)"))));
  EXPECT_THAT(core_->Register(info, "", ""), StatusIs(absl::StatusCode::kAlreadyExists));
  // The agent itself, restarted with its work dir, is recognised.
  auto again = core_->Register(info, "", secret_a);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->agent_id(), id);
  // Under token auth the token must match too.
  ASSERT_THAT(core_->Register(info, "tok-1", secret_a), IsOk());
  EXPECT_THAT(core_->Register(info, "tok-2", secret_a),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("(another agent token)")));

  // Offline (no heartbeat for longer than agent_offline_after): a replacement takes the name.
  clock_.Advance(absl::Seconds(11));
  auto replaced = core_->Register(info, "tok-2", secret_b);
  ASSERT_THAT(replaced, IsOk());
  EXPECT_EQ(replaced->agent_id(), id);
  EXPECT_THAT(core_->Register(info, "tok-2", secret_a), StatusIs(absl::StatusCode::kAlreadyExists));

  // The proof stays in the coordinator.
  auto listed = core_->ListAgents(v1::ListAgentsRequest());
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->agents_size(), 1);
  EXPECT_EQ(listed->agents(0).secret_sha256(), "");
}

}  // namespace
}  // namespace tailor::coordinator

namespace tailor::coordinator {
namespace {

TEST_F(CoordinatorTest, LauncherRanksFetchAssignmentAndHeartbeatAsHolder) {
  RecordingLauncher launcher;
  core_->SetLauncher(&launcher);
  v1::Campaign c = Submit(AutocompressContract(), "r1");
  core_->Tick();
  ASSERT_EQ(launcher.launched.size(), 1u);
  const v1::AcquireJobResponse& l = launcher.launched[0];
  EXPECT_EQ(l.job().kind(), "rank");
  auto fetched = core_->GetAssignment(l.lease().id());
  ASSERT_THAT(fetched, IsOk());
  EXPECT_EQ(fetched->job().id(), l.job().id());
  EXPECT_EQ(fetched->contract().name(), "npc");
  v1::HeartbeatRequest hb;
  hb.set_agent_id("launcher:test");
  hb.add_lease_ids(l.lease().id());
  auto r = core_->Heartbeat(hb);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->extended_size(), 1);
  EXPECT_THAT(core_->GetAssignment("l-nope"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not active")));
}

TEST_F(CoordinatorTest, UnchangedProgressIsAKeepaliveWithoutEvents) {
  v1::Campaign c = Submit(ProbeContract(), "r1");
  v1::AcquireJobResponse a = TryAcquire(RegisterAgent("cpu-box"));
  v1::ReportProgressRequest p;
  p.set_lease_id(a.lease().id());
  p.mutable_progress()->set_fraction(0.5);
  p.mutable_progress()->set_message("half");
  ASSERT_THAT(core_->ReportProgress(p), IsOk());
  const size_t events = EventTypes(c.id()).size();
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(10));
    ASSERT_THAT(core_->ReportProgress(p), IsOk());
    core_->Tick();
  }
  EXPECT_EQ(EventTypes(c.id()).size(), events);
  EXPECT_EQ(Get(c.id()).jobs(0).state(), v1::JOB_LEASED) << "keepalives extended the lease";
}

}  // namespace
}  // namespace tailor::coordinator
