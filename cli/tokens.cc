// `tailor tokens create|list|revoke|audit`: API tokens and the audit log (admin tokens only).
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/grpc_util.h"
#include "common/proto_time.h"

namespace tailor::cli {
namespace {

constexpr char kNoTokenService[] = "this CLI was built without the token API";

std::string RoleName(v1::TokenRole role) {
  switch (role) {
    case v1::TOKEN_ROLE_SUBMITTER:
      return "submitter";
    case v1::TOKEN_ROLE_ADMIN:
      return "admin";
    case v1::TOKEN_ROLE_AGENT:
      return "agent";
    default:
      return absl::StrCat(static_cast<int>(role));
  }
}

int Fail(const CliEnv& env, absl::string_view what, const absl::Status& status,
         absl::string_view hint = "") {
  return ReportError(*env.err, what, status, env.address, hint);
}

absl::StatusOr<v1::TokenRole> ParseTokenRole(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "submitter") return v1::TOKEN_ROLE_SUBMITTER;
  if (n == "admin") return v1::TOKEN_ROLE_ADMIN;
  if (n == "agent") return v1::TOKEN_ROLE_AGENT;
  return absl::InvalidArgumentError(
      absl::StrCat("--role must be submitter, admin or agent, got '", name, "'"));
}

// The EXPIRES cell: "never", the time, or the time marked "(expired)" once it has passed
// (only `--all` lists those).
std::string FormatExpiry(const v1::ApiToken& token, absl::Time now, absl::TimeZone tz) {
  if (!token.has_expires_at()) return "never";
  const std::string at = FormatTimestamp(token.expires_at(), tz);
  return FromProto(token.expires_at()) <= now ? absl::StrCat(at, " (expired)") : at;
}

}  // namespace

int RunTokensCreate(const Invocation& inv, const CliEnv& env) {
  if (env.tokens == nullptr) return Fail(env, "cannot create a token", absl::InternalError(kNoTokenService));
  absl::StatusOr<v1::TokenRole> role = ParseTokenRole(inv.role);
  if (!role.ok()) return ReportUsageError(*env.err, role.status().message());
  v1::CreateTokenRequest request;
  request.set_role(*role);
  request.set_team(inv.team);
  request.set_description(inv.description);
  if (inv.expires_in.has_value()) {
    // Out-of-range values (0, over 3650 days) go as they are: the coordinator is the one
    // place that judges them.
    request.set_expires_in_seconds(absl::ToInt64Seconds(*inv.expires_in));
  }
  v1::CreateTokenResponse response;
  auto ctx = env.CallContext();
  absl::Status status = FromGrpcStatus(env.tokens->CreateToken(ctx.get(), request, &response));
  if (!status.ok()) {
    return Fail(env, "cannot create a token", status,
                absl::StartsWith(status.message(), "expires_in:")
                    ? "--expires-in takes 1s to 3650d, like 90d; without it the token never "
                      "expires"
                    : "a submitter token needs --team; teams are [a-z0-9_-]{1,64}");
  }
  if (inv.json) {
    PrintJson(*env.out, response);
    return kExitOk;
  }
  // The secret alone on stdout, so `TOKEN=$(tailor tokens create ...)` works; the rest to
  // stderr.
  *env.err << "created " << RoleName(response.token().role()) << " token "
           << response.token().id()
           << (response.token().team().empty() ? "" : " for team " + response.token().team())
           << (response.token().has_expires_at()
                   ? " expiring " + FormatTimestamp(response.token().expires_at(), env.tz)
                   : "")
           << "; the secret is shown once and never stored:\n";
  *env.out << response.secret() << "\n";
  return kExitOk;
}

int RunTokensList(const Invocation& inv, const CliEnv& env) {
  if (env.tokens == nullptr) return Fail(env, "cannot list tokens", absl::InternalError(kNoTokenService));
  v1::ListTokensRequest request;
  request.set_include_revoked(inv.all);
  v1::ListTokensResponse response;
  auto ctx = env.CallContext();
  absl::Status status = FromGrpcStatus(env.tokens->ListTokens(ctx.get(), request, &response));
  if (!status.ok()) return Fail(env, "cannot list tokens", status);
  if (inv.json) {
    PrintJson(*env.out, response);
    return kExitOk;
  }
  if (response.tokens_size() == 0) {
    *env.out << "no tokens\n";
    return kExitOk;
  }
  Table table({{"ID"},
               {"ROLE"},
               {"TEAM"},
               {"CREATED"},
               {"REVOKED"},
               {"EXPIRES"},
               {"DESCRIPTION", Align::kLeft, 0, true}});
  const absl::Time now = env.clock->Now();
  for (const v1::ApiToken& t : response.tokens()) {
    table.AddRow({t.id(), RoleName(t.role()), t.team().empty() ? "-" : t.team(),
                  FormatTimestamp(t.created_at(), env.tz),
                  t.has_revoked_at() ? FormatTimestamp(t.revoked_at(), env.tz) : "-",
                  FormatExpiry(t, now, env.tz),
                  t.description().empty() ? "-" : t.description()});
  }
  *env.out << table.Render(env.width);
  return kExitOk;
}

int RunTokensRevoke(const Invocation& inv, const CliEnv& env) {
  if (env.tokens == nullptr) return Fail(env, "cannot revoke a token", absl::InternalError(kNoTokenService));
  v1::RevokeTokenRequest request;
  request.set_id(inv.target);
  v1::ApiToken token;
  auto ctx = env.CallContext();
  absl::Status status = FromGrpcStatus(env.tokens->RevokeToken(ctx.get(), request, &token));
  if (!status.ok()) {
    return Fail(env, absl::StrCat("cannot revoke token ", inv.target), status,
                "check the id; `tailor tokens list` shows tokens");
  }
  if (inv.json) {
    PrintJson(*env.out, token);
  } else {
    *env.out << "token " << token.id() << " revoked at "
             << FormatTimestamp(token.revoked_at(), env.tz) << "\n";
  }
  return kExitOk;
}

int RunTokensAudit(const Invocation& inv, const CliEnv& env) {
  if (env.tokens == nullptr) return Fail(env, "cannot read the audit log", absl::InternalError(kNoTokenService));
  v1::ListAuditEventsRequest request;
  request.set_limit(static_cast<int32_t>(inv.limit));
  v1::ListAuditEventsResponse response;
  auto ctx = env.CallContext();
  absl::Status status =
      FromGrpcStatus(env.tokens->ListAuditEvents(ctx.get(), request, &response));
  if (!status.ok()) return Fail(env, "cannot read the audit log", status);
  if (inv.json) {
    PrintJson(*env.out, response);
    return kExitOk;
  }
  if (response.events_size() == 0) {
    *env.out << "no audit events\n";
    return kExitOk;
  }
  Table table({{"TIME"}, {"TOKEN"}, {"VERB"}, {"TARGET"}, {"DETAIL", Align::kLeft, 0, true}});
  for (const v1::AuditEvent& e : response.events()) {
    table.AddRow({FormatTimestamp(e.time(), env.tz), e.token_id().empty() ? "-" : e.token_id(),
                  e.verb(), e.target(), e.detail().empty() ? "-" : e.detail()});
  }
  *env.out << table.Render(env.width);
  return kExitOk;
}

}  // namespace tailor::cli
