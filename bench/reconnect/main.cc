// bench_reconnect: after a coordinator restart, how long until every agent's heartbeat
// reaches it again. Agents that wait for the coordinator during an outage (wait_for_ready, the
// default) run beside agents that fail fast (--no-wait-for-coordinator, the earlier
// behaviour), each set against its own real tailor-coordinator in the same run. Prints a table
// and writes JSON; --quick is the smoke mode the test command runs (no timing is asserted).
//
//   bench_reconnect [--quick] [--agents N] [--rounds R] [--down-s D] [--heartbeat-s H]
//                   [--json-out FILE]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/cluster.h"

namespace tailor::bench {
namespace {

struct Config {
  int agents = 4;
  int rounds = 5;
  // Longer than one heartbeat interval, so every agent meets the outage (an agent whose
  // next beat falls after the restart never notices it and is not what is measured).
  double down_s = 8;
  double heartbeat_s = 5;  // the coordinator's production default
  std::string json_out = "bench_reconnect.json";
};

struct ModeResult {
  std::string mode;
  std::vector<double> delays_s;  // per agent and round: first heartbeat after serving again
  int failed_rounds = 0;
};

// Each agent's last heartbeat as the coordinator recorded it; empty on a failed call.
std::vector<absl::Time> LastHeartbeats(e2e::Cluster& cluster) {
  e2e::RunResult r = cluster.Cli({"agents", "--all", "--json"}, absl::Seconds(10));
  std::vector<absl::Time> out;
  if (r.exit_code != 0) return out;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.contains("agents")) return out;
  for (const auto& a : j["agents"]) {
    absl::Time t;
    std::string err;
    if (absl::ParseTime(absl::RFC3339_full, a.value("last_heartbeat", ""), &t, &err)) {
      out.push_back(t);
    }
  }
  return out;
}

// One restart: SIGKILL, down for down_s, started again; then the time from serving until each
// agent's first heartbeat (polled every 50 ms, 60 s at most). False when one never came.
bool MeasureRestart(e2e::Cluster& cluster, const Config& config, ModeResult& result) {
  const absl::Time killed = absl::Now();
  cluster.KillCoordinator();
  std::this_thread::sleep_for(absl::ToChronoMilliseconds(absl::Seconds(config.down_s)));
  if (!cluster.StartCoordinator()) return false;
  const absl::Time serving = absl::Now();
  const absl::Time deadline = serving + absl::Seconds(60);
  while (absl::Now() < deadline) {
    const std::vector<absl::Time> beats = LastHeartbeats(cluster);
    const bool all_back =
        static_cast<int>(beats.size()) == config.agents &&
        std::all_of(beats.begin(), beats.end(), [&](absl::Time t) { return t > killed; });
    if (all_back) {
      for (absl::Time t : beats) {
        result.delays_s.push_back(std::max(0.0, absl::ToDoubleSeconds(t - serving)));
      }
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

ModeResult RunMode(const std::string& mode, const Config& config) {
  ModeResult result;
  result.mode = mode;
  e2e::Cluster::Options options;  // the production 15 s lease
  options.heartbeat_s = config.heartbeat_s;
  e2e::Cluster cluster(absl::StrCat("bench-reconnect-", mode), options);
  if (!cluster.StartCoordinator()) {
    result.failed_rounds = config.rounds;
    return result;
  }
  std::vector<std::string> extra;
  if (mode == "fail-fast") extra.push_back("--no-wait-for-coordinator");
  for (int i = 0; i < config.agents; ++i) cluster.StartAgent(absl::StrCat("a", i), extra);
  // Every agent registered and heartbeating before the first restart.
  const absl::Time started = absl::Now();
  while (static_cast<int>(LastHeartbeats(cluster).size()) < config.agents &&
         absl::Now() - started < absl::Seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(absl::ToChronoMilliseconds(absl::Seconds(config.heartbeat_s)));
  for (int round = 0; round < config.rounds; ++round) {
    std::cerr << mode << ": restart " << round + 1 << "/" << config.rounds << "\n";
    if (!MeasureRestart(cluster, config, result)) ++result.failed_rounds;
  }
  return result;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

nlohmann::json Report(const Config& config, const std::vector<ModeResult>& modes) {
  nlohmann::json j = {{"agents", config.agents},
                      {"rounds", config.rounds},
                      {"down_s", config.down_s},
                      {"heartbeat_s", config.heartbeat_s},
                      {"lease_ttl_s", 15},
                      {"modes", nlohmann::json::array()}};
  std::printf("reconnect after a restart: %d agents, %d restarts, down %.1f s, heartbeat %.1f s, "
              "lease 15 s\n",
              config.agents, config.rounds, config.down_s, config.heartbeat_s);
  std::printf("%-10s %8s %8s %8s %8s %7s\n", "MODE", "SAMPLES", "P50 S", "P90 S", "MAX S",
              "FAILED");
  for (const ModeResult& m : modes) {
    const double p50 = Quantile(m.delays_s, 0.5), p90 = Quantile(m.delays_s, 0.9);
    const double max =
        m.delays_s.empty() ? 0 : *std::max_element(m.delays_s.begin(), m.delays_s.end());
    std::printf("%-10s %8zu %8.2f %8.2f %8.2f %7d\n", m.mode.c_str(), m.delays_s.size(), p50, p90,
                max, m.failed_rounds);
    j["modes"].push_back({{"mode", m.mode},
                          {"delays_s", m.delays_s},
                          {"p50_s", p50},
                          {"p90_s", p90},
                          {"max_s", max},
                          {"failed_rounds", m.failed_rounds}});
  }
  // The tail is what loses leases: a fail-fast agent's next beat may come at once or only
  // after the backup poller's and its own intervals.
  if (modes.size() == 2 && !modes[0].delays_s.empty() && !modes[1].delays_s.empty()) {
    for (const double q : {0.5, 0.9}) {
      const double ratio = Quantile(modes[1].delays_s, q) /
                           std::max(1e-3, Quantile(modes[0].delays_s, q));
      std::printf("fail-fast / wait (p%.0f): %.1fx\n", q * 100, ratio);
      j[absl::StrFormat("p%.0f_ratio_fail_fast_over_wait", q * 100)] = ratio;
    }
  }
  return j;
}

}  // namespace
}  // namespace tailor::bench

int main(int argc, char** argv) {
  tailor::bench::Config config;
  bool quick = false;
  CLI::App app{"bench_reconnect: agent reconnect time after a coordinator restart, waiting "
               "heartbeats beside fail-fast ones"};
  app.add_flag("--quick", quick, "smoke mode: 1 agent, 1 restart, 1 s heartbeat, 2 s down");
  app.add_option("--agents", config.agents, "agents per mode")->check(CLI::Range(1, 64));
  app.add_option("--rounds", config.rounds, "restarts per mode")->check(CLI::Range(1, 100));
  app.add_option("--down-s", config.down_s, "seconds the coordinator stays down")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--heartbeat-s", config.heartbeat_s, "the coordinator's heartbeat interval")
      ->check(CLI::Range(0.2, 30.0));
  app.add_option("--json-out", config.json_out, "where the JSON goes");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    config.agents = 1;
    config.rounds = 1;
    config.heartbeat_s = 1;
    config.down_s = 2;
  }
  std::vector<tailor::bench::ModeResult> modes;
  for (const char* mode : {"wait", "fail-fast"}) {
    modes.push_back(tailor::bench::RunMode(mode, config));
  }
  const nlohmann::json report = tailor::bench::Report(config, modes);
  std::ofstream(config.json_out) << report.dump(2) << "\n";
  int failed = 0;
  for (const auto& m : modes) failed += m.failed_rounds;
  if (failed > 0) {
    std::cerr << "bench_reconnect: " << failed << " restart(s) where an agent never came back\n";
    return 1;
  }
  return 0;
}
