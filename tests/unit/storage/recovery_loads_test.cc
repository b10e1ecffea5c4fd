// What a restarting coordinator reads back (Coordinator::Recover): every open campaign, its
// last event number and its jobs, at a size where the store parses the records on two
// threads (docs/benchmarks.md, "Restart-to-serving and a quiet machine").
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/coordinator_store.h"
#include "tests/testing/status_matchers.h"

namespace tailor::storage {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;

// More than the store's single-thread limit (4096 rows), odd so the halves differ.
constexpr int kCampaigns = 5001;

class RecoveryLoadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/tailor_recovery_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto store = CoordinatorStore::Open(dir_ + "/tailor.db");
    ASSERT_THAT(store.status(), IsOk());
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Campaign k: state by k mod 3 (queued, running, succeeded), k mod 4 events, one job.
  void Populate() {
    auto tx = store_->Begin();
    ASSERT_THAT(tx.status(), IsOk());
    const v1::CampaignState states[] = {v1::CAMPAIGN_QUEUED, v1::CAMPAIGN_RUNNING,
                                        v1::CAMPAIGN_SUCCEEDED};
    for (int k = 0; k < kCampaigns; ++k) {
      v1::Campaign c;
      c.set_id(absl::StrCat("c-", k));
      c.set_team("t");
      c.set_request_id(absl::StrCat("r-", k));
      c.set_name(absl::StrCat("campaign ", k));
      c.set_state(states[k % 3]);
      ASSERT_THAT(store_->InsertCampaign(c, "hash"), IsOk());
      for (int seq = 1; seq <= k % 4; ++seq) {
        v1::Event e;
        e.set_campaign_id(c.id());
        e.set_seq(seq);
        e.set_type("job_progress");
        ASSERT_THAT(store_->AppendEvent(e), IsOk());
      }
      v1::Job job;
      job.set_id(absl::StrCat("j-", k));
      job.set_campaign_id(c.id());
      job.set_key("probe");
      job.set_kind("probe");
      ASSERT_THAT(store_->InsertJob(job, 0), IsOk());
    }
    ASSERT_THAT(tx->Commit(), IsOk());
  }

  std::string dir_;
  std::unique_ptr<CoordinatorStore> store_;
};

TEST_F(RecoveryLoadsTest, EveryOpenCampaignWithItsLastEventAndJobs) {
  Populate();
  auto campaigns = store_->LoadNonFinalCampaigns();
  ASSERT_THAT(campaigns.status(), IsOk());
  std::set<std::string> expected, loaded;
  for (int k = 0; k < kCampaigns; ++k) {
    if (k % 3 != 2) expected.insert(absl::StrCat("c-", k));
  }
  for (const v1::Campaign& c : *campaigns) {
    // Each record parsed into its own row: the name matches the id it was stored with.
    EXPECT_EQ(c.name(), absl::StrCat("campaign ", c.id().substr(2))) << c.id();
    loaded.insert(c.id());
  }
  EXPECT_EQ(campaigns->size(), expected.size());
  EXPECT_EQ(loaded, expected);

  auto seqs = store_->LastEventSeqOfNonFinalCampaigns();
  ASSERT_THAT(seqs.status(), IsOk());
  EXPECT_EQ(seqs->size(), expected.size());
  for (const std::string& id : expected) {
    const int k = std::stoi(id.substr(2));
    EXPECT_EQ((*seqs)[id], k % 4) << id;
  }

  auto jobs = store_->LoadJobsOfNonFinalCampaigns();
  ASSERT_THAT(jobs.status(), IsOk());
  ASSERT_EQ(jobs->size(), expected.size());
  for (const v1::Job& j : *jobs) {
    EXPECT_EQ(j.id(), absl::StrCat("j-", j.campaign_id().substr(2)));
    EXPECT_TRUE(expected.count(j.campaign_id())) << j.campaign_id();
  }
}

// One damaged record in the second thread's half or the first's fails the whole load with
// DATA_LOSS; nothing is returned half-parsed.
TEST_F(RecoveryLoadsTest, AnUnparsableRecordFailsTheLoad) {
  Populate();
  for (const char* id : {"c-3", "c-4999"}) {
    ASSERT_THAT(store_->db()->Exec(absl::StrCat(
                    "UPDATE campaigns SET contract = x'ffffffff' WHERE id = '", id, "'")),
                IsOk());
    EXPECT_THAT(store_->LoadNonFinalCampaigns().status(),
                StatusIs(absl::StatusCode::kDataLoss, "stored campaign record does not parse"))
        << id;
    ASSERT_THAT(store_->db()->Exec(absl::StrCat(
                    "UPDATE campaigns SET state = 3 WHERE id = '", id, "'")),
                IsOk());
  }
  EXPECT_THAT(store_->LoadNonFinalCampaigns().status(), IsOk());
}

}  // namespace
}  // namespace tailor::storage
