#ifndef TAILOR_COORDINATOR_AUTH_H_
#define TAILOR_COORDINATOR_AUTH_H_

// Who is calling. Shared by the gRPC services and the HTTP dashboard so that both enforce the
// same roles: a bearer token maps to a Principal, and every handler asks the Principal.
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::coordinator {

enum class Role {
  kSubmitter,  // own team's campaigns only; another team's campaign is NOT_FOUND
  kAdmin,      // everything: every team, tokens, draining agents, recompress
  kAgent,      // the agent API only (profiler agents and worker ranks)
};

struct Principal {
  std::string token_id;  // empty when authentication is off
  std::string team;      // the token's team; empty for admins and agents
  Role role = Role::kAdmin;

  bool is_admin() const { return role == Role::kAdmin; }
  // Whether this caller may see a campaign owned by `campaign_team`.
  bool CanSee(absl::string_view campaign_team) const {
    return role == Role::kAdmin || (role == Role::kSubmitter && team == campaign_team);
  }
};

// "submitter", "admin", "agent": the names tokens, logs and messages use.
inline absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kSubmitter:
      return "submitter";
    case Role::kAdmin:
      return "admin";
    case Role::kAgent:
      return "agent";
  }
  return "unknown";
}

// Turns the bearer token of a request (without the "Bearer " prefix; empty when the request
// carried none) into a Principal. UNAUTHENTICATED for a missing, unknown or revoked token.
class Authenticator {
 public:
  virtual ~Authenticator() = default;
  virtual absl::StatusOr<Principal> Authenticate(absl::string_view bearer_token) = 0;
  // False when every caller is an anonymous admin (loopback development without --auth).
  virtual bool enabled() const = 0;
};

// Authentication off: every caller is an admin. Only allowed on loopback addresses or with
// --insecure (see coordinator/main.cc).
class AllowAllAuthenticator : public Authenticator {
 public:
  absl::StatusOr<Principal> Authenticate(absl::string_view) override { return Principal{}; }
  bool enabled() const override { return false; }
};

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_AUTH_H_
