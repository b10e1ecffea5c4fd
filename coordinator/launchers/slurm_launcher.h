#ifndef TAILOR_COORDINATOR_LAUNCHERS_SLURM_LAUNCHER_H_
#define TAILOR_COORDINATOR_LAUNCHERS_SLURM_LAUNCHER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/coordinator.h"
#include "coordinator/launchers/slurm_client.h"

namespace tailor::coordinator {

struct SlurmLauncherOptions {
  std::string worker_bin;   // tailor-worker, as the compute nodes see it
  std::string coordinator;  // HOST:PORT the ranks dial (reachable from the compute nodes)
  // Scripts and logs go to data_dir/logs/<job>/attempt-<n>.{sbatch,log}, work and checkpoints
  // to data_dir/work/<job>/: the directory must be on a filesystem the nodes share.
  std::string data_dir;
  std::string partition;                 // --partition, empty = the cluster's default
  std::string account;                   // --account, empty = the user's default
  std::vector<std::string> sbatch_args;  // extra #SBATCH lines, e.g. "--qos=high"
  // --requeue lets Slurm put a job that lost its node or was preempted back in the queue under
  // the same job id, keeping its place and its attempt; without it (the default) every loss
  // is a tailor retry with backoff, counted against max_attempts.
  bool requeue = false;
  // One `squeue --json` per interval for every tracked job (never one call per job).
  absl::Duration poll_interval = absl::Seconds(10);
  // How often the launcher extends the leases of jobs Slurm still holds (pending jobs have no
  // worker to heartbeat for them). Must be well under the coordinator's lease TTL.
  absl::Duration keepalive_interval = absl::Seconds(5);
  // While the controller does not answer, leases of jobs last seen alive are kept this long;
  // after that they expire and the jobs are retried.
  absl::Duration controller_grace = absl::Minutes(5);
  // An attempt whose sbatch outcome is unknown (coordinator restarted before recording the
  // id, or sbatch timed out) is looked up by job name; only after this long without a match
  // is it declared lost, so a submission still in flight is never duplicated.
  absl::Duration unknown_submit_window = absl::Seconds(30);
  // The c10d rendezvous port is MASTER_PORT = base + job id % span on the first node.
  int master_port_base = 20000;
  int master_port_span = 20000;
  // Authentication and TLS of the ranks: the script exports TAILOR_TOKEN read from token_file
  // (so the secret is not copied into the script) and TAILOR_CA_CERT. Empty = not exported.
  std::string token_file;
  std::string ca_cert;
};

// What the launcher tells the coordinator. The production sink (CoordinatorSlurmSink) calls
// the Coordinator; unit tests record the calls.
class SlurmAttemptSink {
 public:
  virtual ~SlurmAttemptSink() = default;
  // Records the Slurm job id and what Slurm says about it (one transaction). FAILED_PRECONDITION
  // or NOT_FOUND when the attempt is no longer active.
  virtual absl::Status RecordLaunch(const std::string& lease_id, const std::string& slurm_job_id,
                                    const std::string& state, const std::string& reason) = 0;
  // Extends the leases; returns those that are no longer active (completed, expired or
  // cancelled), which the launcher stops tracking.
  virtual absl::StatusOr<std::vector<std::string>> KeepAlive(
      const std::vector<std::string>& lease_ids) = 0;
  // Ends the attempt as failed. FAILED_PRECONDITION or NOT_FOUND when it already ended (e.g.
  // rank 0 completed it just before the job left the queue): nothing is applied then.
  virtual absl::Status FailAttempt(const std::string& lease_id, const std::string& error,
                                   bool retryable) = 0;
};

class CoordinatorSlurmSink : public SlurmAttemptSink {
 public:
  explicit CoordinatorSlurmSink(Coordinator* core) : core_(core) {}
  absl::Status RecordLaunch(const std::string& lease_id, const std::string& slurm_job_id,
                            const std::string& state, const std::string& reason) override;
  absl::StatusOr<std::vector<std::string>> KeepAlive(
      const std::vector<std::string>& lease_ids) override;
  absl::Status FailAttempt(const std::string& lease_id, const std::string& error,
                           bool retryable) override;

 private:
  Coordinator* const core_;
};

// Runs launcher-placed jobs as Slurm batch jobs. Launch writes the attempt's sbatch script
// (kept next to its log) and queues it; a background loop submits with `sbatch --parsable`,
// records the job id, tracks every job with one `squeue --json` per poll interval (`sacct`
// for jobs that left the queue), keeps the leases of pending and running jobs alive, and turns
// a job that ended without rank 0's completion report into a retryable failure. A submission
// Slurm refuses fails the job for good with Slurm's message. Cancel reaches `scancel`.
// After a coordinator restart, Adopt takes the still-active attempts back: those with a job id
// are matched by id, the others by job name (tailor.<campaign>.<job>.a<attempt>), so a crash
// between sbatch and the record never leads to a second allocation.
class SlurmLauncher : public Launcher {
 public:
  // `client`, `sink` and `clock` must outlive the launcher. With start_thread=false nothing
  // runs until RunOnce is called (tests, with a FakeClock).
  SlurmLauncher(SlurmLauncherOptions options, SlurmClient* client, SlurmAttemptSink* sink,
                Clock* clock, bool start_thread = true);
  ~SlurmLauncher() override;

  std::string name() const override { return "slurm"; }
  absl::Status Launch(const v1::AcquireJobResponse& assignment) override;
  void Cancel(const std::string& lease_id) override;
  void Adopt(const std::vector<LaunchedAttempt>& attempts) override;

  // One round of the loop: submissions, cancellations, then the poll and the keepalive when
  // they are due.
  void RunOnce();

  // Calls made to the Slurm controller since start (the benchmark's "calls per minute").
  struct Stats {
    int64_t sbatch = 0, squeue = 0, sacct = 0, scancel = 0;
  };
  Stats stats();
  size_t TrackedForTest();

  static std::string JobName(const std::string& campaign_id, const std::string& job_id,
                             int attempt);

 private:
  struct Tracked {
    std::string lease_id, job_id, campaign_id, name, script_path;
    int attempt = 0;
    std::string slurm_id;  // empty until sbatch answers or the name is matched
    // Waiting for sbatch (queued or running now).
    bool awaiting_submit = false;
    bool submitting = false;
    bool cancel_requested = false;
    // The coordinator has the id and the last state below.
    bool recorded = false;
    std::string state, reason;
    absl::Time last_alive;  // last time Slurm (or sbatch) said the job exists and is not over
    // The sbatch outcome is unknown; look the name up in the queue, and give up after this.
    absl::Time unknown_since = absl::InfinitePast();
    bool unknown = false;
  };
  // What one poll decided, applied after the controller calls without the lock held.
  struct Outcome {
    std::string lease_id;
    std::string slurm_id, state, reason;
    bool record = false;
    std::string fail_error;  // non-empty: end the attempt as a retryable failure
  };
  // What one sbatch answer leaves to do after the lock is released.
  struct SubmitFollowUp {
    bool record = false;     // tell the coordinator the new job id
    std::string fail;        // non-empty: end the attempt with sbatch's message
    bool retryable = false;  // ... as a retryable failure
  };

  void Loop();
  void SubmitQueued();
  // Takes every queued attempt still waiting for sbatch and marks it as submitting; the
  // lease ids with their scripts.
  std::vector<std::pair<std::string, std::string>> TakeSubmitBatch();
  // Applies one sbatch answer to the attempt's tracking and says what is left to do.
  SubmitFollowUp NoteSubmitAnswer(const std::string& lease, const absl::StatusOr<std::string>& id,
                                  absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a new job id with the coordinator; a lease that ended meanwhile gets its job
  // cancelled.
  void RecordSubmission(const std::string& lease, const std::string& slurm_id);
  void SendCancels();
  void Poll();
  // Matches the tracked attempts against one squeue answer: judges those found, collects in
  // `left` those whose job is no longer in the queue.
  void MatchQueue(const std::vector<SlurmJobInfo>& queue, std::vector<Outcome>& outcomes,
                  std::vector<std::string>& left) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An attempt without a job id, looked up by job name (`jobs`: the queued jobs of that name,
  // null when there are none). Returns the job to judge, or null with *drop set when the
  // attempt is no longer to be tracked.
  const SlurmJobInfo* MatchByName(Tracked& t, std::vector<const SlurmJobInfo*>* jobs,
                                  absl::Time now, std::vector<Outcome>& outcomes, bool* drop)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks sacct how the jobs of the `left` leases ended (one call) and judges them.
  void CheckLeftJobs(const std::vector<std::string>& left, std::vector<Outcome>& outcomes);
  void JudgeAccounting(const std::vector<std::string>& left,
                       const absl::StatusOr<std::vector<SlurmJobInfo>>& acct,
                       std::vector<Outcome>& outcomes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KeepAlive();
  // What to do with an attempt given Slurm's view of its job (null: not in the queue).
  void Judge(Tracked& t, const SlurmJobInfo* info, absl::Time now,
             std::vector<Outcome>& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Apply(const std::vector<Outcome>& outcomes);
  absl::StatusOr<std::string> WriteScript(const v1::AcquireJobResponse& a);

  const SlurmLauncherOptions options_;
  SlurmClient* const client_;
  SlurmAttemptSink* const sink_;
  Clock* const clock_;

  absl::Mutex mu_;
  std::map<std::string, Tracked> tracked_ ABSL_GUARDED_BY(mu_);  // by lease id
  std::deque<std::string> submit_queue_ ABSL_GUARDED_BY(mu_);    // lease ids
  std::vector<std::string> cancel_queue_ ABSL_GUARDED_BY(mu_);   // Slurm job ids
  absl::Time next_poll_ ABSL_GUARDED_BY(mu_);
  absl::Time next_keepalive_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The sbatch script for an attempt (exposed for tests). INVALID_ARGUMENT for resources that
// cannot be expressed safely (e.g. a GPU type with shell metacharacters).
absl::StatusOr<std::string> BuildSbatchScript(const SlurmLauncherOptions& options,
                                              const v1::AcquireJobResponse& assignment);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_LAUNCHERS_SLURM_LAUNCHER_H_
