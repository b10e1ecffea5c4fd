#ifndef TAILOR_TESTS_E2E_CLUSTER_H_
#define TAILOR_TESTS_E2E_CLUSTER_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/process.h"

namespace tailor::e2e {

// A real coordinator and real agents on loopback, in a fresh data directory.
class Cluster {
 public:
  struct Options {
    // The coordinator's production lease and heartbeat: ctest runs end-to-end tests side by
    // side on the 2-core CI machine, where oversubscribed ranks and agents can miss a 3 s
    // lease and turn one planned attempt into several (a flake that cost two landings).
    double lease_ttl_s = 15;
    double heartbeat_s = 1;
    double backoff_base_s = 0.2;
    // Appended to the coordinator's command line (e.g. --launcher slurm ...).
    std::vector<std::string> coordinator_args;
    // The coordinator and agent binaries in the build's bin dir (a test binary that registers
    // a test-only method runs instead of the real ones).
    std::string coordinator_bin = "tailor-coordinator";
    std::string agent_bin = "tailor-profiler-agent";
    // Set in the coordinator's environment (and so in the ranks its local launcher starts,
    // which inherit it), e.g. {"TAILOR_GIVE_UP_AFTER_S", "5"}.
    std::map<std::string, std::string> coordinator_env;
  };
  // Only for tests of lease expiry itself (an agent dies, a lease must run out): a 3 s lease
  // with 0.5 s heartbeats keeps them short.
  static Options WithShortLeases() {
    Options o;
    o.lease_ttl_s = 3;
    o.heartbeat_s = 0.5;
    return o;
  }
  // The default, named where a test wants to say so.
  static Options WithProductionLeases() { return Options(); }
  explicit Cluster(const std::string& name, Options options);
  explicit Cluster(const std::string& name) : Cluster(name, Options()) {}
  ~Cluster();

  // Starts (or restarts, on the same port and data dir) the coordinator; true when serving.
  bool StartCoordinator();
  void KillCoordinator();  // SIGKILL
  Process* StartAgent(const std::string& name, const std::vector<std::string>& extra_args = {});
  void KillAgent(const std::string& name);
  // The processes, for other signals (SIGTERM, SIGSTOP/SIGCONT); null when never started.
  Process* coordinator() { return coordinator_.get(); }
  Process* agent(const std::string& name) {
    auto it = agents_.find(name);
    return it == agents_.end() ? nullptr : it->second.get();
  }

  // Runs the tailor CLI against this cluster.
  RunResult Cli(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(60));
  // Global options put before every Cli() call's arguments (and so every Status(), Submit()
  // and WaitForState()), e.g. {"--token", T, "--ca-cert", CA} for a cluster with --auth
  // tokens or TLS.
  void set_cli_args(std::vector<std::string> args) { cli_args_ = std::move(args); }
  // `tailor status ID --json` parsed; null json on failure.
  nlohmann::json Status(const std::string& campaign_id);
  // `tailor report ID --json` parsed; null json (and a test failure) on failure.
  nlohmann::json Report(const std::string& campaign_id);
  // Submits a contract file; returns the campaign id ("" on failure).
  std::string Submit(const std::string& contract_path, const std::string& request_id = "");
  bool WaitForState(const std::string& campaign_id, const std::string& state,
                    absl::Duration timeout);

  std::string WriteFile(const std::string& name, const std::string& content);
  // A parent trained for two steps (tailor-train-parent) under dir()/parent: enough to run
  // every job kind, in seconds. "" on failure (the failure is reported as a test failure).
  // `layout` is tailor-train-parent's --layout (tailor's format, or a nemotron-h checkpoint).
  std::string TrainTinyParent(const std::string& layout = "tailor");
  const std::string& dir() const { return dir_; }
  std::string db_path() const { return dir_ + "/data/tailor.db"; }
  int port() const { return port_; }
  int http_port() const { return http_port_; }  // the dashboard's; 0 when it has none

 private:
  std::string dir_;
  Options options_;
  int port_ = 0;
  int http_port_ = 0;
  int restarts_ = 0;
  std::unique_ptr<Process> coordinator_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
  std::vector<std::string> cli_args_;
};

// The job with `key` in a `tailor status --json` campaign; null when absent (or the campaign
// is null, e.g. a status call failed).
nlohmann::json JobOf(const nlohmann::json& campaign, const std::string& key);
// Proto JSON writes int64 as a string; this reads either form.
int64_t Int64Of(const nlohmann::json& v);

// The pid of the tailor-worker rank `rank` of job `job_id` (found by its environment, as an
// operator would with ps), or 0.
pid_t FindWorkerRank(const std::string& job_id, int rank);
// What a failed wait needs to be understood from a CI log: the campaign and the last lines of
// every worker log of `job_id` (data/logs/<job>/attempt-<n>[.rank<r>].log).
std::string Diagnose(Cluster& cluster, const std::string& campaign_id, const std::string& job_id);
// Waits (up to `timeout`) until the first attempt of job `key` reports progress step >= `step`,
// then SIGKILLs its rank `rank`. Returns the job's id, or "" with a test failure that says why
// (the job ended first, never got there, or the rank was not found) and the diagnostics.
std::string KillRankAtStep(Cluster& cluster, const std::string& campaign_id,
                           const std::string& key, int64_t step, int rank,
                           absl::Duration timeout);

}  // namespace tailor::e2e

#endif  // TAILOR_TESTS_E2E_CLUSTER_H_
