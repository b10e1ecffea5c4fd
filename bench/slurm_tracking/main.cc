// bench_slurm_tracking: how the Slurm launcher follows many jobs on a real controller.
//
// For each --jobs N it hands N synthetic assignments to a SlurmLauncher (the production class,
// with the real sbatch/squeue/sacct/scancel client and its own thread) on a running cluster
// (deploy/dev-slurm/start.sh). Each Slurm job runs one task that writes the wall time at which
// it starts and ends, sleeps a random --min-sleep..--max-sleep seconds, and exits without
// reporting to any coordinator; the launcher therefore has to notice both changes by polling:
// PENDING -> RUNNING (recorded state) and RUNNING -> COMPLETED (recorded state, then the attempt
// failed as "completed without a completion report").
//
// Prints and writes (bench/out/slurm_tracking.json), per N:
//   - calls the launcher made to the controller per minute while tracking: squeue, sacct,
//     scancel (sbatch is one per job submitted, reported apart);
//   - delay from the task's own start/end time to the moment the launcher recorded RUNNING /
//     the final state: p50, p99, max.
//
//   bench_slurm_tracking [--jobs N]... [--poll-interval S] [--min-sleep S] [--max-sleep S]
//                        [--partition P] [--json-out PATH] [--keep] [--quick]
//
// --quick is the test command's smoke mode (bench_slurm_tracking_quick): one phase of 3 jobs
// sleeping 1..3 s, squeue every second, on the dev cluster, which it starts itself
// (deploy/dev-slurm/start.sh, idempotent) as tests/e2e/slurm_e2e_test.cc does. It fails when a
// job is not seen to end; when the dev cluster cannot be started (not root, no Slurm packages)
// it says "bench_slurm_tracking: skipped: ...", writes that reason as its JSON and exits 0.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "coordinator/launchers/slurm_client.h"
#include "coordinator/launchers/slurm_launcher.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace tailor::bench {
namespace {

using coordinator::CommandSlurmClient;
using coordinator::CommandSlurmClientOptions;
using coordinator::SlurmAttemptSink;
using coordinator::SlurmLauncher;
using coordinator::SlurmLauncherOptions;
using nlohmann::json;

struct Flags {
  std::vector<int> jobs = {20, 200};
  double poll_interval_s = 10;
  int min_sleep_s = 20;
  int max_sleep_s = 90;
  std::string partition;
  std::string json_out = "bench/out/slurm_tracking.json";
  int timeout_s = 1200;
  bool keep = false;
  bool quick = false;
};

// Stands in for the coordinator: timestamps what the launcher reports.
class TimingSink : public SlurmAttemptSink {
 public:
  absl::Status RecordLaunch(const std::string& lease, const std::string& id,
                            const std::string& state, const std::string& reason) override {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    Seen& s = seen_[lease];
    s.slurm_id = id;
    if (state == "RUNNING" && s.running == absl::InfinitePast()) s.running = now;
    if (!coordinator::SlurmStateIsAlive(state) && s.ended == absl::InfinitePast()) {
      s.ended = now;
      s.final_state = state;
    }
    ++records_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> KeepAlive(
      const std::vector<std::string>& leases) override {
    absl::MutexLock lock(&mu_);
    ++keepalives_;
    return std::vector<std::string>();
  }
  absl::Status FailAttempt(const std::string& lease, const std::string& error,
                           bool retryable) override {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    Seen& s = seen_[lease];
    if (s.ended == absl::InfinitePast()) s.ended = now;
    s.error = error;
    ++ended_;
    return absl::OkStatus();
  }

  struct Seen {
    std::string slurm_id, final_state, error;
    absl::Time running = absl::InfinitePast();
    absl::Time ended = absl::InfinitePast();
  };
  std::map<std::string, Seen> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  int ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }
  int64_t records() {
    absl::MutexLock lock(&mu_);
    return records_;
  }
  int64_t keepalives() {
    absl::MutexLock lock(&mu_);
    return keepalives_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, Seen> seen_ ABSL_GUARDED_BY(mu_);
  int ended_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t records_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t keepalives_ ABSL_GUARDED_BY(mu_) = 0;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double rank = p * (v.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - lo) * (v[hi] - v[lo]);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The task's own wall time, written by the worker script ("" when it never got there).
absl::Time TaskTime(const std::string& path) {
  double t = 0;
  const std::string text(absl::StripAsciiWhitespace(ReadText(path)));
  if (text.empty() || !absl::SimpleAtod(text, &t)) return absl::InfinitePast();
  return absl::FromUnixMicros(static_cast<int64_t>(t * 1e6));
}

json Stats(const std::vector<double>& v) {
  return {{"n", v.size()},
          {"p50_s", Percentile(v, 0.5)},
          {"p99_s", Percentile(v, 0.99)},
          {"max_s", v.empty() ? NAN : *std::max_element(v.begin(), v.end())}};
}

json RunPhase(const Flags& flags, int n, const std::string& root) {
  const std::string dir = absl::StrCat(root, "/n", n);
  std::filesystem::create_directories(dir);
  // The "worker": one task that timestamps its start and end around a sleep whose length is
  // the last field of the lease id.
  const std::string worker = dir + "/sleeper.sh";
  {
    std::ofstream out(worker);
    out << "#!/bin/sh\n"
           "date +%s.%N > \"$TAILOR_WORK_DIR/start\"\n"
           "sleep \"${TAILOR_LEASE_ID##*-}\"\n"
           "date +%s.%N > \"$TAILOR_WORK_DIR/end\"\n";
  }
  std::filesystem::permissions(worker, std::filesystem::perms::owner_all |
                                           std::filesystem::perms::group_read |
                                           std::filesystem::perms::others_read);

  SlurmLauncherOptions o;
  o.worker_bin = worker;
  o.coordinator = "127.0.0.1:1";  // never dialled: the sleeper does not report
  o.data_dir = dir;
  o.partition = flags.partition;
  o.poll_interval = absl::Milliseconds(static_cast<int64_t>(flags.poll_interval_s * 1000));
  CommandSlurmClient client(CommandSlurmClientOptions{});
  TimingSink sink;
  std::mt19937 rng(42 + n);
  std::uniform_int_distribution<int> sleep_s(flags.min_sleep_s, flags.max_sleep_s);

  std::vector<std::pair<std::string, std::string>> leases;  // lease, job
  auto launcher = std::make_unique<SlurmLauncher>(o, &client, &sink, Clock::Real());
  const absl::Time start = absl::Now();
  for (int i = 0; i < n; ++i) {
    v1::AcquireJobResponse a;
    a.set_assigned(true);
    a.set_campaign_id("c-bench");
    const std::string job = absl::StrFormat("j-bench-n%d-%04d", n, i);
    const std::string lease = absl::StrFormat("l-bench-n%d-%04d-%d", n, i, sleep_s(rng));
    a.mutable_lease()->set_id(lease);
    a.mutable_lease()->set_attempt(1);
    a.mutable_job()->set_id(job);
    a.mutable_job()->set_kind("sleep");
    v1::ResourceSpec* r = a.mutable_job()->mutable_resources();
    r->set_nodes(1);
    r->set_ranks_per_node(1);
    r->set_time_limit_s(3600);
    absl::Status st = launcher->Launch(a);
    if (!st.ok()) {
      std::fprintf(stderr, "launch %s: %s\n", lease.c_str(), st.ToString().c_str());
      return json();
    }
    leases.emplace_back(lease, job);
  }
  // Every job ends as "completed without a completion report".
  const absl::Time deadline = start + absl::Seconds(flags.timeout_s);
  int last_print = -1;
  while (sink.ended() < n && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
    const int done = sink.ended();
    if (done / 20 != last_print / 20) {
      std::fprintf(stderr, "  n=%d: %d/%d ended after %.0f s\n", n, done, n,
                   absl::ToDoubleSeconds(absl::Now() - start));
      last_print = done;
    }
  }
  const absl::Time end = absl::Now();
  const SlurmLauncher::Stats calls = launcher->stats();
  launcher.reset();

  std::vector<double> start_delay, end_delay;
  int missing = 0;
  absl::Time first_submit_done = absl::InfiniteFuture();
  const auto seen = sink.seen();
  for (const auto& [lease, job] : leases) {
    const std::string work = absl::StrCat(dir, "/work/", job, "/attempt-1");
    const absl::Time t_start = TaskTime(work + "/start");
    const absl::Time t_end = TaskTime(work + "/end");
    auto it = seen.find(lease);
    if (it == seen.end() || t_start == absl::InfinitePast() || t_end == absl::InfinitePast()) {
      ++missing;
      continue;
    }
    if (it->second.running != absl::InfinitePast()) {
      start_delay.push_back(absl::ToDoubleSeconds(it->second.running - t_start));
    }
    if (it->second.ended != absl::InfinitePast()) {
      end_delay.push_back(absl::ToDoubleSeconds(it->second.ended - t_end));
    }
    first_submit_done = std::min(first_submit_done, t_start);
  }
  const double minutes = absl::ToDoubleMinutes(end - start);
  const int64_t controller = calls.squeue + calls.sacct + calls.scancel;
  json out = {
      {"jobs", n},
      {"poll_interval_s", flags.poll_interval_s},
      {"sleep_s", {flags.min_sleep_s, flags.max_sleep_s}},
      {"tracking_minutes", minutes},
      {"calls",
       {{"sbatch", calls.sbatch},
        {"squeue", calls.squeue},
        {"sacct", calls.sacct},
        {"scancel", calls.scancel}}},
      {"controller_calls_per_minute", controller / minutes},
      {"squeue_per_minute", calls.squeue / minutes},
      {"naive_per_job_polling_calls_per_minute", n * 60.0 / flags.poll_interval_s},
      {"launcher_keepalives_per_minute", sink.keepalives() / minutes},
      {"detect_running", Stats(start_delay)},
      {"detect_end", Stats(end_delay)},
      {"jobs_without_timestamps", missing},
  };
  return out;
}

// --quick: the dev cluster started (or found running) and this process pointed at it; the
// reason when it cannot be started.
absl::Status StartDevSlurm() {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "the Slurm dev cluster needs root to run slurmd (deploy/dev-slurm/start.sh)");
  }
  const coordinator::CommandResult start = coordinator::RunCommand(
      {"bash", absl::StrCat(TAILOR_SOURCE_DIR, "/deploy/dev-slurm/start.sh")}, absl::Seconds(300));
  if (start.exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("deploy/dev-slurm/start.sh exited ", start.exit_code,
                                               ": ", start.err, start.out));
  }
  const char* dir = std::getenv("TAILOR_SLURM_DIR");
  setenv("SLURM_CONF",
         absl::StrCat(dir != nullptr ? dir : "/tmp/tailor-dev-slurm", "/etc/slurm.conf").c_str(),
         1);
  return absl::OkStatus();
}

bool WriteJson(const std::string& path, const json& j) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) std::fprintf(stderr, "bench_slurm_tracking: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

std::string Row(const json& r, const char* what, const json& s) {
  return absl::StrFormat("| %4d | %-9s | %5.2f | %5.2f | %5.2f | %3d |",
                         r["jobs"].get<int>(), what, s["p50_s"].get<double>(),
                         s["p99_s"].get<double>(), s["max_s"].get<double>(),
                         s["n"].get<int>());
}

}  // namespace
}  // namespace tailor::bench

int main(int argc, char** argv) {
  using namespace tailor::bench;
  Flags flags;
  // --quick changes the defaults, so flags given beside it still apply.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") {
      flags.jobs = {3};
      flags.poll_interval_s = 1;
      flags.min_sleep_s = 1;
      flags.max_sleep_s = 3;
      flags.timeout_s = 120;
    }
  }
  CLI::App app{"bench_slurm_tracking: controller calls and state-change delay of the Slurm "
               "launcher on a running Slurm cluster"};
  app.add_option("--jobs", flags.jobs, "tracked jobs per phase (repeatable)");
  app.add_option("--poll-interval", flags.poll_interval_s, "seconds between squeue calls")
      ->check(CLI::Range(0.2, 600.0))
      ->capture_default_str();
  app.add_option("--min-sleep", flags.min_sleep_s, "shortest job, seconds")->capture_default_str();
  app.add_option("--max-sleep", flags.max_sleep_s, "longest job, seconds")->capture_default_str();
  app.add_option("--partition", flags.partition, "Slurm partition (default: the default)");
  app.add_option("--timeout", flags.timeout_s, "seconds per phase before giving up")
      ->capture_default_str();
  app.add_option("--json-out", flags.json_out)->capture_default_str();
  app.add_flag("--keep", flags.keep, "keep scripts, logs and timestamps");
  app.add_flag("--quick", flags.quick,
               "smoke mode: 3 jobs of 1..3 s, squeue every 1 s, 120 s timeout, on the dev "
               "cluster it starts (skips, exit 0, when that cannot start)");
  CLI11_PARSE(app, argc, argv);
  if (flags.min_sleep_s < 1 || flags.max_sleep_s < flags.min_sleep_s) {
    std::fprintf(stderr, "--min-sleep must be >= 1 and <= --max-sleep\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::err);  // every job "fails" by design; keep the output readable
  if (flags.quick) {
    if (absl::Status st = StartDevSlurm(); !st.ok()) {
      std::printf("bench_slurm_tracking: skipped: %s\n", std::string(st.message()).c_str());
      return WriteJson(flags.json_out,
                       {{"bench", "slurm_tracking"}, {"skipped", std::string(st.message())}})
                 ? 0
                 : 1;
    }
  }
  tailor::coordinator::CommandResult probe =
      tailor::coordinator::RunCommand({"sinfo", "-h"}, absl::Seconds(10));
  if (probe.exit_code != 0) {
    std::fprintf(stderr,
                 "no running Slurm (sinfo: %s); start one with deploy/dev-slurm/start.sh\n",
                 probe.err.c_str());
    return 1;
  }
  const std::string root = absl::StrCat("/tmp/tailor-bench-slurm-", getpid());
  json phases = json::array();
  for (int n : flags.jobs) {
    std::fprintf(stderr, "phase: %d jobs, squeue every %.1f s, sleeps %d..%d s\n", n,
                 flags.poll_interval_s, flags.min_sleep_s, flags.max_sleep_s);
    json r = RunPhase(flags, n, root);
    if (r.is_null()) return 1;
    phases.push_back(r);
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  double load[3] = {};
  if (getloadavg(load, 3) < 0) load[0] = NAN;
  json out = {{"bench", "slurm_tracking"},
              {"time", absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(), absl::UTCTimeZone())},
              {"host", host},
              {"cpus", sysconf(_SC_NPROCESSORS_ONLN)},
              {"loadavg_1m", load[0]},
              {"phases", phases}};

  std::printf("\nController calls while tracking (squeue every %.1f s):\n\n", flags.poll_interval_s);
  std::printf("| jobs | minutes | sbatch | squeue | sacct | scancel | controller calls/min | "
              "per-job polling would be |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const json& r : phases) {
    std::printf("| %d | %.1f | %lld | %lld | %lld | %lld | %.1f | %.0f |\n", r["jobs"].get<int>(),
                r["tracking_minutes"].get<double>(), r["calls"]["sbatch"].get<long long>(),
                r["calls"]["squeue"].get<long long>(), r["calls"]["sacct"].get<long long>(),
                r["calls"]["scancel"].get<long long>(),
                r["controller_calls_per_minute"].get<double>(),
                r["naive_per_job_polling_calls_per_minute"].get<double>());
  }
  std::printf("\nDelay from the task's own start/end to tailor's recorded state (seconds):\n\n");
  std::printf("| jobs | change    |   p50 |   p99 |   max |   n |\n"
              "|-----:|-----------|------:|------:|------:|----:|\n");
  for (const json& r : phases) {
    std::printf("%s\n%s\n", Row(r, "-> RUNNING", r["detect_running"]).c_str(),
                Row(r, "-> ended", r["detect_end"]).c_str());
  }
  std::printf("\n%s, %ld CPUs, load average %.1f\n", host, sysconf(_SC_NPROCESSORS_ONLN),
              load[0]);
  if (!WriteJson(flags.json_out, out)) return 1;
  std::printf("JSON: %s\n", flags.json_out.c_str());
  if (!flags.keep) std::filesystem::remove_all(root);
  // The smoke test's one check: the launcher saw every job end (no timing is asserted).
  if (flags.quick) {
    for (const json& r : phases) {
      if (r["detect_end"]["n"].get<int>() != r["jobs"].get<int>()) {
        std::fprintf(stderr, "bench_slurm_tracking: %d of %d jobs seen to end\n",
                     r["detect_end"]["n"].get<int>(), r["jobs"].get<int>());
        return 1;
      }
    }
  }
  return 0;
}
