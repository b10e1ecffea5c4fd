#include "coordinator/launchers/slurm_launcher.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {
namespace {

bool IsGone(const absl::Status& st) {
  return st.code() == absl::StatusCode::kFailedPrecondition ||
         st.code() == absl::StatusCode::kNotFound;
}

// Single-quoted for /bin/sh: nothing inside is expanded.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Values that end up on an #SBATCH line: one line, no spaces (sbatch splits the line).
bool SafeDirectiveValue(const std::string& s) {
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t' || c == '#') return false;
  }
  return true;
}

bool SafeGresName(const std::string& s) {
  if (s.size() > 64) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return false;
    }
  }
  return true;
}

// Slurm's --time: days-hours:minutes:seconds (hours alone would overflow past a day).
std::string SlurmTime(int64_t seconds) {
  return absl::StrFormat("%d-%02d:%02d:%02d", seconds / 86400, (seconds / 3600) % 24,
                         (seconds / 60) % 60, seconds % 60);
}

bool IsNoReason(const std::string& reason) { return reason.empty() || reason == "None"; }

std::string EndedMessage(const SlurmJobInfo& info) {
  const std::string job = absl::StrCat("Slurm job ", info.job_id);
  std::string what;
  if (info.state == "COMPLETED") {
    what = absl::StrCat(job, " completed without a completion report from rank 0");
  } else if (info.state == "CANCELLED") {
    what = absl::StrCat(job, " was cancelled outside tailor (scancel or an administrator)");
  } else if (info.state == "TIMEOUT") {
    what = absl::StrCat(job, " reached its time limit (TIMEOUT)");
  } else if (info.state == "NODE_FAIL") {
    what = absl::StrCat(job, " lost a node (NODE_FAIL)");
  } else if (info.state == "PREEMPTED") {
    what = absl::StrCat(job, " was preempted (PREEMPTED)");
  } else if (info.state == "OUT_OF_MEMORY") {
    what = absl::StrCat(job, " ran out of memory (OUT_OF_MEMORY)");
  } else if (info.state == "BOOT_FAIL") {
    what = absl::StrCat(job, " could not boot its nodes (BOOT_FAIL)");
  } else {
    // Slurm reports the batch script's wait status: the exit code is in the high byte.
    const int code = info.exit_code > 255 ? info.exit_code >> 8 : info.exit_code;
    what = absl::StrCat(job, " ended ", info.state, " (exit code ", code,
                        ") without a completion report from rank 0");
  }
  if (!IsNoReason(info.reason) && info.state != "TIMEOUT") {
    absl::StrAppend(&what, ", reason ", info.reason);
  }
  return what;
}

// Ends an attempt whose submission sbatch did not take, with sbatch's message. An attempt
// that already ended (FAILED_PRECONDITION or NOT_FOUND) is left as it is.
void FailSubmission(SlurmAttemptSink* sink, const std::string& lease, const std::string& fail,
                    bool retryable) {
  spdlog::warn("lease={} sbatch: {}", lease, fail);
  absl::Status st = sink->FailAttempt(lease, fail, retryable);
  if (!st.ok() && !IsGone(st)) {
    spdlog::error("lease={} failing the attempt: {}", lease, st.ToString());
  }
}

// What the script's resources and directive values must satisfy before any is written.
absl::Status ValidateScriptInputs(const SlurmLauncherOptions& o, const v1::ResourceSpec& r) {
  if (!SafeGresName(r.gpu_type())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resources.gpu_type: must be a GRES type name of [A-Za-z0-9_.-] (at most 64), got '",
        r.gpu_type().substr(0, 64), "'"));
  }
  if (r.gpus_per_node() < 0 || r.memory_mib() < 0 || r.time_limit_s() < 0) {
    return absl::InvalidArgumentError("resources: negative gpus, memory or time limit");
  }
  for (const std::string* v : {&o.partition, &o.account}) {
    if (!SafeDirectiveValue(*v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Slurm partition/account '", *v, "' contains blanks or '#'"));
    }
  }
  return absl::OkStatus();
}

int RanksPerNode(const v1::ResourceSpec& r) { return std::max(1, r.ranks_per_node()); }

// Where an attempt writes: its log files' common prefix and the job's work directory.
struct ScriptPaths {
  std::string log_base;  // <data>/logs/<job>/attempt-N
  std::string work;      // <data>/work/<job>
};

ScriptPaths PathsOf(const SlurmLauncherOptions& o, const v1::AcquireJobResponse& a) {
  const std::string& job_id = a.job().id();
  const int attempt = a.lease().attempt();
  return {absl::StrCat(o.data_dir, "/logs/", job_id, "/attempt-", attempt),
          absl::StrCat(o.data_dir, "/work/", job_id)};
}

// The #SBATCH directives: the job's resources, tailor's settings, then the operator's extra
// sbatch arguments. Each must be one --option[=value] without blanks.
absl::StatusOr<std::vector<std::string>> SbatchDirectives(const SlurmLauncherOptions& o,
                                                          const v1::AcquireJobResponse& a,
                                                          const ScriptPaths& paths) {
  const v1::ResourceSpec& r = a.job().resources();
  std::vector<std::string> d;
  d.push_back(absl::StrCat("--job-name=",
                           SlurmLauncher::JobName(a.campaign_id(), a.job().id(),
                                                  a.lease().attempt())));
  d.push_back(absl::StrCat("--nodes=", std::max(1, r.nodes())));
  d.push_back(absl::StrCat("--ntasks-per-node=", RanksPerNode(r)));
  if (r.gpus_per_node() > 0) {
    d.push_back(r.gpu_type().empty()
                    ? absl::StrCat("--gres=gpu:", r.gpus_per_node())
                    : absl::StrCat("--gres=gpu:", r.gpu_type(), ":", r.gpus_per_node()));
  }
  if (r.memory_mib() > 0) d.push_back(absl::StrCat("--mem=", r.memory_mib(), "M"));
  if (r.time_limit_s() > 0) d.push_back(absl::StrCat("--time=", SlurmTime(r.time_limit_s())));
  if (!o.partition.empty()) d.push_back(absl::StrCat("--partition=", o.partition));
  if (!o.account.empty()) d.push_back(absl::StrCat("--account=", o.account));
  d.push_back(absl::StrCat("--output=", paths.log_base, ".log"));
  // slurmstepd and rank 0 both write the attempt log: neither may truncate the other.
  d.push_back("--open-mode=append");
  d.push_back(o.requeue ? "--requeue" : "--no-requeue");
  for (const std::string& extra : o.sbatch_args) {
    if (extra.rfind("--", 0) != 0 || extra.find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("sbatch argument '", extra, "' must be one --option[=value]"));
    }
    d.push_back(extra);
  }
  for (const std::string& v : d) {
    if (v.find('\n') != std::string::npos || v.find(' ') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad sbatch directive '", v, "'"));
    }
  }
  return d;
}

// The environment every rank's tailor-worker reads: coordinator, lease, directories and
// credentials, and the rendezvous port.
void AppendEnvironment(const SlurmLauncherOptions& o, const v1::AcquireJobResponse& a,
                       const ScriptPaths& paths, std::string& s) {
  absl::StrAppend(
      &s, "set -u\n",
      "export TAILOR_COORDINATOR=", ShellQuote(o.coordinator), "\n",
      "export TAILOR_LEASE_ID=", ShellQuote(a.lease().id()), "\n",
      "export TAILOR_WORK_DIR=",
      ShellQuote(absl::StrCat(paths.work, "/attempt-", a.lease().attempt())), "\n",
      "# Survives attempts: a retried search or distillation resumes from its checkpoints.\n",
      "export TAILOR_CHECKPOINT_DIR=", ShellQuote(absl::StrCat(paths.work, "/checkpoints")), "\n",
      "export TAILOR_LAUNCHER=slurm\n",
      o.token_file.empty()
          ? std::string()
          : absl::StrCat("export TAILOR_TOKEN=\"$(cat ", ShellQuote(o.token_file), ")\"\n"),
      o.ca_cert.empty() ? std::string()
                        : absl::StrCat("export TAILOR_CA_CERT=", ShellQuote(o.ca_cert), "\n"),
      "# The c10d store listens on the first node; a port derived from the job id keeps jobs\n",
      "# sharing a node apart.\n",
      "export MASTER_PORT=$((", o.master_port_base, " + SLURM_JOB_ID % ", o.master_port_span,
      "))\n",
      "# Each rank derives RANK/WORLD_SIZE/LOCAL_RANK from SLURM_PROCID/SLURM_NTASKS/\n",
      "# SLURM_LOCALID and MASTER_ADDR from the first host of SLURM_JOB_NODELIST.\n",
      "unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR\n");
}

// The directories, a banner line in the log, and the srun that starts one worker per task.
void AppendLaunch(const SlurmLauncherOptions& o, int per_node, const ScriptPaths& paths,
                  std::string& s) {
  absl::StrAppend(
      &s, "mkdir -p \"$TAILOR_WORK_DIR\" \"$TAILOR_CHECKPOINT_DIR\"\n",
      "echo \"tailor: Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, $SLURM_NTASKS ranks, "
      "rendezvous port $MASTER_PORT, restart ${SLURM_RESTART_COUNT:-0}\"\n",
      "# One tailor-worker per task; rank 0 writes the attempt log (what `tailor logs` shows),\n",
      "# the others attempt-N.rankR.log. A rank that fails takes the others down with it.\n",
      "exec srun --kill-on-bad-exit=1 --ntasks-per-node=", per_node, " /bin/sh -c ",
      ShellQuote("if [ \"$SLURM_PROCID\" = 0 ]; then exec \"$1\" >>\"$2.log\" 2>&1; "
                 "else exec \"$1\" >>\"$2.rank$SLURM_PROCID.log\" 2>&1; fi"),
      " tailor-rank ", ShellQuote(o.worker_bin), " ", ShellQuote(paths.log_base), "\n");
}

}  // namespace

// --- the coordinator side -----------------------------------------------------------------

absl::Status CoordinatorSlurmSink::RecordLaunch(const std::string& lease_id,
                                                const std::string& slurm_job_id,
                                                const std::string& state,
                                                const std::string& reason) {
  return core_->RecordLaunch(lease_id, slurm_job_id, state, IsNoReason(reason) ? "" : reason);
}

absl::StatusOr<std::vector<std::string>> CoordinatorSlurmSink::KeepAlive(
    const std::vector<std::string>& lease_ids) {
  v1::HeartbeatRequest req;
  req.set_agent_id("launcher:slurm");
  for (const std::string& id : lease_ids) req.add_lease_ids(id);
  absl::StatusOr<v1::HeartbeatResponse> resp = core_->Heartbeat(req);
  if (!resp.ok()) return resp.status();
  std::vector<std::string> gone(resp->unknown_lease_ids().begin(),
                                resp->unknown_lease_ids().end());
  gone.insert(gone.end(), resp->cancelled_lease_ids().begin(),
              resp->cancelled_lease_ids().end());
  return gone;
}

absl::Status CoordinatorSlurmSink::FailAttempt(const std::string& lease_id,
                                               const std::string& error, bool retryable) {
  v1::CompleteJobRequest req;
  req.set_lease_id(lease_id);
  req.set_success(false);
  req.set_error(error);
  req.set_retryable(retryable);
  return core_->CompleteJob(req).status();
}

// --- the script ---------------------------------------------------------------------------

std::string SlurmLauncher::JobName(const std::string& campaign_id, const std::string& job_id,
                                   int attempt) {
  return absl::StrCat("tailor.", campaign_id, ".", job_id, ".a", attempt);
}

absl::StatusOr<std::string> BuildSbatchScript(const SlurmLauncherOptions& o,
                                              const v1::AcquireJobResponse& a) {
  TAILOR_RETURN_IF_ERROR(ValidateScriptInputs(o, a.job().resources()));
  const ScriptPaths paths = PathsOf(o, a);
  TAILOR_ASSIGN_OR_RETURN(const std::vector<std::string> d, SbatchDirectives(o, a, paths));
  std::string s = "#!/bin/bash\n";
  absl::StrAppend(&s, "# tailor ", a.job().kind(), " job ", a.job().id(), " of campaign ",
                  a.campaign_id(), ", attempt ", a.lease().attempt(), ", lease ", a.lease().id(),
                  ".\n",
                  "# Written by tailor-coordinator --launcher slurm and kept as the record of "
                  "what was submitted.\n");
  for (const std::string& v : d) absl::StrAppend(&s, "#SBATCH ", v, "\n");
  AppendEnvironment(o, a, paths, s);
  AppendLaunch(o, RanksPerNode(a.job().resources()), paths, s);
  return s;
}

// --- the launcher -------------------------------------------------------------------------

SlurmLauncher::SlurmLauncher(SlurmLauncherOptions options, SlurmClient* client,
                             SlurmAttemptSink* sink, Clock* clock, bool start_thread)
    : options_(std::move(options)), client_(client), sink_(sink), clock_(clock) {
  {
    absl::MutexLock lock(&mu_);
    next_poll_ = clock_->Now() + options_.poll_interval;
    next_keepalive_ = clock_->Now() + options_.keepalive_interval;
  }
  if (start_thread) thread_ = std::thread([this] { Loop(); });
}

SlurmLauncher::~SlurmLauncher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // Slurm jobs outlive the coordinator on purpose: after a restart Adopt picks them up.
}

void SlurmLauncher::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(200));
      if (stop_) return;
      wake_ = false;
    }
    RunOnce();
  }
}

absl::StatusOr<std::string> SlurmLauncher::WriteScript(const v1::AcquireJobResponse& a) {
  absl::StatusOr<std::string> script = BuildSbatchScript(options_, a);
  if (!script.ok()) return script.status();
  const std::string dir = absl::StrCat(options_.data_dir, "/logs/", a.job().id());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = absl::StrCat(dir, "/attempt-", a.lease().attempt(), ".sbatch");
  {
    std::ofstream out(path, std::ios::trunc);
    out << *script;
    out.close();
    if (!out) {
      return absl::InternalError(absl::StrCat("cannot write the sbatch script ", path));
    }
  }
  return path;
}

absl::Status SlurmLauncher::Launch(const v1::AcquireJobResponse& a) {
  absl::StatusOr<std::string> path = WriteScript(a);
  if (!path.ok()) return path.status();
  Tracked t;
  t.lease_id = a.lease().id();
  t.job_id = a.job().id();
  t.campaign_id = a.campaign_id();
  t.attempt = a.lease().attempt();
  t.name = JobName(t.campaign_id, t.job_id, t.attempt);
  t.script_path = *path;
  t.awaiting_submit = true;
  t.last_alive = clock_->Now();
  absl::MutexLock lock(&mu_);
  tracked_[t.lease_id] = t;
  submit_queue_.push_back(t.lease_id);
  wake_ = true;
  return absl::OkStatus();
}

void SlurmLauncher::Cancel(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  auto it = tracked_.find(lease_id);
  if (it == tracked_.end()) return;
  Tracked& t = it->second;
  if (!t.slurm_id.empty()) {
    spdlog::info("lease={} cancelled: scancel Slurm job {}", lease_id, t.slurm_id);
    cancel_queue_.push_back(t.slurm_id);
    tracked_.erase(it);
  } else if (t.awaiting_submit && !t.submitting) {
    tracked_.erase(it);  // never reached Slurm
  } else {
    // sbatch is running or its outcome is unknown: cancel once the job id is known.
    t.cancel_requested = true;
  }
  wake_ = true;
}

void SlurmLauncher::Adopt(const std::vector<LaunchedAttempt>& attempts) {
  if (attempts.empty()) return;
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  for (const LaunchedAttempt& a : attempts) {
    Tracked t;
    t.lease_id = a.lease_id;
    t.job_id = a.job_id;
    t.campaign_id = a.campaign_id;
    t.attempt = a.attempt;
    t.name = JobName(a.campaign_id, a.job_id, a.attempt);
    t.slurm_id = a.external_id;
    t.recorded = !a.external_id.empty();
    t.unknown = a.external_id.empty();
    t.unknown_since = now;
    t.last_alive = now;
    tracked_[t.lease_id] = t;
  }
  spdlog::info("slurm launcher: reconciling {} attempts from before the restart",
               attempts.size());
  next_poll_ = now;
  next_keepalive_ = now;
  wake_ = true;
}

void SlurmLauncher::RunOnce() {
  SubmitQueued();
  SendCancels();
  bool poll = false, keepalive = false;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    poll = now >= next_poll_;
    keepalive = now >= next_keepalive_;
  }
  if (poll) Poll();
  if (keepalive || poll) KeepAlive();
  SendCancels();
}

void SlurmLauncher::SubmitQueued() {
  const std::vector<std::pair<std::string, std::string>> batch = TakeSubmitBatch();
  for (const auto& [lease, script] : batch) {
    absl::StatusOr<std::string> id = client_->Submit(script);
    const absl::Time now = clock_->Now();
    SubmitFollowUp next;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.sbatch;
      next = NoteSubmitAnswer(lease, id, now);
    }
    if (next.record) RecordSubmission(lease, *id);
    if (!next.fail.empty()) FailSubmission(sink_, lease, next.fail, next.retryable);
  }
}

std::vector<std::pair<std::string, std::string>> SlurmLauncher::TakeSubmitBatch() {
  std::vector<std::pair<std::string, std::string>> batch;  // lease, script
  absl::MutexLock lock(&mu_);
  while (!submit_queue_.empty()) {
    const std::string lease = submit_queue_.front();
    submit_queue_.pop_front();
    auto it = tracked_.find(lease);
    if (it == tracked_.end() || !it->second.awaiting_submit) continue;
    it->second.submitting = true;
    batch.emplace_back(lease, it->second.script_path);
  }
  return batch;
}

SlurmLauncher::SubmitFollowUp SlurmLauncher::NoteSubmitAnswer(
    const std::string& lease, const absl::StatusOr<std::string>& id, absl::Time now) {
  SubmitFollowUp next;
  auto it = tracked_.find(lease);
  if (it == tracked_.end()) {
    // The lease ended while sbatch ran: the new allocation belongs to no one.
    if (id.ok()) cancel_queue_.push_back(*id);
    return next;
  }
  Tracked& t = it->second;
  t.submitting = false;
  t.awaiting_submit = false;
  if (id.ok()) {
    t.slurm_id = *id;
    t.state = "PENDING";
    t.last_alive = now;
    spdlog::info("job={} lease={} submitted as Slurm job {} ({})", t.job_id, lease, *id,
                 t.name);
    if (t.cancel_requested) {
      cancel_queue_.push_back(*id);
      tracked_.erase(it);
    } else {
      next.record = true;
    }
  } else if (id.status().code() == absl::StatusCode::kDeadlineExceeded) {
    spdlog::warn("job={} lease={} {}; looking for Slurm job {} by name", t.job_id, lease,
                 std::string(id.status().message()), t.name);
    t.unknown = true;
    t.unknown_since = now;
    t.last_alive = now;
  } else {
    const bool cancelled = t.cancel_requested;
    tracked_.erase(it);
    if (cancelled) return next;
    next.fail = std::string(id.status().message());
    // Refused by Slurm (FAILED_PRECONDITION): the same script would be refused again.
    next.retryable = id.status().code() != absl::StatusCode::kFailedPrecondition;
  }
  return next;
}

void SlurmLauncher::RecordSubmission(const std::string& lease, const std::string& slurm_id) {
  absl::Status st = sink_->RecordLaunch(lease, slurm_id, "PENDING", "");
  absl::MutexLock lock(&mu_);
  auto it = tracked_.find(lease);
  if (st.ok()) {
    if (it != tracked_.end()) it->second.recorded = true;
  } else if (IsGone(st)) {
    // Cancelled or expired while sbatch ran.
    spdlog::info("lease={} ended before Slurm job {} was recorded; cancelling it", lease,
                 slurm_id);
    cancel_queue_.push_back(slurm_id);
    if (it != tracked_.end()) tracked_.erase(it);
  } else {
    spdlog::warn("lease={} recording Slurm job {} failed ({}); retrying at the next poll",
                 lease, slurm_id, st.ToString());
  }
}

void SlurmLauncher::SendCancels() {
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&mu_);
    ids.swap(cancel_queue_);
  }
  if (ids.empty()) return;
  absl::Status st = client_->Cancel(ids);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.scancel;
  }
  if (!st.ok()) {
    spdlog::warn("scancel {}: {}", absl::StrJoin(ids, " "), st.ToString());
  } else {
    spdlog::info("scancel {}", absl::StrJoin(ids, " "));
  }
}

void SlurmLauncher::Judge(Tracked& t, const SlurmJobInfo* info, absl::Time now,
                          std::vector<Outcome>& out) {
  Outcome o;
  o.lease_id = t.lease_id;
  o.slurm_id = t.slurm_id;
  o.state = info->state;
  o.reason = info->reason;
  if (SlurmStateIsAlive(info->state)) {
    t.last_alive = now;
    if (!t.recorded || info->state != t.state || info->reason != t.reason) {
      t.state = info->state;
      t.reason = info->reason;
      t.recorded = true;  // reset by Apply if the write fails
      o.record = true;
      out.push_back(o);
    }
    return;
  }
  // Over, and rank 0 has not completed the lease (its completion would have ended the
  // tracking, or will make the failure below a no-op).
  o.record = true;
  o.fail_error = EndedMessage(*info);
  out.push_back(o);
}

void SlurmLauncher::Poll() {
  {
    absl::MutexLock lock(&mu_);
    next_poll_ = clock_->Now() + options_.poll_interval;
    bool any = false;
    for (const auto& [lease, t] : tracked_) any = any || !t.awaiting_submit;
    if (!any) return;  // nothing to ask Slurm about
  }
  absl::StatusOr<std::vector<SlurmJobInfo>> queue = client_->Queue();
  std::vector<Outcome> outcomes;
  std::vector<std::string> left;  // lease ids whose job is no longer in the queue
  {
    absl::MutexLock lock(&mu_);
    ++stats_.squeue;
    if (!queue.ok()) {
      spdlog::warn("squeue: {} (leases of jobs last seen alive are kept for {})",
                   queue.status().ToString(), absl::FormatDuration(options_.controller_grace));
      return;
    }
    MatchQueue(*queue, outcomes, left);
  }
  if (!left.empty()) CheckLeftJobs(left, outcomes);
  Apply(outcomes);
}

void SlurmLauncher::MatchQueue(const std::vector<SlurmJobInfo>& queue,
                               std::vector<Outcome>& outcomes, std::vector<std::string>& left) {
  const absl::Time now = clock_->Now();
  std::map<std::string, const SlurmJobInfo*> by_id;
  std::map<std::string, std::vector<const SlurmJobInfo*>> by_name;
  for (const SlurmJobInfo& j : queue) {
    by_id[j.job_id] = &j;
    if (absl::StartsWith(j.name, "tailor.")) by_name[j.name].push_back(&j);
  }
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    Tracked& t = it->second;
    if (t.awaiting_submit) {
      ++it;
      continue;
    }
    const SlurmJobInfo* info = nullptr;
    if (t.slurm_id.empty()) {
      auto named = by_name.find(t.name);
      bool drop = false;
      info = MatchByName(t, named == by_name.end() ? nullptr : &named->second, now, outcomes,
                         &drop);
      if (info == nullptr) {
        it = drop ? tracked_.erase(it) : std::next(it);
        continue;
      }
    } else {
      auto found = by_id.find(t.slurm_id);
      if (found != by_id.end()) info = found->second;
    }
    if (info == nullptr) {
      left.push_back(t.lease_id);
      ++it;
      continue;
    }
    const size_t before = outcomes.size();
    Judge(t, info, now, outcomes);
    const bool over = outcomes.size() > before && !outcomes.back().fail_error.empty();
    it = over ? tracked_.erase(it) : std::next(it);
  }
}

const SlurmJobInfo* SlurmLauncher::MatchByName(Tracked& t, std::vector<const SlurmJobInfo*>* jobs,
                                               absl::Time now, std::vector<Outcome>& outcomes,
                                               bool* drop) {
  if (jobs == nullptr) {
    if (now - t.unknown_since < options_.unknown_submit_window) {
      t.last_alive = now;  // keep the lease while a late submission may still appear
      return nullptr;
    }
    if (!t.cancel_requested) {
      Outcome o;
      o.lease_id = t.lease_id;
      o.fail_error = absl::StrCat(
          "no Slurm job named ", t.name,
          " exists: the coordinator stopped (or sbatch timed out) before Slurm accepted "
          "it");
      outcomes.push_back(o);
    }
    *drop = true;
    return nullptr;
  }
  // Prefer a live one; any other live job of the same name is a duplicate to remove.
  std::stable_sort(jobs->begin(), jobs->end(), [](const auto* a, const auto* b) {
    return SlurmStateIsAlive(a->state) > SlurmStateIsAlive(b->state);
  });
  const SlurmJobInfo* info = jobs->front();
  for (size_t i = 1; i < jobs->size(); ++i) {
    if (SlurmStateIsAlive((*jobs)[i]->state)) cancel_queue_.push_back((*jobs)[i]->job_id);
  }
  spdlog::info("lease={} matched Slurm job {} by name {}", t.lease_id, info->job_id, t.name);
  t.slurm_id = info->job_id;
  t.unknown = false;
  t.recorded = false;
  if (t.cancel_requested) {
    cancel_queue_.push_back(t.slurm_id);
    *drop = true;
    return nullptr;
  }
  return info;
}

void SlurmLauncher::CheckLeftJobs(const std::vector<std::string>& left,
                                  std::vector<Outcome>& outcomes) {
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& lease : left) {
      auto it = tracked_.find(lease);
      if (it != tracked_.end()) ids.push_back(it->second.slurm_id);
    }
  }
  absl::StatusOr<std::vector<SlurmJobInfo>> acct = client_->Accounting(ids);
  absl::MutexLock lock(&mu_);
  ++stats_.sacct;
  JudgeAccounting(left, acct, outcomes);
}

void SlurmLauncher::JudgeAccounting(const std::vector<std::string>& left,
                                    const absl::StatusOr<std::vector<SlurmJobInfo>>& acct,
                                    std::vector<Outcome>& outcomes) {
  const absl::Time now = clock_->Now();
  std::map<std::string, const SlurmJobInfo*> by_id;
  if (acct.ok()) {
    for (const SlurmJobInfo& j : *acct) by_id[j.job_id] = &j;
  }
  for (const std::string& lease : left) {
    auto it = tracked_.find(lease);
    if (it == tracked_.end()) continue;  // cancelled meanwhile
    Tracked& t = it->second;
    auto found = by_id.find(t.slurm_id);
    if (found != by_id.end()) {
      const size_t before = outcomes.size();
      Judge(t, found->second, now, outcomes);
      if (outcomes.size() > before && !outcomes.back().fail_error.empty()) tracked_.erase(it);
      continue;
    }
    // Without accounting the final state is unknown. The worker's CompleteJob is
    // authoritative for success and always precedes the job's exit, so an attempt that is
    // still active here ended without one: fail it and let the retry rules decide.
    Outcome o;
    o.lease_id = t.lease_id;
    o.fail_error = absl::StrCat(
        "Slurm job ", t.slurm_id,
        " left the queue without a completion report from rank 0 (final state unknown: ",
        acct.ok() ? std::string("sacct has no record of it")
                  : std::string(acct.status().message()),
        ")");
    outcomes.push_back(o);
    tracked_.erase(it);
  }
}

void SlurmLauncher::Apply(const std::vector<Outcome>& outcomes) {
  for (const Outcome& o : outcomes) {
    if (o.record) {
      absl::Status st = sink_->RecordLaunch(o.lease_id, o.slurm_id, o.state, o.reason);
      if (!st.ok()) {
        absl::MutexLock lock(&mu_);
        auto it = tracked_.find(o.lease_id);
        if (IsGone(st)) {
          // Completed by rank 0, expired or cancelled: nothing left to follow.
          if (it != tracked_.end()) tracked_.erase(it);
          continue;
        }
        spdlog::warn("lease={} recording Slurm state {}: {}", o.lease_id, o.state, st.ToString());
        if (it != tracked_.end()) it->second.recorded = false;
      }
    }
    if (!o.fail_error.empty()) {
      absl::Status st = sink_->FailAttempt(o.lease_id, o.fail_error, /*retryable=*/true);
      if (st.ok()) {
        spdlog::warn("lease={} {}", o.lease_id, o.fail_error);
      } else if (!IsGone(st)) {
        spdlog::error("lease={} failing the attempt: {}", o.lease_id, st.ToString());
      }
    }
  }
}

void SlurmLauncher::KeepAlive() {
  std::vector<std::string> leases;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    next_keepalive_ = now + options_.keepalive_interval;
    for (const auto& [lease, t] : tracked_) {
      if (now - t.last_alive <= options_.controller_grace) leases.push_back(lease);
    }
  }
  if (leases.empty()) return;
  absl::StatusOr<std::vector<std::string>> gone = sink_->KeepAlive(leases);
  if (!gone.ok()) {
    spdlog::warn("extending {} Slurm leases: {}", leases.size(), gone.status().ToString());
    return;
  }
  absl::MutexLock lock(&mu_);
  for (const std::string& lease : *gone) {
    auto it = tracked_.find(lease);
    if (it == tracked_.end()) continue;
    if (!it->second.slurm_id.empty()) {
      // Completed by rank 0 (the job is finishing), or expired/cancelled, in which case the
      // coordinator has already called Cancel.
      tracked_.erase(it);
    } else if (it->second.awaiting_submit && !it->second.submitting) {
      tracked_.erase(it);
    } else {
      it->second.cancel_requested = true;
    }
  }
}

SlurmLauncher::Stats SlurmLauncher::stats() {
  absl::MutexLock lock(&mu_);
  return stats_;
}

size_t SlurmLauncher::TrackedForTest() {
  absl::MutexLock lock(&mu_);
  return tracked_.size();
}

}  // namespace tailor::coordinator
