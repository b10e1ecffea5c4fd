#ifndef TAILOR_TESTS_E2E_PROCESS_H_
#define TAILOR_TESTS_E2E_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace tailor::e2e {

// A child process of an end-to-end test. stdout and stderr go to `log_path`. The destructor
// kills it (SIGKILL) so a failing test leaks nothing.
class Process {
 public:
  Process(std::vector<std::string> argv, std::string log_path,
          std::map<std::string, std::string> env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  void Signal(int sig);
  // Waits up to `timeout`; returns the exit code, 128+signal, or -1 on timeout.
  int Wait(absl::Duration timeout);
  void Kill();  // SIGKILL and reap
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  bool reaped_ = false;
  std::string log_path_;
};

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a command to completion (killed after `timeout`).
RunResult Run(const std::vector<std::string>& argv, absl::Duration timeout,
              const std::map<std::string, std::string>& env = {});

std::string ReadFile(const std::string& path);
// Polls `pred` every 50 ms until true or timeout.
bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout);

std::string BinDir();
std::string SourceDir();

}  // namespace tailor::e2e

#endif  // TAILOR_TESTS_E2E_PROCESS_H_
