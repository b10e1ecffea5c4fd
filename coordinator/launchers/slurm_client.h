#ifndef TAILOR_COORDINATOR_LAUNCHERS_SLURM_CLIENT_H_
#define TAILOR_COORDINATOR_LAUNCHERS_SLURM_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tailor::coordinator {

// What Slurm says about one job, from `squeue --json` or `sacct --json`.
struct SlurmJobInfo {
  std::string job_id;
  std::string name;
  std::string state;   // PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::string reason;  // Resources, Priority, ...; empty for Slurm's "None"
  int exit_code = 0;
  int restart_count = 0;
  absl::Time start_time = absl::InfinitePast();  // InfinitePast when not started
  absl::Time end_time = absl::InfinitePast();
};

// The Slurm commands tailor uses, one method per command so that each call made to the
// controller is visible (and countable) at this seam. The launcher's logic is tested against
// a fake; CommandSlurmClient runs the real commands.
class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  // `sbatch --parsable SCRIPT`; the job id. FAILED_PRECONDITION with Slurm's message when the
  // controller refuses the job (bad GRES type, unknown partition, ...), UNAVAILABLE when it
  // cannot be reached or is busy, DEADLINE_EXCEEDED when sbatch gave no answer (the job may
  // or may not exist).
  virtual absl::StatusOr<std::string> Submit(const std::string& script_path) = 0;
  // `squeue --json`: every job the controller still holds in memory (pending, running, and
  // finished ones until MinJobAge passes). One call answers for all tracked jobs.
  virtual absl::StatusOr<std::vector<SlurmJobInfo>> Queue() = 0;
  // `sacct --json -j ID,...` for jobs that left the queue. UNIMPLEMENTED when the cluster has
  // no accounting storage.
  virtual absl::StatusOr<std::vector<SlurmJobInfo>> Accounting(
      const std::vector<std::string>& job_ids) = 0;
  // `scancel ID...`.
  virtual absl::Status Cancel(const std::vector<std::string>& job_ids) = 0;
};

struct CommandResult {
  int exit_code = -1;  // 128+signal when killed; -1 when it could not be started
  std::string out;
  std::string err;
};

// Runs argv (PATH lookup for a bare name) with stdin from /dev/null and both outputs
// captured, killing it after `timeout`. Safe to call from a multi-threaded process.
CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout);

struct CommandSlurmClientOptions {
  std::string bin_dir;  // where sbatch/squeue/sacct/scancel live; empty = PATH
  absl::Duration timeout = absl::Seconds(60);
};

class CommandSlurmClient : public SlurmClient {
 public:
  explicit CommandSlurmClient(CommandSlurmClientOptions options) : options_(std::move(options)) {}
  absl::StatusOr<std::string> Submit(const std::string& script_path) override;
  absl::StatusOr<std::vector<SlurmJobInfo>> Queue() override;
  absl::StatusOr<std::vector<SlurmJobInfo>> Accounting(
      const std::vector<std::string>& job_ids) override;
  absl::Status Cancel(const std::vector<std::string>& job_ids) override;

 private:
  std::string Bin(const std::string& name) const;
  const CommandSlurmClientOptions options_;
};

// --- parsing, exposed for tests ---
// `sbatch --parsable` prints "ID" or "ID;CLUSTER".
absl::StatusOr<std::string> ParseSbatchParsable(absl::string_view out);
// Turns a failed sbatch into FAILED_PRECONDITION (refused: final for this job), UNAVAILABLE
// (controller unreachable or busy: worth a retry) or DEADLINE_EXCEEDED (killed while waiting:
// the job may exist), carrying Slurm's own words.
absl::Status SbatchFailure(const CommandResult& result);
// squeue --json (Slurm 22.05+: "jobs"[] with job_id, name, job_state, state_reason, ...).
absl::StatusOr<std::vector<SlurmJobInfo>> ParseSqueueJson(absl::string_view json);
// sacct --json ("jobs"[] with job_id, name, state {current, reason}, exit_code, time).
absl::StatusOr<std::vector<SlurmJobInfo>> ParseSacctJson(absl::string_view json);

// Job states in which Slurm still holds (or will again hold) resources for the job.
bool SlurmStateIsAlive(absl::string_view state);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_LAUNCHERS_SLURM_CLIENT_H_
