#include "compression/gguf/llama_cpp_sidecar.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
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

// An unnamed in-memory file holding `text`, read from its start: the child's stdin. A file,
// not a pipe, so that the parent never blocks writing a large request nor dies of SIGPIPE
// when the child exits without reading it. -1 on failure.
int StdinFile(const std::string& text) {
  const int fd = memfd_create("llama-sidecar-request", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// posix_spawnp with stdout and stderr on pipes, stdin `stdin_text` (empty: /dev/null).
absl::StatusOr<ChildResult> RunChild(const std::vector<std::string>& argv,
                                     const std::string& stdin_text, absl::Duration timeout) {
  const int in_fd = stdin_text.empty() ? -1 : StdinFile(stdin_text);
  if (!stdin_text.empty() && in_fd < 0) {
    return absl::InternalError(
        absl::StrCat("llama.cpp sidecar: cannot hold the request: ", std::strerror(errno)));
  }
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    if (in_fd >= 0) close(in_fd);
    return absl::InternalError("pipe2 failed");
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    if (in_fd >= 0) close(in_fd);
    return absl::InternalError("pipe2 failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (in_fd >= 0) {
    // The copy on fd 0 loses FD_CLOEXEC, the memfd itself keeps it.
    posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
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
  if (in_fd >= 0) close(in_fd);
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

// The sidecar script of `options` (empty: the default) run by RunSidecarScript.
absl::StatusOr<std::string> RunSidecar(const std::vector<std::string>& flags,
                                       const std::string& stdin_text, absl::Duration timeout,
                                       const SidecarOptions& options) {
  const std::string script = options.script.empty() ? DefaultSidecarScript() : options.script;
  return RunSidecarScript(script, flags, stdin_text, timeout, options);
}

// One prompt's {"positions": [...], "logprobs": [[vocab_size values]...]} into `r`; the
// message does not name the sidecar (the callers prefix it).
absl::Status ParseResult(const Json& j, NextTokenLogprobs& r) {
  if (!j.is_object() || !j.contains("positions") || !j["positions"].is_array() ||
      !j.contains("logprobs") || !j["logprobs"].is_array()) {
    return absl::InternalError("positions or logprobs missing or not arrays");
  }
  for (const Json& p : j["positions"]) {
    r.positions.push_back(p.is_number_integer() ? p.get<int64_t>() : -1);
  }
  for (const Json& row : j["logprobs"]) {
    if (!row.is_array()) return absl::InternalError("a row is not an array");
    std::vector<double> values;
    values.reserve(row.size());
    for (const Json& x : row) {
      values.push_back(x.is_number() ? x.get<double>() : -std::numeric_limits<double>::infinity());
    }
    if (static_cast<int64_t>(values.size()) != r.vocab_size) {
      return absl::InternalError(
          absl::StrCat("a row has ", values.size(), " values, vocab_size is ", r.vocab_size));
    }
    r.logprobs.push_back(std::move(values));
  }
  if (r.logprobs.size() != r.positions.size()) {
    return absl::InternalError("one row per position expected");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RunSidecarScript(const std::string& script_path,
                                             const std::vector<std::string>& args,
                                             const std::string& stdin_text, absl::Duration timeout,
                                             const SidecarOptions& options) {
  if (!FileExists(script_path)) {
    return absl::NotFoundError(absl::StrCat("llama.cpp sidecar: no script at ", script_path));
  }
  std::vector<std::string> argv = {options.node, script_path};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunEngineProcess(argv, stdin_text, timeout);
}

absl::StatusOr<std::string> RunEngineProcess(const std::vector<std::string>& argv,
                                             const std::string& stdin_text,
                                             absl::Duration timeout) {
  if (argv.empty()) return absl::InvalidArgumentError("llama.cpp sidecar: no program to run");
  if (argv[0].find('/') != std::string::npos && !FileExists(argv[0])) {
    return absl::NotFoundError(absl::StrCat("llama.cpp sidecar: no program at ", argv[0]));
  }
  absl::StatusOr<ChildResult> r = RunChild(argv, stdin_text, timeout);
  if (!r.ok()) return r.status();
  if (r->timed_out || !WIFEXITED(r->wait_status) || WEXITSTATUS(r->wait_status) != 0) {
    return ChildError(*r, timeout);
  }
  return std::move(r->out);
}

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
  if (!j["vocab_size"].is_number_integer() || !j["positions"].is_array() ||
      !j["logprobs"].is_array()) {
    return absl::InternalError("llama.cpp sidecar: vocab_size, positions or logprobs malformed");
  }
  NextTokenLogprobs r;
  r.vocab_size = j["vocab_size"].get<int64_t>();
  r.node_llama_cpp_version = j.value("node_llama_cpp", "");
  r.llama_cpp_release = j.value("llama_cpp", "");
  if (absl::Status s = ParseResult(j, r); !s.ok()) {
    return absl::InternalError(absl::StrCat("llama.cpp sidecar: ", s.message()));
  }
  return r;
}

absl::StatusOr<std::vector<NextTokenLogprobs>> ParseSidecarBatchOutput(const std::string& json,
                                                                       size_t prompts) {
  const Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("results") || !j.contains("vocab_size")) {
    return absl::InternalError(
        absl::StrCat("llama.cpp sidecar: unexpected output: ", json.substr(0, 200)));
  }
  if (!j["vocab_size"].is_number_integer() || !j["results"].is_array()) {
    return absl::InternalError("llama.cpp sidecar: vocab_size or results malformed");
  }
  if (j["results"].size() != prompts) {
    return absl::InternalError(absl::StrCat("llama.cpp sidecar: ", j["results"].size(),
                                            " results for ", prompts, " prompts"));
  }
  std::vector<NextTokenLogprobs> out(prompts);
  for (size_t i = 0; i < prompts; ++i) {
    out[i].vocab_size = j["vocab_size"].get<int64_t>();
    out[i].node_llama_cpp_version = j.value("node_llama_cpp", "");
    out[i].llama_cpp_release = j.value("llama_cpp", "");
    if (absl::Status s = ParseResult(j["results"][i], out[i]); !s.ok()) {
      return absl::InternalError(absl::StrCat("llama.cpp sidecar: prompt ", i, ": ", s.message()));
    }
  }
  return out;
}

absl::StatusOr<NextTokenLogprobs> RunNextTokenLogprobs(const std::string& gguf_path,
                                                       const std::vector<int32_t>& tokens,
                                                       const std::vector<int64_t>& positions,
                                                       const SidecarOptions& options) {
  std::vector<std::string> flags = {"--model",   gguf_path,
                                    "--threads", absl::StrCat(options.threads),
                                    "--tokens",  absl::StrJoin(tokens, ",")};
  if (!positions.empty()) {
    flags.push_back("--positions");
    flags.push_back(absl::StrJoin(positions, ","));
  }
  absl::StatusOr<std::string> out = RunSidecar(flags, "", options.timeout, options);
  if (!out.ok()) return out.status();
  return ParseSidecarOutput(*out);
}

absl::StatusOr<std::vector<NextTokenLogprobs>> RunNextTokenLogprobsBatch(
    const std::string& gguf_path, const std::vector<std::vector<int32_t>>& prompts,
    const std::vector<int64_t>& positions, const SidecarOptions& options) {
  if (prompts.empty()) return std::vector<NextTokenLogprobs>();
  Json request = {{"prompts", Json::array()}};
  for (const std::vector<int32_t>& tokens : prompts) {
    Json prompt = {{"tokens", tokens}};
    if (!positions.empty()) prompt["positions"] = positions;
    request["prompts"].push_back(std::move(prompt));
  }
  const absl::Duration timeout =
      options.timeout + options.timeout_per_extra_prompt * static_cast<int64_t>(prompts.size() - 1);
  absl::StatusOr<std::string> out =
      RunSidecar({"--model", gguf_path, "--batch", "--threads", absl::StrCat(options.threads)},
                 request.dump(), timeout, options);
  if (!out.ok()) return out.status();
  return ParseSidecarBatchOutput(*out, prompts.size());
}

std::string LlamaCppSidecarMissing(const std::string& script) {
  const std::string dir = script.substr(0, script.find_last_of('/'));
  if (access(script.c_str(), R_OK) != 0) return "no " + script;
  if (access((dir + "/node_modules/node-llama-cpp/package.json").c_str(), R_OK) != 0) {
    return "node-llama-cpp is not installed in " + dir + " (run deploy/install-deps.sh)";
  }
  if (std::system("command -v node >/dev/null 2>&1") != 0) return "node is not on PATH";
  return "";
}

}  // namespace tailor::gguf
