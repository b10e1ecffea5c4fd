// tailor-soak: mixed load against real processes on loopback for a while, measuring the
// coordinator's (and a long-lived agent's) memory and file descriptors.
//
//   tailor-soak --duration 1800 --json soak.json
//
// Load: PROBE submissions (up to --max-inflight open at once), cancels of open campaigns,
// agent churn (an agent SIGKILLed or SIGTERMed and started again), coordinator restarts every
// --coordinator-restart-every seconds (alternately SIGTERM and SIGKILL). Every --sample-every
// seconds it samples VmRSS and the open fds of the coordinator and of the agent that is never
// churned. At the end everything is shut down and the invariants of tests/e2e/invariants.h are
// checked (including no leaked processes), and the coordinator's fd count may not grow by more
// than --max-fd-growth within one lifetime. Exit 0 when all hold, 1 on a violation, 2 on usage.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/cluster.h"
#include "tests/e2e/invariants.h"

namespace tailor::e2e {
namespace {

struct Options {
  double duration_s = 60;
  double sample_every_s = 5;
  double restart_every_s = 300;
  double churn_every_s = 20;
  int max_inflight = 4;
  int seed = 1;
  int max_fd_growth = 50;  // more in the longest coordinator lifetime fails the run
  std::string json_path;
};

struct Sample {
  double t = 0;
  int lifetime = 0;  // coordinator start number
  int64_t coordinator_rss_kb = -1;
  int coordinator_fds = -1;
  int64_t agent_rss_kb = -1;
  int agent_fds = -1;
  int inflight = 0;
  int finished = 0;
};

void Usage() {
  std::cerr << "usage: tailor-soak [--duration S] [--sample-every S] "
               "[--coordinator-restart-every S] [--churn-every S] [--max-inflight N] "
               "[--seed N] [--max-fd-growth N] [--json PATH]\n";
}

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (a == "--duration") {
      o->duration_s = std::stod(v);
    } else if (a == "--sample-every") {
      o->sample_every_s = std::stod(v);
    } else if (a == "--coordinator-restart-every") {
      o->restart_every_s = std::stod(v);
    } else if (a == "--churn-every") {
      o->churn_every_s = std::stod(v);
    } else if (a == "--max-inflight") {
      o->max_inflight = std::stoi(v);
    } else if (a == "--seed") {
      o->seed = std::stoi(v);
    } else if (a == "--max-fd-growth") {
      o->max_fd_growth = std::stoi(v);
    } else if (a == "--json") {
      o->json_path = v;
    } else {
      return false;
    }
  }
  return o->duration_s > 0 && o->sample_every_s > 0 && o->max_inflight > 0;
}

void Stop(Process* p) {
  if (p == nullptr) return;
  p->Signal(SIGTERM);
  if (p->Wait(absl::Seconds(30)) < 0) p->Kill();
}

int Main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) {
    Usage();
    return 2;
  }
  std::mt19937 rng(o.seed);
  Cluster::Options copts;
  copts.lease_ttl_s = 5;
  copts.heartbeat_s = 1;
  copts.backoff_base_s = 0.5;
  Cluster cluster("soak", copts);
  if (!cluster.StartCoordinator()) {
    std::cerr << "tailor-soak: the coordinator did not start\n";
    return 1;
  }
  int lifetime = 1;
  const std::string stable = "stable";
  const std::vector<std::string> churned = {"churn-1", "churn-2"};
  cluster.StartAgent(stable);
  for (const auto& a : churned) cluster.StartAgent(a);

  std::map<std::string, int> counts;  // action -> n
  std::set<std::string> accepted;
  std::set<std::string> open;
  std::vector<Sample> samples;
  int submit_failures = 0;
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(o.duration_s);
  absl::Time next_sample = start;
  absl::Time next_restart = start + absl::Seconds(o.restart_every_s);
  absl::Time next_churn = start + absl::Seconds(o.churn_every_s);
  int n = 0;
  int finished = 0;

  auto sample = [&] {
    Sample s;
    s.t = absl::ToDoubleSeconds(absl::Now() - start);
    s.lifetime = lifetime;
    if (Process* c = cluster.coordinator()) {
      s.coordinator_rss_kb = RssKb(c->pid());
      s.coordinator_fds = FdCount(c->pid());
    }
    if (Process* a = cluster.agent(stable)) {
      s.agent_rss_kb = RssKb(a->pid());
      s.agent_fds = FdCount(a->pid());
    }
    s.inflight = static_cast<int>(open.size());
    s.finished = finished;
    samples.push_back(s);
    std::cout << std::fixed << std::setprecision(0) << std::setw(7) << s.t << " s  coordinator#"
              << s.lifetime << " rss " << s.coordinator_rss_kb << " kB fds "
              << s.coordinator_fds << " | agent rss " << s.agent_rss_kb << " kB fds "
              << s.agent_fds << " | open " << s.inflight << " done " << s.finished << std::endl;
  };

  while (absl::Now() < end) {
    const absl::Time now = absl::Now();
    if (now >= next_sample) {
      sample();
      next_sample = now + absl::Seconds(o.sample_every_s);
    }
    // Forget what finished.
    const std::map<std::string, int> states = CampaignStates(cluster.db_path());
    for (auto it = open.begin(); it != open.end();) {
      auto s = states.find(*it);
      if (s != states.end() && IsFinalCampaignState(s->second)) {
        ++finished;
        it = open.erase(it);
      } else {
        ++it;
      }
    }
    if (now >= next_restart) {
      const bool kill = counts["coordinator restart"] % 2 == 1;
      if (kill) {
        cluster.KillCoordinator();
      } else {
        Stop(cluster.coordinator());
      }
      bool up = false;
      for (int i = 0; i < 5 && !up; ++i) {
        up = cluster.StartCoordinator();
        if (!up) {
          cluster.KillCoordinator();
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
      }
      if (!up) {
        std::cerr << "tailor-soak: the coordinator did not come back\n";
        return 1;
      }
      ++lifetime;
      ++counts["coordinator restart"];
      next_restart = absl::Now() + absl::Seconds(o.restart_every_s);
      continue;
    }
    if (now >= next_churn) {
      const std::string& name =
          churned[std::uniform_int_distribution<size_t>(0, churned.size() - 1)(rng)];
      if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
        cluster.KillAgent(name);
        ++counts["agent SIGKILL"];
      } else {
        Stop(cluster.agent(name));
        ++counts["agent SIGTERM"];
      }
      cluster.StartAgent(name);
      next_churn = absl::Now() + absl::Seconds(o.churn_every_s);
      continue;
    }
    const int roll = std::uniform_int_distribution<int>(0, 9)(rng);
    if (roll == 0 && !open.empty()) {
      auto it = open.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng));
      RunResult r = cluster.Cli({"cancel", *it, "--reason", "soak"});
      ++counts[r.exit_code == 0 ? "cancel" : "cancel refused (already final)"];
    } else if (static_cast<int>(open.size()) < o.max_inflight) {
      const int duration = std::uniform_int_distribution<int>(50, 400)(rng);
      const std::string path = cluster.WriteFile(
          "soak.textproto", absl::StrCat("name: \"soak-", n, "\"\nmethod: PROBE\n",
                                         "target { device_kind: \"cpu\" }\n",
                                         "probe { duration_ms: ", duration, " }\n"));
      const std::string id = cluster.Submit(path, absl::StrCat("soak-", o.seed, "-", n++));
      if (id.empty()) {
        ++submit_failures;
      } else {
        accepted.insert(id);
        open.insert(id);
        ++counts["submit"];
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::uniform_int_distribution<int>(200, 800)(rng)));
  }
  sample();

  // Drain: everything accepted finishes.
  const bool drained = WaitFor(
      [&] {
        const std::map<std::string, int> states = CampaignStates(cluster.db_path());
        for (const std::string& id : accepted) {
          auto it = states.find(id);
          if (it == states.end() || !IsFinalCampaignState(it->second)) return false;
        }
        return true;
      },
      absl::Seconds(300));
  for (const auto& a : churned) Stop(cluster.agent(a));
  Stop(cluster.agent(stable));
  Stop(cluster.coordinator());
  InvariantOptions inv;
  inv.data_dir = cluster.dir() + "/data";
  inv.accepted = accepted;
  inv.process_marker = cluster.dir();
  InvariantReport report = CheckInvariants(inv);
  if (!drained) report.violations.push_back("campaigns still open 300 s after the load ended");

  // Growth: within the longest coordinator lifetime, the first sample after a warm-up (caches,
  // gRPC threads and SQLite's page cache fill in the first minute) vs the last; peak overall.
  const double warmup_s = std::min(60.0, o.restart_every_s / 3);
  std::map<int, double> born;                     // lifetime -> time of its first sample
  std::map<int, std::pair<Sample, Sample>> span;  // lifetime -> (first after warm-up, last)
  int64_t peak_rss = 0;
  int peak_fds = 0;
  int64_t agent_peak_rss = 0;
  for (const Sample& s : samples) {
    peak_rss = std::max(peak_rss, s.coordinator_rss_kb);
    peak_fds = std::max(peak_fds, s.coordinator_fds);
    agent_peak_rss = std::max(agent_peak_rss, s.agent_rss_kb);
    born.emplace(s.lifetime, s.t);
    auto it = span.find(s.lifetime);
    if (it == span.end()) {
      span[s.lifetime] = {s, s};
    } else {
      // Until the warm-up is over the baseline moves along.
      if (it->second.first.t - born[s.lifetime] < warmup_s) it->second.first = s;
      it->second.second = s;
    }
  }
  // The stable agent's baseline likewise: the first sample after the warm-up.
  Sample a0 = samples.front();
  for (const Sample& s : samples) {
    a0 = s;
    if (s.t >= warmup_s) break;
  }
  nlohmann::json lifetimes = nlohmann::json::array();
  double longest = -1;
  nlohmann::json growth;
  for (const auto& [life, fl] : span) {
    const auto& [first, last] = fl;
    nlohmann::json l = {{"lifetime", life},
                        {"from_s", first.t},
                        {"to_s", last.t},
                        {"rss_kb_first", first.coordinator_rss_kb},
                        {"rss_kb_last", last.coordinator_rss_kb},
                        {"fds_first", first.coordinator_fds},
                        {"fds_last", last.coordinator_fds}};
    lifetimes.push_back(l);
    if (last.t - first.t > longest) {
      longest = last.t - first.t;
      growth = {{"seconds", last.t - first.t},
                {"rss_kb", last.coordinator_rss_kb - first.coordinator_rss_kb},
                {"fds", last.coordinator_fds - first.coordinator_fds}};
    }
  }
  const Sample& a1 = samples.back();
  if (!growth.is_null() && growth["fds"].get<int>() > o.max_fd_growth) {
    report.violations.push_back(absl::StrCat("coordinator fds grew by ", growth["fds"].get<int>(),
                                             " in one lifetime (limit ", o.max_fd_growth, ")"));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << "\nsoak: " << o.duration_s << " s of load (" << seconds << " s with drain), "
            << accepted.size() << " campaigns accepted, " << submit_failures
            << " submissions failed\n";
  for (const auto& [k, v] : counts) std::cout << "  " << k << ": " << v << "\n";
  std::cout << "  coordinator: peak RSS " << peak_rss << " kB, peak fds " << peak_fds
            << "; longest lifetime " << growth["seconds"] << " s: RSS growth "
            << growth["rss_kb"] << " kB, fd growth " << growth["fds"] << "\n"
            << "  agent '" << stable << "': RSS " << a0.agent_rss_kb << " -> " << a1.agent_rss_kb
            << " kB (peak " << agent_peak_rss << "), fds " << a0.agent_fds << " -> "
            << a1.agent_fds << "\n"
            << "  invariants: " << report.Summary() << "\n";
  if (!o.json_path.empty()) {
    nlohmann::json js = nlohmann::json::array();
    for (const Sample& s : samples) {
      js.push_back({{"t", s.t},
                    {"lifetime", s.lifetime},
                    {"coordinator_rss_kb", s.coordinator_rss_kb},
                    {"coordinator_fds", s.coordinator_fds},
                    {"agent_rss_kb", s.agent_rss_kb},
                    {"agent_fds", s.agent_fds},
                    {"open", s.inflight},
                    {"finished", s.finished}});
    }
    nlohmann::json out = {{"duration_s", o.duration_s},
                          {"wall_s", seconds},
                          {"seed", o.seed},
                          {"campaigns", accepted.size()},
                          {"submit_failures", submit_failures},
                          {"actions", counts},
                          {"coordinator_peak_rss_kb", peak_rss},
                          {"coordinator_peak_fds", peak_fds},
                          {"coordinator_growth_longest_lifetime", growth},
                          {"coordinator_lifetimes", lifetimes},
                          {"warmup_s", warmup_s},
                          {"agent_rss_kb", {a0.agent_rss_kb, a1.agent_rss_kb}},
                          {"agent_peak_rss_kb", agent_peak_rss},
                          {"agent_fds", {a0.agent_fds, a1.agent_fds}},
                          {"campaigns_by_state", report.campaigns_by_state},
                          {"violations", report.violations},
                          {"samples", js}};
    std::ofstream(o.json_path) << out.dump(2) << "\n";
  }
  return report.ok() ? 0 : 1;
}

}  // namespace
}  // namespace tailor::e2e

int main(int argc, char** argv) { return tailor::e2e::Main(argc, argv); }
