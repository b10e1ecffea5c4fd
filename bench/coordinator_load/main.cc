// bench_coordinator_load: how much load one tailor-coordinator takes. A real coordinator
// process, real gRPC clients on loopback, a fresh data dir per phase:
//   1. submissions/s and submit latency with 1, 8 and 64 concurrent clients;
//   2. lease round trips (AcquireJob + CompleteJob) with a deep queue and many agents;
//   3. restart-to-serving after SIGKILL with that queue in the database;
//   4. peak RSS after 2 and 3;
//   5. a Slurm sbatch baseline when a controller answers.
// Prints a table and writes JSON (see docs/benchmarks.md).
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/coordinator_load/child_process.h"
#include "bench/coordinator_load/load_phases.h"
#include "bench/coordinator_load/report.h"

namespace tailor::bench {
namespace {

namespace fs = std::filesystem;

// Recovery of a big database may legitimately take long; this only bounds a hung start.
constexpr absl::Duration kStartTimeout = absl::Minutes(5);

struct Run {
  BenchConfig config;
  std::string work_dir;
  int next_log = 0;

  CoordinatorProcess::Options Options(const std::string& data_dir, int port = 0) {
    CoordinatorProcess::Options o;
    o.binary = config.coordinator_bin;
    o.data_dir = data_dir;
    o.log_path = absl::StrCat(work_dir, "/coordinator-", next_log++, ".log");
    o.port = port;
    o.log_level = config.coordinator_log_level;
    return o;
  }

  absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Start(const std::string& data_dir,
                                                            int port = 0) {
    auto proc = CoordinatorProcess::Spawn(Options(data_dir, port));
    if (!proc.ok()) return proc.status();
    if (auto port_or = (*proc)->WaitServing(kStartTimeout); !port_or.ok()) {
      return port_or.status();
    }
    return proc;
  }
};

double LoadAverage() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : 0;
}

std::string MachineDescription() {
  utsname u{};
  uname(&u);
  return absl::StrCat(sysconf(_SC_NPROCESSORS_ONLN), " CPUs, ", u.sysname, " ", u.release, " ",
                      u.machine);
}

int64_t DatabaseBytes(const std::string& data_dir) {
  int64_t total = 0;
  for (const char* name : {"/tailor.db", "/tailor.db-wal"}) {
    std::error_code ec;
    const auto size = fs::file_size(data_dir + name, ec);
    if (!ec) total += static_cast<int64_t>(size);
  }
  return total;
}

// Usage counters at construction; Elapsed() is what the phase since then cost.
class UsageMeter {
 public:
  explicit UsageMeter(const CoordinatorProcess& c)
      : c_(c), cpu_(c.CpuSeconds()), wait_(c.RunQueueWaitSeconds()), self_(SelfCpuSeconds()) {}
  ProcessUsage Elapsed() const {
    ProcessUsage u;
    u.coordinator_cpu_s = c_.CpuSeconds() - cpu_;
    u.coordinator_wait_s = c_.RunQueueWaitSeconds() - wait_;
    u.client_cpu_s = SelfCpuSeconds() - self_;
    return u;
  }

 private:
  const CoordinatorProcess& c_;
  const double cpu_, wait_, self_;
};

// Phase 1: a fresh coordinator per client count, so every count starts from an empty database.
absl::Status MeasureSubmissions(Run& run, BenchResults& results) {
  for (int clients : run.config.submit_clients) {
    const std::string dir = absl::StrCat(run.work_dir, "/submit-", clients);
    auto proc = run.Start(dir);
    if (!proc.ok()) return proc.status();
    std::cerr << "phase 1: " << clients << " clients for " << run.config.phase_seconds << " s\n";
    SubmitLoadOptions options;
    options.address = (*proc)->address();
    options.clients = clients;
    options.duration = absl::Seconds(run.config.phase_seconds);
    options.request_id_prefix = absl::StrCat("submit-c", clients);
    const UsageMeter meter(**proc);
    auto result = RunSubmitLoad(options);
    if (!result.ok()) return result.status();
    result->usage = meter.Elapsed();
    results.submissions.push_back(*result);
  }
  return absl::OkStatus();
}

// Phase 2: seed `queued` campaigns, register agents, then time lease round trips. Returns the
// still-running coordinator so phase 3 restarts it on the same database.
absl::StatusOr<std::unique_ptr<CoordinatorProcess>> MeasureLeases(Run& run, BenchResults& results) {
  const std::string dir = run.work_dir + "/lease";
  auto proc = run.Start(dir);
  if (!proc.ok()) return proc.status();
  CoordinatorProcess& c = **proc;
  std::cerr << "phase 2: seeding " << run.config.queued << " campaigns with "
            << run.config.seed_clients << " clients\n";
  SubmitLoadOptions seed;
  seed.address = c.address();
  seed.clients = run.config.seed_clients;
  seed.total = run.config.queued;
  seed.request_id_prefix = "seed";
  const UsageMeter seed_meter(c);
  auto seeded = RunSubmitLoad(seed);
  if (!seeded.ok()) return seeded.status();
  seeded->usage = seed_meter.Elapsed();
  results.seeding = *seeded;
  results.db_bytes_after_seeding = DatabaseBytes(dir);
  if (seeded->submitted != run.config.queued) {
    return absl::InternalError(absl::StrCat("seeding queued ", seeded->submitted, " of ",
                                            run.config.queued,
                                            " campaigns; first error: ", seeded->first_error));
  }

  std::cerr << "phase 2: listing every campaign\n";
  results.listing = ListEveryCampaign(c.address());

  std::cerr << "phase 2: registering " << run.config.agents << " agents\n";
  const absl::Time reg_start = absl::Now();
  auto agents = RegisterAgents(c.address(), run.config.agents);
  if (!agents.ok()) return agents.status();
  results.register_s = absl::ToDoubleSeconds(absl::Now() - reg_start);

  std::cerr << "phase 2: " << run.config.round_trips << " lease round trips on "
            << run.config.lease_threads << " threads\n";
  const UsageMeter lease_meter(c);
  auto lease = RunLeaseRoundTrips(c.address(), *agents, run.config.lease_threads,
                                  run.config.round_trips, /*seed=*/42);
  if (!lease.ok()) return lease.status();
  lease->usage = lease_meter.Elapsed();
  results.lease = *lease;
  results.rss_after_lease_kib = c.PeakRssKib();
  return proc;
}

// Phase 3: SIGKILL (no clean shutdown, like a crash) and start again on the same data dir and
// port; time exec -> first successful ListQueue.
absl::Status MeasureRestarts(Run& run, std::unique_ptr<CoordinatorProcess> proc,
                             BenchResults& results) {
  const int port = proc->port();
  const std::string dir = run.work_dir + "/lease";
  for (int i = 0; i < run.config.restarts; ++i) {
    std::cerr << "phase 3: restart " << i + 1 << "/" << run.config.restarts << "\n";
    proc->Kill();
    proc.reset();
    auto next = CoordinatorProcess::Spawn(run.Options(dir, port));
    if (!next.ok()) return next.status();
    proc = *std::move(next);
    if (auto p = proc->WaitServing(kStartTimeout); !p.ok()) return p.status();
    RestartRun r;
    r.listening_s = absl::ToDoubleSeconds(absl::Now() - proc->spawned_at());
    const absl::Time give_up = absl::Now() + kStartTimeout;
    absl::Status st;
    while (!(st = ListQueueOnce(proc->address(), absl::Seconds(30))).ok()) {
      if (absl::Now() > give_up) {
        return absl::DeadlineExceededError(
            absl::StrCat("ListQueue never succeeded: ", st.ToString()));
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    r.serving_s = absl::ToDoubleSeconds(absl::Now() - proc->spawned_at());
    r.cpu_s = proc->CpuSeconds();
    r.wait_s = proc->RunQueueWaitSeconds();
    if (auto t = proc->RecoveredAt(); t.has_value()) {
      r.recovered_s = absl::ToDoubleSeconds(*t - proc->spawned_at());
    }
    r.peak_rss_kib = proc->PeakRssKib();
    results.restarts.push_back(r);
  }
  return absl::OkStatus();
}

void MeasureSlurm(const Run& run, BenchResults& results) {
  SlurmProbe probe = ProbeSlurm();
  if (!probe.available) {
    results.slurm_reason = probe.reason;
    return;
  }
  std::vector<SubmitLoadResult> slurm;
  for (int clients : {1, 8}) {
    std::cerr << "phase 5: sbatch with " << clients << " clients\n";
    slurm.push_back(RunSlurmLoad(probe, clients, absl::Seconds(run.config.phase_seconds)));
  }
  results.slurm = std::move(slurm);
}

absl::Status WriteJson(const std::string& path, const nlohmann::json& j) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out.good()) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status RunAll(Run& run, BenchResults& results) {
  if (auto st = MeasureSubmissions(run, results); !st.ok()) return st;
  auto proc = MeasureLeases(run, results);
  if (!proc.ok()) return proc.status();
  if (auto st = MeasureRestarts(run, *std::move(proc), results); !st.ok()) return st;
  MeasureSlurm(run, results);
  return absl::OkStatus();
}

}  // namespace
}  // namespace tailor::bench

int main(int argc, char** argv) {
  using tailor::bench::BenchConfig;
  CLI::App app{
      "bench_coordinator_load: submissions/s, lease latency at a deep queue, "
      "restart-to-serving and peak RSS of a real tailor-coordinator"};
  BenchConfig config;
  config.coordinator_bin = std::string(TAILOR_BIN_DIR) + "/tailor-coordinator";
  std::string json_out = "bench/out/coordinator_load.json";
  std::string work_base = "/tmp";
  bool keep = false;
  app.add_option("--coordinator-bin", config.coordinator_bin, "tailor-coordinator to measure")
      ->capture_default_str();
  auto* duration =
      app.add_option("--duration", config.phase_seconds, "seconds per timed submission phase")
          ->check(CLI::Range(0.1, 3600.0))
          ->capture_default_str();
  auto* queued = app.add_option("--queued", config.queued, "queued jobs for phases 2-3")
                     ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
                     ->capture_default_str();
  auto* agents = app.add_option("--agents", config.agents, "registered agents")
                     ->check(CLI::Range(1, 1000000))
                     ->capture_default_str();
  auto* trips = app.add_option("--round-trips", config.round_trips, "lease round trips")
                    ->check(CLI::Range(int64_t{1}, int64_t{100000000}))
                    ->capture_default_str();
  app.add_option("--lease-threads", config.lease_threads, "client threads for round trips")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--seed-clients", config.seed_clients, "concurrent clients seeding the queue")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--restarts", config.restarts, "restart measurements (median reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--coordinator-log-level", config.coordinator_log_level,
                 "the coordinator's --log-level (info is what production runs)")
      ->capture_default_str();
  app.add_flag("--quick", config.quick,
               "1 s phases, 10000 queued, 200 agents, 1000 round trips (explicit flags win)");
  app.add_option("--json-out", json_out, "where the JSON goes")->capture_default_str();
  app.add_option("--work-dir", work_base, "parent of the temporary data dirs")
      ->capture_default_str();
  app.add_flag("--keep", keep, "keep data dirs and coordinator logs for inspection");
  CLI11_PARSE(app, argc, argv);
  if (config.quick) {
    if (duration->count() == 0) config.phase_seconds = 1;
    if (queued->count() == 0) config.queued = 10000;
    if (agents->count() == 0) config.agents = 200;
    if (trips->count() == 0) config.round_trips = 1000;
  }
  std::vector<std::string> args(argv, argv + argc);
  config.command_line = absl::StrJoin(args, " ");

  tailor::bench::Run run{config, ""};
  std::string tmpl = work_base + "/tailor-bench-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::cerr << "bench_coordinator_load: cannot create a directory under " << work_base << "\n";
    return 1;
  }
  run.work_dir = tmpl;

  tailor::bench::BenchResults results;
  results.date = absl::FormatTime("%Y-%m-%dT%H:%M:%S%Ez", absl::Now(), absl::LocalTimeZone());
  results.machine = tailor::bench::MachineDescription();
  results.loadavg_start = tailor::bench::LoadAverage();
  absl::Status st = tailor::bench::RunAll(run, results);
  results.loadavg_end = tailor::bench::LoadAverage();
  if (!st.ok()) {
    std::cerr << "bench_coordinator_load: " << st << " (data and logs kept in " << run.work_dir
              << ")\n";
    return 1;
  }
  tailor::bench::PrintTable(config, results, std::cout);
  if (auto w = tailor::bench::WriteJson(json_out, tailor::bench::ToJson(config, results));
      !w.ok()) {
    std::cerr << "bench_coordinator_load: " << w << "\n";
    return 1;
  }
  std::cout << "\nJSON: " << json_out << "\n";
  if (keep) {
    std::cout << "data and coordinator logs kept in " << run.work_dir << "\n";
  } else {
    std::error_code ec;
    std::filesystem::remove_all(run.work_dir, ec);
  }
  // Refused calls are a broken bench or a broken coordinator, never a figure: the smoke test
  // in the test command fails on them (the lease phase once ran with every CompleteJob
  // refused for a missing agent id, and passed).
  if (results.lease.errors > 0) {
    std::cerr << "bench_coordinator_load: " << results.lease.errors
              << " lease round trips failed; first: " << results.lease.first_error << "\n";
    return 1;
  }
  // Likewise a listing that fails, misses campaigns or breaks its byte bound.
  const tailor::bench::ListingResult& listing = results.listing;
  if (!tailor::bench::ListingHolds(config, listing)) {
    std::cerr << "bench_coordinator_load: listing " << listing.campaigns << " of "
              << config.queued << " campaigns, largest page " << listing.max_page_bytes
              << " bytes (bound " << tailor::bench::kListingBoundBytes << ")"
              << (listing.error.empty() ? "" : "; ") << listing.error << "\n";
    return 1;
  }
  return 0;
}
