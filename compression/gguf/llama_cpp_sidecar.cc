#include "compression/gguf/llama_cpp_sidecar.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace tailor::gguf {
namespace {

using Json = nlohmann::json;

struct ChildResult {
  int wait_status = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
};

// The last few lines of the child's stderr, and llama.cpp's assertion line when a
// backtrace after it pushed it out of them: what the user needs to see.
std::string Tail(const std::string& err) {
  std::vector<absl::string_view> lines = absl::StrSplit(err, '\n', absl::SkipWhitespace());
  const size_t keep = 8;
  std::string assertion;
  if (lines.size() > keep) {
    for (size_t i = 0; i + keep < lines.size() && assertion.empty(); ++i) {
      if (absl::StrContains(lines[i], "GGML_ASSERT")) assertion = absl::StrCat(lines[i], "\n...\n");
    }
    lines.erase(lines.begin(), lines.end() - keep);
  }
  return absl::StrCat(assertion, absl::StrJoin(lines, "\n"));
}

// Reads both pipes until the child closes them or the deadline passes.
void Drain(int out_fd, int err_fd, absl::Time deadline, ChildResult& r) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      r.timed_out = true;
      return;
    }
    const int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        fds[i].fd = -1;  // closed (or broken): stop polling it
        --open_fds;
      }
    }
  }
}

// posix_spawnp with stdout and stderr on pipes, stdin from /dev/null.
absl::StatusOr<ChildResult> RunChild(const std::vector<std::string>& argv,
                                     absl::Duration timeout) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError("pipe2 failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return absl::NotFoundError(absl::StrCat("cannot run ", argv[0], ": ", std::strerror(rc)));
  }
  ChildResult r;
  Drain(out_pipe[0], err_pipe[0], absl::Now() + timeout, r);
  if (r.timed_out) kill(pid, SIGKILL);
  close(out_pipe[0]);
  close(err_pipe[0]);
  while (waitpid(pid, &r.wait_status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

absl::Status ChildError(const ChildResult& r, absl::Duration timeout) {
  const std::string tail = Tail(r.err);
  const std::string stderr_part = tail.empty() ? "" : absl::StrCat(":\n", tail);
  if (r.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        "llama.cpp sidecar: killed after the ", absl::FormatDuration(timeout), " timeout",
        stderr_part));
  }
  if (WIFSIGNALED(r.wait_status)) {
    const int sig = WTERMSIG(r.wait_status);
    return absl::InternalError(absl::StrCat("llama.cpp sidecar: killed by signal ", sig, " (",
                                            strsignal(sig), ")", stderr_part));
  }
  const int code = WIFEXITED(r.wait_status) ? WEXITSTATUS(r.wait_status) : -1;
  if (absl::StrContains(r.err, "node-llama-cpp is not installed")) {
    return absl::NotFoundError(absl::StrCat("llama.cpp sidecar", stderr_part));
  }
  return absl::InternalError(
      absl::StrCat("llama.cpp sidecar: exit code ", code, stderr_part));
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

std::string DefaultSidecarScript() {
  if (const char* env = std::getenv("TAILOR_LLAMA_SIDECAR"); env != nullptr && *env != '\0') {
    return env;
  }
  return absl::StrCat(TAILOR_SOURCE_DIR, "/tools/llama-sidecar/next_token_logprobs.mjs");
}

absl::StatusOr<NextTokenLogprobs> ParseSidecarOutput(const std::string& json) {
  const Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("logprobs") ||
      !j.contains("vocab_size") || !j.contains("positions")) {
    return absl::InternalError(absl::StrCat("llama.cpp sidecar: unexpected output: ",
                                            json.substr(0, 200)));
  }
  NextTokenLogprobs r;
  if (!j["vocab_size"].is_number_integer() || !j["positions"].is_array() ||
      !j["logprobs"].is_array()) {
    return absl::InternalError("llama.cpp sidecar: vocab_size, positions or logprobs malformed");
  }
  r.vocab_size = j["vocab_size"].get<int64_t>();
  for (const Json& p : j["positions"]) {
    r.positions.push_back(p.is_number_integer() ? p.get<int64_t>() : -1);
  }
  r.node_llama_cpp_version = j.value("node_llama_cpp", "");
  r.llama_cpp_release = j.value("llama_cpp", "");
  for (const Json& row : j["logprobs"]) {
    if (!row.is_array()) return absl::InternalError("llama.cpp sidecar: a row is not an array");
    std::vector<double> values;
    values.reserve(row.size());
    for (const Json& x : row) {
      values.push_back(x.is_number() ? x.get<double>()
                                     : -std::numeric_limits<double>::infinity());
    }
    if (static_cast<int64_t>(values.size()) != r.vocab_size) {
      return absl::InternalError(absl::StrCat("llama.cpp sidecar: a row has ", values.size(),
                                              " values, vocab_size is ", r.vocab_size));
    }
    r.logprobs.push_back(std::move(values));
  }
  if (r.logprobs.size() != r.positions.size()) {
    return absl::InternalError("llama.cpp sidecar: one row per position expected");
  }
  return r;
}

absl::StatusOr<NextTokenLogprobs> RunNextTokenLogprobs(const std::string& gguf_path,
                                                       const std::vector<int32_t>& tokens,
                                                       const std::vector<int64_t>& positions,
                                                       const SidecarOptions& options) {
  const std::string script = options.script.empty() ? DefaultSidecarScript() : options.script;
  if (!FileExists(script)) {
    return absl::NotFoundError(absl::StrCat("llama.cpp sidecar: no script at ", script));
  }
  std::vector<std::string> argv = {options.node, script, "--model", gguf_path, "--tokens",
                                   absl::StrJoin(tokens, ","), "--threads",
                                   absl::StrCat(options.threads)};
  if (!positions.empty()) {
    argv.push_back("--positions");
    argv.push_back(absl::StrJoin(positions, ","));
  }
  absl::StatusOr<ChildResult> r = RunChild(argv, options.timeout);
  if (!r.ok()) return r.status();
  if (r->timed_out || !WIFEXITED(r->wait_status) || WEXITSTATUS(r->wait_status) != 0) {
    return ChildError(*r, options.timeout);
  }
  return ParseSidecarOutput(r->out);
}

}  // namespace tailor::gguf
