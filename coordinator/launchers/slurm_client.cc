#include "coordinator/launchers/slurm_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace tailor::coordinator {
namespace {

using nlohmann::json;

// Keeps Slurm's message readable in a job error: one line, no trailing blanks, bounded.
std::string OneLine(absl::string_view text, size_t max_len = 2000) {
  std::string s(absl::StripAsciiWhitespace(text));
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (s.size() > max_len) s = absl::StrCat(s.substr(0, max_len), "...");
  return s;
}

bool ContainsIgnoreCase(absl::string_view text, absl::string_view needle) {
  return absl::StrContains(absl::AsciiStrToLower(text), absl::AsciiStrToLower(needle));
}

// 22.05 prints job_state as a string; later versions as a list of flags ("RUNNING",
// "COMPLETING"). The first entry is the base state either way.
std::string StateOf(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && !v.empty() && v[0].is_string()) return v[0].get<std::string>();
  if (v.is_object() && v.contains("current")) return StateOf(v["current"]);
  return "";
}

// Job ids are numbers in JSON (strings in a few plugin versions).
std::string IdOf(const json& v) {
  if (v.is_number_integer()) return absl::StrCat(v.get<int64_t>());
  if (v.is_string()) return v.get<std::string>();
  return "";
}

// Integers that 23.x wraps as {"set": true, "number": N}.
int64_t IntOf(const json& v, int64_t fallback = 0) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_object() && v.contains("number") && v["number"].is_number_integer()) {
    return v["number"].get<int64_t>();
  }
  return fallback;
}

absl::Time TimeOf(const json& v) {
  const int64_t t = IntOf(v, 0);
  return t > 0 ? absl::FromUnixSeconds(t) : absl::InfinitePast();
}

absl::StatusOr<json> ParseJobsDocument(absl::string_view text, const char* what) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InternalError(absl::StrCat(what, " printed something that is not JSON: '",
                                            OneLine(text.substr(0, 200)), "'"));
  }
  if (doc.contains("errors") && doc["errors"].is_array() && !doc["errors"].empty()) {
    return absl::UnavailableError(
        absl::StrCat(what, " reported errors: ", OneLine(doc["errors"].dump())));
  }
  if (!doc.contains("jobs") || !doc["jobs"].is_array()) {
    return absl::InternalError(absl::StrCat(what, " JSON has no \"jobs\" array"));
  }
  return doc;
}

// A started command: its pid (also the id of its process group) and the read ends of the
// pipes on its stdout and stderr.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
};

// Starts argv (PATH lookup) with stdin from /dev/null and stdout/stderr on close-on-exec
// pipes. On failure returns false with the reason in *error and no descriptor left open.
bool SpawnCaptured(const std::vector<std::string>& argv, Child* child, std::string* error) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    *error = absl::StrCat("pipe: ", strerror(errno));
    return false;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    *error = absl::StrCat("pipe: ", strerror(errno));
    close(out_pipe[0]);
    close(out_pipe[1]);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  // Its own process group, so a timeout kills whatever the command started too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    *error = absl::StrCat("cannot run ", argv[0], ": ", strerror(rc));
    return false;
  }
  child->pid = pid;
  child->out_fd = out_pipe[0];
  child->err_fd = err_pipe[0];
  return true;
}

// Reads the child's stdout and stderr until both are closed, killing its process group once
// `timeout` has passed. Closes both read ends; returns whether the child was killed.
bool CollectOutput(const Child& child, absl::Duration timeout, std::string* out,
                   std::string* err) {
  const absl::Time deadline = absl::Now() + timeout;
  bool killed = false;
  struct pollfd fds[2] = {{child.out_fd, POLLIN, 0}, {child.err_fd, POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0 && !killed) {
      kill(-child.pid, SIGKILL);
      killed = true;
    }
    const int n = poll(fds, 2, killed ? 1000 : static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  return killed;
}

// Reaps the child (retrying when a signal interrupts the wait); its wait status.
int WaitForExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  CommandResult result;
  if (argv.empty()) {
    result.err = "empty command";
    return result;
  }
  Child child;
  if (!SpawnCaptured(argv, &child, &result.err)) return result;
  const bool killed = CollectOutput(child, timeout, &result.out, &result.err);
  const int status = WaitForExit(child.pid);
  if (killed) {
    result.exit_code = 128 + SIGKILL;
    absl::StrAppend(&result.err, "\n", argv[0], " did not finish within ",
                    absl::FormatDuration(timeout), " and was killed");
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

absl::StatusOr<std::string> ParseSbatchParsable(absl::string_view out) {
  absl::string_view line = absl::StripAsciiWhitespace(out);
  // Warnings may precede the id on their own lines; the id is the last line.
  const size_t nl = line.rfind('\n');
  if (nl != absl::string_view::npos) line = line.substr(nl + 1);
  const std::string id(line.substr(0, line.find(';')));
  int64_t n = 0;
  if (id.empty() || !absl::SimpleAtoi(id, &n) || n <= 0) {
    return absl::InternalError(
        absl::StrCat("sbatch --parsable printed no job id: '", OneLine(out, 200), "'"));
  }
  return id;
}

absl::Status SbatchFailure(const CommandResult& r) {
  const std::string msg = OneLine(r.err.empty() ? r.out : r.err);
  if (r.exit_code == -1 || r.exit_code == 126 || r.exit_code == 127) {
    return absl::FailedPreconditionError(absl::StrCat("cannot run sbatch: ", msg));
  }
  if (r.exit_code == 128 + SIGKILL) {
    // The controller may have accepted the job before sbatch was killed: the caller must look
    // for it by name rather than submit again.
    return absl::DeadlineExceededError(absl::StrCat("sbatch gave no answer: ", msg));
  }
  // Words Slurm uses when the controller is down, overloaded or restarting: the job itself
  // may be fine.
  static constexpr absl::string_view kTransient[] = {
      "Unable to contact slurm controller",
      "Socket timed out",
      "temporarily unable",
      "Resource temporarily unavailable",
      "Zero Bytes were transmitted",
      "Communication connection failure",
      "Slurmctld is busy",
      "Connection refused",
  };
  for (absl::string_view t : kTransient) {
    if (ContainsIgnoreCase(msg, t)) {
      return absl::UnavailableError(absl::StrCat("Slurm did not take the job: ", msg));
    }
  }
  return absl::FailedPreconditionError(absl::StrCat("Slurm refused the job: ", msg));
}

absl::StatusOr<std::vector<SlurmJobInfo>> ParseSqueueJson(absl::string_view text) {
  absl::StatusOr<json> doc = ParseJobsDocument(text, "squeue --json");
  if (!doc.ok()) return doc.status();
  std::vector<SlurmJobInfo> out;
  for (const json& j : (*doc)["jobs"]) {
    if (!j.is_object()) continue;
    SlurmJobInfo info;
    info.job_id = IdOf(j.value("job_id", json()));
    if (info.job_id.empty()) continue;
    info.name = j.value("name", "");
    info.state = StateOf(j.value("job_state", json()));
    info.reason = j.value("state_reason", "");
    if (info.reason == "None") info.reason.clear();
    info.exit_code = static_cast<int>(IntOf(j.value("exit_code", json()), 0));
    info.restart_count = static_cast<int>(IntOf(j.value("restart_cnt", json()), 0));
    info.start_time = TimeOf(j.value("start_time", json()));
    info.end_time = TimeOf(j.value("end_time", json()));
    out.push_back(std::move(info));
  }
  return out;
}

absl::StatusOr<std::vector<SlurmJobInfo>> ParseSacctJson(absl::string_view text) {
  absl::StatusOr<json> doc = ParseJobsDocument(text, "sacct --json");
  if (!doc.ok()) return doc.status();
  std::vector<SlurmJobInfo> out;
  for (const json& j : (*doc)["jobs"]) {
    if (!j.is_object()) continue;
    SlurmJobInfo info;
    info.job_id = IdOf(j.value("job_id", json()));
    if (info.job_id.empty()) continue;
    info.name = j.value("name", "");
    const json state = j.value("state", json());
    info.state = StateOf(state);
    if (state.is_object()) info.reason = state.value("reason", "");
    if (info.reason == "None") info.reason.clear();
    const json exit = j.value("exit_code", json());
    if (exit.is_object()) {
      info.exit_code = static_cast<int>(IntOf(exit.value("return_code", json()), 0));
    }
    info.restart_count = static_cast<int>(IntOf(j.value("restart_cnt", json()), 0));
    const json time = j.value("time", json());
    if (time.is_object()) {
      info.start_time = TimeOf(time.value("start", json()));
      info.end_time = TimeOf(time.value("end", json()));
    }
    out.push_back(std::move(info));
  }
  return out;
}

bool SlurmStateIsAlive(absl::string_view state) {
  static constexpr absl::string_view kFinal[] = {
      "COMPLETED", "FAILED",        "CANCELLED", "TIMEOUT",  "NODE_FAIL",
      "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
  };
  for (absl::string_view f : kFinal) {
    if (state == f) return false;
  }
  return true;
}

std::string CommandSlurmClient::Bin(const std::string& name) const {
  return options_.bin_dir.empty() ? name : absl::StrCat(options_.bin_dir, "/", name);
}

absl::StatusOr<std::string> CommandSlurmClient::Submit(const std::string& script_path) {
  CommandResult r = RunCommand({Bin("sbatch"), "--parsable", script_path}, options_.timeout);
  if (r.exit_code != 0) return SbatchFailure(r);
  return ParseSbatchParsable(r.out);
}

absl::StatusOr<std::vector<SlurmJobInfo>> CommandSlurmClient::Queue() {
  // --me keeps the answer to our own jobs on Slurm versions that filter JSON output (23.02+);
  // 22.05 ignores filters with --json and prints every job, which is still one call.
  CommandResult r = RunCommand({Bin("squeue"), "--json", "--me"}, options_.timeout);
  if (r.exit_code != 0) {
    return absl::UnavailableError(
        absl::StrCat("squeue --json failed (exit ", r.exit_code, "): ", OneLine(r.err)));
  }
  return ParseSqueueJson(r.out);
}

absl::StatusOr<std::vector<SlurmJobInfo>> CommandSlurmClient::Accounting(
    const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return std::vector<SlurmJobInfo>();
  // -X: the allocation only, not its steps (one row per job).
  CommandResult r = RunCommand(
      {Bin("sacct"), "--json", "-X", "-j", absl::StrJoin(job_ids, ",")}, options_.timeout);
  if (r.exit_code != 0) {
    const std::string msg = OneLine(r.err.empty() ? r.out : r.err);
    if (ContainsIgnoreCase(msg, "accounting storage is disabled")) {
      return absl::UnimplementedError(absl::StrCat("sacct: ", msg));
    }
    return absl::UnavailableError(
        absl::StrCat("sacct --json failed (exit ", r.exit_code, "): ", msg));
  }
  return ParseSacctJson(r.out);
}

absl::Status CommandSlurmClient::Cancel(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return absl::OkStatus();
  std::vector<std::string> argv = {Bin("scancel")};
  argv.insert(argv.end(), job_ids.begin(), job_ids.end());
  CommandResult r = RunCommand(argv, options_.timeout);
  if (r.exit_code != 0) {
    return absl::UnavailableError(
        absl::StrCat("scancel failed (exit ", r.exit_code, "): ", OneLine(r.err)));
  }
  return absl::OkStatus();
}

}  // namespace tailor::coordinator
