#include "common/agent_runtime.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace tailor {

namespace fs = std::filesystem;

namespace {

// The pause between heartbeats while they fail (each of them waits for the coordinator).
constexpr absl::Duration kFailingBeatPause = absl::Milliseconds(100);

std::string SanitizeForPath(absl::string_view s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    out.push_back(ok ? c : '_');
  }
  return out.empty() ? "job" : out;
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateRegistrationSecret(const std::string& work_dir) {
  const std::string path = (fs::path(work_dir) / "agent.secret").string();
  // O_EXCL: of two agents started on one work dir at once, one creates and both read it.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    std::string random(32, '\0');
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    urandom.read(random.data(), static_cast<std::streamsize>(random.size()));
    const std::string hex = absl::BytesToHexString(random) + "\n";
    const bool written = urandom.good() &&
                         ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size()) &&
                         ::fsync(fd) == 0;
    ::close(fd);
    if (!written) {
      ::unlink(path.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write ", path));
    }
  } else if (errno != EEXIST) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  const std::string secret(absl::StripAsciiWhitespace(content.str()));
  const bool valid = secret.size() == 64 &&
                     std::all_of(secret.begin(), secret.end(), [](char c) {
                       return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
                     });
  if (!in || !valid) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a registration secret (64 hex characters); delete it to make a new one "
              "(the coordinator then accepts this agent's name once the old registration is "
              "offline)"));
  }
  return secret;
}

// ---------------------------------------------------------------------------------------------
// Backoff and error classification

Backoff::Backoff(absl::Duration initial, absl::Duration max)
    : initial_(initial), max_(max), current_(initial), rng_(std::random_device{}()) {}

absl::Duration Backoff::Next() {
  const absl::Duration d = current_;
  current_ = std::min(current_ * 2, max_);
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  return d * jitter(rng_);
}

void Backoff::Reset() { current_ = initial_; }

absl::Duration OutageClock::Failed(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (since_ == absl::InfiniteFuture()) since_ = now;
  return now - since_;
}

void OutageClock::Succeeded() {
  absl::MutexLock lock(&mu_);
  since_ = absl::InfiniteFuture();
}

absl::Duration OutageClock::Outage(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return since_ == absl::InfiniteFuture() ? absl::ZeroDuration() : now - since_;
}

OutageRetry::OutageRetry(const AgentRuntimeOptions& options, OutageClock* shared)
    : clock_(options.clock),
      give_up_(options.unreachable_give_up),
      backoff_(options.backoff_initial, options.backoff_max),
      outage_(shared != nullptr ? shared : &own_) {}

bool OutageRetry::ShouldRetry(const absl::Status& status) {
  if (status.ok()) {
    outage_->Succeeded();
    backoff_.Reset();
    return false;
  }
  if (!IsTransientRpcError(status.code())) return false;
  const absl::Duration lasted = outage_->Failed(clock_->Now());
  gave_up_ = give_up_ > absl::ZeroDuration() && lasted >= give_up_;
  return !gave_up_;
}

absl::Duration OutageRetry::NextDelay() {
  const absl::Duration step = backoff_.Next();
  if (give_up_ <= absl::ZeroDuration()) return step;
  return std::max(absl::ZeroDuration(), std::min(step, give_up_ - outage()));
}

absl::Duration OutageRetry::outage() const { return outage_->Outage(clock_->Now()); }

bool IsRetryableJobError(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

bool IsTransientRpcError(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded;
}

bool IsLeaseLostError(absl::StatusCode code) {
  return code == absl::StatusCode::kFailedPrecondition || code == absl::StatusCode::kNotFound;
}

const char* JobStopReasonName(JobStopReason reason) {
  switch (reason) {
    case JobStopReason::kNone:
      return "none";
    case JobStopReason::kCancelled:
      return "cancelled";
    case JobStopReason::kLeaseLost:
      return "lease lost";
    case JobStopReason::kShutdown:
      return "agent shutdown";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// AgentRuntime

AgentRuntime::AgentRuntime(AgentRuntimeOptions options)
    : options_(std::move(options)),
      channel_(MakeChannel(options_.coordinator, ChannelOptions{options_.token, options_.ca_cert})),
      stub_(v1::AgentService::NewStub(channel_)),
      agent_id_(options_.agent_id),
      heartbeat_interval_(options_.default_heartbeat_interval) {}

AgentRuntime::~AgentRuntime() {
  Stop();
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, job] : jobs_) {
      if (job.thread.joinable()) threads.push_back(std::move(job.thread));
    }
  }
  for (auto& t : threads) t.join();
}

void AgentRuntime::RegisterHandler(const std::string& kind, JobHandler handler) {
  handlers_[kind] = std::move(handler);
}

std::string AgentRuntime::agent_id() const {
  absl::MutexLock lock(&mu_);
  return agent_id_;
}

bool AgentRuntime::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

bool AgentRuntime::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool AgentRuntime::completion_deadline_passed() const {
  absl::MutexLock lock(&mu_);
  return absl::Now() > completion_deadline_;
}

int AgentRuntime::RunningJobsLocked() const {
  int n = 0;
  for (const auto& [id, job] : jobs_) n += job.done ? 0 : 1;
  return n;
}

bool AgentRuntime::CanAcquireLocked() const {
  return stopping_ ||
         (!draining_ && RunningJobsLocked() < std::max(1, options_.max_concurrent_jobs));
}

bool AgentRuntime::AllJobsDoneOrStopNowLocked() const {
  return stop_now_ || RunningJobsLocked() == 0;
}

bool AgentRuntime::AllJobsDoneOrStoppingLocked() const {
  return stopping_ || RunningJobsLocked() == 0;
}

int AgentRuntime::ActiveJobCountForTest() const {
  absl::MutexLock lock(&mu_);
  return RunningJobsLocked();
}

void AgentRuntime::Stop() {
  absl::MutexLock lock(&mu_);
  if (!stopping_) spdlog::info("stopping: no new jobs; running jobs may finish");
  stopping_ = true;
  // Do not wait out a 10 s long-poll; a job assigned in this instant is handed back below.
  if (acquire_ctx_ != nullptr) acquire_ctx_->TryCancel();
}

void AgentRuntime::StopNow() {
  Stop();
  absl::MutexLock lock(&mu_);
  stop_now_ = true;
}

bool AgentRuntime::SleepUnlessStopping(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

absl::Status AgentRuntime::Run() {
  if (handlers_.empty()) {
    return absl::FailedPreconditionError("no job handlers registered; nothing to run");
  }
  std::error_code ec;
  fs::create_directories(fs::path(options_.work_dir) / "jobs", ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create work dir ", options_.work_dir, ": ", ec.message()));
  }
  TAILOR_ASSIGN_OR_RETURN(registration_secret_, LoadOrCreateRegistrationSecret(options_.work_dir));
  if (!RegisterWithRetry().ok()) return absl::OkStatus();  // stopped before registering
  std::thread heartbeat([this] { HeartbeatLoop(); });
  AcquireLoop();
  ShutdownJobs();
  {
    absl::MutexLock lock(&mu_);
    heartbeat_stop_ = true;
  }
  heartbeat.join();
  ReapFinishedJobs();
  spdlog::info("agent stopped");
  return absl::OkStatus();
}

absl::Status AgentRuntime::RegisterOnce() {
  v1::RegisterAgentRequest request;
  v1::AgentInfo* info = request.mutable_info();
  *info = options_.info;
  info->clear_job_kinds();
  for (const auto& [kind, handler] : handlers_) info->add_job_kinds(kind);
  info->set_max_concurrent_jobs(std::max(1, options_.max_concurrent_jobs));
  request.set_registration_secret(registration_secret_);
  v1::RegisterAgentResponse response;
  auto rpc = MakeContext(options_.rpc_timeout, options_.token);
  TAILOR_RETURN_IF_ERROR(FromGrpcStatus(stub_->Register(rpc.get(), request, &response)));
  absl::MutexLock lock(&mu_);
  agent_id_ = response.agent_id();
  if (response.heartbeat_interval_ms() > 0) {
    heartbeat_interval_ = absl::Milliseconds(response.heartbeat_interval_ms());
  }
  spdlog::info("registered with {} as agent {} (name {}, device kind '{}', heartbeat {})",
               options_.coordinator, agent_id_, options_.info.name(), options_.info.device_kind(),
               absl::FormatDuration(heartbeat_interval_));
  return absl::OkStatus();
}

absl::Status AgentRuntime::RegisterWithRetry() {
  Backoff backoff(options_.backoff_initial, options_.backoff_max);
  while (!stopping()) {
    const absl::Status status = RegisterOnce();
    if (status.ok()) return status;
    const absl::Duration delay = backoff.Next();
    // Never exit because the coordinator is down or refuses us: an operator can fix the
    // coordinator or the token without restarting every agent.
    spdlog::warn("cannot register with {}: {}; retrying in {}", options_.coordinator,
                 status.ToString(), absl::FormatDuration(delay));
    SleepUnlessStopping(delay);
  }
  return absl::CancelledError("stopped before registering");
}

void AgentRuntime::HeartbeatLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // While the coordinator is unreachable each beat itself waits for it (wait_for_ready,
      // HeartbeatOnce), so the next one follows at once: the beat that gets through is sent
      // as soon as the coordinator serves again, not up to an interval later.
      const absl::Duration pause = coordinator_unreachable_ && options_.wait_for_coordinator
                                       ? std::min(heartbeat_interval_, kFailingBeatPause)
                                       : heartbeat_interval_;
      mu_.AwaitWithTimeout(absl::Condition(&heartbeat_stop_), pause);
      if (heartbeat_stop_) return;
    }
    if (agent_id().empty()) {
      KeepaliveByProgress();
    } else {
      HeartbeatOnce();
    }
  }
}

void AgentRuntime::HeartbeatOnce() {
  v1::HeartbeatRequest request;
  std::map<std::string, std::shared_ptr<JobContext>> running;
  {
    absl::MutexLock lock(&mu_);
    request.set_agent_id(agent_id_);
    for (const auto& [lease, job] : jobs_) {
      if (job.done) continue;
      request.add_lease_ids(lease);
      running[lease] = job.ctx;
    }
  }
  v1::HeartbeatResponse response;
  bool failing = false;
  absl::Duration interval;
  {
    absl::MutexLock lock(&mu_);
    failing = coordinator_unreachable_ && options_.wait_for_coordinator;
    interval = heartbeat_interval_;
  }
  // During an outage a fail-fast call finds the channel in backoff and fails at once, and
  // nothing drives the reconnect but gRPC's 5 s backup poller: agents took 10-20 s to come
  // back (issue #19). A waiting call drives it, bounded by one interval.
  auto rpc = MakeContext(failing ? std::min(interval, options_.rpc_timeout) : options_.rpc_timeout,
                         options_.token);
  if (failing) rpc->set_wait_for_ready(true);
  const absl::Status status =
      FromGrpcStatus(stub_->Heartbeat(rpc.get(), request, &response));
  if (!status.ok()) {
    if (status.code() == absl::StatusCode::kNotFound) {
      // The coordinator forgot us (e.g. its database was reset): registering again by the same
      // name gets an id; leases we hold are reported as unknown on the next beat if gone.
      spdlog::warn("coordinator does not know agent {}; registering again", request.agent_id());
      const absl::Status reg = RegisterOnce();
      if (!reg.ok()) spdlog::warn("re-register failed: {}", reg.ToString());
      return;
    }
    absl::MutexLock lock(&mu_);
    if (!heartbeat_failing_) {
      spdlog::warn("heartbeat failed: {}; leases survive until their TTL", status.ToString());
    }
    heartbeat_failing_ = true;
    coordinator_unreachable_ = IsTransientRpcError(status.code());
    return;
  }
  bool drain_changed = false;
  {
    absl::MutexLock lock(&mu_);
    if (heartbeat_failing_) spdlog::info("heartbeats delivered again");
    heartbeat_failing_ = false;
    coordinator_unreachable_ = false;
    drain_changed = draining_ != response.drain();
    draining_ = response.drain();
  }
  if (drain_changed) {
    spdlog::info(response.drain() ? "coordinator drains this agent: finishing current jobs, "
                                    "acquiring no more"
                                  : "drain lifted: acquiring jobs again");
  }
  for (const std::string& lease : response.cancelled_lease_ids()) {
    if (auto it = running.find(lease); it != running.end()) {
      it->second->RequestStop(JobStopReason::kCancelled);
    }
  }
  for (const std::string& lease : response.unknown_lease_ids()) {
    if (auto it = running.find(lease); it != running.end()) {
      it->second->RequestStop(JobStopReason::kLeaseLost);
    }
  }
}

void AgentRuntime::KeepaliveByProgress() {
  std::vector<std::shared_ptr<JobContext>> running;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [lease, job] : jobs_) {
      if (!job.done) running.push_back(job.ctx);
    }
  }
  // Re-sending the last progress extends the lease and tells us about cancellation, without
  // needing an agent id (launcher-started workers never registered).
  for (const auto& ctx : running) {
    if (!ctx->Cancelled()) ctx->SendProgress(ctx->last_progress()).IgnoreError();
  }
}

void AgentRuntime::AcquireLoop() {
  Backoff backoff(options_.backoff_initial, options_.backoff_max);
  while (true) {
    ReapFinishedJobs();
    {
      absl::MutexLock lock(&mu_);
      // Wakes when a job finishes or Stop() is called; the timeout re-checks drain, which the
      // heartbeat thread lifts (it is logged there).
      mu_.AwaitWithTimeout(absl::Condition(this, &AgentRuntime::CanAcquireLocked),
                           absl::Seconds(1));
      if (stopping_) return;
      if (!CanAcquireLocked()) continue;
    }
    const absl::Status status = AcquireOnce();
    if (status.ok()) {
      backoff.Reset();
      continue;
    }
    if (stopping()) return;
    if (status.code() == absl::StatusCode::kNotFound) {
      spdlog::warn("coordinator does not know agent {}; registering again", agent_id());
      if (!RegisterWithRetry().ok()) return;
      continue;
    }
    const absl::Duration delay = backoff.Next();
    spdlog::warn("AcquireJob failed: {}; retrying in {}", status.ToString(),
                 absl::FormatDuration(delay));
    SleepUnlessStopping(delay);
  }
}

absl::Status AgentRuntime::AcquireOnce() {
  v1::AcquireJobRequest request;
  request.set_agent_id(agent_id());
  request.set_wait_ms(absl::ToInt64Milliseconds(options_.poll_wait));
  v1::AcquireJobResponse response;
  auto rpc = MakeContext(options_.poll_wait + options_.poll_slack, options_.token);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    acquire_ctx_ = rpc.get();
  }
  const grpc::Status status = stub_->AcquireJob(rpc.get(), request, &response);
  bool stop = false;
  {
    absl::MutexLock lock(&mu_);
    acquire_ctx_ = nullptr;
    stop = stopping_;
  }
  TAILOR_RETURN_IF_ERROR(FromGrpcStatus(status));
  if (!response.assigned()) return absl::OkStatus();
  JobHandler handler;
  if (auto it = handlers_.find(response.job().kind()); it != handlers_.end()) {
    handler = it->second;
  } else {
    const std::string kind = response.job().kind();
    handler = [kind](JobContext&) -> absl::StatusOr<v1::JobOutput> {
      return absl::UnimplementedError(absl::StrCat("this agent has no handler for '", kind, "'"));
    };
  }
  StartJob(response, std::move(handler));
  if (stop) {
    // Assigned while we were stopping: hand it back now as a retryable failure rather than
    // letting the lease time out.
    absl::MutexLock lock(&mu_);
    if (auto it = jobs_.find(response.lease().id()); it != jobs_.end()) {
      it->second.ctx->RequestStop(JobStopReason::kShutdown);
    }
  }
  return absl::OkStatus();
}

std::string AgentRuntime::JobDirFor(const v1::AcquireJobResponse& a) const {
  const std::string id = a.job().id().empty() ? a.lease().id() : a.job().id();
  return (fs::path(options_.work_dir) / "jobs" /
          absl::StrCat(SanitizeForPath(id), "-a", a.lease().attempt()))
      .string();
}

void AgentRuntime::StartJob(const v1::AcquireJobResponse& assignment, JobHandler handler) {
  auto ctx = std::make_shared<JobContext>(this, assignment, JobDirFor(assignment));
  const std::string lease = assignment.lease().id();
  absl::MutexLock lock(&mu_);
  if (jobs_.contains(lease)) {
    spdlog::warn("lease {} handed out twice; ignoring the duplicate", lease);
    return;
  }
  ActiveJob& job = jobs_[lease];
  job.ctx = ctx;
  // The thread marks itself done under mu_, which we hold, so it cannot finish before it is
  // stored.
  job.thread = std::thread([this, ctx, lease, handler = std::move(handler)] {
    JobOutcome outcome = ExecuteJob(ctx, handler);
    absl::MutexLock lock(&mu_);
    ActiveJob& self = jobs_[lease];
    self.done = true;
    self.outcome = std::move(outcome);
  });
}

JobOutcome AgentRuntime::ExecuteJob(const std::shared_ptr<JobContext>& ctx,
                                    const JobHandler& handler) {
  const v1::Job& job = ctx->job();
  spdlog::info("job {} ({}, attempt {}, lease {}) started", job.id(), job.kind(),
               ctx->lease().attempt(), ctx->lease_id());
  const absl::Time start = absl::Now();
  std::error_code ec;
  fs::create_directories(ctx->work_dir(), ec);
  absl::StatusOr<v1::JobOutput> result;
  if (ec) {
    result = absl::InternalError(
        absl::StrCat("cannot create job dir ", ctx->work_dir(), ": ", ec.message()));
  } else if (ctx->Cancelled()) {
    result = absl::CancelledError("stopped before start");
  } else {
    result = handler(*ctx);
  }
  JobOutcome outcome;
  outcome.handler_status = result.status();
  outcome.stop_reason = ctx->stop_reason();
  v1::CompleteJobRequest request;
  request.set_lease_id(ctx->lease_id());
  request.set_agent_id(agent_id());
  switch (outcome.stop_reason) {
    case JobStopReason::kLeaseLost:
      // Someone else may hold the job now; completing would at best be rejected.
      spdlog::warn("job {}: lease {} lost; abandoning without completing", job.id(),
                   ctx->lease_id());
      if (!options_.keep_job_dirs) fs::remove_all(ctx->work_dir(), ec);
      return outcome;
    case JobStopReason::kCancelled:
      request.set_error("cancelled");
      request.set_retryable(false);
      break;
    case JobStopReason::kShutdown:
      request.set_error("agent stopped before the job finished");
      request.set_retryable(true);
      break;
    case JobStopReason::kNone:
      if (result.ok()) {
        request.set_success(true);
        *request.mutable_output() = *std::move(result);
      } else {
        request.set_error(std::string(result.status().message()));
        request.set_retryable(IsRetryableJobError(result.status().code()));
      }
      break;
  }
  outcome.success = request.success();
  spdlog::info("job {} finished after {}: {}", job.id(),
               absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1))),
               request.success() ? "success" : absl::StrCat("failed: ", request.error()));
  outcome.completed = CompleteWithRetry(*ctx, std::move(request));
  if (!options_.keep_job_dirs) fs::remove_all(ctx->work_dir(), ec);
  return outcome;
}

bool AgentRuntime::CompleteWithRetry(JobContext& ctx, v1::CompleteJobRequest request) {
  OutageRetry retry(options_, ctx.outage_clock());
  while (true) {
    v1::CompleteJobResponse response;
    auto rpc = MakeContext(options_.rpc_timeout, options_.token);
    const absl::Status status =
        FromGrpcStatus(stub_->CompleteJob(rpc.get(), request, &response));
    if (status.ok()) return true;
    if (IsLeaseLostError(status.code())) {
      // The server never applies a completion twice, so this also covers "our earlier attempt
      // did land but the answer was lost".
      spdlog::warn("job {}: completion rejected, lease gone: {}", ctx.job().id(),
                   status.ToString());
      return false;
    }
    if (IsTransientRpcError(status.code())) {
      if (ctx.stop_reason() == JobStopReason::kLeaseLost) return false;
      if (completion_deadline_passed()) {
        spdlog::error("job {}: giving up on completion at shutdown: {}", ctx.job().id(),
                      status.ToString());
        return false;
      }
      // The coordinator may be restarting; leases survive restarts until their TTL and the
      // heartbeat thread keeps extending ours, so keep trying, within the policy's limit.
      if (!retry.ShouldRetry(status)) {
        spdlog::error("job {}: the coordinator has been unreachable for {} (limit {}); giving "
                      "up on completing: {}",
                      ctx.job().id(),
                      absl::FormatDuration(absl::Trunc(retry.outage(), absl::Seconds(1))),
                      absl::FormatDuration(options_.unreachable_give_up), status.ToString());
        return false;
      }
      const absl::Duration delay = retry.NextDelay();
      spdlog::warn("job {}: CompleteJob failed: {}; retrying in {}", ctx.job().id(),
                   status.ToString(), absl::FormatDuration(delay));
      absl::SleepFor(delay);
      continue;
    }
    if (request.success()) {
      // E.g. the result is too large or malformed: report a failure so the job does not sit
      // leased until the TTL expires.
      spdlog::error("job {}: coordinator rejected the result: {}", ctx.job().id(),
                    status.ToString());
      request.set_success(false);
      request.clear_output();
      request.set_error(absl::StrCat("coordinator rejected the result: ", status.message()));
      request.set_retryable(false);
      continue;
    }
    spdlog::error("job {}: coordinator rejected the failure report: {}", ctx.job().id(),
                  status.ToString());
    return false;
  }
}

void AgentRuntime::ReapFinishedJobs() {
  std::vector<std::thread> finished;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (it->second.done) {
        if (it->second.thread.joinable()) finished.push_back(std::move(it->second.thread));
        jobs_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : finished) t.join();
}

void AgentRuntime::ShutdownJobs() {
  std::vector<std::shared_ptr<JobContext>> unfinished;
  {
    absl::MutexLock lock(&mu_);
    const int running = RunningJobsLocked();
    if (running > 0 && !stop_now_) {
      spdlog::info("waiting up to {} for {} running job(s)",
                   absl::FormatDuration(options_.stop_grace), running);
    }
    mu_.AwaitWithTimeout(absl::Condition(this, &AgentRuntime::AllJobsDoneOrStopNowLocked),
                         options_.stop_grace);
    for (const auto& [lease, job] : jobs_) {
      if (!job.done) unfinished.push_back(job.ctx);
    }
    if (!unfinished.empty()) completion_deadline_ = absl::Now() + options_.completion_grace;
  }
  if (!unfinished.empty()) {
    spdlog::warn("cancelling {} job(s) still running at shutdown", unfinished.size());
  }
  for (const auto& ctx : unfinished) ctx->RequestStop(JobStopReason::kShutdown);
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [lease, job] : jobs_) {
      if (job.thread.joinable()) threads.push_back(std::move(job.thread));
    }
  }
  // Handlers must observe Cancelled(); one that does not keeps us here, which is the honest
  // outcome (exiting would orphan its device work).
  for (auto& t : threads) t.join();
}

absl::Status AgentRuntime::RunAssigned(const v1::AcquireJobResponse& assignment,
                                       const JobHandler& handler) {
  if (!assignment.assigned() || assignment.lease().id().empty()) {
    return absl::InvalidArgumentError("RunAssigned needs an assignment with a lease id");
  }
  std::error_code ec;
  fs::create_directories(fs::path(options_.work_dir) / "jobs", ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create work dir ", options_.work_dir, ": ", ec.message()));
  }
  {
    absl::MutexLock lock(&mu_);
    // Without an agent id the keepalive is a progress re-send, with one ("launcher:<name>",
    // never registered, so never told an interval) a heartbeat; either way every third of the
    // TTL, which leaves two chances before the lease expires whatever --lease-ttl is.
    if (assignment.lease().ttl_ms() > 0) {
      heartbeat_interval_ =
          std::max(absl::Milliseconds(assignment.lease().ttl_ms() / 3), absl::Milliseconds(20));
    }
    heartbeat_stop_ = false;
  }
  StartJob(assignment, handler);
  std::thread keepalive([this] { HeartbeatLoop(); });
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &AgentRuntime::AllJobsDoneOrStoppingLocked));
  }
  ShutdownJobs();
  JobOutcome outcome;
  {
    absl::MutexLock lock(&mu_);
    heartbeat_stop_ = true;
    if (auto it = jobs_.find(assignment.lease().id()); it != jobs_.end()) {
      outcome = it->second.outcome;
      jobs_.erase(it);
    }
  }
  keepalive.join();
  switch (outcome.stop_reason) {
    case JobStopReason::kLeaseLost:
      return absl::AbortedError("lease lost; job abandoned");
    case JobStopReason::kCancelled:
      return absl::CancelledError("job cancelled by the coordinator");
    case JobStopReason::kShutdown:
      return absl::CancelledError("stopped before the job finished");
    case JobStopReason::kNone:
      break;
  }
  if (!outcome.handler_status.ok()) return outcome.handler_status;
  if (!outcome.completed) {
    return absl::AbortedError("job finished but the coordinator did not accept the completion");
  }
  return absl::OkStatus();
}

}  // namespace tailor
