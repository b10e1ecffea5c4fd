// API tokens, the audit log and the ownership lookups of CoordinatorStore.
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "gtest/gtest.h"
#include "storage/coordinator_store.h"
#include "storage/database.h"
#include "storage/schema.h"

namespace tailor::storage {
namespace {

class TokenStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::filesystem::temp_directory_path().string(), "/token-store-",
                        getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = CoordinatorStore::Open(dir_ + "/tailor.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  TokenRow Row(const std::string& id, const std::string& hash) {
    TokenRow r;
    r.id = id;
    r.token_hash = hash;
    r.team = "team-a";
    r.role = "submitter";
    r.description = "test";
    r.created_at = absl::FromUnixSeconds(1000);
    return r;
  }

  std::string dir_;
  std::unique_ptr<CoordinatorStore> store_;
};

TEST_F(TokenStoreTest, InsertFindListRevoke) {
  ASSERT_TRUE(store_->InsertToken(Row("tok-1", std::string(64, 'a'))).ok());
  ASSERT_TRUE(store_->InsertToken(Row("tok-2", std::string(64, 'b'))).ok());

  auto found = store_->FindTokenByHash(std::string(64, 'a'));
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, "tok-1");
  EXPECT_EQ((*found)->team, "team-a");
  EXPECT_EQ((*found)->role, "submitter");
  EXPECT_EQ((*found)->created_at, absl::FromUnixSeconds(1000));
  EXPECT_FALSE((*found)->revoked_at.has_value());

  auto missing = store_->FindTokenByHash(std::string(64, 'c'));
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  auto revoked = store_->RevokeToken("tok-1", absl::FromUnixSeconds(2000));
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->revoked_at, absl::FromUnixSeconds(2000));
  // A second revocation keeps the first time.
  revoked = store_->RevokeToken("tok-1", absl::FromUnixSeconds(3000));
  ASSERT_TRUE(revoked.ok());
  EXPECT_EQ(revoked->revoked_at, absl::FromUnixSeconds(2000));
  EXPECT_EQ(store_->RevokeToken("tok-9", absl::FromUnixSeconds(1)).status().code(),
            absl::StatusCode::kNotFound);

  auto active = store_->ListTokens(/*include_inactive=*/false, absl::FromUnixSeconds(4000));
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].id, "tok-2");
  auto all = store_->ListTokens(/*include_inactive=*/true, absl::FromUnixSeconds(4000));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
}

TEST_F(TokenStoreTest, ExpiryRoundTripsAndExpiredTokensAreInactive) {
  TokenRow expiring = Row("tok-1", std::string(64, 'a'));
  expiring.expires_at = absl::FromUnixSeconds(5000);
  ASSERT_TRUE(store_->InsertToken(expiring).ok());
  ASSERT_TRUE(store_->InsertToken(Row("tok-2", std::string(64, 'b'))).ok());

  auto found = store_->GetToken("tok-1");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->expires_at, absl::FromUnixSeconds(5000));
  found = store_->GetToken("tok-2");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->expires_at, std::nullopt);

  auto ids = [&](bool include_inactive, absl::Time now) {
    std::vector<std::string> out;
    auto rows = store_->ListTokens(include_inactive, now);
    EXPECT_TRUE(rows.ok()) << rows.status();
    for (const TokenRow& r : *rows) out.push_back(r.id);
    return out;
  };
  // Valid until the instant before expires_at; at expires_at it is expired.
  EXPECT_EQ(ids(false, absl::FromUnixSeconds(5000) - absl::Microseconds(1)),
            (std::vector<std::string>{"tok-1", "tok-2"}));
  EXPECT_EQ(ids(false, absl::FromUnixSeconds(5000)), std::vector<std::string>{"tok-2"});
  EXPECT_EQ(ids(true, absl::FromUnixSeconds(5000)),
            (std::vector<std::string>{"tok-1", "tok-2"}));
}

// A database written by the previous schema (version 2, no api_tokens.expires_at) is
// upgraded in place by Open: its tokens and audit log survive and never expire.
TEST_F(TokenStoreTest, SchemaVersion2UpgradesInPlaceKeepingTokens) {
  store_.reset();
  const std::string path = dir_ + "/old.db";
  {
    auto db = Database::Open(path);
    ASSERT_TRUE(db.ok()) << db.status();
    const std::vector<Migration> all = CoordinatorMigrations();
    const std::vector<Migration> v2(all.begin(), all.begin() + 2);
    ASSERT_TRUE((*db)->Migrate(v2).ok());
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO api_tokens (id, token_hash, team, role, description, "
                           "created_at, revoked_at) VALUES "
                           "('tok-old', 'hash-old', 'ops', 'admin', 'first admin', 1000000, "
                           "NULL), "
                           "('tok-gone', 'hash-gone', '', 'agent', '', 2000000, 3000000);"
                           "INSERT INTO audit_events (time, token_id, verb, target) VALUES "
                           "(1000000, '', 'CreateToken', 'tok-old');")
                    .ok());
    auto version = (*db)->UserVersion();
    ASSERT_TRUE(version.ok());
    ASSERT_EQ(*version, 2);
  }

  auto store = CoordinatorStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto old = (*store)->FindTokenByHash("hash-old");
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(old->has_value());
  EXPECT_EQ((*old)->id, "tok-old");
  EXPECT_EQ((*old)->team, "ops");
  EXPECT_EQ((*old)->role, "admin");
  EXPECT_EQ((*old)->description, "first admin");
  EXPECT_EQ((*old)->created_at, absl::FromUnixSeconds(1));
  EXPECT_EQ((*old)->revoked_at, std::nullopt);
  EXPECT_EQ((*old)->expires_at, std::nullopt);
  auto gone = (*store)->GetToken("tok-gone");
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(gone->revoked_at, absl::FromUnixSeconds(3));
  EXPECT_EQ(gone->expires_at, std::nullopt);
  // Years later the old token is still listed as active.
  auto active = (*store)->ListTokens(false, absl::FromUnixSeconds(1) + absl::Hours(24 * 3650));
  ASSERT_TRUE(active.ok()) << active.status();
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].id, "tok-old");
  auto events = (*store)->ListAuditEvents(10);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].target, "tok-old");
  // New tokens carry an expiry in the upgraded table.
  TokenRow fresh = Row("tok-new", std::string(64, 'n'));
  fresh.expires_at = absl::FromUnixSeconds(9000);
  ASSERT_TRUE((*store)->InsertToken(fresh).ok());
  auto got = (*store)->GetToken("tok-new");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->expires_at, absl::FromUnixSeconds(9000));
  store->reset();

  auto db = Database::Open(path);
  ASSERT_TRUE(db.ok()) << db.status();
  auto version = (*db)->UserVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, static_cast<int>(CoordinatorMigrations().size()));
  EXPECT_GE(*version, 3);
}

TEST_F(TokenStoreTest, DuplicateHashOrIdIsAlreadyExists) {
  ASSERT_TRUE(store_->InsertToken(Row("tok-1", std::string(64, 'a'))).ok());
  EXPECT_EQ(store_->InsertToken(Row("tok-2", std::string(64, 'a'))).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->InsertToken(Row("tok-1", std::string(64, 'b'))).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(TokenStoreTest, AuditEventsNewestFirst) {
  for (int i = 0; i < 3; ++i) {
    AuditRow r;
    r.time = absl::FromUnixSeconds(100 + i);
    r.token_id = "tok-admin";
    r.verb = absl::StrCat("Verb", i);
    r.target = absl::StrCat("target-", i);
    auto id = store_->InsertAuditEvent(r);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, i + 1);
  }
  auto events = store_->ListAuditEvents(2);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].verb, "Verb2");
  EXPECT_EQ((*events)[0].target, "target-2");
  EXPECT_EQ((*events)[0].time, absl::FromUnixSeconds(102));
  EXPECT_EQ((*events)[1].verb, "Verb1");
}

TEST_F(TokenStoreTest, OwnershipLookups) {
  v1::Campaign c;
  c.set_id("cmp-1");
  c.set_request_id("req-1");
  c.set_name("n");
  c.set_team("team-a");
  *c.mutable_created_at() = ToProto(absl::FromUnixSeconds(1));
  *c.mutable_updated_at() = ToProto(absl::FromUnixSeconds(1));
  ASSERT_TRUE(store_->InsertCampaign(c, "hash").ok());
  auto team = store_->CampaignTeam("cmp-1");
  ASSERT_TRUE(team.ok()) << team.status();
  EXPECT_EQ(*team, "team-a");
  auto missing = store_->CampaignTeam("cmp-2");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "campaign 'cmp-2' not found");

  v1::Artifact a;
  a.set_digest(std::string(64, 'd'));
  a.set_kind("probe");
  a.set_name("x");
  a.set_campaign_id("cmp-1");
  a.set_job_id("job-1");
  ASSERT_TRUE(store_->InsertArtifact(a).ok());
  auto teams = store_->TeamsOfArtifact(std::string(64, 'd'));
  ASSERT_TRUE(teams.ok()) << teams.status();
  EXPECT_EQ(*teams, std::vector<std::string>{"team-a"});
  auto none = store_->TeamsOfArtifact(std::string(64, 'e'));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace tailor::storage
