#include "bench/coordinator_load/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

extern char** environ;

namespace tailor::bench {
namespace {

// posix_spawn rather than fork: the bench is multi-threaded (gRPC), and a forked child of a
// threaded process may only call async-signal-safe functions before exec.
absl::StatusOr<pid_t> SpawnWithOutput(const std::vector<std::string>& argv,
                                      const std::string& out_path, bool append, bool own_group) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const int flags = O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), flags, 0644);
  if (own_group) {
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  } else {
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (own_group) {
    // Its own process group, so a Ctrl-C aimed at the bench does not also hit the child
    // before the bench has read its peak RSS.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", strerror(rc)));
  }
  return pid;
}

// The value of a "Key:   123 kB" line of /proc/PID/status.
int64_t ProcStatusKib(pid_t pid, absl::string_view key) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, key)) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t kib = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) return kib;
  }
  return -1;
}

// Where the child writes its bound ports (--port-file): beside its log.
std::string PortFile(const CoordinatorProcess::Options& options) {
  return options.log_path + ".ports.json";
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Spawn(
    const Options& options) {
  if (access(options.binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("coordinator binary '", options.binary,
                                            "' is missing or not executable; build target "
                                            "tailor-coordinator or pass --coordinator-bin"));
  }
  std::unique_ptr<CoordinatorProcess> p(new CoordinatorProcess(options));
  const std::vector<std::string> argv = {options.binary,
                                         "--data-dir",
                                         options.data_dir,
                                         "--listen",
                                         absl::StrCat("127.0.0.1:", options.port),
                                         "--http-port",
                                         "0",
                                         "--log-level",
                                         options.log_level,
                                         "--port-file",
                                         PortFile(options)};
  // A restart on the same log must not read the previous run's ports.
  std::remove(PortFile(options).c_str());
  p->spawned_at_ = absl::Now();
  auto pid = SpawnWithOutput(argv, options.log_path, /*append=*/true, /*own_group=*/true);
  if (!pid.ok()) return pid.status();
  p->pid_ = *pid;
  return p;
}

CoordinatorProcess::~CoordinatorProcess() { Kill(); }

std::string CoordinatorProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

bool CoordinatorProcess::Running() {
  if (reaped_ || pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

void CoordinatorProcess::Kill() {
  if (reaped_ || pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
}

absl::StatusOr<int> CoordinatorProcess::WaitServing(absl::Duration timeout) {
  // The coordinator writes its ports to --port-file once serving (renamed into place, so a
  // read sees all of it or nothing). Not the log: it also says "http listening on port".
  static constexpr char kKey[] = "\"grpc_port\": ";
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const std::string ports = ReadWholeFile(PortFile(options_));
    const size_t at = ports.find(kKey);
    if (at != std::string::npos) {
      const size_t begin = at + sizeof(kKey) - 1;
      const size_t end = ports.find_first_not_of("0123456789", begin);
      if (end != std::string::npos &&
          absl::SimpleAtoi(absl::string_view(ports).substr(begin, end - begin), &port_)) {
        return port_;
      }
    }
    if (!Running()) {
      return absl::InternalError(
          absl::StrCat("coordinator exited before serving; see ", options_.log_path));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("coordinator not serving after ",
                                                      absl::FormatDuration(timeout), "; see ",
                                                      options_.log_path));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::optional<absl::Time> CoordinatorProcess::RecoveredAt() const {
  // spdlog pattern "%Y-%m-%dT%H:%M:%S.%e ..." in local time (coordinator/common logging).
  const std::string log = ReadWholeFile(options_.log_path);
  const size_t at = log.rfind("] recovered ");
  if (at == std::string::npos) return std::nullopt;
  const size_t line_start = log.rfind('\n', at);
  const size_t begin = line_start == std::string::npos ? 0 : line_start + 1;
  const std::string stamp = log.substr(begin, 23);
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*S", stamp, absl::LocalTimeZone(), &t, &err)) {
    return std::nullopt;
  }
  return t;
}

int64_t CoordinatorProcess::PeakRssKib() const { return ProcStatusKib(pid_, "VmHWM:"); }

double CoordinatorProcess::CpuSeconds() const {
  // Fields 14 and 15 of /proc/PID/stat (utime, stime) in clock ticks; the command name
  // (field 2) may contain spaces, so count from its closing parenthesis.
  const std::string stat = ReadWholeFile(absl::StrCat("/proc/", pid_, "/stat"));
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 2), ' ');
  // After ')': field 3 is index 0, so utime (14) is index 11 and stime (15) index 12.
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return 0;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double CoordinatorProcess::RunQueueWaitSeconds() const {
  std::error_code ec;
  double total = 0;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid_, "/task"), ec)) {
    // "<ns on cpu> <ns waiting on a run queue> <timeslices>"
    std::vector<std::string> fields =
        absl::StrSplit(ReadWholeFile(task.path().string() + "/schedstat"), ' ');
    int64_t wait_ns = 0;
    if (fields.size() >= 2 && absl::SimpleAtoi(fields[1], &wait_ns)) total += wait_ns * 1e-9;
  }
  return total;
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  CommandResult result;
  char out_template[] = "/tmp/tailor-bench-outXXXXXX";
  const int fd = mkstemp(out_template);
  if (fd < 0) return result;
  close(fd);
  auto pid = SpawnWithOutput(argv, out_template, /*append=*/false, /*own_group=*/false);
  if (!pid.ok()) {
    unlink(out_template);
    return result;
  }
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    if (waitpid(*pid, &status, WNOHANG) == *pid) {
      result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (absl::Now() > deadline) {
      kill(*pid, SIGKILL);
      waitpid(*pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  result.out = ReadWholeFile(out_template);
  unlink(out_template);
  return result;
}

std::optional<std::string> FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tailor::bench
