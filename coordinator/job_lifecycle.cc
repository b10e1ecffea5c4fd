// The agent side of the coordinator: registration, heartbeats, leases (acquire, progress,
// completion, expiry with retries and backoff), cost tables and artifact records.
#include <algorithm>
#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/ids.h"
#include "common/proto_time.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/job_output.h"
#include "coordinator/coordinator.h"
#include "coordinator/cost_table_check.h"
#include "coordinator/quality_check.h"
#include "coordinator/relative_budget.h"
#include "coordinator/unit_of_work.h"
#include "methods/api/job_kinds.h"
#include "methods/registry.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {

namespace {
constexpr size_t kMaxJobKinds = 64;
constexpr int kMaxCostEntries = 100000;

// Job kinds are identifiers like the contract's names (docs/architecture.md "Limits").
constexpr size_t kMaxJobKindChars = 64;
// Free-text registration fields are shown by `tailor agents`, the dashboard and the logs.
constexpr size_t kMaxInfoTextChars = 256;

// The first 64 characters of `s`, C-escaped: what an error message quotes of a bad value, so
// that control characters never reach a terminal or a log line raw.
std::string Quoted(absl::string_view s) {
  return absl::StrCat("\"", absl::CHexEscape(s.substr(0, 64)), "\"");
}

bool HasControlCharacter(absl::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

// A free-text field: at most `max` characters and no control characters.
absl::Status CheckInfoText(absl::string_view field, absl::string_view value, size_t max) {
  if (value.size() > max) {
    return absl::InvalidArgumentError(absl::StrCat("info.", field, ": must be at most ", max,
                                                   " characters, got ", value.size()));
  }
  if (HasControlCharacter(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "info.", field, ": must not contain control characters, got ", Quoted(value)));
  }
  return absl::OkStatus();
}

absl::Status ValidateJobKinds(const v1::AgentInfo& info) {
  if (info.job_kinds().empty() || static_cast<size_t>(info.job_kinds_size()) > kMaxJobKinds) {
    return absl::InvalidArgumentError(
        absl::StrCat("info.job_kinds: must list 1..64 job kinds, got ", info.job_kinds_size()));
  }
  for (int i = 0; i < info.job_kinds_size(); ++i) {
    if (!IsSafeToken(info.job_kinds(i), kMaxJobKindChars)) {
      return absl::InvalidArgumentError(
          absl::StrCat("info.job_kinds[", i, "]: must be 1..", kMaxJobKindChars,
                       " characters of [A-Za-z0-9._:-], got ", Quoted(info.job_kinds(i)),
                       " (", info.job_kinds(i).size(), " characters)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateAgentInfo(const v1::AgentInfo& info) {
  if (!IsSafeToken(info.name(), 200)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "info.name: must be 1..200 characters of [A-Za-z0-9._:-], got ", Quoted(info.name())));
  }
  if (info.device_kind().empty()) {
    return absl::InvalidArgumentError("info.device_kind: must be 1..128 characters");
  }
  TAILOR_RETURN_IF_ERROR(CheckInfoText("device_kind", info.device_kind(), 128));
  TAILOR_RETURN_IF_ERROR(CheckInfoText("device", info.device(), kMaxInfoTextChars));
  TAILOR_RETURN_IF_ERROR(CheckInfoText("hostname", info.hostname(), kMaxInfoTextChars));
  TAILOR_RETURN_IF_ERROR(CheckInfoText("gpu_type", info.gpu_type(), kMaxInfoTextChars));
  TAILOR_RETURN_IF_ERROR(CheckInfoText("engine", info.engine(), kMaxInfoTextChars));
  TAILOR_RETURN_IF_ERROR(
      CheckInfoText("engine_version", info.engine_version(), kMaxInfoTextChars));
  if (info.memory_mib() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("info.memory_mib: must be >= 0, got ", info.memory_mib()));
  }
  if (info.gpus() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("info.gpus: must be >= 0, got ", info.gpus()));
  }
  TAILOR_RETURN_IF_ERROR(ValidateJobKinds(info));
  if (info.max_concurrent_jobs() < 0 || info.max_concurrent_jobs() > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "info.max_concurrent_jobs: must be in 0..1024, got ", info.max_concurrent_jobs()));
  }
  return absl::OkStatus();
}

// The parent's measurement a table carries is what budgets relative to the parent resolve
// against: every figure it holds must be one.
absl::Status CheckParentMeasured(const v1::ModelCosts& m) {
  absl::Status status;
  auto check = [&status](const char* name, bool has, double v) {
    if (!status.ok() || !has || (std::isfinite(v) && v > 0)) return;
    status = absl::InvalidArgumentError(
        absl::StrCat("table.parent_measured.", name, ": must be finite and > 0, got ", v));
  };
  check("latency_ms", m.has_latency_ms(), m.latency_ms());
  check("request_p50_ms", m.has_request_p50_ms(), m.request_p50_ms());
  check("request_p90_ms", m.has_request_p90_ms(), m.request_p90_ms());
  check("request_p99_ms", m.has_request_p99_ms(), m.request_p99_ms());
  check("throughput_tokens_per_s", m.has_throughput_tokens_per_s(), m.throughput_tokens_per_s());
  check("memory_mib", m.has_memory_mib(), m.memory_mib());
  return status;
}

bool IsLauncherHolder(absl::string_view holder) {
  return absl::StartsWith(holder, "launcher:");
}

std::string Seconds1(absl::Duration d) {
  return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d));
}
}  // namespace

absl::Status Coordinator::CheckSameAgentLocked(const v1::Agent& agent,
                                               const std::string& token_id,
                                               const std::string& secret,
                                               absl::Time now) const {
  const absl::Duration since = now - FromProto(agent.last_heartbeat());
  const bool live = agent.state() != v1::AGENT_OFFLINE && since <= options_.agent_offline_after;
  if (!live) return absl::OkStatus();  // a replaced machine takes its name back
  // Empty on either side proves nothing and refutes nothing: admins register without an agent
  // token, and agents registered before identities were kept have no secret yet.
  const bool token_ok =
      token_id.empty() || agent.token_id().empty() || token_id == agent.token_id();
  const bool secret_ok =
      agent.secret_sha256().empty() || Sha256::Hex(secret) == agent.secret_sha256();
  if (token_ok && secret_ok) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat(
      "info.name: '", agent.info().name(), "' belongs to live agent ", agent.id(), " (host ",
      agent.info().hostname().empty() ? "unknown" : agent.info().hostname(),
      ", last heartbeat ", Seconds1(since), " ago); this registration does not prove to be it (",
      token_ok ? "another registration secret" : "another agent token",
      "). Stop that agent, or give this one another --name; an agent restarted with its own "
      "--work-dir and token is recognised"));
}

absl::StatusOr<v1::RegisterAgentResponse> Coordinator::Register(const v1::AgentInfo& info,
                                                                const std::string& token_id,
                                                                const std::string& secret) {
  TAILOR_RETURN_IF_ERROR(ValidateAgentInfo(info));
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  v1::Agent agent;
  auto by_name = agent_by_name_.find(info.name());
  if (by_name != agent_by_name_.end()) {
    agent = agents_.at(by_name->second);
    TAILOR_RETURN_IF_ERROR(CheckSameAgentLocked(agent, token_id, secret, now));
  } else {
    agent.set_id(NewId("a", now));
    *agent.mutable_registered_at() = ToProto(now);
    agent.set_state(v1::AGENT_ONLINE);
  }
  *agent.mutable_info() = info;
  // The latest registration's agent token owns the agent's leases from now on (an agent that
  // restarts registers again with its own token); a registration without one (auth off, an
  // admin token) leaves the binding as it was.
  if (!token_id.empty()) agent.set_token_id(token_id);
  if (!secret.empty()) agent.set_secret_sha256(Sha256::Hex(secret));
  if (agent.info().max_concurrent_jobs() == 0) agent.mutable_info()->set_max_concurrent_jobs(1);
  if (agent.state() != v1::AGENT_DRAINED) agent.set_state(v1::AGENT_ONLINE);
  *agent.mutable_last_heartbeat() = ToProto(now);
  TAILOR_RETURN_IF_ERROR(
      CommitWrite([&agent](storage::CoordinatorStore& store) { return store.UpsertAgent(agent); }));
  agent_by_name_[info.name()] = agent.id();
  agents_[agent.id()] = agent;
  spdlog::info("agent={} registered name={} device_kind='{}' kinds={}", agent.id(), info.name(),
               info.device_kind(), info.job_kinds_size());
  v1::RegisterAgentResponse resp;
  resp.set_agent_id(agent.id());
  resp.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  resp.set_lease_ttl_ms(absl::ToInt64Milliseconds(options_.lease_ttl));
  return resp;
}

int Coordinator::ActiveLeasesOfLocked(const std::string& holder) {
  int n = 0;
  for (const auto& [id, lease] : leases_) n += (lease.holder == holder && !lease.cancelled);
  return n;
}

absl::StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(const v1::HeartbeatRequest& req) {
  const absl::Time now = clock_->Now();
  Effects fx;
  v1::HeartbeatResponse resp;
  {
    absl::MutexLock lock(&mu_);
    // Launcher-started workers heartbeat as their lease holder ("launcher:<name>") without
    // registering: they are not agents and take no further work.
    const bool launcher_holder = req.agent_id().rfind("launcher:", 0) == 0;
    auto agent = agents_.find(req.agent_id());
    if (agent == agents_.end() && !launcher_holder) {
      return absl::NotFoundError(
          absl::StrCat("agent '", req.agent_id(), "' is not registered; register again"));
    }
    if (agent != agents_.end()) {
      *agent->second.mutable_last_heartbeat() = ToProto(now);
      resp.set_drain(agent->second.state() == v1::AGENT_DRAINED);
    }
    UnitOfWork uow(this, now);
    const absl::Time expires = now + options_.lease_ttl;
    for (const std::string& lease_id : req.lease_ids()) {
      auto it = leases_.find(lease_id);
      if (it == leases_.end() || it->second.holder != req.agent_id()) {
        resp.add_unknown_lease_ids(lease_id);
      } else if (it->second.cancelled) {
        resp.add_cancelled_lease_ids(lease_id);
      } else {
        uow.ExtendLease(lease_id, expires);
        v1::Lease* l = resp.add_extended();
        l->set_id(lease_id);
        l->set_job_id(it->second.job_id);
        l->set_attempt(it->second.attempt);
        *l->mutable_expires_at() = ToProto(expires);
        l->set_ttl_ms(absl::ToInt64Milliseconds(options_.lease_ttl));
      }
    }
    TAILOR_RETURN_IF_ERROR(CommitLocked(uow, fx));
  }
  fx.Run();
  return resp;
}

absl::Status Coordinator::CheckLeaseHolder(const std::string& lease_id, const LeaseCaller& caller,
                                           absl::string_view field) {
  absl::MutexLock lock(&mu_);
  std::string holder;
  if (auto it = leases_.find(lease_id); it != leases_.end()) {
    holder = it->second.holder;
  } else {
    // Ended leases too: how an attempt ended is its holder's business only.
    TAILOR_ASSIGN_OR_RETURN(std::optional<storage::AttemptRow> row,
                            store_->FindAttempt(lease_id));
    if (!row.has_value()) return absl::OkStatus();
    holder = row->holder;
  }
  if (caller.agent_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": required: the agent id (or launcher:<name>) the lease was granted to"));
  }
  // The messages name the caller, never the holder.
  if (caller.agent_id != holder) {
    return absl::PermissionDeniedError(absl::StrCat(
        "lease '", lease_id, "' was not granted to ", caller.agent_id,
        "; only its holder may use it"));
  }
  if (caller.token_id.empty()) return absl::OkStatus();
  bool token_matches = caller.launcher_token;
  if (!IsLauncherHolder(holder)) {
    auto agent = agents_.find(holder);
    token_matches = agent != agents_.end() && agent->second.token_id() == caller.token_id;
  }
  if (!token_matches) {
    return absl::PermissionDeniedError(absl::StrCat(
        "lease '", lease_id, "' was not granted to token ", caller.token_id, ": ",
        IsLauncherHolder(holder) ? "a launcher's lease answers only to the launcher's token"
                                 : "it answers only to the token its agent registered with"));
  }
  return absl::OkStatus();
}

absl::Status Coordinator::CheckAgentCaller(const LeaseCaller& caller) {
  if (caller.token_id.empty()) return absl::OkStatus();
  if (IsLauncherHolder(caller.agent_id)) {
    if (caller.launcher_token) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(
        "agent_id: ", caller.agent_id, " is reserved for the coordinator's launcher token; ",
        "token ", caller.token_id, " may not use it"));
  }
  absl::MutexLock lock(&mu_);
  auto agent = agents_.find(caller.agent_id);
  if (agent == agents_.end()) return absl::OkStatus();  // the call answers NOT_FOUND itself
  if (agent->second.token_id().empty()) {
    return absl::NotFoundError(absl::StrCat("agent '", caller.agent_id,
                                            "' registered without a token; register again"));
  }
  if (agent->second.token_id() != caller.token_id) {
    return absl::PermissionDeniedError(
        absl::StrCat("agent '", caller.agent_id, "' registered with another token; token ",
                     caller.token_id, " may not act for it"));
  }
  return absl::OkStatus();
}

bool Coordinator::AnyLeaseHeldLocked(bool by_launcher) const {
  for (const auto& [id, lease] : leases_) {
    if ((lease.holder.rfind("launcher:", 0) == 0) == by_launcher) return true;
  }
  return false;
}

std::optional<std::string> Coordinator::PickForAgentLocked(const std::string& agent_id) {
  const v1::Agent& agent = agents_.at(agent_id);
  if (agent.state() == v1::AGENT_DRAINED) return std::nullopt;
  if (options_.isolate_measurements && AnyLeaseHeldLocked(/*by_launcher=*/true)) {
    return std::nullopt;
  }
  if (ActiveLeasesOfLocked(agent_id) >= std::max(1, agent.info().max_concurrent_jobs())) {
    return std::nullopt;
  }
  return queue_.Pick(agent.info(), [this](const std::string& id) -> const v1::Job* {
    // Pick calls the lookup only before it returns, still under mu_; the analysis does not
    // carry the lock into a lambda, so it is asserted here.
    mu_.AssertHeld();
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
  });
}

absl::StatusOr<v1::AcquireJobResponse> Coordinator::LeaseJobLocked(const std::string& job_id,
                                                                   const std::string& holder,
                                                                   Effects& fx) {
  const absl::Time now = clock_->Now();
  UnitOfWork uow(this, now);
  v1::Job& job = uow.Job(job_id);
  job.set_state(v1::JOB_LEASED);
  job.set_attempt(job.attempt() + 1);
  job.set_lease_id(NewId("l", now));
  job.set_agent_id(holder);
  job.clear_not_before();
  *job.mutable_updated_at() = ToProto(now);
  // A new attempt has no external id yet; the previous attempt's stays in its attempt row.
  job.clear_external_id();
  job.clear_external_state();
  job.clear_external_reason();
  if (holder.rfind("launcher:", 0) == 0) job.set_launcher(holder.substr(9));
  storage::AttemptRow row;
  row.lease_id = job.lease_id();
  row.job_id = job_id;
  row.attempt = job.attempt();
  row.holder = holder;
  row.state = "active";
  row.started_at = now;
  row.expires_at = now + options_.lease_ttl;
  uow.AddAttempt(row, LiveLease{row.lease_id, job_id, holder, row.attempt, row.expires_at, false});
  uow.Emit(job.campaign_id(), job_id, "job_leased",
           absl::StrCat("attempt ", job.attempt(), "/", job.resources().max_attempts(), " on ",
                        holder));
  AdvanceCampaignLocked(uow, job.campaign_id());

  TAILOR_RETURN_IF_ERROR(CommitLocked(uow, fx));
  return AssignmentLocked(leases_.at(row.lease_id));
}

v1::AcquireJobResponse Coordinator::AssignmentLocked(const LiveLease& lease) {
  const v1::Job& job = jobs_.at(lease.job_id);
  const LiveCampaign& campaign = campaigns_.at(job.campaign_id());
  v1::AcquireJobResponse resp;
  resp.set_assigned(true);
  resp.mutable_lease()->set_id(lease.lease_id);
  resp.mutable_lease()->set_job_id(lease.job_id);
  resp.mutable_lease()->set_attempt(lease.attempt);
  *resp.mutable_lease()->mutable_expires_at() = ToProto(lease.expires_at);
  resp.mutable_lease()->set_ttl_ms(absl::ToInt64Milliseconds(options_.lease_ttl));
  *resp.mutable_job() = job;
  resp.set_campaign_id(job.campaign_id());
  *resp.mutable_contract() = ContractForJobLocked(campaign.campaign, job);
  if (job.kind() == methods::jobs::kDriftCheck) AddDriftCheckInputsLocked(campaign.campaign, resp);
  for (const std::string& other : campaign.job_ids) {
    const v1::Job& dep = jobs_.at(other);
    if (std::find(job.depends_on().begin(), job.depends_on().end(), dep.key()) !=
        job.depends_on().end()) {
      (*resp.mutable_inputs())[dep.key()] = dep.output();
    }
  }
  return resp;
}

v1::DeploymentContract Coordinator::ContractForJobLocked(const v1::Campaign& campaign,
                                                        const v1::Job& job) {
  const v1::DeploymentContract& contract = campaign.contract();
  if (!HasRelativeBudget(contract.budget())) return contract;
  // A drift check judges the source student on the budgets it was held to.
  const std::string& from = job.kind() == methods::jobs::kDriftCheck
                                ? campaign.recompress().source_campaign_id()
                                : campaign.id();
  // Every lease reads this: a live campaign's jobs are read in place, not copied into a view
  // (CampaignWithJobsLocked); only a finished source campaign is read from the store.
  std::vector<const v1::Job*> jobs;
  absl::StatusOr<v1::Campaign> stored;
  if (auto live = campaigns_.find(from); live != campaigns_.end()) {
    for (const std::string& id : live->second.job_ids) jobs.push_back(&jobs_.at(id));
  } else {
    stored = CampaignWithJobsLocked(from);
    if (!stored.ok()) return contract;
    for (const v1::Job& j : stored->jobs()) jobs.push_back(&j);
  }
  const std::optional<v1::ProfileResult> profile = CampaignProfile(jobs);
  return ResolvedContract(contract, profile.has_value() ? &*profile : nullptr);
}

absl::StatusOr<v1::AcquireJobResponse> Coordinator::GetAssignment(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end() || it->second.cancelled) {
    return absl::FailedPreconditionError(
        absl::StrCat("lease '", lease_id, "' is not active (expired, completed or unknown)"));
  }
  return AssignmentLocked(it->second);
}

uint64_t Coordinator::AcquireJob(const v1::AcquireJobRequest& req, AcquireCallback done) {
  const absl::Time now = clock_->Now();
  Effects fx;
  uint64_t waiter_id = 0;
  {
    absl::MutexLock lock(&mu_);
    auto agent = agents_.find(req.agent_id());
    if (agent == agents_.end()) {
      fx.calls.push_back([done] {
        done(absl::NotFoundError("agent is not registered; register again"));
      });
    } else {
      *agent->second.mutable_last_heartbeat() = ToProto(now);
      queue_.Promote(now);
      std::optional<std::string> job_id = PickForAgentLocked(req.agent_id());
      absl::StatusOr<v1::AcquireJobResponse> resp;
      if (job_id.has_value()) resp = LeaseJobLocked(*job_id, req.agent_id(), fx);
      if (job_id.has_value() || req.wait_ms() <= 0) {
        if (!job_id.has_value()) resp = v1::AcquireJobResponse();
        fx.calls.push_back([done, resp] { done(resp); });
      } else {
        const absl::Duration wait =
            std::min(absl::Milliseconds(req.wait_ms()), options_.max_poll_wait);
        waiter_id = next_waiter_id_++;
        waiters_.push_back(Waiter{waiter_id, req.agent_id(), now + wait, std::move(done)});
      }
    }
  }
  fx.Run();
  return waiter_id;
}

bool Coordinator::CancelAcquire(uint64_t waiter_id) {
  absl::MutexLock lock(&mu_);
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->id == waiter_id) {
      waiters_.erase(it);
      return true;
    }
  }
  return false;
}

void Coordinator::DispatchLocked(Effects& fx) {
  queue_.Promote(clock_->Now());
  for (auto it = waiters_.begin(); it != waiters_.end() && queue_.size() > 0;) {
    std::optional<std::string> job_id = PickForAgentLocked(it->agent_id);
    if (!job_id.has_value()) {
      ++it;
      continue;
    }
    absl::StatusOr<v1::AcquireJobResponse> resp = LeaseJobLocked(*job_id, it->agent_id, fx);
    AcquireCallback done = std::move(it->done);
    it = waiters_.erase(it);
    fx.calls.push_back([done, resp] { done(resp); });
    if (!resp.ok()) break;  // the database refused; leave the rest for the next tick
  }
  if (launcher_ == nullptr) return;
  // Agents were served first, so a measurement that could start has started: launcher jobs
  // wait for it to finish rather than disturb it.
  if (options_.isolate_measurements && AnyLeaseHeldLocked(/*by_launcher=*/false)) return;
  for (const std::string& job_id : queue_.LauncherJobs(64)) {
    const std::string holder = absl::StrCat("launcher:", launcher_->name());
    absl::StatusOr<v1::AcquireJobResponse> resp = LeaseJobLocked(job_id, holder, fx);
    if (!resp.ok()) break;
    Launcher* launcher = launcher_;
    fx.calls.push_back([this, launcher, resp] {
      absl::Status st = launcher->Launch(*resp);
      if (!st.ok()) {
        v1::CompleteJobRequest fail;
        fail.set_lease_id(resp->lease().id());
        fail.set_success(false);
        fail.set_error(absl::StrCat("launch failed: ", st.message()));
        fail.set_retryable(st.code() == absl::StatusCode::kUnavailable ||
                           st.code() == absl::StatusCode::kResourceExhausted ||
                           st.code() == absl::StatusCode::kInternal);
        (void)CompleteJob(fail);
      }
    });
  }
}

void Coordinator::FailJobAttemptLocked(UnitOfWork& uow, const std::string& job_id,
                                       const std::string& error, bool retryable,
                                       const std::string& attempt_state) {
  v1::Job& job = uow.Job(job_id);
  uow.EndAttempt(job.lease_id(), attempt_state, error);
  job.clear_lease_id();
  job.clear_agent_id();
  job.set_error(error);
  *job.mutable_updated_at() = ToProto(uow.now());
  const int max_attempts = std::max(1, job.resources().max_attempts());
  if (retryable && job.attempt() < max_attempts) {
    const absl::Duration backoff = BackoffFor(job.attempt());
    job.set_state(v1::JOB_RUNNABLE);
    *job.mutable_not_before() = ToProto(uow.now() + backoff);
    uow.Emit(job.campaign_id(), job_id, "job_retry",
             absl::StrCat("attempt ", job.attempt(), "/", max_attempts, " failed (", error,
                          "); retry in ", Seconds1(backoff)));
  } else {
    job.set_state(v1::JOB_FAILED);
    if (retryable) {
      job.set_error(absl::StrCat(error, " (gave up after ", job.attempt(), " attempts)"));
    }
    uow.Emit(job.campaign_id(), job_id, "job_failed", job.error());
  }
  AdvanceCampaignLocked(uow, job.campaign_id());
}

absl::StatusOr<v1::ReportProgressResponse> Coordinator::ReportProgress(
    const v1::ReportProgressRequest& req) {
  const absl::Time now = clock_->Now();
  const double fraction = req.progress().fraction();
  if (!(fraction >= 0.0 && fraction <= 1.0)) {  // NaN fails both comparisons
    return absl::InvalidArgumentError(
        absl::StrCat("progress.fraction: must be in 0..1, got ", fraction));
  }
  Effects fx;
  v1::ReportProgressResponse resp;
  {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(req.lease_id());
    if (it == leases_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "lease '", req.lease_id(), "' is not active (expired, completed or unknown)"));
    }
    if (it->second.cancelled) {
      resp.set_cancelled(true);
      return resp;
    }
    if (req.progress().metrics_size() > 256 || req.progress().message().size() > 4096) {
      return absl::InvalidArgumentError(
          "progress: at most 256 metrics and a 4096-byte message");
    }
    UnitOfWork uow(this, now);
    const absl::Time expires = now + options_.lease_ttl;
    uow.ExtendLease(req.lease_id(), expires);
    // Workers re-send unchanged progress as a keepalive: extend the lease, log nothing.
    if (!google::protobuf::util::MessageDifferencer::Equals(
            uow.JobView(it->second.job_id).progress(), req.progress())) {
      v1::Job& job = uow.Job(it->second.job_id);
      *job.mutable_progress() = req.progress();
      *job.mutable_updated_at() = ToProto(now);
      uow.Emit(job.campaign_id(), job.id(), "job_progress", req.progress().message(),
               &req.progress());
    }
    TAILOR_RETURN_IF_ERROR(CommitLocked(uow, fx));
    resp.mutable_lease()->set_id(req.lease_id());
    resp.mutable_lease()->set_job_id(it->second.job_id);
    resp.mutable_lease()->set_attempt(it->second.attempt);
    *resp.mutable_lease()->mutable_expires_at() = ToProto(expires);
    resp.mutable_lease()->set_ttl_ms(absl::ToInt64Milliseconds(options_.lease_ttl));
  }
  fx.Run();
  return resp;
}

absl::StatusOr<v1::CompleteJobResponse> Coordinator::CompleteJob(
    const v1::CompleteJobRequest& req) {
  const absl::Time now = clock_->Now();
  if (req.output().ByteSizeLong() > static_cast<size_t>(options_.max_result_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("output: ", req.output().ByteSizeLong(),
                                                   " bytes exceeds the limit of ",
                                                   options_.max_result_bytes));
  }
  if (req.error().size() > 16384) {
    return absl::InvalidArgumentError("error: longer than 16384 bytes");
  }
  Effects fx;
  v1::CompleteJobResponse resp;
  {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(req.lease_id());
    if (it == leases_.end()) {
      // Not live: tell the caller precisely why, and apply nothing.
      TAILOR_ASSIGN_OR_RETURN(std::optional<storage::AttemptRow> row,
                              store_->FindAttempt(req.lease_id()));
      if (!row.has_value()) {
        return absl::NotFoundError(absl::StrCat("lease '", req.lease_id(), "' does not exist"));
      }
      if (row->state == "cancelled") {
        TAILOR_ASSIGN_OR_RETURN(*resp.mutable_job(), store_->GetJob(row->job_id));
        return resp;
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "lease '", req.lease_id(), "' is no longer active (attempt ", row->attempt, " ",
          row->state, "); this completion is not applied"));
    }
    const LiveLease lease = it->second;
    UnitOfWork uow(this, now);
    if (lease.cancelled) {
      // The campaign was cancelled while the job ran; the attempt is already closed.
      uow.leases_removed_.push_back(lease.lease_id);
      TAILOR_RETURN_IF_ERROR(CommitLocked(uow, fx));
      TAILOR_ASSIGN_OR_RETURN(*resp.mutable_job(), store_->GetJob(lease.job_id));
    } else {
      v1::Job& job = uow.Job(lease.job_id);
      const std::string refused =
          req.success() && job.kind() == methods::jobs::kProfile
              ? UnresolvableProfile(uow.CampaignView(job.campaign_id()).contract(), req.output())
              : "";
      if (req.success() && refused.empty()) {
        uow.EndAttempt(lease.lease_id, "succeeded", "");
        job.set_state(v1::JOB_SUCCEEDED);
        *job.mutable_output() = req.output();
        job.clear_error();
        // A launcher's last view of the job (e.g. Slurm's PENDING, polled before it started)
        // is stale once it reported success; the external id stays for reference.
        job.clear_external_state();
        job.clear_external_reason();
        job.mutable_progress()->set_fraction(1.0);
        *job.mutable_updated_at() = ToProto(now);
        uow.Emit(job.campaign_id(), job.id(), "job_succeeded",
                 absl::StrCat("attempt ", job.attempt(), " succeeded"));
        if (job.key() == methods::jobs::kVerify) CheckCostTableLocked(uow, job);
        if (job.key() == methods::jobs::kDistill) CheckQualityLocked(uow, job);
        if (job.key() == methods::jobs::kDriftCheck) ApplyDriftCheckLocked(uow, job);
        AdvanceCampaignLocked(uow, job.campaign_id());
      } else if (!refused.empty()) {
        FailJobAttemptLocked(uow, lease.job_id, refused, /*retryable=*/false, "failed");
      } else {
        FailJobAttemptLocked(uow, lease.job_id,
                             req.error().empty() ? "failed without a message" : req.error(),
                             req.retryable(), "failed");
      }
      TAILOR_RETURN_IF_ERROR(CommitLocked(uow, fx));
      *resp.mutable_job() = uow.Job(lease.job_id);
      DispatchLocked(fx);
    }
  }
  fx.Run();
  return resp;
}

void Coordinator::CheckCostTableLocked(UnitOfWork& uow, const v1::Job& verify) {
  const v1::Campaign& campaign = uow.CampaignView(verify.campaign_id());
  const methods::Method* method = methods::BuiltinMethods().Find(campaign.contract().method());
  if (method == nullptr || method->chooser_job(campaign.contract()).empty()) return;
  std::string table_id;
  const v1::JobOutput* chooser = nullptr;
  for (const std::string& id : uow.JobIds(campaign.id())) {
    const v1::Job& job = uow.JobView(id);
    if (job.kind() == methods::jobs::kProfile) {
      if (auto p = DetailOf<v1::ProfileResult>(job.output())) table_id = p->cost_table_id();
    }
    if (job.key() == method->chooser_job(campaign.contract())) chooser = &job.output();
  }
  if (table_id.empty() || chooser == nullptr) return;
  absl::StatusOr<v1::CostTable> table = store_->GetCostTable(table_id);
  if (!table.ok()) {
    spdlog::warn("campaign={} cost table {} not checked: {}", campaign.id(), table_id,
                 table.status().ToString());
    return;
  }
  std::optional<v1::CostTableCheck> check =
      JudgeCostTable(*table, chooser->predicted(), verify.output().measured(), campaign.id(),
                     verify.output().has_parent_beside() ? &verify.output().parent_beside()
                                                         : nullptr);
  if (!check.has_value()) return;
  *uow.Campaign(campaign.id()).mutable_cost_table_check() = *check;
  if (!check->suspect()) return;
  uow.Emit(campaign.id(), verify.id(), "cost_table_suspect",
           absl::StrCat("cost table ", table_id, " is suspect and will not be reused: ",
                        check->reason()));
  if (!table->suspect_reason().empty()) return;  // the first disagreement is the one named
  table->set_suspect_reason(check->reason());
  uow.UpdateCostTable(*table);
}

void Coordinator::CheckQualityLocked(UnitOfWork& uow, const v1::Job& distill) {
  const v1::Campaign& campaign = uow.CampaignView(distill.campaign_id());
  if (!campaign.contract().data().has_eval()) return;
  const auto result = DetailOf<v1::DistillResult>(distill.output());
  if (!result.has_value() || !result->has_eval()) return;  // skipped: no student to judge
  const v1::QualityCheck check = JudgeQuality(campaign.contract().quality(), result->eval());
  *uow.Campaign(campaign.id()).mutable_quality_check() = check;
  uow.Emit(campaign.id(), distill.id(), check.met() ? "quality_met" : "quality_missed",
           check.reason());
  if (!check.met()) {
    FailCampaignLocked(uow, campaign.id(), check.reason(), "the student missed a quality floor");
  }
}

void Coordinator::ExpireLeasesLocked(Effects& fx) {
  const absl::Time now = clock_->Now();
  std::vector<LiveLease> expired;
  for (const auto& [id, lease] : leases_) {
    if (lease.expires_at <= now) expired.push_back(lease);
  }
  if (expired.empty()) return;
  UnitOfWork uow(this, now);
  for (const LiveLease& lease : expired) {
    if (lease.cancelled || !uow.HasJob(lease.job_id)) {
      uow.leases_removed_.push_back(lease.lease_id);
      continue;
    }
    const std::string error =
        absl::StrCat("lease expired: no heartbeat from ", lease.holder, " for ",
                     Seconds1(options_.lease_ttl));
    FailJobAttemptLocked(uow, lease.job_id, error, /*retryable=*/true, "expired");
    if (launcher_ != nullptr && lease.holder.rfind("launcher:", 0) == 0) {
      Launcher* launcher = launcher_;
      std::string lease_id = lease.lease_id;
      fx.calls.push_back([launcher, lease_id] { launcher->Cancel(lease_id); });
    }
  }
  absl::Status st = CommitLocked(uow, fx);
  if (!st.ok()) spdlog::error("expiring {} leases failed: {}", expired.size(), st.ToString());
}

void Coordinator::Tick() {
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    queue_.Promote(now);
    ExpireLeasesLocked(fx);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->deadline <= now) {
        AcquireCallback done = std::move(it->done);
        fx.calls.push_back([done] { done(v1::AcquireJobResponse()); });
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    DispatchLocked(fx);
  }
  fx.Run();
}

absl::Status Coordinator::RecordLaunch(const std::string& lease_id,
                                       const std::string& external_id,
                                       const std::string& state, const std::string& reason) {
  if (external_id.empty() || external_id.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "external_id: must be 1..128 characters, got ", external_id.size()));
  }
  if (state.size() > 64 || reason.size() > 256) {
    return absl::InvalidArgumentError("external state or reason too long (64/256 characters)");
  }
  Effects fx;
  {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(lease_id);
    if (it == leases_.end() || it->second.cancelled) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease '", lease_id, "' is not active (expired, completed or unknown)"));
    }
    const LiveLease& lease = it->second;
    if (lease.holder.rfind("launcher:", 0) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease '", lease_id, "' is held by agent ", lease.holder,
                       ", not by a launcher"));
    }
    if (!lease.external_id.empty() && lease.external_id != external_id) {
      return absl::FailedPreconditionError(
          absl::StrCat("lease '", lease_id, "' is already recorded as ", lease.external_id,
                       "; refusing to record ", external_id));
    }
    const std::string launcher = lease.holder.substr(9);
    const v1::Job& view = jobs_.at(lease.job_id);
    const bool first = lease.external_id.empty();
    if (!first && view.external_state() == state && view.external_reason() == reason) {
      return absl::OkStatus();  // nothing new
    }
    UnitOfWork uow(this, clock_->Now());
    v1::Job& job = uow.Job(lease.job_id);
    const std::string described = absl::StrCat(
        launcher, " job ", external_id, state.empty() ? "" : " ", state,
        reason.empty() ? "" : absl::StrCat(" (", reason, ")"));
    if (first) {
      uow.SetAttemptExternal(lease_id, launcher, external_id);
      job.set_launcher(launcher);
      job.set_external_id(external_id);
      uow.Emit(job.campaign_id(), job.id(), "job_launched",
               absl::StrCat("attempt ", lease.attempt, " is ", described));
    } else if (view.external_state() != state) {
      uow.Emit(job.campaign_id(), job.id(), "job_external_state", described);
    }
    job.set_external_state(state);
    job.set_external_reason(reason);
    *job.mutable_updated_at() = ToProto(uow.now());
    TAILOR_RETURN_IF_ERROR(CommitLocked(uow, fx));
  }
  fx.Run();
  return absl::OkStatus();
}

absl::StatusOr<LeaseInfo> Coordinator::CheckLease(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end() || it->second.cancelled) {
    return absl::FailedPreconditionError(
        absl::StrCat("lease '", lease_id, "' is not active (expired, completed or unknown)"));
  }
  const v1::Job& job = jobs_.at(it->second.job_id);
  LeaseInfo info;
  info.lease_id = lease_id;
  info.attempt = it->second.attempt;
  info.job_id = job.id();
  info.job_kind = job.kind();
  info.campaign_id = job.campaign_id();
  info.fingerprint = campaigns_.at(job.campaign_id()).campaign.fingerprint();
  return info;
}

absl::StatusOr<v1::Artifact> Coordinator::RecordArtifact(const LeaseInfo& lease,
                                                         const std::string& kind,
                                                         const std::string& name,
                                                         const storage::BlobInfo& blob) {
  const absl::Time now = clock_->Now();
  v1::Artifact a;
  a.set_digest(blob.digest);
  a.set_size_bytes(blob.size_bytes);
  a.set_kind(kind);
  a.set_name(name);
  a.set_campaign_id(lease.campaign_id);
  a.set_job_id(lease.job_id);
  a.set_attempt(lease.attempt);
  *a.mutable_created_at() = ToProto(now);
  Effects fx;
  if (lease.lease_id.empty()) {
    // An admin upload: a blob of no campaign (e.g. a parent model). The row keeps it in
    // backups; only admins and agents may download it (it belongs to no team).
    absl::MutexLock lock(&mu_);
    TAILOR_RETURN_IF_ERROR(
        CommitWrite([&a](storage::CoordinatorStore& store) { return store.InsertArtifact(a); }));
    spdlog::info("admin upload: {} '{}' {} bytes sha256:{}", kind, name, blob.size_bytes,
                 blob.digest);
    return a;
  }
  {
    absl::MutexLock lock(&mu_);
    if (campaigns_.count(lease.campaign_id) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", lease.campaign_id, " already finished"));
    }
    // Checked again after the bytes arrived: an upload can outlive its lease, and a dead
    // attempt's artifact must not be listed beside its retry's as if it counted.
    if (auto live = leases_.find(lease.lease_id);
        live == leases_.end() || live->second.cancelled) {
      return absl::FailedPreconditionError(absl::StrCat(
          "lease '", lease.lease_id, "' ended while its upload ran (expired, completed or ",
          "cancelled): artifact '", name, "' is not recorded"));
    }
    UnitOfWork uow(this, now);
    uow.Emit(lease.campaign_id, lease.job_id, "artifact_uploaded",
             absl::StrCat(kind, " '", name, "' ", blob.size_bytes, " bytes sha256:",
                          blob.digest.substr(0, 12)));
    TAILOR_RETURN_IF_ERROR(
        CommitWrite([&a, &uow](storage::CoordinatorStore& store) -> absl::Status {
          TAILOR_RETURN_IF_ERROR(store.InsertArtifact(a));
          for (const auto& e : uow.events_) TAILOR_RETURN_IF_ERROR(store.AppendEvent(e));
          return absl::OkStatus();
        }));
    for (const auto& [id, seq] : uow.seqs_) campaigns_[id].last_seq = seq;
    NotifyLocked(lease.campaign_id, fx);
  }
  fx.Run();
  return a;
}

absl::StatusOr<v1::CostTable> Coordinator::PutCostTable(const v1::PutCostTableRequest& req) {
  TAILOR_ASSIGN_OR_RETURN(LeaseInfo lease, CheckLease(req.lease_id()));
  if (lease.job_kind != methods::jobs::kProfile) {
    return absl::FailedPreconditionError(absl::StrCat(
        "only profile jobs store cost tables; lease belongs to a '", lease.job_kind, "' job"));
  }
  if (req.table().entries_size() == 0 || req.table().entries_size() > kMaxCostEntries) {
    return absl::InvalidArgumentError(absl::StrCat("table.entries: must hold 1..",
                                                   kMaxCostEntries, " entries, got ",
                                                   req.table().entries_size()));
  }
  const std::string& parent = req.table().parent_architecture();
  if (!parent.empty() && !IsSha256Hex(parent)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table.parent_architecture: must be empty or 64 lowercase hex digits, got ",
        parent.size(), " bytes"));
  }
  if (req.table().has_parent_measured()) {
    TAILOR_RETURN_IF_ERROR(CheckParentMeasured(req.table().parent_measured()));
  }
  const absl::Time now = clock_->Now();
  v1::CostTable table = req.table();
  table.set_id(NewId("ct", now));
  table.set_fingerprint(lease.fingerprint);
  table.set_campaign_id(lease.campaign_id);
  table.set_job_id(lease.job_id);
  *table.mutable_created_at() = ToProto(now);
  table.clear_suspect_reason();  // the coordinator's verdict, never the agent's to set
  absl::MutexLock lock(&mu_);
  TAILOR_RETURN_IF_ERROR(CommitWrite(
      [&table](storage::CoordinatorStore& store) { return store.InsertCostTable(table); }));
  spdlog::info("campaign={} job={} cost table {} stored ({} entries, latency MAPE {:.2f}%)",
               lease.campaign_id, lease.job_id, table.id(), table.entries_size(),
               100 * table.latency_mape());
  return table;
}

}  // namespace tailor::coordinator
