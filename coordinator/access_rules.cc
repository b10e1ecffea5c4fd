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
    AccessRule{"/tailor.v1.CampaignService/SubmitCampaign", kCallersCampaign,
               V::kOwnTeamSubmission},
    AccessRule{"/tailor.v1.CampaignService/GetCampaign", kCallersCampaign, V::kOneCampaign},
    AccessRule{"/tailor.v1.CampaignService/ListCampaigns", kCallersCampaign, V::kTeamListing},
    AccessRule{"/tailor.v1.CampaignService/CancelCampaign", kCallersCampaign, V::kOneCampaign},
    AccessRule{"/tailor.v1.CampaignService/WatchCampaign", kCallersCampaign, V::kOneCampaign},
    AccessRule{"/tailor.v1.CampaignService/GetReport", kCallersCampaign, V::kOneCampaign},
    AccessRule{"/tailor.v1.CampaignService/ListArtifacts", kCallersCampaign, V::kOneCampaign},
    // Cost tables describe devices, not campaigns; workers read them with agent tokens.
    AccessRule{"/tailor.v1.CampaignService/ListCostTables", kCallersWithToken, V::kNoCampaigns},
    AccessRule{"/tailor.v1.CampaignService/GetCostTable", kCallersWithToken, V::kNoCampaigns},
    AccessRule{"/tailor.v1.CampaignService/GetJobLog", kCallersCampaign, V::kOneCampaign},
    // --- gRPC AgentService: profiler agents and worker ranks ---
    AccessRule{"/tailor.v1.AgentService/Register", kCallersAgent, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/Heartbeat", kCallersAgent, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/AcquireJob", kCallersAgent, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/ReportProgress", kCallersAgent, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/CompleteJob", kCallersAgent, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/UploadArtifact", kCallersAgent, V::kNoCampaigns},
    // `tailor artifacts get` downloads with a submitter token: its own team's artifacts.
    AccessRule{"/tailor.v1.AgentService/DownloadArtifact", kCallersWithToken, V::kOneCampaign},
    AccessRule{"/tailor.v1.AgentService/PutCostTable", kCallersAgent, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AgentService/GetAssignment", kCallersAgent, V::kNoCampaigns},
    // --- gRPC AdminService ---
    // The queue is what the dashboard's overview shows a submitter: its team's jobs, and the
    // cluster-wide counts per device kind.
    AccessRule{"/tailor.v1.AdminService/ListQueue", kCallersCampaign, V::kTeamListing},
    AccessRule{"/tailor.v1.AdminService/ListAgents", kCallersAdmin, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AdminService/DrainAgent", kCallersAdmin, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AdminService/Recompress", kCallersAdmin, V::kNoCampaigns},
    AccessRule{"/tailor.v1.AdminService/DeleteCampaign", kCallersAdmin, V::kNoCampaigns},
    // --- gRPC TokenService ---
    AccessRule{"/tailor.v1.TokenService/CreateToken", kCallersAdmin, V::kNoCampaigns},
    AccessRule{"/tailor.v1.TokenService/ListTokens", kCallersAdmin, V::kNoCampaigns},
    AccessRule{"/tailor.v1.TokenService/RevokeToken", kCallersAdmin, V::kNoCampaigns},
    AccessRule{"/tailor.v1.TokenService/ListAuditEvents", kCallersAdmin, V::kNoCampaigns},
    // --- HTTP: probes, scrapers and the public bundle carry no token ---
    AccessRule{"GET /healthz", kCallersAny, V::kNoCampaigns},
    AccessRule{"GET /readyz", kCallersAny, V::kNoCampaigns},
    // Counts only (jobs per state and device kind, agents, calls), no campaign names.
    AccessRule{"GET /metrics", kCallersAny, V::kNoCampaigns},
    AccessRule{"GET /static/{file}", kCallersAny, V::kNoCampaigns},
    // The login form itself; POST /login refuses tokens that GET / would not admit.
    AccessRule{"GET /login", kCallersAny, V::kNoCampaigns},
    AccessRule{"POST /login", kCallersAny, V::kNoCampaigns},
    AccessRule{"POST /logout", kCallersAny, V::kNoCampaigns},
    // --- HTTP: the dashboard pages and their JSON API ---
    AccessRule{"GET /", kCallersCampaign, V::kTeamListing},
    AccessRule{"GET /campaigns/{id}", kCallersCampaign, V::kOneCampaign},
    AccessRule{"GET /api/queue", kCallersCampaign, V::kTeamListing},
    // Unlike gRPC ListAgents (admins): every agent, with only the own team's current jobs.
    AccessRule{"GET /api/agents", kCallersCampaign, V::kTeamListing},
    AccessRule{"GET /api/campaigns", kCallersCampaign, V::kTeamListing},
    AccessRule{"GET /api/campaigns/{id}", kCallersCampaign, V::kOneCampaign},
    AccessRule{"GET /api/campaigns/{id}/report", kCallersCampaign, V::kOneCampaign},
    AccessRule{"GET /api/campaigns/{id}/charts", kCallersCampaign, V::kOneCampaign},
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
      return kCallerSubmitter;
    case Role::kAgent:
      return kCallerAgent;
    case Role::kAdmin:
      return kCallerAdmin;
  }
  return kCallerAnonymous;
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
  if (p.role != Role::kSubmitter || p.team == campaign_team) return absl::OkStatus();
  return HiddenCampaign(campaign_id);
}

absl::Status ScopeSubmission(const Principal& p, v1::DeploymentContract* contract) {
  if (p.role != Role::kSubmitter) return absl::OkStatus();
  if (contract->team().empty()) contract->set_team(p.team);
  if (contract->team() == p.team) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("team: token ", p.token_id, " submits for team '",
                                                  p.team, "' only, the contract says '",
                                                  contract->team(), "'"));
}

std::optional<v1::ListCampaignsRequest> ScopeCampaignListing(const Principal& p,
                                                             v1::ListCampaignsRequest request) {
  if (p.role != Role::kSubmitter) return request;
  // An empty team filter would mean every team.
  if (p.team.empty()) return std::nullopt;
  if (!request.team().empty() && request.team() != p.team) return std::nullopt;
  request.set_team(p.team);
  return request;
}

void HideLeaseIds(const Principal& p, v1::Campaign* campaign) {
  if (p.is_admin()) return;
  for (v1::Job& job : *campaign->mutable_jobs()) job.clear_lease_id();
}

v1::ListQueueResponse ScopeQueue(const Principal& p, v1::ListQueueResponse queue) {
  if (p.role != Role::kSubmitter) return queue;
  v1::ListQueueResponse visible;
  *visible.mutable_summary() = std::move(*queue.mutable_summary());
  for (v1::QueueEntry& e : *queue.mutable_entries()) {
    if (e.team() != p.team) continue;
    e.mutable_job()->clear_lease_id();
    *visible.add_entries() = std::move(e);
  }
  return visible;
}

void ScopeAgents(const Principal& p, const v1::ListQueueResponse& visible_queue,
                 v1::ListAgentsResponse* agents) {
  if (p.role != Role::kSubmitter) return;
  std::set<std::string> visible;
  for (const v1::QueueEntry& e : visible_queue.entries()) visible.insert(e.job().id());
  for (v1::Agent& agent : *agents->mutable_agents()) {
    agent.clear_token_id();
    std::vector<std::string> keep;
    for (const std::string& id : agent.current_job_ids()) {
      if (visible.count(id)) keep.push_back(id);
    }
    agent.clear_current_job_ids();
    for (std::string& id : keep) agent.add_current_job_ids(std::move(id));
  }
}

}  // namespace tailor::coordinator
