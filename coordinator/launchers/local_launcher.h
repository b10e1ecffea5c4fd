#ifndef TAILOR_COORDINATOR_LAUNCHERS_LOCAL_LAUNCHER_H_
#define TAILOR_COORDINATOR_LAUNCHERS_LOCAL_LAUNCHER_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/coordinator.h"

namespace tailor::coordinator {

struct LocalLauncherOptions {
  std::string worker_bin;   // path of tailor-worker
  std::string coordinator;  // HOST:PORT the workers dial
  std::string data_dir;     // logs go to data_dir/logs/<job>/attempt-<n>[.rank<r>].log
  int max_ranks = 16;       // per job on this host
  std::string token;        // TAILOR_TOKEN of the ranks (an agent token; empty = none)
  std::string ca_cert;      // TAILOR_CA_CERT of the ranks (PEM path; empty = plaintext)
};

// Starts each launcher-placed job as WORLD_SIZE tailor-worker processes on this host, wired
// for a c10d TCPStore rendezvous (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK) and
// given the lease id (TAILOR_LEASE_ID). Rank 0 reports to the coordinator. If any rank dies
// abnormally the others are stopped and `on_failure(lease_id, why)` is called, which the
// server turns into a retryable failure (ignored when rank 0 already completed the lease).
class LocalLauncher : public Launcher {
 public:
  using FailureCallback = std::function<void(const std::string& lease_id, const std::string&)>;
  LocalLauncher(LocalLauncherOptions options, FailureCallback on_failure);
  ~LocalLauncher() override;

  std::string name() const override { return "local"; }
  absl::Status Launch(const v1::AcquireJobResponse& assignment) override;
  void Cancel(const std::string& lease_id) override;

  // Number of leases with live processes.
  size_t RunningForTest();

 private:
  struct Ranks {
    std::vector<pid_t> pids;
    std::vector<bool> exited;
    bool failed = false;
    bool cancelled = false;
    absl::Time cancelled_at;
  };
  // Where one rank sits in its job.
  struct RankPlace {
    int rank = 0;
    int world_size = 1;
    int master_port = 0;
    std::string work_dir;
  };
  // The ranks per node a job's resources ask for, when this host can run them.
  absl::StatusOr<int> RanksOnThisHost(const v1::ResourceSpec& resources) const;
  // The rank's whole environment: the coordinator's own, with the rendezvous, lease, work and
  // checkpoint dirs, token, CA and thread count set for the rank.
  std::vector<std::string> RankEnvironment(const v1::AcquireJobResponse& a,
                                           const RankPlace& place) const;
  // fork + exec of tailor-worker with `env`, stdout and stderr appended to `log`, in a process
  // group of its own.
  absl::StatusOr<pid_t> SpawnRank(std::vector<std::string> env, const std::string& log) const;
  void ReapLoop();
  static void KillAll(const Ranks& ranks, int sig);

  const LocalLauncherOptions options_;
  const FailureCallback on_failure_;
  absl::Mutex mu_;
  std::map<std::string, Ranks> running_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread reaper_;
};

// The intra-op threads each of `ranks` ranks on one host gets: the host's cores (`cores`, or
// the hardware's when 0) split evenly, at least 1.
int ThreadsPerRank(int ranks, int cores = 0);

// A TCP port that was free a moment ago on 127.0.0.1 (for the rendezvous store).
int PickFreePort();

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_LAUNCHERS_LOCAL_LAUNCHER_H_
