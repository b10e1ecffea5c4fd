#ifndef TAILOR_BENCH_COORDINATOR_LOAD_REPORT_H_
#define TAILOR_BENCH_COORDINATOR_LOAD_REPORT_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/coordinator_load/load_phases.h"
#include "nlohmann/json.hpp"

namespace tailor::bench {

// What the run was asked to do (echoed into the JSON so a figure can be reproduced).
struct BenchConfig {
  std::string coordinator_bin;
  double phase_seconds = 5;
  std::vector<int> submit_clients = {1, 8, 64};
  int64_t queued = 100000;
  int seed_clients = 64;
  int agents = 1000;
  int lease_threads = 8;
  int64_t round_trips = 5000;
  int restarts = 3;
  bool quick = false;
  std::string coordinator_log_level = "info";
  std::string command_line;
};

// ListCampaigns' byte bound (CoordinatorOptions::max_listing_bytes): no page may exceed it,
// however many campaigns are stored.
inline constexpr int64_t kListingBoundBytes = 4 << 20;

struct RestartRun {
  double serving_s = 0;               // exec -> first successful ListQueue
  std::optional<double> recovered_s;  // exec -> the "recovered ..." log line
  double listening_s = 0;             // exec -> "listening on port" on stdout
  int64_t peak_rss_kib = -1;          // VmHWM once serving
  double cpu_s = 0;                   // CPU the new process used until serving
  double wait_s = 0;                  // time it was runnable but waited for a CPU
};

struct BenchResults {
  std::string date;     // ISO 8601, local time
  std::string machine;  // CPUs, kernel
  double loadavg_start = 0;
  double loadavg_end = 0;
  std::vector<SubmitLoadResult> submissions;
  SubmitLoadResult seeding;
  int64_t db_bytes_after_seeding = 0;
  ListingResult listing;  // every stored campaign listed after seeding
  double register_s = 0;
  LeaseLoadResult lease;
  int64_t rss_after_lease_kib = -1;
  std::vector<RestartRun> restarts;
  std::optional<std::vector<SubmitLoadResult>> slurm;  // nullopt: not available
  std::string slurm_reason;
};

// Every stored campaign listed, no call failed and no page over kListingBoundBytes.
bool ListingHolds(const BenchConfig& config, const ListingResult& listing);

// The targets, measured against these results.
struct TargetCheck {
  std::string name;
  std::string target;        // e.g. ">= 2000/s"
  std::string measured;      // formatted
  std::optional<bool> pass;  // nullopt: not measured
};
std::vector<TargetCheck> CheckTargets(const BenchConfig& config, const BenchResults& results);

double RestartMedianSeconds(const BenchResults& results);

void PrintTable(const BenchConfig& config, const BenchResults& results, std::ostream& out);
nlohmann::json ToJson(const BenchConfig& config, const BenchResults& results);

}  // namespace tailor::bench

#endif  // TAILOR_BENCH_COORDINATOR_LOAD_REPORT_H_
