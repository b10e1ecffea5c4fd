#ifndef TAILOR_PROFILER_AGENT_REQUEST_LATENCY_H_
#define TAILOR_PROFILER_AGENT_REQUEST_LATENCY_H_

// What every engine's verify judges a latency budget on: the whole request's wall time at the
// percentile the contract names, over enough requests for that percentile, measured in a run
// without interference (docs/contract.md, "budget"). Per-piece figures stay as diagnostics.

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/costmodel/calm_serving.h"
#include "compression/engine/workload.h"
#include "tailor/v1/contract.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::profiler {

// Requests served for a percentile: enough that >= 5 samples lie at or above it (p50: 10,
// p90: 50, p99: 500), and never fewer than `configured`.
int RepetitionsFor(v1::LatencyPercentile percentile, int configured);
double PercentileOf(v1::LatencyPercentile percentile);  // 50, 90, 99 (unspecified: 50)

// Sets the judged latency_ms (`percentile` of `request_ms`), what it is (latency_statistic),
// the throughput it implies, and the p50 / p90 / p99 / median requests and repetitions.
void SetWholeRequestLatency(const std::vector<double>& request_ms, const engine::Workload& w,
                            v1::LatencyPercentile percentile, v1::ModelCosts& costs);

// A verify measurement served until calm: `serve` measures once (the run's own costs and its
// requests as the interference check reads them); the kept run's costs come back with how
// calm it was, and the statistic says when it is the calmest of several or still disturbed.
struct VerifyRun {
  v1::ModelCosts costs;
  costmodel::ServedModel served;
};
absl::StatusOr<v1::ModelCosts> MeasureUntilCalm(
    const std::function<absl::StatusOr<VerifyRun>()>& serve,
    const costmodel::CalmServingOptions& options);

// Several serves of one model judged as one: the serve of median latency_ms (the upper one of
// an even count), its statistic saying "; the median of N <what> (a, b, c ms)", every serve's
// latency in serve_latency_ms, their re-serves summed. InvalidArgument when `serves` is empty.
absl::StatusOr<v1::ModelCosts> MedianServe(const std::vector<v1::ModelCosts>& serves,
                                           absl::string_view what);

// A verify's measurement: `serves` serves of the model back to back (each its own engine run,
// served until calm), judged on the median serve, as the measure job judges a candidate on
// the median of its rounds; the settle's measurement and the verify's are then the same
// statistic. The first error is returned as is.
absl::StatusOr<v1::ModelCosts> MeasureServes(
    int serves, const std::function<absl::StatusOr<v1::ModelCosts>()>& serve);

// The interference check of a figure taken over many requests (a verify's percentile, a
// profiled model's median): sustained interference only, the interquartile spread over 25%,
// and the engine's CPU time for `threads` threads; threads 0 = CPU time tells nothing, e.g.
// an engine that waits on a GPU.
costmodel::CalmServingOptions RequestCalmOptions(int threads);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_REQUEST_LATENCY_H_
