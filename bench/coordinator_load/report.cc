#include "bench/coordinator_load/report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tailor::bench {
namespace {

// Issue #19's targets (the first two were 2,000/s and 2 s before group commit).
constexpr double kTargetSubmitsPerSecond = 3000;
constexpr double kTargetSubmitP99Ms = 100;
constexpr int kTargetSubmitClients = 64;
constexpr double kTargetLeaseP99Ms = 10;
constexpr double kTargetRestartSeconds = 1.5;

double Mib(int64_t kib) { return kib < 0 ? -1 : kib / 1024.0; }

nlohmann::json LatencyJson(const LatencySummary& l) {
  return {{"count", l.count},
          {"p50_ms", l.p50_ms},
          {"p99_ms", l.p99_ms},
          {"max_ms", l.max_ms},
          {"mean_ms", l.mean_ms}};
}

nlohmann::json UsageJson(const ProcessUsage& u) {
  return {{"coordinator_cpu_s", u.coordinator_cpu_s},
          {"coordinator_runqueue_wait_s", u.coordinator_wait_s},
          {"client_cpu_s", u.client_cpu_s}};
}

nlohmann::json SubmitJson(const SubmitLoadResult& r) {
  nlohmann::json j = {{"clients", r.clients},       {"submitted", r.submitted},
                      {"errors", r.errors},         {"seconds", r.seconds},
                      {"per_second", r.per_second}, {"latency", LatencyJson(r.latency)},
                      {"usage", UsageJson(r.usage)}};
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  return j;
}

const SubmitLoadResult* SubmitsWith(const std::vector<SubmitLoadResult>& all, int clients) {
  for (const SubmitLoadResult& r : all) {
    if (r.clients == clients) return &r;
  }
  return nullptr;
}

std::string PassText(const std::optional<bool>& pass) {
  if (!pass.has_value()) return "n/a";
  return *pass ? "PASS" : "MISS";
}

// Seconds of CPU (or of waiting for one) per second of wall time: 1.0 = one core's worth.
double Cores(double cpu_s, double wall_s) { return wall_s > 0 ? cpu_s / wall_s : 0; }

std::string UsageText(const ProcessUsage& u, double wall_s) {
  return absl::StrFormat("%5.2f %5.2f %5.2f", Cores(u.coordinator_cpu_s, wall_s),
                         Cores(u.coordinator_wait_s, wall_s), Cores(u.client_cpu_s, wall_s));
}

}  // namespace

double RestartMedianSeconds(const BenchResults& results) {
  if (results.restarts.empty()) return 0;
  std::vector<double> s;
  for (const RestartRun& r : results.restarts) s.push_back(r.serving_s);
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

bool ListingHolds(const BenchConfig& config, const ListingResult& listing) {
  return listing.error.empty() && listing.campaigns >= config.queued &&
         listing.max_page_bytes <= kListingBoundBytes;
}

std::vector<TargetCheck> CheckTargets(const BenchConfig& config, const BenchResults& results) {
  std::vector<TargetCheck> checks;
  TargetCheck submit{absl::StrCat("submissions/s, ", kTargetSubmitClients, " clients"),
                     absl::StrFormat(">= %.0f/s, p99 <= %.0f ms", kTargetSubmitsPerSecond,
                                     kTargetSubmitP99Ms),
                     "not run",
                     {}};
  if (const SubmitLoadResult* r = SubmitsWith(results.submissions, kTargetSubmitClients)) {
    submit.measured = absl::StrFormat("%.0f/s, %.1f ms", r->per_second, r->latency.p99_ms);
    submit.pass =
        r->per_second >= kTargetSubmitsPerSecond && r->latency.p99_ms <= kTargetSubmitP99Ms;
  }
  checks.push_back(submit);

  TargetCheck listing{absl::StrCat("ListCampaigns page, ", config.queued, " stored"),
                      absl::StrFormat("<= %d KiB, all listed", kListingBoundBytes / 1024),
                      absl::StrFormat("%.0f KiB, %d listed", results.listing.max_page_bytes / 1024.0,
                                      results.listing.campaigns),
                      ListingHolds(config, results.listing)};
  checks.push_back(listing);

  TargetCheck lease{absl::StrCat("AcquireJob p99, ", config.queued, " queued"),
                    absl::StrFormat("<= %.0f ms (at 100000 queued)", kTargetLeaseP99Ms),
                    "not run",
                    {}};
  if (results.lease.acquire.count > 0) {
    lease.measured = absl::StrFormat("%.2f ms", results.lease.acquire.p99_ms);
    lease.pass = results.lease.acquire.p99_ms <= kTargetLeaseP99Ms;
  }
  checks.push_back(lease);

  TargetCheck restart{"restart-to-serving, median",
                      absl::StrFormat("<= %.1f s (at 100000 queued)", kTargetRestartSeconds),
                      "not run",
                      {}};
  if (!results.restarts.empty()) {
    const double median = RestartMedianSeconds(results);
    restart.measured = absl::StrFormat("%.2f s", median);
    restart.pass = median <= kTargetRestartSeconds;
  }
  checks.push_back(restart);
  return checks;
}

void PrintTable(const BenchConfig& config, const BenchResults& results, std::ostream& out) {
  out << absl::StrFormat("\ncoordinator load | %s | %s | load average %.2f -> %.2f\n", results.date,
                         results.machine, results.loadavg_start, results.loadavg_end);
  out << "\nsubmissions (PROBE contracts, distinct request ids)\n"
      << "  cores = CPU-seconds per second: coordinator on CPU, coordinator runnable but waiting\n"
      << "  for a CPU, and this load generator on CPU\n";
  out << absl::StrFormat("  %-22s %9s %8s %8s %8s %6s  %s\n", "phase", "submitted", "per s",
                         "p50 ms", "p99 ms", "errors", "cores: coord  wait client");
  auto row = [&](const std::string& name, const SubmitLoadResult& r) {
    out << absl::StrFormat("  %-22s %9d %8.0f %8.2f %8.2f %6d         %s\n", name, r.submitted,
                           r.per_second, r.latency.p50_ms, r.latency.p99_ms, r.errors,
                           UsageText(r.usage, r.seconds));
  };
  for (const SubmitLoadResult& r : results.submissions) {
    row(absl::StrCat(r.clients, r.clients == 1 ? " client" : " clients"), r);
  }
  row(absl::StrCat("seeding (", results.seeding.clients, " clients)"), results.seeding);
  out << absl::StrFormat("  database after seeding: %.1f MiB (tailor.db + WAL)\n",
                         results.db_bytes_after_seeding / 1048576.0);

  const ListingResult& g = results.listing;
  out << absl::StrFormat(
      "\nlisting every campaign (ListCampaigns, page_size 1000): %d campaigns in %d pages, "
      "largest page %.1f KiB (bound %d KiB), per page p50 %.2f ms, p99 %.2f ms%s\n",
      g.campaigns, g.pages, g.max_page_bytes / 1024.0, kListingBoundBytes / 1024,
      g.page.p50_ms, g.page.p99_ms, g.error.empty() ? "" : absl::StrCat("; ", g.error));

  const LeaseLoadResult& l = results.lease;
  out << absl::StrFormat(
      "\nlease round trips (%d queued, %d agents, %d threads, %d round trips, %.0f/s)\n",
      config.queued, config.agents, l.threads, l.round_trips, l.per_second);
  out << absl::StrFormat("  %-22s %9s %9s %9s %9s\n", "call", "p50 ms", "p99 ms", "max ms",
                         "mean ms");
  auto lat = [&](const std::string& name, const LatencySummary& s) {
    out << absl::StrFormat("  %-22s %9.2f %9.2f %9.2f %9.2f\n", name, s.p50_ms, s.p99_ms, s.max_ms,
                           s.mean_ms);
  };
  lat("AcquireJob(wait_ms=0)", l.acquire);
  lat("CompleteJob(success)", l.complete);
  lat("round trip", l.round_trip);
  out << absl::StrFormat("  errors %d, not assigned %d, cores: coord  wait client %s\n", l.errors,
                         l.not_assigned, UsageText(l.usage, l.seconds));
  if (!l.first_error.empty()) out << "  first error: " << l.first_error << "\n";

  out << absl::StrFormat("\nrestart after SIGKILL (%d queued jobs in the database)\n",
                         config.queued);
  for (size_t i = 0; i < results.restarts.size(); ++i) {
    const RestartRun& r = results.restarts[i];
    out << absl::StrFormat(
        "  run %d: serving (first ListQueue) %.3f s, listening %.3f s, recovered log %s, "
        "VmHWM %.1f MiB, CPU %.2f s, waited for CPU %.2f s\n",
        i + 1, r.serving_s, r.listening_s,
        r.recovered_s.has_value() ? absl::StrFormat("%.3f s", *r.recovered_s) : "n/a",
        Mib(r.peak_rss_kib), r.cpu_s, r.wait_s);
  }
  out << absl::StrFormat("  median %.3f s\n", RestartMedianSeconds(results));
  out << absl::StrFormat(
      "\npeak RSS (VmHWM): after lease phase %.1f MiB, after restart %.1f MiB\n",
      Mib(results.rss_after_lease_kib),
      results.restarts.empty() ? -1.0 : Mib(results.restarts.back().peak_rss_kib));

  if (!results.slurm.has_value()) {
    out << "\nslurm: not available (no running slurmctld)\n  why: " << results.slurm_reason << "\n";
  } else {
    out << "\nslurm baseline (sbatch --parsable --wrap true -o /dev/null)\n";
    for (const SubmitLoadResult& s : *results.slurm) {
      const SubmitLoadResult* t = SubmitsWith(results.submissions, s.clients);
      out << absl::StrFormat("  %2d clients: %8.1f/s, p50 %.1f ms, p99 %.1f ms, errors %d",
                             s.clients, s.per_second, s.latency.p50_ms, s.latency.p99_ms, s.errors);
      if (t != nullptr && s.per_second > 0) {
        out << absl::StrFormat(", tailor/slurm %.1fx", t->per_second / s.per_second);
      }
      out << "\n";
    }
  }

  out << "\ntargets\n";
  for (const TargetCheck& c : CheckTargets(config, results)) {
    out << absl::StrFormat("  %-36s %-30s %-22s %s\n", c.name, c.target, c.measured,
                           PassText(c.pass));
  }
}

nlohmann::json ToJson(const BenchConfig& config, const BenchResults& results) {
  nlohmann::json j;
  j["benchmark"] = "coordinator_load";
  j["date"] = results.date;
  j["machine"] = results.machine;
  j["loadavg"] = {{"start", results.loadavg_start}, {"end", results.loadavg_end}};
  j["config"] = {{"coordinator_bin", config.coordinator_bin},
                 {"phase_seconds", config.phase_seconds},
                 {"submit_clients", config.submit_clients},
                 {"queued", config.queued},
                 {"seed_clients", config.seed_clients},
                 {"agents", config.agents},
                 {"lease_threads", config.lease_threads},
                 {"round_trips", config.round_trips},
                 {"restarts", config.restarts},
                 {"quick", config.quick},
                 {"coordinator_log_level", config.coordinator_log_level},
                 {"command", config.command_line}};
  j["submissions"] = nlohmann::json::array();
  for (const SubmitLoadResult& r : results.submissions) j["submissions"].push_back(SubmitJson(r));
  j["seeding"] = SubmitJson(results.seeding);
  j["seeding"]["db_bytes"] = results.db_bytes_after_seeding;
  j["listing"] = {{"campaigns", results.listing.campaigns},
                  {"pages", results.listing.pages},
                  {"max_page_bytes", results.listing.max_page_bytes},
                  {"bound_bytes", kListingBoundBytes},
                  {"page_p50_ms", results.listing.page.p50_ms},
                  {"page_p99_ms", results.listing.page.p99_ms},
                  {"error", results.listing.error}};
  const LeaseLoadResult& l = results.lease;
  j["lease"] = {{"queued", config.queued},
                {"agents", config.agents},
                {"register_seconds", results.register_s},
                {"threads", l.threads},
                {"round_trips", l.round_trips},
                {"not_assigned", l.not_assigned},
                {"errors", l.errors},
                {"seconds", l.seconds},
                {"per_second", l.per_second},
                {"acquire", LatencyJson(l.acquire)},
                {"complete", LatencyJson(l.complete)},
                {"round_trip", LatencyJson(l.round_trip)},
                {"usage", UsageJson(l.usage)}};
  if (!l.first_error.empty()) j["lease"]["first_error"] = l.first_error;
  nlohmann::json runs = nlohmann::json::array();
  for (const RestartRun& r : results.restarts) {
    runs.push_back({{"serving_s", r.serving_s},
                    {"listening_s", r.listening_s},
                    {"recovered_log_s", r.recovered_s.has_value() ? nlohmann::json(*r.recovered_s)
                                                                  : nlohmann::json(nullptr)},
                    {"peak_rss_mib", Mib(r.peak_rss_kib)},
                    {"cpu_s", r.cpu_s},
                    {"runqueue_wait_s", r.wait_s}});
  }
  j["restart"] = {{"runs", runs}, {"median_serving_s", RestartMedianSeconds(results)}};
  j["peak_rss_mib"] = {
      {"after_lease", Mib(results.rss_after_lease_kib)},
      {"after_restart",
       results.restarts.empty() ? -1.0 : Mib(results.restarts.back().peak_rss_kib)}};
  if (!results.slurm.has_value()) {
    j["slurm"] = nullptr;
    j["slurm_reason"] = results.slurm_reason;
  } else {
    nlohmann::json slurm = nlohmann::json::array();
    for (const SubmitLoadResult& s : *results.slurm) {
      nlohmann::json e = SubmitJson(s);
      const SubmitLoadResult* t = SubmitsWith(results.submissions, s.clients);
      e["tailor_over_slurm"] = (t != nullptr && s.per_second > 0)
                                   ? nlohmann::json(t->per_second / s.per_second)
                                   : nlohmann::json(nullptr);
      slurm.push_back(e);
    }
    j["slurm"] = slurm;
  }
  j["targets"] = nlohmann::json::array();
  for (const TargetCheck& c : CheckTargets(config, results)) {
    j["targets"].push_back(
        {{"name", c.name},
         {"target", c.target},
         {"measured", c.measured},
         {"pass", c.pass.has_value() ? nlohmann::json(*c.pass) : nlohmann::json(nullptr)}});
  }
  return j;
}

}  // namespace tailor::bench
