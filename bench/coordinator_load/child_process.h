#ifndef TAILOR_BENCH_COORDINATOR_LOAD_CHILD_PROCESS_H_
#define TAILOR_BENCH_COORDINATOR_LOAD_CHILD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tailor::bench {

// A tailor-coordinator child process. stdout and stderr go to one log file, which is how the
// bench learns when recovery finished; the bound port comes from its --port-file. The destructor SIGKILLs it, so an
// early return never leaks a coordinator holding a port and a data dir.
class CoordinatorProcess {
 public:
  struct Options {
    std::string binary;
    std::string data_dir;
    std::string log_path;
    int port = 0;  // 0 = let the coordinator pick a free port
    std::string log_level = "info";
  };

  // Spawns the binary; returns once it runs (not yet serving: see WaitServing).
  static absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Spawn(const Options& options);
  ~CoordinatorProcess();
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  // Polls the --port-file for the bound gRPC port; fails if the process exits or the timeout
  // passes.
  absl::StatusOr<int> WaitServing(absl::Duration timeout);
  // When the "recovered ..." log line was written, from its timestamp (ms resolution).
  std::optional<absl::Time> RecoveredAt() const;

  void Kill();  // SIGKILL and reap; no shutdown path runs, like a crash
  bool Running();

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  std::string address() const;
  absl::Time spawned_at() const { return spawned_at_; }
  const std::string& log_path() const { return options_.log_path; }
  // VmHWM (peak resident set) in KiB, or -1 when /proc cannot tell.
  int64_t PeakRssKib() const;
  // User + system CPU time the process has used so far, in seconds.
  double CpuSeconds() const;
  // Summed over its live threads: seconds spent runnable but waiting for a CPU
  // (/proc/PID/task/*/schedstat). High values mean the machine, not the coordinator, is the
  // limit.
  double RunQueueWaitSeconds() const;

 private:
  explicit CoordinatorProcess(Options options) : options_(std::move(options)) {}

  Options options_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int port_ = 0;
  absl::Time spawned_at_;
};

struct CommandResult {
  int exit_code = -1;  // -1: killed after the timeout or could not start
  std::string out;     // stdout
};

// Runs a command to completion, killing it after `timeout`. stderr is discarded.
CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout);

// The absolute path of `name` in $PATH, if any.
std::optional<std::string> FindInPath(const std::string& name);

std::string ReadWholeFile(const std::string& path);

// CPU time (user + system) this process has used so far, in seconds.
double SelfCpuSeconds();

}  // namespace tailor::bench

#endif  // TAILOR_BENCH_COORDINATOR_LOAD_CHILD_PROCESS_H_
