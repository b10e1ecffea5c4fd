// Schema migrations of the campaign-side tables. Version 4: request ids scoped per team. A
// version-3 database (every request id globally unique) is rebuilt in place, its campaigns,
// jobs and attempts kept with their references intact, and afterwards two teams may use the
// same request id. Version 7: cost tables keyed by the parent's architecture.
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/coordinator_store.h"
#include "storage/database.h"
#include "storage/schema.h"
#include "tests/testing/status_matchers.h"

namespace tailor::storage {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;

class CampaignSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/tailor_schema_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
};

v1::Campaign CampaignOf(const std::string& id, const std::string& team,
                        const std::string& request_id) {
  v1::Campaign c;
  c.set_id(id);
  c.set_team(team);
  c.set_request_id(request_id);
  c.set_name("probe");
  c.set_state(v1::CAMPAIGN_QUEUED);
  return c;
}

TEST_F(CampaignSchemaTest, Version3DatabaseIsRebuiltWithTeamScopedRequestIds) {
  const std::string path = dir_ + "/tailor.db";
  {
    auto db = Database::Open(path);
    ASSERT_THAT(db.status(), IsOk());
    const std::vector<Migration> all = CoordinatorMigrations();
    const std::vector<Migration> v3(all.begin(), all.begin() + 3);
    ASSERT_THAT((*db)->Migrate(v3), IsOk());
    ASSERT_THAT((*db)->Exec("INSERT INTO campaigns (id, request_id, contract_hash, name, team, "
                            "method, state, fingerprint, created_at, updated_at, contract) "
                            "VALUES ('c-1', 'nightly', 'hash-1', 'probe', 'vision', 1, 1, '', "
                            "1, 1, x'');"
                            "INSERT INTO jobs (id, campaign_id, key, kind, state, ord, "
                            "updated_at, proto) VALUES ('j-1', 'c-1', 'probe', 'probe', 1, 0, "
                            "1, x'');"
                            "INSERT INTO job_attempts (lease_id, job_id, attempt, holder, state, "
                            "started_at, expires_at) VALUES ('l-1', 'j-1', 1, 'a-1', 'active', "
                            "1, 2);"),
                IsOk());
  }
  auto store = CoordinatorStore::Open(path);
  ASSERT_THAT(store.status(), IsOk());
  Database* db = (*store)->db();
  EXPECT_EQ(*db->UserVersion(), static_cast<int>(CoordinatorMigrations().size()));
  EXPECT_GE(*db->UserVersion(), 4);
  EXPECT_THAT(db->IntegrityCheck(), IsOk());
  auto fk = db->Prepare("PRAGMA foreign_key_check");
  ASSERT_THAT(fk.status(), IsOk());
  EXPECT_FALSE(*fk->Step()) << "a row references a missing " << fk->ColumnText(2);

  auto found = (*store)->FindByRequestId("vision", "nightly");
  ASSERT_THAT(found.status(), IsOk());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->second, "hash-1");
  auto other_team = (*store)->FindByRequestId("speech", "nightly");
  ASSERT_THAT(other_team.status(), IsOk());
  EXPECT_FALSE(other_team->has_value());
  EXPECT_THAT((*store)->InsertCampaign(CampaignOf("c-2", "speech", "nightly"), "hash-2"), IsOk());
  EXPECT_THAT((*store)->InsertCampaign(CampaignOf("c-3", "vision", "nightly"), "hash-3"),
              StatusIs(absl::StatusCode::kAlreadyExists));
  // The job and its attempt still hang off the rebuilt table, which still enforces them.
  auto job = db->Prepare("SELECT campaign_id FROM jobs WHERE id = 'j-1'");
  ASSERT_THAT(job.status(), IsOk());
  ASSERT_TRUE(*job->Step());
  EXPECT_EQ(job->ColumnText(0), "c-1");
  EXPECT_THAT(db->Exec("INSERT INTO jobs (id, campaign_id, key, kind, state, ord, updated_at, "
                       "proto) VALUES ('j-9', 'c-missing', 'k', 'probe', 1, 0, 1, x'')"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Schema version 7: cost tables keyed by the parent's architecture beside the target
// fingerprint. A version-6 table keeps its row but no key, so it is never reused again (its
// parent is unknown); tables stored afterwards are found only under their own key.
v1::CostTable TableOf(const std::string& id, const std::string& parent, int64_t seconds) {
  v1::CostTable t;
  t.set_id(id);
  t.set_fingerprint("fp");
  t.set_device_kind("cpu");
  t.set_engine("tailor-builtin");
  t.set_engine_version("1");
  t.set_parent_architecture(parent);
  t.mutable_created_at()->set_seconds(seconds);
  return t;
}

TEST_F(CampaignSchemaTest, Version6TablesAreKeptButNeverReused) {
  const std::string path = dir_ + "/tailor.db";
  {
    auto db = Database::Open(path);
    ASSERT_THAT(db.status(), IsOk());
    const std::vector<Migration> all = CoordinatorMigrations();
    ASSERT_GE(all.size(), 7u);
    const std::vector<Migration> v6(all.begin(), all.begin() + 6);
    ASSERT_THAT((*db)->Migrate(v6), IsOk());
    ASSERT_THAT((*db)->Exec("INSERT INTO cost_tables (id, fingerprint, device_kind, engine, "
                            "engine_version, created_at, proto) VALUES ('ct-old', 'fp', 'cpu', "
                            "'tailor-builtin', '1', 1, x'');"),
                IsOk());
  }
  auto store = CoordinatorStore::Open(path);
  ASSERT_THAT(store.status(), IsOk());
  EXPECT_EQ(*(*store)->db()->UserVersion(), 7);
  ASSERT_EQ((*store)->ListCostTables("").value().size(), 1u);  // kept
  EXPECT_FALSE((*store)->FindCostTable("fp", "").value().has_value());

  const std::string a(64, 'a');
  const std::string b(64, 'b');
  ASSERT_THAT((*store)->InsertCostTable(TableOf("ct-a", a, 10)), IsOk());
  ASSERT_THAT((*store)->InsertCostTable(TableOf("ct-b", b, 20)), IsOk());
  ASSERT_THAT((*store)->InsertCostTable(TableOf("ct-a2", a, 30)), IsOk());
  // The newest table of the same target AND the same parent, never the other parent's.
  EXPECT_EQ((*store)->FindCostTable("fp", a).value()->id(), "ct-a2");
  EXPECT_EQ((*store)->FindCostTable("fp", b).value()->id(), "ct-b");
  EXPECT_FALSE((*store)->FindCostTable("fp", std::string(64, 'c')).value().has_value());
  EXPECT_FALSE((*store)->FindCostTable("other-fp", a).value().has_value());
  EXPECT_FALSE((*store)->FindCostTable("fp", "").value().has_value());
}

}  // namespace
}  // namespace tailor::storage
