#ifndef TAILOR_COORDINATOR_ACCESS_RULES_H_
#define TAILOR_COORDINATOR_ACCESS_RULES_H_

// Who may call what, in one table for both ports: every gRPC method (keyed by its full name,
// "/tailor.v1.AdminService/ListQueue", as in the metrics) and every HTTP route (keyed by
// "METHOD /path", with {id} for a campaign id) has exactly one row saying which callers it
// admits and how a submitter's view of campaigns is scoped. The gRPC services and the HTTP
// server authenticate in their own way (metadata, header or cookie) and then ask this table
// and the scoping functions below; tests/unit/coordinator/access_rules_test.cc walks every
// row through every role and two teams, and fails for a method or route without a row.
// docs/operations.md ("Access rules") is this table in prose.
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "coordinator/auth.h"
#include "tailor/v1/admin.pb.h"
#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::coordinator {

// Which callers a row admits, as bits so that one row names all of them.
enum Caller : uint8_t {
  // No token, with --auth tokens (probes, scrapers, the login form). With --auth off every
  // caller is an anonymous admin, so the kCallerAdmin bit decides.
  kCallerAnonymous = 1 << 0,
  kCallerSubmitter = 1 << 1,
  kCallerAgent = 1 << 2,
  kCallerAdmin = 1 << 3,
};
inline constexpr uint8_t kCallersAny =
    kCallerAnonymous | kCallerSubmitter | kCallerAgent | kCallerAdmin;
inline constexpr uint8_t kCallersWithToken = kCallerSubmitter | kCallerAgent | kCallerAdmin;
inline constexpr uint8_t kCallersCampaign = kCallerSubmitter | kCallerAdmin;
inline constexpr uint8_t kCallersAgent = kCallerAgent | kCallerAdmin;
inline constexpr uint8_t kCallersAdmin = kCallerAdmin;

// What a submitter sees of other teams. The scope limits submitters only: admins see every
// team, and agents, on the rows that admit them at all, are not scoped (they run every
// team's jobs and fetch their inputs).
enum class Visibility {
  kNoCampaigns,  // touches no campaign data (agent and admin verbs, cost tables, health)
  // Names one campaign (or its job or artifact): another team's is NOT_FOUND, worded exactly
  // as for a missing id, so a submitter never learns it exists.
  kOneCampaign,
  // Lists campaigns or jobs: only the own team's entries; cluster-wide counts stay.
  kTeamListing,
  // Creates a campaign: for the own team only; a contract naming another team is
  // PERMISSION_DENIED naming the field `team`, one naming none gets the token's.
  kOwnTeamSubmission,
};

struct AccessRule {
  absl::string_view call;  // "/tailor.v1.Service/Method" or "GET /path"
  uint8_t callers;         // Caller bits
  Visibility visibility;
};

// Every row, gRPC methods first, then HTTP routes.
absl::Span<const AccessRule> AccessRules();
// The row for `call`, or null.
const AccessRule* FindAccessRule(absl::string_view call);

// The Caller bit of an authenticated principal.
Caller CallerOf(Role role);
bool Admits(const AccessRule& rule, Caller caller);

// OK when the row for `call` admits `p`. PERMISSION_DENIED ("ListQueue needs an admin token;
// this is agent token tok-...") when it does not, and INTERNAL when `call` has no row: a
// method nobody wrote a rule for is refused, not opened.
absl::Status CheckCall(absl::string_view call, const Principal& p);

// NOT_FOUND "campaign 'ID' not found": what a missing and a hidden campaign both look like.
absl::Status HiddenCampaign(absl::string_view campaign_id);
// OK when `p` may see a campaign owned by `campaign_team`; HiddenCampaign otherwise.
absl::Status CheckCampaignVisible(const Principal& p, absl::string_view campaign_id,
                                  absl::string_view campaign_team);

// The contract as `p` may submit it (kOwnTeamSubmission).
absl::Status ScopeSubmission(const Principal& p, v1::DeploymentContract* contract);
// A campaign listing as `p` may run it: unchanged for admins, the own team for submitters.
// nullopt when a submitter can see nothing of it (another team asked for, or no team), so the
// answer is an empty listing.
std::optional<v1::ListCampaignsRequest> ScopeCampaignListing(const Principal& p,
                                                             v1::ListCampaignsRequest request);
// A campaign as `p` may see it: lease ids are their holders' business, so everyone but an
// admin gets its jobs without them.
void HideLeaseIds(const Principal& p, v1::Campaign* campaign);
// The queue as `p` may see it: the summary stays cluster-wide (how busy each device kind is);
// the entries name campaigns, so a submitter gets its own team's only (their positions are
// still ranks in the whole queue), without lease ids.
v1::ListQueueResponse ScopeQueue(const Principal& p, v1::ListQueueResponse queue);
// Agents as `p` may see them: a submitter sees every agent, but only the current jobs that
// are in its `visible_queue` (see ScopeQueue), and not the tokens they registered with.
void ScopeAgents(const Principal& p, const v1::ListQueueResponse& visible_queue,
                 v1::ListAgentsResponse* agents);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_ACCESS_RULES_H_
