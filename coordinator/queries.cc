// Read paths of the coordinator: campaign views with live waiting reasons, listings, events,
// reports, the queue, agents, cost tables; plus draining and recompression.
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "coordinator/coordinator.h"
#include "coordinator/report.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {

std::string Coordinator::WaitingReasonLocked(const v1::Job& job) {
  const absl::Time now = clock_->Now();
  if (job.has_not_before() && FromProto(job.not_before()) > now) {
    return absl::StrFormat("retry %d after backoff, in %.1fs (last error: %s)", job.attempt() + 1,
                           absl::ToDoubleSeconds(FromProto(job.not_before()) - now),
                           job.error());
  }
  if (job.resources().placement() == "launcher") {
    return launcher_ == nullptr ? absl::StrCat("no launcher configured for '", job.kind(),
                                               "' jobs (start the coordinator with --launcher)")
                                : "waiting for the launcher";
  }
  bool any_kind = false;
  std::string mismatch;
  for (const auto& [id, agent] : agents_) {
    const bool online = agent.state() == v1::AGENT_ONLINE &&
                        now - FromProto(agent.last_heartbeat()) <= options_.agent_offline_after;
    if (!online || agent.info().device_kind() != job.resources().device_kind()) continue;
    any_kind = true;
    std::optional<std::string> why = AgentMismatch(agent.info(), job);
    if (!why.has_value()) {
      return absl::StrCat("waiting for a free agent (queue position ", queue_.Position(job.id()),
                          ")");
    }
    mismatch = *why;
  }
  if (!any_kind) {
    return absl::StrCat("no online agent with device kind '", job.resources().device_kind(),
                        "'");
  }
  return absl::StrCat("no online agent with device kind '", job.resources().device_kind(),
                      "' fits: ", mismatch);
}

std::string Coordinator::StaleReasonLocked(const v1::Target& target) {
  // The most recent registration decides what the fleet runs now: upgrading one agent of a
  // device kind is the moment its old measurements stop describing the serving stack.
  const v1::Agent* newest = nullptr;
  for (const auto& [id, agent] : agents_) {
    const v1::AgentInfo& info = agent.info();
    if (info.engine_version().empty() || info.device_kind() != target.device_kind() ||
        info.engine() != target.engine()) {
      continue;
    }
    if (newest == nullptr ||
        FromProto(agent.registered_at()) > FromProto(newest->registered_at())) {
      newest = &agent;
    }
  }
  if (newest == nullptr || newest->info().engine_version() == target.engine_version()) return "";
  return absl::StrCat("agent ", newest->info().name(), " registered ", target.engine(), " ",
                      newest->info().engine_version(), " on ", target.device_kind(),
                      "; this target was measured with ", target.engine_version());
}

v1::Campaign Coordinator::ViewLocked(const v1::Campaign& stored, std::vector<v1::Job> jobs) {
  v1::Campaign view = stored;
  view.set_stale_reason(StaleReasonLocked(stored.contract().target()));
  for (v1::Job& job : jobs) {
    if (job.state() == v1::JOB_RUNNABLE) job.set_waiting_reason(WaitingReasonLocked(job));
    *view.add_jobs() = std::move(job);
  }
  return view;
}

absl::StatusOr<v1::Campaign> Coordinator::CampaignWithJobsLocked(const std::string& id) {
  auto live = campaigns_.find(id);
  if (live != campaigns_.end()) {
    std::vector<v1::Job> jobs;
    for (const std::string& job_id : live->second.job_ids) jobs.push_back(jobs_.at(job_id));
    return ViewLocked(live->second.campaign, std::move(jobs));
  }
  TAILOR_ASSIGN_OR_RETURN(v1::Campaign stored, store_->GetCampaign(id));
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, store_->JobsOfCampaign(id));
  return ViewLocked(stored, std::move(jobs));
}

absl::StatusOr<v1::Campaign> Coordinator::GetCampaign(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return CampaignWithJobsLocked(id);
}

absl::StatusOr<v1::Job> Coordinator::GetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) return it->second;
  return store_->GetJob(job_id);
}

namespace {

// A page token is the id of the last campaign of the previous page ("c-" and 22 hex digits,
// common/ids.h); anything else would silently list from an arbitrary point.
bool IsPageToken(absl::string_view token) {
  if (token.size() != 24 || !absl::StartsWith(token, "c-")) return false;
  return std::all_of(token.begin() + 2, token.end(),
                     [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); });
}

absl::Status ValidateListing(const v1::ListCampaignsRequest& req) {
  for (int i = 0; i < req.states_size(); ++i) {
    const int state = req.states(i);
    if (state == v1::CAMPAIGN_STATE_UNSPECIFIED || !v1::CampaignState_IsValid(state)) {
      return absl::InvalidArgumentError(
          absl::StrCat("states[", i, "]: must be QUEUED, RUNNING, SUCCEEDED, FAILED or ",
                       "CANCELLED, got ", state));
    }
  }
  if (!req.page_token().empty() && !IsPageToken(req.page_token())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: must be a next_page_token of an earlier listing, got \"",
        absl::CHexEscape(absl::string_view(req.page_token()).substr(0, 64)), "\""));
  }
  return absl::OkStatus();
}

}  // namespace

v1::Campaign ListingSummary(v1::Campaign c) {
  v1::DeploymentContract kept;
  kept.set_name(c.contract().name());
  kept.set_team(c.contract().team());
  kept.set_method(c.contract().method());
  *kept.mutable_target() = c.contract().target();
  *c.mutable_contract() = std::move(kept);
  c.clear_report();
  for (v1::Job& job : *c.mutable_jobs()) {
    job.clear_output();
    job.mutable_progress()->clear_metrics();
  }
  return c;
}

absl::StatusOr<v1::ListCampaignsResponse> Coordinator::ListCampaigns(
    const v1::ListCampaignsRequest& req) {
  if (req.page_size() < 0 || req.page_size() > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be in 0..1000, got ", req.page_size()));
  }
  TAILOR_RETURN_IF_ERROR(ValidateListing(req));
  const int size = req.page_size() == 0 ? 50 : req.page_size();
  std::vector<int> states(req.states().begin(), req.states().end());
  absl::MutexLock lock(&mu_);
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::Campaign> rows,
                          store_->ListCampaigns(req.team(), states, req.page_token(), size + 1));
  v1::ListCampaignsResponse resp;
  int64_t bytes = 0;
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < size; ++i) {
    TAILOR_ASSIGN_OR_RETURN(v1::Campaign full, CampaignWithJobsLocked(rows[i].id()));
    v1::Campaign summary = ListingSummary(std::move(full));
    bytes += static_cast<int64_t>(summary.ByteSizeLong());
    if (resp.campaigns_size() > 0 && bytes > options_.max_listing_bytes) {
      resp.set_next_page_token(rows[i - 1].id());
      return resp;
    }
    *resp.add_campaigns() = std::move(summary);
  }
  if (static_cast<int>(rows.size()) > size) resp.set_next_page_token(rows[size - 1].id());
  return resp;
}

absl::StatusOr<std::vector<v1::Event>> Coordinator::ReadEvents(const std::string& campaign_id,
                                                               int64_t after_seq, int limit,
                                                               bool* final) {
  absl::MutexLock lock(&mu_);
  *final = false;
  int64_t last_seq = 0;
  auto live = campaigns_.find(campaign_id);
  if (live != campaigns_.end()) {
    last_seq = live->second.last_seq;
  } else {
    TAILOR_ASSIGN_OR_RETURN(v1::Campaign stored, store_->GetCampaign(campaign_id));
    (void)stored;  // existence check; a stored-only campaign is final
    TAILOR_ASSIGN_OR_RETURN(last_seq, store_->MaxEventSeq(campaign_id));
  }
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::Event> events,
                          store_->ReadEvents(campaign_id, after_seq, limit));
  const int64_t reached = events.empty() ? after_seq : events.back().seq();
  *final = live == campaigns_.end() && reached >= last_seq;
  return events;
}

absl::StatusOr<v1::CampaignReport> Coordinator::GetReport(const std::string& id) {
  absl::MutexLock lock(&mu_);
  TAILOR_ASSIGN_OR_RETURN(v1::Campaign campaign, CampaignWithJobsLocked(id));
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::Artifact> artifacts, store_->ListArtifacts(id));
  std::vector<v1::Job> jobs(campaign.jobs().begin(), campaign.jobs().end());
  return BuildReport(campaign, jobs, artifacts);
}

absl::StatusOr<v1::ListArtifactsResponse> Coordinator::ListArtifacts(
    const std::string& campaign_id) {
  absl::MutexLock lock(&mu_);
  TAILOR_ASSIGN_OR_RETURN(v1::Campaign unused, store_->GetCampaign(campaign_id));
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::Artifact> artifacts, store_->ListArtifacts(campaign_id));
  v1::ListArtifactsResponse resp;
  for (auto& a : artifacts) *resp.add_artifacts() = std::move(a);
  return resp;
}

absl::StatusOr<v1::ListCostTablesResponse> Coordinator::ListCostTables(
    const std::string& device_kind) {
  absl::MutexLock lock(&mu_);
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::CostTable> tables, store_->ListCostTables(device_kind));
  v1::ListCostTablesResponse resp;
  for (auto& t : tables) {
    t.clear_entries();  // listings stay small; `costs show` fetches one table whole
    MarkStaleLocked(t);
    *resp.add_tables() = std::move(t);
  }
  return resp;
}

absl::StatusOr<v1::CostTable> Coordinator::GetCostTable(const v1::GetCostTableRequest& req) {
  absl::MutexLock lock(&mu_);
  if (!req.id().empty()) {
    TAILOR_ASSIGN_OR_RETURN(v1::CostTable table, store_->GetCostTable(req.id()));
    MarkStaleLocked(table);
    return table;
  }
  if (req.fingerprint().empty()) {
    return absl::InvalidArgumentError("give a fingerprint or a cost table id");
  }
  // Accept a unique prefix of the fingerprint, as printed by `tailor costs list`.
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::CostTable> tables, store_->ListCostTables(""));
  const v1::CostTable* match = nullptr;
  for (const auto& t : tables) {
    if (t.fingerprint().rfind(req.fingerprint(), 0) != 0) continue;
    if (match != nullptr && match->fingerprint() != t.fingerprint()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fingerprint prefix '", req.fingerprint(), "' is ambiguous"));
    }
    if (match == nullptr) match = &t;  // newest first
  }
  if (match == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no cost table with fingerprint '", req.fingerprint(), "'"));
  }
  TAILOR_ASSIGN_OR_RETURN(v1::CostTable table, store_->GetCostTable(match->id()));
  MarkStaleLocked(table);
  return table;
}

void Coordinator::MarkStaleLocked(v1::CostTable& table) {
  v1::Target target;
  target.set_device_kind(table.device_kind());
  target.set_engine(table.engine());
  target.set_engine_version(table.engine_version());
  table.set_stale(!StaleReasonLocked(target).empty());
}

absl::StatusOr<v1::ListQueueResponse> Coordinator::ListQueue(const v1::ListQueueRequest& req) {
  if (req.limit() < 0 || req.limit() > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: must be in 0..10000, got ", req.limit()));
  }
  const size_t limit = req.limit() == 0 ? 100 : req.limit();
  absl::MutexLock lock(&mu_);
  std::map<std::string, v1::QueueSummary> summary;
  std::vector<const v1::Job*> listed;
  for (const auto& [id, job] : jobs_) {
    const std::string& kind = job.resources().placement() == "launcher"
                                  ? std::string("(launcher)")
                                  : job.resources().device_kind();
    if (!req.device_kind().empty() && kind != req.device_kind()) continue;
    v1::QueueSummary& s = summary[kind];
    s.set_device_kind(kind);
    switch (job.state()) {
      case v1::JOB_PENDING: s.set_pending(s.pending() + 1); break;
      case v1::JOB_RUNNABLE: s.set_runnable(s.runnable() + 1); listed.push_back(&job); break;
      case v1::JOB_LEASED: s.set_leased(s.leased() + 1); listed.push_back(&job); break;
      default: break;
    }
  }
  // Leased first, then runnable in scheduling order (priority, then age).
  auto order = [](const v1::Job* a, const v1::Job* b) {
    if ((a->state() == v1::JOB_LEASED) != (b->state() == v1::JOB_LEASED)) {
      return a->state() == v1::JOB_LEASED;
    }
    if (a->resources().priority() != b->resources().priority()) {
      return a->resources().priority() > b->resources().priority();
    }
    const int64_t ta = absl::ToUnixMicros(FromProto(a->created_at()));
    const int64_t tb = absl::ToUnixMicros(FromProto(b->created_at()));
    return ta != tb ? ta < tb : a->id() < b->id();
  };
  const size_t n = std::min(limit, listed.size());
  std::partial_sort(listed.begin(), listed.begin() + n, listed.end(), order);
  v1::ListQueueResponse resp;
  std::map<std::string, int> position;
  for (size_t i = 0; i < n; ++i) {
    const v1::Job& job = *listed[i];
    v1::QueueEntry* e = resp.add_entries();
    *e->mutable_job() = job;
    if (job.state() == v1::JOB_RUNNABLE) {
      e->mutable_job()->set_waiting_reason(WaitingReasonLocked(job));
      e->set_position(++position[job.resources().device_kind()]);
    }
    const LiveCampaign& c = campaigns_.at(job.campaign_id());
    e->set_campaign_name(c.campaign.name());
    e->set_team(c.campaign.team());
  }
  for (auto& [k, s] : summary) *resp.add_summary() = s;
  return resp;
}

absl::StatusOr<v1::ListAgentsResponse> Coordinator::ListAgents(
    const v1::ListAgentsRequest& req) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  v1::ListAgentsResponse resp;
  for (const auto& [id, stored] : agents_) {
    v1::Agent a = stored;
    a.clear_secret_sha256();  // identity proofs stay in the coordinator
    if (a.state() == v1::AGENT_ONLINE &&
        now - FromProto(a.last_heartbeat()) > options_.agent_offline_after) {
      a.set_state(v1::AGENT_OFFLINE);
    }
    if (a.state() == v1::AGENT_OFFLINE && !req.include_offline()) continue;
    for (const auto& [lease_id, lease] : leases_) {
      if (lease.holder == id && !lease.cancelled) a.add_current_job_ids(lease.job_id);
    }
    *resp.add_agents() = std::move(a);
  }
  return resp;
}

absl::StatusOr<v1::Agent> Coordinator::DrainAgent(const v1::DrainAgentRequest& req) {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(req.agent_id());
  if (it == agents_.end()) {
    return absl::NotFoundError(absl::StrCat("agent '", req.agent_id(), "' not found"));
  }
  v1::Agent updated = it->second;
  updated.set_state(req.undrain() ? v1::AGENT_ONLINE : v1::AGENT_DRAINED);
  TAILOR_RETURN_IF_ERROR(CommitWrite(
      [&updated](storage::CoordinatorStore& store) { return store.UpsertAgent(updated); }));
  it->second = updated;
  spdlog::info("agent={} {}", req.agent_id(), req.undrain() ? "undrained" : "drained");
  return updated;
}

absl::StatusOr<v1::DeleteCampaignResponse> Coordinator::DeleteCampaign(
    const std::string& campaign_id) {
  absl::MutexLock lock(&mu_);
  if (auto live = campaigns_.find(campaign_id); live != campaigns_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", campaign_id, " is ", v1::CampaignState_Name(live->second.campaign.state()),
        "; cancel it first (tailor cancel ", campaign_id, "), then delete its record"));
  }
  v1::DeleteCampaignResponse deleted;
  TAILOR_RETURN_IF_ERROR(CommitWrite([&](storage::CoordinatorStore& store) -> absl::Status {
    TAILOR_ASSIGN_OR_RETURN(deleted, store.DeleteCampaign(campaign_id));
    return absl::OkStatus();
  }));
  spdlog::info("campaign={} record deleted ({} jobs, {} events, {} artifact rows)", campaign_id,
               deleted.jobs(), deleted.events(), deleted.artifacts());
  return deleted;
}

absl::StatusOr<v1::RecompressResponse> Coordinator::Recompress(
    const v1::RecompressRequest& req) {
  if (req.engine_version().empty() || req.engine_version().size() > 64) {
    return absl::InvalidArgumentError("engine_version: must be 1..64 characters");
  }
  std::vector<v1::Campaign> recurring;
  {
    absl::MutexLock lock(&mu_);
    TAILOR_ASSIGN_OR_RETURN(recurring, store_->ListRecurringCampaigns());
  }
  // The newest campaign per (team, name) stands for its target; older ones were superseded.
  std::map<std::pair<std::string, std::string>, v1::Campaign> latest;
  for (auto& c : recurring) latest[{c.team(), c.name()}] = std::move(c);
  v1::RecompressResponse resp;
  for (const auto& [key, c] : latest) {
    const v1::Target& t = c.contract().target();
    if (!req.engine().empty() && t.engine() != req.engine()) continue;
    if (t.engine_version() == req.engine_version()) continue;
    v1::RecompressEntry* e = resp.add_entries();
    e->set_source_campaign_id(c.id());
    e->set_old_engine_version(t.engine_version());
    if (req.dry_run()) continue;
    v1::DeploymentContract next = c.contract();
    next.mutable_target()->set_engine_version(req.engine_version());
    // The key makes a pipeline's repeated calls harmless: the second one finds the first.
    // Versions may hold characters request ids may not ("1+threads2"): those become '_'.
    std::string version = req.engine_version();
    for (char& ch : version) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' &&
          ch != ':' && ch != '-') {
        ch = '_';
      }
    }
    const std::string request_id =
        absl::StrCat("recompress:", c.id(), ":", version).substr(0, 128);
    v1::RecompressOrigin origin;
    origin.set_source_campaign_id(c.id());
    origin.set_old_engine_version(t.engine_version());
    TAILOR_ASSIGN_OR_RETURN(auto submitted, Submit(next, request_id, &origin));
    e->set_new_campaign_id(submitted.first.id());
    e->set_submitted(submitted.second);
  }
  return resp;
}

}  // namespace tailor::coordinator
