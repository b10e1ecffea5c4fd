#ifndef TAILOR_COMPRESSION_COSTMODEL_PROFILER_H_
#define TAILOR_COMPRESSION_COSTMODEL_PROFILER_H_

// Step 1 of hardware-guided compression: profile a cost table in the built-in engine under
// the contract, then validate it on held-out architectures measured end to end in the same
// run (docs/costmodel.md).
//
//  1. Profile grid: for every layer class of the parent, a tensor grid of configurations
//     drawn from the search space (at most max_points_per_axis values per width axis, always
//     both ends, plus 0 where 0 is its own regime such as "no shared expert"), at up to
//     max_hidden_points hidden widths.
//  2. Short dummy-weight models with the parent's layer sequence at one hidden width: each
//     position takes the next grid node dealt to it or is removed with the search space's
//     odds, until every node ran `occurrences` times. The models look like the random
//     candidates they must predict, and contexts vary (the interaction fit needs that).
//  3. Held-out architectures: random heterogeneous architectures from the search space.
//  4. Rounds: every model (profiling and held-out) is visited once per round, in a shuffled
//     order so drift in the host's load hits all of them alike; a visit serves an unrecorded
//     request that warms the model's caches (as back-to-back serving would), then a recorded
//     one with the timeline split at step and layer boundaries.
//  5. Table: a robust time per (model, layer, phase) = per-step medians over rounds,
//     summed; base times per configuration and the interaction coefficients fitted on them
//     (interaction.h); T0 per hidden width the same way from the time outside the layers;
//     workspaces measured per layer; eps = median of measured minus modelled memory over
//     the profiling models.
//  6. Validation: the cost model from that table predicts every held-out architecture;
//     errors against their measurement (the same robust statistic over the whole request,
//     engine::RobustLatencyOf) are stored with the table.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/costmodel/cost_table.h"
#include "compression/costmodel/drift_check.h"
#include "compression/costmodel/profile_grid.h"
#include "compression/costmodel/search_space.h"
#include "compression/engine/engine.h"
#include "compression/model/config.h"

namespace tailor::costmodel {

struct ProfileOptions {
  engine::EngineOptions engine;
  engine::Workload workload;
  std::string device_kind = "cpu";
  SearchSpaceOptions space;
  int max_points_per_axis = 2;
  int max_hidden_points = 4;
  // Every grid node is timed in this many profiling models (>= 2 lets the interaction fit
  // see it in different contexts).
  int occurrences = 2;
  // Remove positions with the search space's odds (contexts like real candidates').
  bool random_removal = true;
  bool fit_interaction = true;
  double interaction_ridge = 0.5;
  int warmup_rounds = 1;
  int rounds = 9;
  // Per visit of a model in a round: unrecorded requests that warm its caches (a deployed
  // engine serves one model back to back), then recorded ones.
  int warm_requests_per_visit = 1;
  int measured_requests_per_visit = 1;
  int validation_architectures = 8;
  uint64_t seed = 1;
  ProgressFn progress;
};

absl::StatusOr<ProfileResult> ProfileCostTable(const model::HybridConfig& parent,
                                               const ProfileOptions& options);

// The drift check's serve function in the built-in engine: each architecture with dummy
// weights drawn from the seed, served as verify serves (engine::Engine::Measure under
// `measure`), latency the robust per-step figure the builtin's tables predict, memory the peak.
RecheckServeFn BuiltinRecheckServe(const engine::EngineOptions& options,
                                   const engine::Workload& workload,
                                   const engine::MeasureOptions& measure);

// --- pieces, exposed for tests and benches ---------------------------------------------

// Every configuration the profiler measures: ProfileGrid (profile_grid.h) at the options'
// max_points_per_axis and max_hidden_points.
std::vector<ProfilePoint> ProfileGrid(const SearchSpace& space, const ProfileOptions& options);

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_PROFILER_H_
