#include "compression/costmodel/drift_check.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::costmodel {

absl::StatusOr<RecheckResult> RecheckCostTable(const CostModel& table,
                                               const model::HybridConfig& parent,
                                               const RecheckServeFn& serve,
                                               const RecheckOptions& options) {
  if (options.architectures < 1) {
    return absl::InvalidArgumentError("recheck: architectures must be >= 1");
  }
  TAILOR_ASSIGN_OR_RETURN(SearchSpace space, SearchSpace::FromParent(parent, options.space));
  std::mt19937_64 rng(options.seed);
  const int64_t positions = table.workload().cache_positions();
  TAILOR_ASSIGN_OR_RETURN(std::vector<DrawnArchitecture> drawn,
                          DrawValidationArchitectures(space, options.architectures, positions,
                                                      options.require_present_layer, rng));
  RecheckResult result;
  uint64_t seed = options.seed;
  for (size_t i = 0; i < drawn.size(); ++i) {
    if (options.progress &&
        !options.progress(static_cast<double>(i) / drawn.size(),
                          absl::StrCat("re-measuring architecture ", i + 1, "/", drawn.size()),
                          {})) {
      return absl::CancelledError("drift check cancelled");
    }
    DrawnArchitecture& d = drawn[i];
    TAILOR_ASSIGN_OR_RETURN(Prediction p, table.Predict(d.config));
    TAILOR_ASSIGN_OR_RETURN(RecheckServed served, serve(d.config, ++seed));
    ArchitectureMeasurement m;
    m.description = std::move(d.description);
    m.config = d.config;
    m.seed = seed;
    m.parameters = d.config.ParameterCount();
    m.measured_latency_ms = served.latency_ms;
    m.measured_memory_mib = served.memory_mib;
    m.predicted_latency_ms = p.latency_ms;
    m.predicted_memory_mib = p.memory_mib;
    result.architectures.push_back(std::move(m));
  }
  result.summary = Summarize(result.architectures);
  const ValidationSummary& validated = table.table().validation;
  result.bound = std::max(validated.latency_max_error, validated.latency_mape);
  result.holds = validated.architectures > 0 && result.summary.latency_mape <= result.bound;
  return result;
}

}  // namespace tailor::costmodel
