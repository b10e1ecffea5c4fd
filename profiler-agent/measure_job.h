#ifndef TAILOR_PROFILER_AGENT_MEASURE_JOB_H_
#define TAILOR_PROFILER_AGENT_MEASURE_JOB_H_

// The `measure` job's serving (MakeMeasureHandler, ml_jobs.h, serves through the agent's
// engine): the candidate architectures a chooser job lists (the settle's ladders,
// docs/autocompress.md "measure and settle") served in interleaved rounds, in passes.
// The first serves the candidates not on demand, served again while the host measures slow
// (SlowHostCheck, request_latency.h); each further pass the on-demand rungs between a
// ladder's largest candidate measured within the budgets and the next one (autocompress::
// RungsToRefine), since only they can use more of the budget, until those two are
// neighbours or kMaxRefinePasses have run.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/agent_runtime.h"
#include "compression/model/config.h"
#include "profiler-agent/request_latency.h"
#include "tailor/v1/contract.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::profiler {

// Rounds of each pass: every candidate served once per round, round after round, and each
// candidate's round of median latency kept. One serve of a ~20 ms request on a shared 2-vCPU
// host moves by up to +-10% from minute to minute; interleaving spreads that drift over all
// candidates alike, and the median drops a disturbed round.
inline constexpr int kMeasureRounds = 3;

// Further passes at most. Each serves up to a quarter of settle_rungs per ladder evenly over
// the gap the last left: a ladder in fine steps (four to a step of the search space) with
// settle_rungs 8 closes a gap of 3 unserved rungs in one, of 8 in two, of 26 in three.
inline constexpr int kMaxRefinePasses = 3;

// What the one job the measure job depends on that lists candidates asks for.
struct Candidates {
  std::string source;  // that job's key
  std::vector<model::HybridConfig> architectures;
  std::vector<double> predicted_ms;  // their predicted latency, as listed
  std::vector<int> ladder;           // CandidateArchitecture.ladder
  std::vector<bool> on_demand;       // CandidateArchitecture.on_demand
  double latency_error = 0;          // JobOutput.candidates_latency_error
};

// INVALID_ARGUMENT naming the job and candidate when a config does not parse, when two
// inputs list candidates, or when none does.
absl::StatusOr<Candidates> CandidatesOf(const JobContext& ctx);

// The agent's slow-host check (`agent`: its remeasures, floor bound and pause) for candidates
// priced by a table of worst held-out error `latency_error`: the bound the larger of the two;
// no check (remeasures 0) when the table's error is unknown (<= 0) or the agent checks none.
SlowHostCheck SlowHostCheckOf(const SlowHostCheck& agent, double latency_error);

// The parent's latency at the contract's percentile that its timed budgets were resolved
// against, when they are all relative to the parent (Budget.*_vs_parent, resolved by the
// coordinator); none when a timed budget is absolute or there is none.
std::optional<double> ParentReferenceMs(const v1::DeploymentContract& contract);

// Both passes: `serve_round(which, label)` serves the candidates `which` (indices into all of
// them) once each; `slow_host` applies to the first pass (its predicted_ms are filled here).
// With `parent_alongside` and a ParentReferenceMs, index n (one past the candidates) names
// the parent's architecture, served in every pass after the candidates: the host's speed
// moves by 10-30% over the minutes between passes here, so each pass's figures are put on
// the footing the budgets were resolved at by the parent served among them (x reference /
// the parent's median; MeasureResult.parent_beside_ms), and passes minutes apart compare;
// `slow_host` then records its scale without serving again.
// The result has one `measured` per candidate (empty where unserved), `served`, `refined`,
// `rounds`, the close-call fields and the first pass's slow-host figures; not the engine or
// the seconds.
absl::StatusOr<v1::MeasureResult> MeasureCandidates(const Candidates& candidates,
                                                    const v1::DeploymentContract& contract,
                                                    const CloseCalls& close,
                                                    const SlowHostCheck& slow_host,
                                                    const ServeRoundFn& serve_round,
                                                    bool parent_alongside = false);

// The job's final progress line: how many of the candidates of `source` were served, in which
// pass, a slow host's passes, and the close calls.
std::string MeasureSummary(const v1::MeasureResult& r, const std::string& source);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_MEASURE_JOB_H_
