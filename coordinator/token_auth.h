#ifndef TAILOR_COORDINATOR_TOKEN_AUTH_H_
#define TAILOR_COORDINATOR_TOKEN_AUTH_H_

// Bearer tokens: 256-bit random secrets, shown once when created and stored only as their
// SHA-256. The registry owns its own database connection, so authenticating a call never
// waits for the coordinator's lock.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/auth.h"
#include "storage/coordinator_store.h"

namespace tailor::coordinator {

// INVALID_ARGUMENT "role: ..." for anything but the three names.
absl::StatusOr<Role> ParseRole(absl::string_view name);

// A new secret: "tailor_" followed by 64 lowercase hex characters (256 random bits).
std::string NewTokenSecret();
// What the database keeps of a secret: its SHA-256, hex.
std::string HashTokenSecret(absl::string_view secret);

// The longest lifetime Create accepts: a token meant to outlive this is one meant never to
// expire, which is what no expiry says.
inline constexpr absl::Duration kMaxTokenLifetime = absl::Hours(24 * 3650);

// A token just created: the stored row and the secret, which exists nowhere else.
struct IssuedToken {
  storage::TokenRow row;
  std::string secret;
};

// "2026-11-30T10:00:00Z" (whole seconds, UTC): how expiry times are written in errors, the
// audit log and the coordinator's own output.
std::string Rfc3339Utc(absl::Time t);

// The audit detail of CreateToken: "role=submitter team=vision", and for a token that
// expires " expires_at=2026-11-30T10:00:00Z".
std::string CreateTokenAuditDetail(const storage::TokenRow& row);

// Tokens, the audit log and the ownership lookups authorization needs. Thread-safe.
class TokenRegistry {
 public:
  // Opens a connection of its own to the coordinator database at `db_path` (creating and
  // migrating it if needed: the offline `--create-token` runs before any server).
  static absl::StatusOr<std::unique_ptr<TokenRegistry>> Open(const std::string& db_path,
                                                             Clock* clock);
  // Valid tokens are cached for `cache_ttl`. Revoke() empties the cache, so a revocation
  // through this registry takes effect at once; one written by another process (the database
  // edited by hand) within `cache_ttl`.
  TokenRegistry(std::unique_ptr<storage::CoordinatorStore> store, Clock* clock,
                absl::Duration cache_ttl = absl::Seconds(5));

  // INVALID_ARGUMENT (naming the field) for a submitter without a team, a team that is not
  // [a-z0-9_-]{1,64}, a description over 256 characters, or an `expires_in` that is not in
  // (0, kMaxTokenLifetime]. Without `expires_in` the token never expires.
  absl::StatusOr<IssuedToken> Create(Role role, const std::string& team,
                                     const std::string& description,
                                     std::optional<absl::Duration> expires_in = std::nullopt);
  // Oldest first. Revoked and expired tokens only with include_revoked.
  absl::StatusOr<std::vector<storage::TokenRow>> List(bool include_revoked);
  // NOT_FOUND for an unknown id; revoking twice keeps the first time.
  absl::StatusOr<storage::TokenRow> Revoke(const std::string& id);

  // The principal of a bearer secret. UNAUTHENTICATED when it is empty, unknown, revoked or
  // expired ("token tok-... expired at 2026-11-30T10:00:00Z"). Expiry is exact even for
  // cached tokens.
  absl::StatusOr<Principal> Lookup(absl::string_view secret);

  // Records one use of an admin verb.
  absl::Status Audit(const Principal& who, absl::string_view verb, absl::string_view target,
                     absl::string_view detail = "");
  absl::StatusOr<std::vector<storage::AuditRow>> ListAudit(int limit);

  // See CoordinatorStore::CampaignTeam / TeamsOfArtifact.
  absl::StatusOr<std::string> CampaignTeam(const std::string& campaign_id);
  absl::StatusOr<std::vector<std::string>> TeamsOfArtifact(const std::string& digest);

 private:
  struct Cached {
    Principal principal;
    absl::Time fetched_at;
    std::optional<absl::Time> expires_at;
  };

  Clock* const clock_;
  const absl::Duration cache_ttl_;
  absl::Mutex mu_;
  std::unique_ptr<storage::CoordinatorStore> store_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Cached> cache_ ABSL_GUARDED_BY(mu_);  // by token hash
};

// Authentication on (`--auth tokens`): every call needs a valid token.
class TokenAuthenticator : public Authenticator {
 public:
  explicit TokenAuthenticator(TokenRegistry* registry) : registry_(registry) {}
  absl::StatusOr<Principal> Authenticate(absl::string_view bearer_token) override {
    return registry_->Lookup(bearer_token);
  }
  bool enabled() const override { return true; }

 private:
  TokenRegistry* const registry_;
};

// The agent-role token the coordinator hands the ranks its launchers start (TAILOR_TOKEN).
// Its secret is kept in `path` (mode 0600) so that ranks started before a restart (Slurm
// jobs) keep working: the file's token is reused while it is valid, otherwise (revoked,
// expired, unknown) a new one is created and the file rewritten. Its tokens never expire.
absl::StatusOr<std::string> EnsureLauncherToken(TokenRegistry* registry, const std::string& path);

// The secret of "authorization: Bearer <secret>" ("" when the header is absent or uses
// another scheme). The scheme is matched case-insensitively.
std::string BearerFromHeader(absl::string_view authorization);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_TOKEN_AUTH_H_
