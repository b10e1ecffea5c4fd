#include "tests/e2e/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace tailor::e2e {
namespace {

pid_t Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd,
            const std::map<std::string, std::string>& env) {
  pid_t pid = fork();
  if (pid == 0) {
    // Own process group, so a test can kill a whole tree.
    setpgid(0, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int Decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

Process::Process(std::vector<std::string> argv, std::string log_path,
                 std::map<std::string, std::string> env)
    : log_path_(std::move(log_path)) {
  int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_ = Spawn(argv, fd, fd, env);
  close(fd);
}

Process::~Process() { Kill(); }

bool Process::Running() {
  if (reaped_ || pid_ <= 0) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = st;
    return false;
  }
  return true;
}

void Process::Signal(int sig) {
  if (!reaped_ && pid_ > 0) kill(pid_, sig);
}

int Process::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (Running()) {
    if (absl::Now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Decode(status_);
}

void Process::Kill() {
  if (reaped_ || pid_ <= 0) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  int st = 0;
  waitpid(pid_, &st, 0);
  status_ = st;
  reaped_ = true;
}

RunResult Run(const std::vector<std::string>& argv, absl::Duration timeout,
              const std::map<std::string, std::string>& env) {
  char out_tmpl[] = "/tmp/tailor-e2e-outXXXXXX";
  char err_tmpl[] = "/tmp/tailor-e2e-errXXXXXX";
  int out_fd = mkstemp(out_tmpl);
  int err_fd = mkstemp(err_tmpl);
  pid_t pid = Spawn(argv, out_fd, err_fd, env);
  close(out_fd);
  close(err_fd);
  RunResult result;
  const absl::Time deadline = absl::Now() + timeout;
  int st = 0;
  while (true) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      result.exit_code = Decode(st);
      break;
    }
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      result.exit_code = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  result.out = ReadFile(out_tmpl);
  result.err = ReadFile(err_tmpl);
  unlink(out_tmpl);
  unlink(err_tmpl);
  return result;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

std::string BinDir() { return TAILOR_BIN_DIR; }
std::string SourceDir() { return TAILOR_SOURCE_DIR; }

}  // namespace tailor::e2e
