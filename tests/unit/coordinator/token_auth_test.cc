// TokenRegistry and TokenAuthenticator: secrets, hashing, roles, revocation, the cache.
#include "coordinator/token_auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"

namespace tailor::coordinator {
namespace {

class TokenAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::filesystem::temp_directory_path().string(), "/token-auth-",
                        getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = storage::CoordinatorStore::Open(db_path());
    ASSERT_TRUE(store.ok()) << store.status();
    registry_ = std::make_unique<TokenRegistry>(*std::move(store), &clock_);
  }
  void TearDown() override {
    registry_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string db_path() const { return dir_ + "/tailor.db"; }

  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<TokenRegistry> registry_;
};

TEST(TokenSecretTest, FormatAndHash) {
  const std::string a = NewTokenSecret();
  const std::string b = NewTokenSecret();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 7u + 64u);
  EXPECT_TRUE(absl::StartsWith(a, "tailor_"));
  EXPECT_TRUE(IsSha256Hex(a.substr(7)));  // 64 lowercase hex characters
  EXPECT_EQ(HashTokenSecret(a), Sha256::Hex(a));
}

TEST(TokenSecretTest, BearerHeader) {
  EXPECT_EQ(BearerFromHeader("Bearer abc"), "abc");
  EXPECT_EQ(BearerFromHeader("bearer  abc "), "abc");
  EXPECT_EQ(BearerFromHeader("Basic abc"), "");
  EXPECT_EQ(BearerFromHeader(""), "");
  EXPECT_EQ(BearerFromHeader("Bearer"), "");
}

TEST(TokenSecretTest, Roles) {
  for (Role r : {Role::kSubmitter, Role::kAdmin, Role::kAgent}) {
    auto parsed = ParseRole(RoleName(r));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, r);
  }
  auto bad = ParseRole("root");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "role:"));
}

TEST_F(TokenAuthTest, CreateStoresOnlyTheHash) {
  auto issued = registry_->Create(Role::kSubmitter, "team-a", "ci");
  ASSERT_TRUE(issued.ok()) << issued.status();
  EXPECT_TRUE(absl::StartsWith(issued->row.id, "tok-"));
  EXPECT_EQ(issued->row.token_hash, Sha256::Hex(issued->secret));
  EXPECT_EQ(issued->row.role, "submitter");
  EXPECT_EQ(issued->row.created_at, clock_.Now());
  // The secret is nowhere in the database file.
  std::ifstream in(db_path(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ifstream wal(db_path() + "-wal", std::ios::binary);
  bytes.append((std::istreambuf_iterator<char>(wal)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.find(issued->secret), std::string::npos);
  EXPECT_NE(bytes.find(issued->row.token_hash), std::string::npos);
}

TEST_F(TokenAuthTest, CreateValidates) {
  auto no_team = registry_->Create(Role::kSubmitter, "", "");
  EXPECT_EQ(no_team.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(no_team.status().message(), "team:"));
  auto bad_team = registry_->Create(Role::kSubmitter, "Team A", "");
  EXPECT_EQ(bad_team.status().code(), absl::StatusCode::kInvalidArgument);
  auto long_desc = registry_->Create(Role::kAdmin, "", std::string(300, 'x'));
  EXPECT_EQ(long_desc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(long_desc.status().message(), "description:"));
  EXPECT_TRUE(registry_->Create(Role::kAgent, "", "").ok());
  EXPECT_TRUE(registry_->Create(Role::kAdmin, "ops", "").ok());
}

TEST_F(TokenAuthTest, AuthenticateByRole) {
  TokenAuthenticator auth(registry_.get());
  EXPECT_TRUE(auth.enabled());
  auto sub = registry_->Create(Role::kSubmitter, "team-a", "");
  auto agent = registry_->Create(Role::kAgent, "", "");
  auto admin = registry_->Create(Role::kAdmin, "ops", "");
  ASSERT_TRUE(sub.ok() && agent.ok() && admin.ok());

  auto p = auth.Authenticate(sub->secret);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->role, Role::kSubmitter);
  EXPECT_EQ(p->team, "team-a");
  EXPECT_EQ(p->token_id, sub->row.id);
  EXPECT_TRUE(p->CanSee("team-a"));
  EXPECT_FALSE(p->CanSee("team-b"));

  p = auth.Authenticate(agent->secret);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->role, Role::kAgent);
  EXPECT_FALSE(p->CanSee("team-a"));

  p = auth.Authenticate(admin->secret);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->is_admin());
  EXPECT_EQ(p->team, "");  // admins see every team
  EXPECT_TRUE(p->CanSee("team-b"));
}

TEST_F(TokenAuthTest, MissingWrongAndOversizedAreUnauthenticated) {
  TokenAuthenticator auth(registry_.get());
  EXPECT_EQ(auth.Authenticate("").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Authenticate(NewTokenSecret()).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.Authenticate(std::string(10000, 'x')).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(TokenAuthTest, RevocationIsImmediateDespiteTheCache) {
  TokenAuthenticator auth(registry_.get());
  auto t = registry_->Create(Role::kSubmitter, "team-a", "");
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(auth.Authenticate(t->secret).ok());  // now cached
  auto revoked = registry_->Revoke(t->row.id);
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->revoked_at, clock_.Now());
  auto p = auth.Authenticate(t->secret);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(p.status().message(), "invalid or revoked token");
  EXPECT_EQ(registry_->Revoke("tok-nope").status().code(), absl::StatusCode::kNotFound);

  auto listed = registry_->List(/*include_revoked=*/false);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  listed = registry_->List(/*include_revoked=*/true);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);
}

TEST_F(TokenAuthTest, RevocationByAnotherProcessWithinTheCacheTtl) {
  TokenAuthenticator auth(registry_.get());
  auto t = registry_->Create(Role::kAgent, "", "");
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(auth.Authenticate(t->secret).ok());
  // Another connection (another process) revokes it.
  auto other = storage::CoordinatorStore::Open(db_path());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->RevokeToken(t->row.id, clock_.Now()).ok());
  EXPECT_TRUE(auth.Authenticate(t->secret).ok());  // cached
  clock_.Advance(absl::Seconds(6));
  EXPECT_EQ(auth.Authenticate(t->secret).status().code(), absl::StatusCode::kUnauthenticated);
}

// FakeClock starts at 2023-11-14T22:13:20Z.
TEST_F(TokenAuthTest, ExpiringTokenWorksUntilItsExpiryEvenWhenCached) {
  TokenAuthenticator auth(registry_.get());
  const absl::Time created = clock_.Now();
  auto t = registry_->Create(Role::kSubmitter, "team-a", "ci", absl::Hours(1));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->row.expires_at, created + absl::Hours(1));
  EXPECT_EQ(CreateTokenAuditDetail(t->row),
            "role=submitter team=team-a expires_at=2023-11-14T23:13:20Z");

  clock_.Advance(absl::Minutes(59));
  auto p = auth.Authenticate(t->secret);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->token_id, t->row.id);
  // Cached one second before the expiry; the cache (5 s) must not outlive it.
  clock_.Set(created + absl::Hours(1) - absl::Seconds(1));
  ASSERT_TRUE(auth.Authenticate(t->secret).ok());
  clock_.Set(created + absl::Hours(1));
  p = auth.Authenticate(t->secret);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(p.status().message(),
            absl::StrCat("token ", t->row.id, " expired at 2023-11-14T23:13:20Z"));
  // And it stays expired (nothing re-cached it).
  clock_.Advance(absl::Hours(24));
  EXPECT_EQ(auth.Authenticate(t->secret).status().message(),
            absl::StrCat("token ", t->row.id, " expired at 2023-11-14T23:13:20Z"));

  // Listed like a revoked token: only with include_revoked.
  auto listed = registry_->List(/*include_revoked=*/false);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
  listed = registry_->List(/*include_revoked=*/true);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, t->row.id);
  EXPECT_EQ((*listed)[0].expires_at, created + absl::Hours(1));
  EXPECT_EQ((*listed)[0].revoked_at, std::nullopt);
}

TEST_F(TokenAuthTest, TokensWithoutExpiryStillWorkYearsLater) {
  auto t = registry_->Create(Role::kAdmin, "ops", "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->row.expires_at, std::nullopt);
  EXPECT_EQ(CreateTokenAuditDetail(t->row), "role=admin team=ops");
  clock_.Advance(absl::Hours(24 * 365 * 20));
  auto p = registry_->Lookup(t->secret);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->is_admin());
  auto listed = registry_->List(/*include_revoked=*/false);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);
}

TEST_F(TokenAuthTest, InvalidExpiryIsRejectedAndNothingIsWritten) {
  const struct {
    absl::Duration expires_in;
    std::string message;
  } cases[] = {
      {absl::ZeroDuration(), "expires_in: must be positive, got 0s"},
      {absl::Seconds(-60), "expires_in: must be positive, got -60s"},
      {absl::Hours(24 * 3650) + absl::Seconds(1),
       "expires_in: must be at most 3650 days (315360000s), got 315360001s; omit it for a "
       "token that never expires"},
      {absl::InfiniteDuration(),
       "expires_in: must be at most 3650 days (315360000s), got 9223372036854775807s; omit it "
       "for a token that never expires"},
  };
  for (const auto& c : cases) {
    auto t = registry_->Create(Role::kAdmin, "ops", "", c.expires_in);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(t.status().message(), c.message);
  }
  auto listed = registry_->List(/*include_revoked=*/true);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  // The bounds themselves are accepted.
  auto longest = registry_->Create(Role::kAdmin, "ops", "", absl::Hours(24 * 3650));
  ASSERT_TRUE(longest.ok()) << longest.status();
  EXPECT_EQ(longest->row.expires_at, clock_.Now() + absl::Hours(24 * 3650));
  EXPECT_TRUE(registry_->Create(Role::kAdmin, "ops", "", absl::Seconds(1)).ok());
}

TEST_F(TokenAuthTest, AuditRecordsTheToken) {
  Principal admin;
  admin.token_id = "tok-admin";
  ASSERT_TRUE(registry_->Audit(admin, "DrainAgent", "agent-1", "why").ok());
  auto events = registry_->ListAudit(10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].token_id, "tok-admin");
  EXPECT_EQ((*events)[0].verb, "DrainAgent");
  EXPECT_EQ((*events)[0].target, "agent-1");
  EXPECT_EQ((*events)[0].detail, "why");
  EXPECT_EQ((*events)[0].time, clock_.Now());
}

TEST_F(TokenAuthTest, LauncherTokenIsReusedUntilRevoked) {
  const std::string path = dir_ + "/launcher.token";
  auto first = EnsureLauncherToken(registry_.get(), path);
  ASSERT_TRUE(first.ok()) << first.status();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto p = registry_->Lookup(*first);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->role, Role::kAgent);

  auto again = EnsureLauncherToken(registry_.get(), path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);

  ASSERT_TRUE(registry_->Revoke(p->token_id).ok());
  auto fresh = EnsureLauncherToken(registry_.get(), path);
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(*fresh, *first);
  EXPECT_TRUE(registry_->Lookup(*fresh).ok());
}

TEST_F(TokenAuthTest, LauncherTokenNeverExpiresAndAnExpiredOneIsReplaced) {
  const std::string path = dir_ + "/launcher.token";
  // A file holding an agent token that expires (written by hand, say).
  auto expiring = registry_->Create(Role::kAgent, "", "", absl::Minutes(10));
  ASSERT_TRUE(expiring.ok());
  {
    std::ofstream out(path);
    out << expiring->secret << "\n";
  }
  auto reused = EnsureLauncherToken(registry_.get(), path);
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_EQ(*reused, expiring->secret);  // still valid: kept

  clock_.Advance(absl::Minutes(10));
  auto fresh = EnsureLauncherToken(registry_.get(), path);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_NE(*fresh, expiring->secret);
  std::ifstream in(path);
  std::string stored;
  std::getline(in, stored);
  EXPECT_EQ(stored, *fresh);

  // The launcher's own token has no expiry: it still works, and is kept, years later.
  clock_.Advance(absl::Hours(24 * 365 * 20));
  auto p = registry_->Lookup(*fresh);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->role, Role::kAgent);
  auto again = EnsureLauncherToken(registry_.get(), path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *fresh);
  auto listed = registry_->List(/*include_revoked=*/false);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, p->token_id);
  EXPECT_EQ((*listed)[0].expires_at, std::nullopt);
}

TEST(AllowAllTest, EveryoneIsAnAnonymousAdmin) {
  AllowAllAuthenticator auth;
  EXPECT_FALSE(auth.enabled());
  auto p = auth.Authenticate("");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->is_admin());
  EXPECT_EQ(p->token_id, "");
}

}  // namespace
}  // namespace tailor::coordinator
