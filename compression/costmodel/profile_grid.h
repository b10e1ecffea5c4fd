#ifndef TAILOR_COMPRESSION_COSTMODEL_PROFILE_GRID_H_
#define TAILOR_COMPRESSION_COSTMODEL_PROFILE_GRID_H_

// What every cost-table profiler shares, whichever engine serves its models: the profile
// grid, the held-out draws, the per-architecture measurements and their summary. Split from
// profiler.h so engine-agnostic profilers (whole_model_profiler.h) need no LibTorch headers.

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/costmodel/cost_table.h"
#include "compression/costmodel/search_space.h"
#include "compression/engine/workload.h"
#include "compression/model/config.h"

namespace tailor::costmodel {

// Called between units of work; return false to cancel (the profiler then returns
// CANCELLED). Fraction in [0, 1).
using ProgressFn = std::function<bool(double fraction, const std::string& message,
                                      const std::map<std::string, double>& metrics)>;

// One whole model served end to end.
struct ArchitectureMeasurement {
  std::string description;
  model::HybridConfig config;
  uint64_t seed = 0;  // of its dummy weights (CreateHybridLM)
  int64_t parameters = 0;
  double flops = 0;  // RequestFlops under the workload
  double measured_latency_ms = 0;
  double measured_memory_mib = 0;
  double predicted_latency_ms = 0;  // held-out architectures only
  double predicted_memory_mib = 0;
};

struct ProfileResult {
  CostTableData table;
  std::vector<ArchitectureMeasurement> validation;        // held out
  std::vector<ArchitectureMeasurement> profiling_models;  // what the table was built from
  int profiled_configs = 0;
  double seconds = 0;
  // Whole-model profiling (whole_model_profiler.h) only: models served again because a
  // measurement looked disturbed, the extra serves, and models still disturbed after the
  // last re-measure (the table then rests on them: a non-zero count must be reported).
  int remeasured_models = 0;
  int remeasures = 0;
  int noisy_models = 0;
  // Rounds of every model served (WholeModelProfileOptions::max_rounds), and the held-out
  // latency MAPE of the table fitted after each, in order; the last is the table's.
  int rounds = 1;
  std::vector<double> round_latency_mapes;
};

// At most `max_points` of the ascending `values`, evenly spread by index, both ends kept.
std::vector<int64_t> SelectAxisPoints(const std::vector<int64_t>& values, int max_points);

struct ProfilePoint {
  model::LayerSpec spec;
  int64_t hidden = 0;
  int position = 0;  // the parent layer whose place it takes in a profiling model
};
// Every configuration a profiler measures (each a node of its class's full grid): for every
// layer class of the parent, the tensor grid of at most max_points_per_axis values per width
// axis (both ends kept, plus 0 where 0 is its own regime), at up to max_hidden_points hidden
// widths.
std::vector<ProfilePoint> ProfileGrid(const SearchSpace& space, int max_points_per_axis,
                                      int max_hidden_points);

// A held-out architecture: its choices, its config (max_seq = positions) and description.
struct DrawnArchitecture {
  Architecture architecture;
  model::HybridConfig config;
  std::string description;
};
// Up to `count` distinct uniform draws from the space (space.Sample on `rng`, 100 tries per
// architecture). require_present_layer skips draws that remove every layer, for engines
// that cannot serve a model without layers.
absl::StatusOr<std::vector<DrawnArchitecture>> DrawValidationArchitectures(
    const SearchSpace& space, int count, int64_t positions, bool require_present_layer,
    std::mt19937_64& rng);

// Multiply-adds x 2 of one request: every layer's active weights per token processed, the
// attention score and value products over the context, and the LM head for each position
// whose logits are needed (the last prompt position and every decode step).
double RequestFlops(const model::HybridConfig& config, const engine::Workload& workload);

// Errors of predicted against measured over held-out architectures.
ValidationSummary Summarize(const std::vector<ArchitectureMeasurement>& rows);

// Readable order for `tailor costs show`: fixed costs first, then by kind, hidden width,
// configuration, and prefill before decode.
void SortCostEntries(std::vector<CostEntryData>& entries);

class CostModel;
// The parent under the table (t0_ms and memory.parent_*), for display (best effort: left at
// 0 when it cannot predict).
void SetParentCosts(const CostModel& cost_model, const model::HybridConfig& parent,
                    const engine::Workload& w, CostTableData& t);

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_PROFILE_GRID_H_
