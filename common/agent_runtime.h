#ifndef TAILOR_COMMON_AGENT_RUNTIME_H_
#define TAILOR_COMMON_AGENT_RUNTIME_H_

// The agent side of the lease protocol, shared by tailor-profiler-agent (a long-running daemon
// that pulls jobs) and tailor-worker (started by a launcher for one job it already holds a lease
// for). Handlers only see a JobContext; registration, heartbeats, lease loss, cancellation,
// completion retries and reconnecting after a coordinator restart all live here, so every
// handler gets the same semantics for free.

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "tailor/v1/job_output.pb.h"
#include "grpcpp/grpcpp.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "tailor/v1/agent.pb.h"

namespace tailor {

struct AgentRuntimeOptions {
  std::string coordinator = "127.0.0.1:50051";  // HOST:PORT
  v1::AgentInfo info;  // job_kinds and max_concurrent_jobs are filled in by the runtime
  std::string token;    // bearer token; empty = $TAILOR_TOKEN
  std::string ca_cert;  // PEM path; TLS when non-empty
  absl::Duration poll_wait = absl::Seconds(10);  // AcquireJob long-poll length
  std::string work_dir = "tailor-agent-work";     // per-job scratch dirs go below jobs/
  int max_concurrent_jobs = 1;
  Clock* clock = Clock::Real();

  // Worker mode (RunAssigned) without a registered agent: leases are kept alive by re-sending
  // the last progress instead of heartbeats. When set, heartbeats are used instead.
  std::string agent_id;

  // Timing. Production defaults; tests shrink them.
  absl::Duration rpc_timeout = absl::Seconds(10);     // unary calls
  absl::Duration poll_slack = absl::Seconds(5);       // long-poll deadline = wait + slack
  absl::Duration backoff_initial = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(5);
  // Used when the coordinator's RegisterAgentResponse / lease carries no interval.
  absl::Duration default_heartbeat_interval = absl::Seconds(5);
  absl::Duration progress_min_interval = absl::Milliseconds(250);  // ~4 reports/s
  absl::Duration stop_grace = absl::Seconds(30);        // Stop(): let jobs finish this long
  absl::Duration completion_grace = absl::Seconds(10);  // after that, retry completions this long
  // The one retry policy of every call a job makes (completion, uploads, downloads, cost
  // tables; OutageRetry): transient errors (the coordinator restarting or unreachable) are
  // retried with backoff until the calls have failed this long in a row. Zero: for as long as
  // the job runs, which its lease bounds (agents: the coordinator answers "lease gone" once
  // it is back). Workers set a multiple of the lease TTL (docs/reliability.md).
  absl::Duration unreachable_give_up = absl::ZeroDuration();
  // While the coordinator is unreachable, heartbeats wait for it (wait_for_ready, bounded by
  // one interval) and follow each other at once, driving the reconnect; false: they fail fast
  // and keep their interval (the earlier behaviour; bench_reconnect's baseline).
  bool wait_for_coordinator = true;
  bool keep_job_dirs = false;  // keep per-job scratch dirs after completion (debugging)
};

// Exponential backoff with jitter: initial, doubling, capped at max, each delay scaled by a
// random factor in [0.8, 1.2] so a fleet of agents does not reconnect in lockstep after a
// coordinator restart.
class Backoff {
 public:
  Backoff(absl::Duration initial, absl::Duration max);
  absl::Duration Next();
  void Reset();

 private:
  absl::Duration initial_;
  absl::Duration max_;
  absl::Duration current_;
  std::mt19937_64 rng_;
};

// Since when a job's calls to the coordinator have failed in a row. One per job, shared by
// all its calls (uploads, downloads, completion), so the give-up bound is per outage rather
// than per call: an upload that waited out most of it leaves its job's failure report only
// the rest, instead of starting the clock again (docs/reliability.md).
class OutageClock {
 public:
  // A transient failure at `now`; returns how long the outage has lasted.
  absl::Duration Failed(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  void Succeeded() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Duration Outage(absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::Time since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

// The retry policy of OutageRetry's callers: transient errors are retried with backoff until
// they have lasted `give_up` in a row (zero: no limit here); any other error ends at once.
// `shared` (a job's OutageClock) makes the outage the job's rather than this call's.
class OutageRetry {
 public:
  explicit OutageRetry(const AgentRuntimeOptions& options, OutageClock* shared = nullptr);
  // After a failed call: true when it should be retried (sleep NextDelay() first). OK status
  // resets the outage.
  bool ShouldRetry(const absl::Status& status);
  // The backoff step, cut short at the give-up bound so no wait overruns it.
  absl::Duration NextDelay();
  // How long the calls have failed in a row (zero when the last one succeeded).
  absl::Duration outage() const;
  bool gave_up() const { return gave_up_; }

 private:
  Clock* clock_;
  absl::Duration give_up_;
  Backoff backoff_;
  OutageClock own_;
  OutageClock* const outage_;  // shared or &own_
  bool gave_up_ = false;
};

// Handler errors with these codes are reported as retryable: the job may succeed on another
// attempt (transient infrastructure trouble rather than a bad input).
bool IsRetryableJobError(absl::StatusCode code);
// Codes that mean "the coordinator did not answer" for a call we must not give up on.
bool IsTransientRpcError(absl::StatusCode code);
// What ReportProgress/CompleteJob answer when the lease expired or was replaced.
bool IsLeaseLostError(absl::StatusCode code);

class AgentRuntime;

// The agent's registration secret, <work_dir>/agent.secret: created on first start (mode 0600,
// 32 random bytes as 64 hex characters) and read on every later one, so an agent restarted
// with its own work dir proves to be the agent it was. A damaged file is an error naming it.
absl::StatusOr<std::string> LoadOrCreateRegistrationSecret(const std::string& work_dir);
class Sha256;
namespace agent_internal {
class ByteSource;  // a rewindable source of upload bytes (file or memory)
}  // namespace agent_internal

// Why a job must stop before its handler finished.
enum class JobStopReason {
  kNone,
  kCancelled,  // the coordinator cancelled it: complete as failure "cancelled", not retryable
  kLeaseLost,  // lease expired or replaced: abandon silently, never complete
  kShutdown,   // the agent is stopping and the grace period ran out: retryable failure
};
const char* JobStopReasonName(JobStopReason reason);

// Everything a job handler needs. Thread-safe: a handler may report progress from several
// threads. Owned by the runtime; valid for the duration of the handler call.
class JobContext {
 public:
  JobContext(AgentRuntime* runtime, v1::AcquireJobResponse assignment, std::string work_dir);
  JobContext(const JobContext&) = delete;
  JobContext& operator=(const JobContext&) = delete;

  const v1::AcquireJobResponse& assignment() const { return assignment_; }
  const v1::Lease& lease() const { return assignment_.lease(); }
  const v1::Job& job() const { return assignment_.job(); }
  const v1::DeploymentContract& contract() const { return assignment_.contract(); }
  const google::protobuf::Map<std::string, v1::JobOutput>& inputs() const {
    return assignment_.inputs();
  }
  const std::string& lease_id() const { return assignment_.lease().id(); }
  // A per-job scratch directory, created before the handler runs and removed after the job
  // completes (unless options.keep_job_dirs): upload anything worth keeping as an artifact.
  const std::string& work_dir() const { return work_dir_; }
  std::shared_ptr<grpc::Channel> channel() const;
  const std::string& token() const;

  // Reports progress (also extends the lease). Non-final reports are rate-limited to
  // options.progress_min_interval; dropped ones return OK. Transient coordinator errors are
  // logged and swallowed: heartbeats keep the lease alive, and a missed progress update must
  // not fail a job. Returns CANCELLED when the job must stop (cancelled or lease lost).
  absl::Status ReportProgress(double fraction, absl::string_view message, int64_t step = 0,
                              int64_t total_steps = 0,
                              const std::map<std::string, double>& metrics = {},
                              bool final = false);

  // True once the job must stop; handlers check it between units of work.
  bool Cancelled() const;
  JobStopReason stop_reason() const;
  // Sleeps up to `d`; returns early (false) when the job is cancelled. True if it slept fully.
  bool SleepUnlessCancelled(absl::Duration d) const;

  // Uploads an artifact owned by this job's lease. The sha256 is computed first, then the data
  // is streamed in 1 MiB chunks; transient failures retry the whole (content-addressed) upload.
  absl::StatusOr<v1::Artifact> UploadArtifactFile(const std::string& kind,
                                                  const std::string& name,
                                                  const std::string& path);
  absl::StatusOr<v1::Artifact> UploadArtifactBytes(const std::string& kind,
                                                   const std::string& name,
                                                   absl::string_view bytes);
  // Downloads a blob to `path`: written to `path.part`, verified against `digest`, then renamed
  // so a crash never leaves a truncated file under the final name. Resumes by offset after a
  // transient failure.
  absl::Status DownloadArtifact(const std::string& digest, const std::string& path);
  absl::StatusOr<v1::CostTable> PutCostTable(const v1::CostTable& table);

  // Runtime side (also usable by tests): request the job to stop. kLeaseLost overrides any
  // earlier reason, because a job whose lease is gone must never be completed.
  void RequestStop(JobStopReason reason);
  // Last progress sent or attempted, for keepalives in worker mode.
  v1::JobProgress last_progress() const;
  // The job's one outage clock (OutageClock), shared by all its coordinator calls.
  OutageClock* outage_clock() { return &outage_; }

 private:
  friend class AgentRuntime;
  // Sends one ReportProgress now (no rate limit); used by ReportProgress and worker keepalives.
  absl::Status SendProgress(const v1::JobProgress& progress);
  absl::StatusOr<v1::Artifact> Upload(const std::string& kind, const std::string& name,
                                      agent_internal::ByteSource& source);
  absl::StatusOr<v1::Artifact> UploadOnce(const v1::ArtifactHeader& header,
                                          agent_internal::ByteSource& source);
  // One DownloadArtifact stream from *written on, appending to `out` and `hasher`.
  absl::Status DownloadOnce(const std::string& digest, std::FILE* out, int64_t* written,
                            int64_t* total, Sha256& hasher);

  AgentRuntime* const runtime_;
  const v1::AcquireJobResponse assignment_;
  const std::string work_dir_;
  OutageClock outage_;

  mutable absl::Mutex mu_;
  JobStopReason stop_reason_ ABSL_GUARDED_BY(mu_) = JobStopReason::kNone;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;  // stop_reason_ != kNone, for Await
  absl::Time last_progress_sent_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  v1::JobProgress last_progress_ ABSL_GUARDED_BY(mu_);
};

using JobHandler = std::function<absl::StatusOr<v1::JobOutput>(JobContext&)>;

// How a job ended, from the agent's point of view.
struct JobOutcome {
  bool completed = false;  // the coordinator accepted a CompleteJob
  bool success = false;
  JobStopReason stop_reason = JobStopReason::kNone;
  absl::Status handler_status;
};

class AgentRuntime {
 public:
  explicit AgentRuntime(AgentRuntimeOptions options);
  ~AgentRuntime();
  AgentRuntime(const AgentRuntime&) = delete;
  AgentRuntime& operator=(const AgentRuntime&) = delete;

  // Adding a job kind is one line: runtime.RegisterHandler("verify", MakeVerifyHandler(...)).
  // Must be called before Run().
  void RegisterHandler(const std::string& kind, JobHandler handler);

  // Registers, heartbeats and pulls jobs until Stop(). Never returns because the coordinator is
  // down: it reconnects with backoff. Returns an error only for a local setup failure (e.g. the
  // work dir cannot be created or no handler is registered).
  absl::Status Run();

  // Worker mode: runs one job whose lease was obtained elsewhere (a launcher), with the same
  // context, keepalive and completion code as Run(). Returns OK when the job succeeded and the
  // coordinator accepted the completion; the handler's error when it failed; CANCELLED when it
  // was cancelled; ABORTED when the lease was lost.
  absl::Status RunAssigned(const v1::AcquireJobResponse& assignment, const JobHandler& handler);

  // Stop acquiring; running jobs get options.stop_grace to finish, then they are cancelled.
  // Safe to call from any thread (not from a signal handler: use a sigwait thread).
  void Stop();
  // Like Stop() but cancels running jobs immediately (second SIGTERM).
  void StopNow();

  std::string agent_id() const;
  const AgentRuntimeOptions& options() const { return options_; }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  v1::AgentService::Stub* stub() const { return stub_.get(); }
  bool draining() const;
  int ActiveJobCountForTest() const;

 private:
  friend class JobContext;
  struct ActiveJob {
    std::shared_ptr<JobContext> ctx;
    std::thread thread;
    bool done = false;
    JobOutcome outcome;
  };

  absl::Status RegisterWithRetry();  // until success or Stop()
  absl::Status RegisterOnce();
  void HeartbeatLoop();
  void HeartbeatOnce();
  void KeepaliveByProgress();
  void AcquireLoop();
  // Long-polls once; an assigned job is started on its own thread.
  absl::Status AcquireOnce();
  void StartJob(const v1::AcquireJobResponse& assignment, JobHandler handler);
  JobOutcome ExecuteJob(const std::shared_ptr<JobContext>& ctx, const JobHandler& handler);
  bool CompleteWithRetry(JobContext& ctx, v1::CompleteJobRequest request);
  std::string JobDirFor(const v1::AcquireJobResponse& assignment) const;
  void ReapFinishedJobs();
  // Waits up to the grace period for running jobs, cancels the rest and joins every thread.
  void ShutdownJobs();
  bool SleepUnlessStopping(absl::Duration d);  // false when Stop() was called
  bool stopping() const;
  bool completion_deadline_passed() const;
  int RunningJobsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanAcquireLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllJobsDoneOrStopNowLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllJobsDoneOrStoppingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AgentRuntimeOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  std::map<std::string, JobHandler> handlers_;  // written before Run() only
  std::string registration_secret_;              // written before the first registration only

  mutable absl::Mutex mu_;
  std::string agent_id_ ABSL_GUARDED_BY(mu_);
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_);
  bool heartbeat_failing_ ABSL_GUARDED_BY(mu_) = false;  // log an outage once, not per beat
  // The last beat met no coordinator (a transient error): beats then wait for it.
  bool coordinator_unreachable_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_now_ ABSL_GUARDED_BY(mu_) = false;
  bool heartbeat_stop_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  // Completions are retried until this time once shutdown gave up on the grace period.
  absl::Time completion_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // The in-flight long-poll, so Stop() can cancel it instead of waiting for the poll to end.
  grpc::ClientContext* acquire_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_map<std::string, ActiveJob> jobs_ ABSL_GUARDED_BY(mu_);  // by lease id
};

}  // namespace tailor

#endif  // TAILOR_COMMON_AGENT_RUNTIME_H_
