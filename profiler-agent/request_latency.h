#ifndef TAILOR_PROFILER_AGENT_REQUEST_LATENCY_H_
#define TAILOR_PROFILER_AGENT_REQUEST_LATENCY_H_

// What every engine's verify judges a latency budget on: the whole request's wall time at the
// percentile the contract names, over enough requests for that percentile, measured in a run
// without interference (docs/contract.md, "budget"). Per-piece figures stay as diagnostics.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/latency_percentile.h"
#include "compression/costmodel/calm_serving.h"
#include "compression/engine/workload.h"
#include "tailor/v1/contract.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::profiler {

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

// Close calls. How many serves a figure needs depends on how close it is to the budget it is
// judged against: quiet llama.cpp children of a ~20 ms model differ by +-7-14% from serve to
// serve on a 2-vCPU host (docs/benchmarks.md, "Close calls"), so a median of three decides
// a budget 20% away but not one 3% away. A figure whose median lies within `band` of a
// budget is served `extra_serves` more times and judged on the median of all its serves,
// in verify and in the settle's measure job alike.
struct CloseCalls {
  int extra_serves = 0;  // 0: off
  double band = 0.10;    // a fraction of the budget
  // The extra serves come in `groups` groups (sizes differing by at most one), each after a
  // `pause`. Back to back, nine serves take ~30 s; the host's slow minutes (the whole host
  // x1.1-1.2 slower for 1-2 minutes with nothing of ours running, docs/benchmarks.md "Close
  // calls") last longer, so a figure taken in one would be judged in it. Serves minutes
  // apart sample more than one phase; within a phase, serve after serve are independent
  // (lag-1 autocorrelation 0.00 over 61 serves), so the pause costs only wall time.
  int groups = 1;
  absl::Duration pause = absl::ZeroDuration();
  // Waits out a pause; false (the job was cancelled) ends the measurement with CANCELLED.
  // Null: absl::SleepFor. The jobs pass PauseReporting (ml_jobs.h); tests record the calls.
  std::function<bool(absl::Duration)> wait;
};
// Whether `m` lies within `band` of a budget `budget` judges it on: its latency_ms of
// latency_ms_max, or its throughput of the floor. Memory is left out: llama.cpp's and the
// built-in engine's allocations do not move from serve to serve.
bool CloseToBudget(const v1::ModelCosts& m, const v1::Budget& budget, double band);

// A verify's measurement: `serves` serves of the model back to back (each its own engine run,
// served until calm), judged on the median serve, as the measure job judges a candidate on
// the median of its rounds; the settle's measurement and the verify's are then the same
// statistic. With `budget` and close.extra_serves > 0, a median within close.band of it is
// served close.extra_serves more times in close.groups groups close.pause apart
// (ModelCosts.close_call_serves). The first error is returned as is, CANCELLED when a
// pause's wait says so.
absl::StatusOr<v1::ModelCosts> MeasureServes(
    int serves, const std::function<absl::StatusOr<v1::ModelCosts>()>& serve,
    const v1::Budget* budget = nullptr, const CloseCalls& close = {});

// A verify's measurement of a model held to budgets relative to its parent: the model and the
// parent's own architecture served alternately, model then parent, `serves` pairs (each serve
// as MeasureServes serves one), each judged on its median serve, and `budget` resolved
// against the parent's median (common/relative_budget.h). The host's speed moves by 10-30%
// over minutes here (docs/benchmarks.md, "Fine steps for the settle"), while the contract
// means the two served on the same host: a parent figure from the profile, minutes or
// campaigns earlier, would judge the host instead. With close.extra_serves > 0 and the
// model's median within close.band of the resolved budget, close.extra_serves more pairs in
// close.groups groups close.pause apart, both medians over all of theirs.
struct BesideParent {
  v1::ModelCosts model;
  v1::ModelCosts parent;
  v1::Budget budget;  // resolved against `parent`
};
absl::StatusOr<BesideParent> MeasureServesBesideParent(
    int serves, const std::function<absl::StatusOr<v1::ModelCosts>()>& serve_model,
    const std::function<absl::StatusOr<v1::ModelCosts>()>& serve_parent,
    const v1::Budget& budget, const CloseCalls& close = {});

// A slow host, not slow candidates. A cost table validated on held-out architectures to a
// worst latency error e prices a set of candidates; when the set's measurements lie further
// above those prices than e (the median over the candidates of measured / predicted latency,
// their "scale"), no architecture explains it: the host is in one of its slow phases (the
// whole 2-vCPU host x1.2-1.5 for minutes with nothing of ours running, docs/benchmarks.md
// "Close calls"), and a rung chosen on such figures is wrong minutes later. So the rounds are
// served again after `pause`, up to `remeasures` times while the scale stays over, and the
// attempt of the lowest scale is kept: interference only ever adds time. A set measured
// FASTER than its prices is left alone (a table profiled in a slow phase is what drift
// detection and the suspect mark are for, not a pause).
struct SlowHostCheck {
  std::vector<double> predicted_ms;  // per candidate; empty (or any <= 0): no check
  double bound = 0;                  // over 1 + bound is slow; <= 0: no check
  int remeasures = 0;
  absl::Duration pause = absl::ZeroDuration();
  // As CloseCalls::wait (null: absl::SleepFor; false ends the measurement with CANCELLED).
  std::function<bool(absl::Duration)> wait;
};

// The measure job's serving (the settle's rungs): every candidate served once per round for
// `rounds` rounds, interleaved so that the host's drift falls on all alike; with `slow_host`,
// those rounds again while the host measures slow (SlowHostCheck); then the candidates whose
// median lies within close.band of a budget close.extra_serves rounds more among themselves,
// in close.groups groups close.pause apart. `serve_round(which, label)` serves the candidates
// `which` (indices) once each, in that order. Per candidate, the median of its serves in the
// kept attempt and the close-call rounds (MedianServe), with close_call_serves set where it
// had more.
//
// With `anchor`, one of the candidates is the parent, the timed budgets being relative to it:
// a candidate is close to a budget scaled as the parent measured in these rounds against the
// figure the budgets were resolved at (AnchorScale), and the parent is never a close call but
// is served in the close-call rounds too, after the close calls, its median over all of its
// serves: the anchor spans the minutes the close calls span.
using ServeRoundFn = std::function<absl::StatusOr<std::vector<v1::ModelCosts>>(
    const std::vector<size_t>& which, const std::string& label)>;
struct ParentAnchor {
  std::optional<size_t> index;  // none: no anchor
  double reference_ms = 0;      // the parent's latency the budgets were resolved against
};
// reference_ms over the anchor's median latency in `medians`: the factor that puts a timed
// figure served beside it on the footing the budgets were resolved at (< 1 when the host is
// slower now). 1 without an anchor or a usable figure.
double AnchorScale(const ParentAnchor& anchor, const std::vector<v1::ModelCosts>& medians);
// `budget`'s timed limits as they stand against figures served at `scale` (latency over it,
// throughput times it): what a raw median is compared with.
v1::Budget BudgetAtScale(const v1::Budget& budget, double scale);
struct RoundsMeasured {
  std::vector<v1::ModelCosts> medians;
  int close_calls = 0;  // candidates served the extra rounds
  // With a slow-host check: each attempt's scale (median measured / predicted latency over
  // the candidates), in order, and which attempt was kept.
  std::vector<double> host_scales;
  int kept_attempt = 0;
};
absl::StatusOr<RoundsMeasured> MeasureInRounds(size_t candidates, int rounds,
                                               const v1::Budget& budget, const CloseCalls& close,
                                               const ServeRoundFn& serve_round,
                                               const SlowHostCheck& slow_host = {},
                                               const ParentAnchor& anchor = {});

// The interference check of a figure taken over many requests (a verify's percentile, a
// profiled model's median): sustained interference only, the interquartile spread over 25%,
// and the engine's CPU time for `threads` threads; threads 0 = CPU time tells nothing, e.g.
// an engine that waits on a GPU.
costmodel::CalmServingOptions RequestCalmOptions(int threads);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_REQUEST_LATENCY_H_
