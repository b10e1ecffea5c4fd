#include "coordinator/launchers/local_launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

extern char** environ;

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {

int ThreadsPerRank(int ranks, int cores) {
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, ranks));
}

int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

LocalLauncher::LocalLauncher(LocalLauncherOptions options, FailureCallback on_failure)
    : options_(std::move(options)), on_failure_(std::move(on_failure)) {
  reaper_ = std::thread([this] { ReapLoop(); });
}

LocalLauncher::~LocalLauncher() {
  stop_.store(true);
  if (reaper_.joinable()) reaper_.join();
  // Workers outlive a coordinator restart on purpose (they keep their leases); only a
  // deliberate shutdown path would kill them, and that is Cancel's job.
}

absl::StatusOr<int> LocalLauncher::RanksOnThisHost(const v1::ResourceSpec& r) const {
  const int nodes = std::max(1, r.nodes());
  const int per_node = std::max(1, r.ranks_per_node());
  if (nodes != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the local launcher runs single-node jobs; this one asks for ", nodes,
        " nodes (start the coordinator with --launcher slurm)"));
  }
  if (per_node > options_.max_ranks) {
    return absl::FailedPreconditionError(absl::StrCat("job asks for ", per_node,
                                                      " ranks; the local launcher allows ",
                                                      options_.max_ranks));
  }
  if (access(options_.worker_bin.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker binary '", options_.worker_bin, "' is not executable"));
  }
  return per_node;
}

std::vector<std::string> LocalLauncher::RankEnvironment(const v1::AcquireJobResponse& a,
                                                        const RankPlace& place) const {
  std::vector<std::string> env = {
      absl::StrCat("TAILOR_COORDINATOR=", options_.coordinator),
      absl::StrCat("TAILOR_LEASE_ID=", a.lease().id()),
      absl::StrCat("TAILOR_WORK_DIR=", place.work_dir),
      // Survives attempts: a retried search or distillation resumes from its checkpoints.
      absl::StrCat("TAILOR_CHECKPOINT_DIR=", options_.data_dir, "/work/", a.job().id(),
                   "/checkpoints"),
      absl::StrCat("TAILOR_LAUNCHER=local"),
      absl::StrCat("RANK=", place.rank),
      absl::StrCat("LOCAL_RANK=", place.rank),
      absl::StrCat("WORLD_SIZE=", place.world_size),
      "MASTER_ADDR=127.0.0.1",
      absl::StrCat("MASTER_PORT=", place.master_port),
  };
  if (!options_.token.empty()) env.push_back(absl::StrCat("TAILOR_TOKEN=", options_.token));
  // The host's cores shared among the ranks: LibTorch's OpenMP pool defaults to every core
  // in every rank, and oversubscribed pools spin-wait, which starved the ranks' heartbeat
  // threads past their lease on 2-core machines. An operator's OMP_NUM_THREADS wins.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    env.push_back(absl::StrCat("OMP_NUM_THREADS=", ThreadsPerRank(place.world_size)));
  }
  if (!options_.ca_cert.empty()) {
    env.push_back(absl::StrCat("TAILOR_CA_CERT=", options_.ca_cert));
  }
  // The coordinator's own environment, less what is set above.
  std::vector<std::string> full_env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const std::string& ours : env) overridden |= ours.rfind(key + "=", 0) == 0;
    if (!overridden) full_env.push_back(kv);
  }
  full_env.insert(full_env.end(), env.begin(), env.end());
  return full_env;
}

absl::StatusOr<pid_t> LocalLauncher::SpawnRank(std::vector<std::string> env,
                                               const std::string& log) const {
  // Everything the child needs is built before fork: between fork and exec a child of a
  // multi-threaded process may only make async-signal-safe calls (no malloc).
  std::vector<char*> envp;
  for (std::string& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(options_.worker_bin.c_str()), nullptr};
  pid_t pid = fork();
  if (pid < 0) return absl::ResourceExhaustedError(absl::StrCat("fork failed: ", strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    execve(argv[0], argv, envp.data());
    _exit(127);
  }
  // Both sides set the group: whichever runs first wins, so a Cancel right after Launch
  // always finds the group.
  setpgid(pid, pid);
  return pid;
}

absl::Status LocalLauncher::Launch(const v1::AcquireJobResponse& a) {
  TAILOR_ASSIGN_OR_RETURN(const int per_node, RanksOnThisHost(a.job().resources()));
  const std::string log_dir = absl::StrCat(options_.data_dir, "/logs/", a.job().id());
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  RankPlace place;
  place.world_size = per_node;
  place.work_dir =
      absl::StrCat(options_.data_dir, "/work/", a.job().id(), "/attempt-", a.lease().attempt());
  std::filesystem::create_directories(place.work_dir, ec);
  place.master_port = PickFreePort();
  if (place.master_port == 0) {
    return absl::UnavailableError("no free port for the rendezvous store");
  }
  Ranks ranks;
  for (place.rank = 0; place.rank < per_node; ++place.rank) {
    const std::string log =
        place.rank == 0
            ? absl::StrCat(log_dir, "/attempt-", a.lease().attempt(), ".log")
            : absl::StrCat(log_dir, "/attempt-", a.lease().attempt(), ".rank", place.rank, ".log");
    absl::StatusOr<pid_t> pid = SpawnRank(RankEnvironment(a, place), log);
    if (!pid.ok()) {
      KillAll(ranks, SIGKILL);
      return pid.status();
    }
    ranks.pids.push_back(*pid);
    ranks.exited.push_back(false);
  }
  spdlog::info("job={} lease={} launched {} local ranks (rendezvous 127.0.0.1:{})", a.job().id(),
               a.lease().id(), per_node, place.master_port);
  absl::MutexLock lock(&mu_);
  running_[a.lease().id()] = std::move(ranks);
  return absl::OkStatus();
}

void LocalLauncher::KillAll(const Ranks& ranks, int sig) {
  for (size_t i = 0; i < ranks.pids.size(); ++i) {
    if (!ranks.exited[i]) kill(-ranks.pids[i], sig);
  }
}

void LocalLauncher::Cancel(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  auto it = running_.find(lease_id);
  if (it == running_.end()) return;
  it->second.cancelled = true;
  it->second.cancelled_at = absl::Now();
  KillAll(it->second, SIGTERM);
  spdlog::info("lease={} cancelled: SIGTERM to {} ranks", lease_id, it->second.pids.size());
}

size_t LocalLauncher::RunningForTest() {
  absl::MutexLock lock(&mu_);
  return running_.size();
}

void LocalLauncher::ReapLoop() {
  while (!stop_.load()) {
    std::vector<std::pair<std::string, std::string>> failures;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = running_.begin(); it != running_.end();) {
        Ranks& ranks = it->second;
        for (size_t i = 0; i < ranks.pids.size(); ++i) {
          if (ranks.exited[i]) continue;
          int st = 0;
          if (waitpid(ranks.pids[i], &st, WNOHANG) != ranks.pids[i]) continue;
          ranks.exited[i] = true;
          const bool clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
          if (!clean && !ranks.failed && !ranks.cancelled) {
            ranks.failed = true;
            const std::string why =
                WIFSIGNALED(st) ? absl::StrCat("rank ", i, " killed by signal ", WTERMSIG(st))
                                : absl::StrCat("rank ", i, " exited with code ", WEXITSTATUS(st));
            failures.emplace_back(it->first, why);
            // A lost rank breaks every collective; stop the others now rather than at the
            // collective timeout.
            KillAll(ranks, SIGTERM);
          }
        }
        // Ranks that ignore SIGTERM for too long after a cancel are killed.
        if (ranks.cancelled && absl::Now() - ranks.cancelled_at > absl::Seconds(10)) {
          KillAll(ranks, SIGKILL);
        }
        bool all = true;
        for (bool e : ranks.exited) all = all && e;
        it = all ? running_.erase(it) : std::next(it);
      }
    }
    for (const auto& [lease, why] : failures) {
      spdlog::warn("lease={} {}", lease, why);
      on_failure_(lease, why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace tailor::coordinator
