#include "coordinator/token_auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/ids.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "openssl/rand.h"
#include "spdlog/spdlog.h"
#include "methods/legacy_results.h"

namespace tailor::coordinator {
namespace {

constexpr char kSecretPrefix[] = "tailor_";
constexpr size_t kSecretRandomBytes = 32;
// Longer bearer values are rejected without touching the database.
constexpr size_t kMaxSecretLength = 256;
constexpr size_t kMaxDescription = 256;

bool ValidTeam(absl::string_view team) {
  if (team.empty() || team.size() > 64) return false;
  for (char c : team) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

absl::Status ValidateExpiresIn(absl::Duration expires_in) {
  if (expires_in <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expires_in: must be positive, got ", absl::ToInt64Seconds(expires_in), "s"));
  }
  if (expires_in > kMaxTokenLifetime) {
    return absl::InvalidArgumentError(
        absl::StrCat("expires_in: must be at most ", absl::ToInt64Hours(kMaxTokenLifetime) / 24,
                     " days (", absl::ToInt64Seconds(kMaxTokenLifetime), "s), got ",
                     absl::ToInt64Seconds(expires_in), "s; omit it for a token that never "
                     "expires"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  if (name == "submitter") return Role::kSubmitter;
  if (name == "admin") return Role::kAdmin;
  if (name == "agent") return Role::kAgent;
  return absl::InvalidArgumentError(
      absl::StrCat("role: must be submitter, admin or agent, got '", name, "'"));
}

std::string NewTokenSecret() {
  unsigned char bytes[kSecretRandomBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // OpenSSL's CSPRNG failing is not recoverable; a weak token would be worse than a crash.
    spdlog::critical("RAND_bytes failed: cannot create a token secret");
    std::abort();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = kSecretPrefix;
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

std::string HashTokenSecret(absl::string_view secret) { return Sha256::Hex(secret); }

std::string Rfc3339Utc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string CreateTokenAuditDetail(const storage::TokenRow& row) {
  std::string detail = absl::StrCat("role=", row.role, " team=", row.team);
  if (row.expires_at.has_value()) {
    absl::StrAppend(&detail, " expires_at=", Rfc3339Utc(*row.expires_at));
  }
  return detail;
}

std::string BearerFromHeader(absl::string_view authorization) {
  absl::string_view v = absl::StripAsciiWhitespace(authorization);
  if (v.size() < 7 || !absl::EqualsIgnoreCase(v.substr(0, 7), "bearer ")) return "";
  return std::string(absl::StripAsciiWhitespace(v.substr(7)));
}

// --- TokenRegistry ---

absl::StatusOr<std::unique_ptr<TokenRegistry>> TokenRegistry::Open(const std::string& db_path,
                                                                   Clock* clock) {
  // No checkpoints from this connection either: the server's Checkpointer does them.
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<storage::CoordinatorStore> store,
                          storage::CoordinatorStore::Open(db_path, /*external_checkpoints=*/true,
                                                          methods::UpgradeLegacyResult));
  return std::make_unique<TokenRegistry>(std::move(store), clock);
}

TokenRegistry::TokenRegistry(std::unique_ptr<storage::CoordinatorStore> store, Clock* clock,
                             absl::Duration cache_ttl)
    : clock_(clock), cache_ttl_(cache_ttl), store_(std::move(store)) {}

absl::StatusOr<IssuedToken> TokenRegistry::Create(Role role, const std::string& team,
                                                  const std::string& description,
                                                  std::optional<absl::Duration> expires_in) {
  if (role == Role::kSubmitter && team.empty()) {
    return absl::InvalidArgumentError("team: required for a submitter token");
  }
  if (!team.empty() && !ValidTeam(team)) {
    return absl::InvalidArgumentError(
        absl::StrCat("team: must match [a-z0-9_-]{1,64}, got '", team, "'"));
  }
  if (description.size() > kMaxDescription) {
    return absl::InvalidArgumentError(absl::StrCat("description: at most ", kMaxDescription,
                                                   " characters, got ", description.size()));
  }
  if (expires_in.has_value()) TAILOR_RETURN_IF_ERROR(ValidateExpiresIn(*expires_in));
  IssuedToken issued;
  issued.secret = NewTokenSecret();
  storage::TokenRow& row = issued.row;
  row.id = NewId("tok", clock_->Now());
  row.token_hash = HashTokenSecret(issued.secret);
  row.team = team;
  row.role = std::string(RoleName(role));
  row.description = description;
  row.created_at = clock_->Now();
  if (expires_in.has_value()) row.expires_at = row.created_at + *expires_in;
  absl::MutexLock lock(&mu_);
  TAILOR_RETURN_IF_ERROR(store_->InsertToken(row));
  return issued;
}

absl::StatusOr<std::vector<storage::TokenRow>> TokenRegistry::List(bool include_revoked) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  return store_->ListTokens(include_revoked, now);
}

absl::StatusOr<storage::TokenRow> TokenRegistry::Revoke(const std::string& id) {
  absl::MutexLock lock(&mu_);
  TAILOR_ASSIGN_OR_RETURN(storage::TokenRow row, store_->RevokeToken(id, clock_->Now()));
  cache_.clear();
  return row;
}

absl::StatusOr<Principal> TokenRegistry::Lookup(absl::string_view secret) {
  if (secret.empty()) {
    return absl::UnauthenticatedError(
        "no bearer token: send the metadata 'authorization: Bearer <token>'");
  }
  if (secret.size() > kMaxSecretLength) {
    return absl::UnauthenticatedError("invalid or revoked token");
  }
  const std::string hash = HashTokenSecret(secret);
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  if (auto it = cache_.find(hash); it != cache_.end()) {
    // An expired entry falls through to the database, which words the error.
    const bool expired = it->second.expires_at.has_value() && now >= *it->second.expires_at;
    if (now - it->second.fetched_at < cache_ttl_ && !expired) return it->second.principal;
    cache_.erase(it);
  }
  TAILOR_ASSIGN_OR_RETURN(std::optional<storage::TokenRow> row, store_->FindTokenByHash(hash));
  if (!row.has_value() || row->revoked_at.has_value()) {
    return absl::UnauthenticatedError("invalid or revoked token");
  }
  if (row->expires_at.has_value() && now >= *row->expires_at) {
    return absl::UnauthenticatedError(
        absl::StrCat("token ", row->id, " expired at ", Rfc3339Utc(*row->expires_at)));
  }
  absl::StatusOr<Role> role = ParseRole(row->role);
  if (!role.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("token ", row->id, " has an unknown role '", row->role, "'"));
  }
  Principal p;
  p.token_id = row->id;
  p.role = *role;
  if (p.role == Role::kSubmitter) p.team = row->team;
  cache_[hash] = Cached{p, now, row->expires_at};
  return p;
}

absl::Status TokenRegistry::Audit(const Principal& who, absl::string_view verb,
                                  absl::string_view target, absl::string_view detail) {
  storage::AuditRow row;
  row.time = clock_->Now();
  row.token_id = who.token_id;
  row.verb = std::string(verb);
  row.target = std::string(target);
  row.detail = std::string(detail);
  spdlog::info("audit: {} {} by {}{}{}", row.verb, row.target,
               row.token_id.empty() ? "(auth off)" : row.token_id, detail.empty() ? "" : ": ",
               row.detail);
  absl::MutexLock lock(&mu_);
  return store_->InsertAuditEvent(row).status();
}

absl::StatusOr<std::vector<storage::AuditRow>> TokenRegistry::ListAudit(int limit) {
  absl::MutexLock lock(&mu_);
  return store_->ListAuditEvents(limit);
}

absl::StatusOr<std::string> TokenRegistry::CampaignTeam(const std::string& campaign_id) {
  absl::MutexLock lock(&mu_);
  return store_->CampaignTeam(campaign_id);
}

absl::StatusOr<std::vector<std::string>> TokenRegistry::TeamsOfArtifact(
    const std::string& digest) {
  absl::MutexLock lock(&mu_);
  return store_->TeamsOfArtifact(digest);
}

absl::StatusOr<std::string> EnsureLauncherToken(TokenRegistry* registry,
                                                const std::string& path) {
  {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string secret(absl::StripAsciiWhitespace(ss.str()));
      absl::StatusOr<Principal> p = registry->Lookup(secret);
      if (p.ok() && p->role == Role::kAgent) return secret;
      spdlog::info("launcher token in {} is no longer valid ({}); creating a new one", path,
                   p.ok() ? "not an agent token" : std::string(p.status().message()));
    }
  }
  TAILOR_ASSIGN_OR_RETURN(IssuedToken issued,
                          registry->Create(Role::kAgent, "",
                                           "internal: ranks started by the coordinator's "
                                           "launcher"));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write launcher token ", tmp, ": ", std::strerror(errno)));
  }
  const std::string content = issued.secret + "\n";
  const bool written = ::write(fd, content.data(), content.size()) ==
                       static_cast<ssize_t>(content.size());
  ::fchmod(fd, 0600);
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write launcher token ", path, ": ",
                                            std::strerror(errno)));
  }
  spdlog::info("created launcher agent token {} (secret in {})", issued.row.id, path);
  return issued.secret;
}

}  // namespace tailor::coordinator
