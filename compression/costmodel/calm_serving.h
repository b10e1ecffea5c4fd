#ifndef TAILOR_COMPRESSION_COSTMODEL_CALM_SERVING_H_
#define TAILOR_COMPRESSION_COSTMODEL_CALM_SERVING_H_

// Measurements an engine took while something else ran on the host are biased, not noisy:
// a preempted request is slower, and every request of a starved run is. Profiling and
// verification alike serve a model again when its measurement shows interference, and say
// so when it persists (docs/costmodel.md, "Interference").
//
// Interference shows as requests that disagree (spread of whole-request times) or as an
// engine that got too little CPU time for its threads (another process ran on them).

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/model/config.h"

namespace tailor::costmodel {

// One request as the engine timed it: prefill = until the first token, decode = the rest.
// cpu_ms is the process CPU time over the request (0 when the engine cannot tell).
struct ServedRequest {
  double request_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  double cpu_ms = 0;
};

// One model served under the workload, with memory as the engine allocated it.
struct ServedModel {
  std::vector<ServedRequest> requests;
  double weights_mib = 0;  // W
  double state_mib = 0;    // C: KV cache and recurrent state
  double compute_mib = 0;  // P: compute buffers
  // Part of weights_mib that is no layer of the model: stand-in blocks an engine needs (a
  // model without any attention or Mamba layer gets a zero one in llama.cpp). The memory fit
  // leaves them out; left in, they inflated a Nemotron-H table's weights scale by 8%.
  double stand_in_mib = 0;
  // Those stand-ins as layers (at the model's hidden width): the time fit counts those that
  // are nodes of the plan, so their time does not land in T0.
  std::vector<model::LayerSpec> stand_in_layers;
};

struct CalmServingOptions {
  // Threads the engine computes with: a run whose median request got less CPU time than
  // min_thread_utilization * threads * its wall time was preempted (0 disables the check,
  // e.g. on GPUs, where the host thread mostly waits).
  int threads = 1;
  double min_thread_utilization = 0.5;
  // A run whose spread of request times exceeds max_spread is served again. The spread is
  // (q-quantile - (1-q)-quantile) / median with q = spread_quantile: 1 (max - min, the
  // profiler's) catches a single preempted request, which biases a median of 15; a verify of
  // 50 or 500 requests judges a tail percentile, whose outliers are what it measures, and
  // takes the interquartile range (0.75) to see sustained interference only.
  double max_spread = 0.10;
  double spread_quantile = 1.0;
  int max_remeasures = 2;
};

// How one served run looked.
struct Disturbance {
  double spread = 0;              // RequestSpread at the options' spread_quantile
  double thread_utilization = 0;  // median cpu_ms / request_ms / threads; 0 when unknown
  bool disturbed = false;
  std::string why;  // in words, with the figures; empty when calm
};

// A run served until calm: the calmest of its tries (the first calm one, else the one of
// least spread), how it looked, and how many times it was served again.
struct CalmServed {
  ServedModel served;
  Disturbance disturbance;
  int remeasures = 0;
  int kept_try = 0;  // 0-based index of the try `served` is
};

// (q-quantile - (1-q)-quantile) / median of the request times (q = 1: (max - min) /
// median); 0 for fewer than two requests.
double RequestSpread(const ServedModel& served, double quantile = 1.0);

Disturbance JudgeDisturbance(const ServedModel& served, const CalmServingOptions& options);

// Calls `serve` until a calm run, at most 1 + max_remeasures times. An error of `serve`, or
// a run without a timed request, is returned as is.
absl::StatusOr<CalmServed> ServeUntilCalm(const std::function<absl::StatusOr<ServedModel>()>& serve,
                                          const CalmServingOptions& options);

// InvalidArgument naming the field when `options` cannot judge anything.
absl::Status ValidateCalmServingOptions(const CalmServingOptions& options);

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_CALM_SERVING_H_
