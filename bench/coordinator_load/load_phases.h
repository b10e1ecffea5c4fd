#ifndef TAILOR_BENCH_COORDINATOR_LOAD_LOAD_PHASES_H_
#define TAILOR_BENCH_COORDINATOR_LOAD_LOAD_PHASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::bench {

struct LatencySummary {
  int64_t count = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  double mean_ms = 0;
};
// Nearest-rank percentiles over the samples (milliseconds).
LatencySummary Summarize(std::vector<double> samples_ms);

// The contract every submission uses: examples/contracts/probe-cpu.textproto, a PROBE that
// plans exactly one `probe` job for device kind `cpu`.
absl::StatusOr<v1::DeploymentContract> ProbeContract();

// Where the time went during a phase, so a throughput figure can be read against how much CPU
// the coordinator actually got on a shared machine.
struct ProcessUsage {
  double coordinator_cpu_s = 0;   // CPU the coordinator used (user + system)
  double coordinator_wait_s = 0;  // time its threads were runnable but waited for a CPU
  double client_cpu_s = 0;        // CPU this bench (the load generator) used
};

struct SubmitLoadOptions {
  std::string address;
  int clients = 1;
  // Either run for `duration`, or (when total > 0) submit exactly `total` campaigns.
  absl::Duration duration = absl::ZeroDuration();
  int64_t total = 0;
  // Request ids are "<prefix>-<client>-<n>": distinct, so every call creates a campaign.
  std::string request_id_prefix = "bench";
};

struct SubmitLoadResult {
  int clients = 0;
  int64_t submitted = 0;
  int64_t errors = 0;
  std::string first_error;
  double seconds = 0;
  double per_second = 0;
  LatencySummary latency;
  ProcessUsage usage;
};

// `clients` threads, each with its own channel (and TCP connection), submit PROBE campaigns
// back to back. Connecting is not timed; the clock starts once every client is connected.
absl::StatusOr<SubmitLoadResult> RunSubmitLoad(const SubmitLoadOptions& options);

// Registers `count` agents named bench-agent-<i> for device kind "cpu" and job kind "probe";
// returns their ids in order.
absl::StatusOr<std::vector<std::string>> RegisterAgents(const std::string& address, int count);

struct LeaseLoadResult {
  int threads = 0;
  int64_t round_trips = 0;
  int64_t not_assigned = 0;  // AcquireJob answered assigned=false (should stay 0)
  int64_t errors = 0;
  std::string first_error;
  double seconds = 0;
  double per_second = 0;
  LatencySummary acquire;
  LatencySummary complete;
  LatencySummary round_trip;
  ProcessUsage usage;
};

// `threads` client threads do `total` round trips between them: AcquireJob(wait_ms=0) for a
// random agent, then CompleteJob(success) with the lease it got. Each thread owns a disjoint
// slice of the agents so two threads never ask for the same agent at once (an agent holds at
// most one lease, and a collision would measure a refusal rather than a lease).
absl::StatusOr<LeaseLoadResult> RunLeaseRoundTrips(const std::string& address,
                                                   const std::vector<std::string>& agent_ids,
                                                   int threads, int64_t total, uint64_t seed);

// Every page of ListCampaigns, walked with the largest page size the API allows (1000).
struct ListingResult {
  int64_t campaigns = 0;       // summaries over every page
  int pages = 0;
  int64_t max_page_bytes = 0;  // the largest ListCampaignsResponse, serialized
  LatencySummary page;         // per ListCampaigns call
  std::string error;           // the first failed call; "" when every page came back
};
ListingResult ListEveryCampaign(const std::string& address);

// One ListQueue call on a fresh channel; OK once the coordinator serves reads.
absl::Status ListQueueOnce(const std::string& address, absl::Duration timeout);

struct SlurmProbe {
  bool available = false;
  std::string reason;  // why not, when unavailable
  std::string sbatch;  // absolute path
  std::string scancel;  // absolute path; "" when not on PATH (submitted jobs then run out)
};
// sbatch and sinfo on PATH, and `sinfo -h` exits 0 within 5 s (a controller answers).
SlurmProbe ProbeSlurm();

// `clients` threads run `sbatch --parsable --wrap true -o /dev/null` back to back; every job
// submitted is cancelled when the phase ends.
SubmitLoadResult RunSlurmLoad(const SlurmProbe& slurm, int clients, absl::Duration duration);

}  // namespace tailor::bench

#endif  // TAILOR_BENCH_COORDINATOR_LOAD_LOAD_PHASES_H_
