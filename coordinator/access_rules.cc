#include "coordinator/access_rules.h"

#include <array>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {
namespace {

using V = Visibility;

// The table. docs/operations.md ("Access rules") says the same in prose; change both.
constexpr std::array kRules = {
    // --- gRPC CampaignService: what `tailor` does with a submitter token ---
    // A submitter submits for its own team only (another team is PERMISSION_DENIED naming
    // the contract's field `team`).
    AccessRule{"/tailor.v1.CampaignService/SubmitCampaign", kCampaignUsers, V::kOneCampaign},
    AccessRule{"/tailor.v1.CampaignService/GetCampaign", kCampaignUsers, V::kOneCampaign},
    AccessRule{"/tailor.v1.CampaignService/ListCampaigns", kCampaignUsers, V::kTeamListing},
    AccessRule{"/tailor.v1.CampaignService/CancelCampaign", kCampaignUsers, V::kOneCampaign},
    AccessRule{"/tailor.v1.CampaignService/WatchCampaign", kCampaignUsers, V::kOneCampaign},
    AccessRule{"/tailor.v1.CampaignService/GetReport", kCampaignUsers, V::kOneCampaign},
    AccessRule{"/tailor.v1.CampaignService/ListArtifacts", kCampaignUsers, V::kOneCampaign},
    // Cost tables describe devices, not campaigns; workers read them with agent tokens.
    AccessRule{"/tailor.v1.CampaignService/ListCostTables", kAnyToken, V::kNoCampaigns},
    AccessRule{"/tailor.v1.CampaignService/GetCostTable", kAnyToken, V::kNoCampaigns},
    AccessRule{"/tailor.v1.CampaignService/GetJobLog", kCampaignUsers, V::kOneCampaign},
    // --- gRPC AgentService: profiler agents and worker ranks ---
    AccessRule{"/tailor.v1.AgentService/Register", kAgents, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/Heartbeat", kAgents, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/AcquireJob", kAgents, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/ReportProgress", kAgents, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/CompleteJob", kAgents, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/UploadArtifact", kAgents, V::kNoCampaigns},
    // `tailor artifacts get` downloads with a submitter token: its own team's artifacts.
    AccessRule{"/tailor.v1.AgentService/DownloadArtifact", kAnyToken, V::kOneCampaign},
    AccessRule{"/tailor.v1.AgentService/PutCostTable", kAgents, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/GetAssignment", kAgents, V::kNoCampaigns},
    // --- gRPC AdminService ---
    // The queue is what the dashboard's overview shows a submitter: its team's jobs, and the
    // cluster-wide counts per device kind.
    AccessRule{"/tailor.v1.AdminService/ListQueue", kCampaignUsers, V::kTeamListing},
    AccessRule{"/tailor.v1.AdminService/ListAgents", kAdmins, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AdminService/DrainAgent", kAdmins, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AdminService/Recompress", kAdmins, V::kNoCampaigns},
    // --- gRPC TokenService ---
    AccessRule{"/tailor.v1.TokenService/CreateToken", kAdmins, V::kNoCampaigns},
    AccessRule{"/tailor.v1.TokenService/ListTokens", kAdmins, V::kNoCampaigns},
    AccessRule{"/tailor.v1.TokenService/RevokeToken", kAdmins, V::kNoCampaigns},
    AccessRule{"/tailor.v1.TokenService/ListAuditEvents", kAdmins, V::kNoCampaigns},
    // --- HTTP: probes, scrapers and the public bundle carry no token ---
    AccessRule{"GET /healthz", kAnyone, V::kNoCampaigns},
    AccessRule{"GET /readyz", kAnyone, V::kNoCampaigns},
    // Counts only (jobs per state and device kind, agents, calls), no campaign names.
    AccessRule{"GET /metrics", kAnyone, V::kNoCampaigns},
    AccessRule{"GET /static/{file}", kAnyone, V::kNoCampaigns},
    // The login form itself; POST /login refuses tokens that GET / would not admit.
    AccessRule{"GET /login", kAnyone, V::kNoCampaigns},
    AccessRule{"POST /login", kAnyone, V::kNoCampaigns},
    AccessRule{"POST /logout", kAnyone, V::kNoCampaigns},
    // --- HTTP: the dashboard pages and their JSON API ---
    AccessRule{"GET /", kCampaignUsers, V::kTeamListing},
    AccessRule{"GET /campaigns/{id}", kCampaignUsers, V::kOneCampaign},
    AccessRule{"GET /api/queue", kCampaignUsers, V::kTeamListing},
    // Unlike gRPC ListAgents (admins): every agent, with only the own team's current jobs.
    AccessRule{"GET /api/agents", kCampaignUsers, V::kTeamListing},
    AccessRule{"GET /api/campaigns", kCampaignUsers, V::kTeamListing},
    AccessRule{"GET /api/campaigns/{id}", kCampaignUsers, V::kOneCampaign},
    AccessRule{"GET /api/campaigns/{id}/report", kCampaignUsers, V::kOneCampaign},
    AccessRule{"GET /api/campaigns/{id}/charts", kCampaignUsers, V::kOneCampaign},
};

// "an admin token", "a submitter or admin token": the token roles a row admits.
std::string TokensAdmitted(uint8_t callers) {
  std::vector<std::string> roles;
  for (Role role : {Role::kSubmitter, Role::kAgent, Role::kAdmin}) {
    if (callers & CallerOf(role)) roles.emplace_back(RoleName(role));
  }
  if (roles.empty()) return "no token";
  std::string list = roles.back();
  if (roles.size() > 1) {
    roles.pop_back();
    list = absl::StrCat(absl::StrJoin(roles, ", "), " or ", list);
  }
  return absl::StrCat(list[0] == 'a' ? "an " : "a ", list, " token");
}

// "ListQueue" for "/tailor.v1.AdminService/ListQueue"; HTTP routes as they are.
absl::string_view CallName(absl::string_view call) {
  if (call.empty() || call[0] != '/') return call;
  return call.substr(call.rfind('/') + 1);
}

}  // namespace

absl::Span<const AccessRule> AccessRules() { return kRules; }

const AccessRule* FindAccessRule(absl::string_view call) {
  for (const AccessRule& rule : kRules) {
    if (rule.call == call) return &rule;
  }
  return nullptr;
}

Caller CallerOf(Role role) {
  switch (role) {
    case Role::kSubmitter:
      return kSubmitter;
    case Role::kAgent:
      return kAgent;
    case Role::kAdmin:
      return kAdmin;
  }
  return kAnonymous;
}

bool Admits(const AccessRule& rule, Caller caller) { return (rule.callers & caller) != 0; }

absl::Status CheckCall(absl::string_view call, const Principal& p) {
  const AccessRule* rule = FindAccessRule(call);
  if (rule == nullptr) {
    spdlog::error("no access rule for {}; refusing it", std::string(call));
    return absl::InternalError(absl::StrCat(call, " has no access rule"));
  }
  if (Admits(*rule, CallerOf(p.role))) return absl::OkStatus();
  spdlog::warn("denied {} to {} token {}", std::string(call), std::string(RoleName(p.role)),
               p.token_id);
  return absl::PermissionDeniedError(absl::StrCat(CallName(call), " needs ",
                                                  TokensAdmitted(rule->callers), "; this is ",
                                                  RoleName(p.role), " token ", p.token_id));
}

absl::Status HiddenCampaign(absl::string_view campaign_id) {
  return absl::NotFoundError(absl::StrCat("campaign '", campaign_id, "' not found"));
}

absl::Status CheckCampaignVisible(const Principal& p, absl::string_view campaign_id,
                                  absl::string_view campaign_team) {
  return p.CanSee(campaign_team) ? absl::OkStatus() : HiddenCampaign(campaign_id);
}

std::optional<v1::ListCampaignsRequest> ScopeCampaignListing(const Principal& p,
                                                             v1::ListCampaignsRequest request) {
  if (p.is_admin()) return request;
  // An empty team filter would mean every team.
  if (p.team.empty()) return std::nullopt;
  if (!request.team().empty() && request.team() != p.team) return std::nullopt;
  request.set_team(p.team);
  return request;
}

v1::ListQueueResponse ScopeQueue(const Principal& p, v1::ListQueueResponse queue) {
  if (p.is_admin()) return queue;
  v1::ListQueueResponse visible;
  *visible.mutable_summary() = std::move(*queue.mutable_summary());
  for (v1::QueueEntry& e : *queue.mutable_entries()) {
    if (p.CanSee(e.team())) *visible.add_entries() = std::move(e);
  }
  return visible;
}

void ScopeAgents(const Principal& p, const v1::ListQueueResponse& visible_queue,
                 v1::ListAgentsResponse* agents) {
  if (p.is_admin()) return;
  std::set<std::string> visible;
  for (const v1::QueueEntry& e : visible_queue.entries()) visible.insert(e.job().id());
  for (v1::Agent& agent : *agents->mutable_agents()) {
    std::vector<std::string> keep;
    for (const std::string& id : agent.current_job_ids()) {
      if (visible.count(id)) keep.push_back(id);
    }
    agent.clear_current_job_ids();
    for (std::string& id : keep) agent.add_current_job_ids(std::move(id));
  }
}

}  // namespace tailor::coordinator
