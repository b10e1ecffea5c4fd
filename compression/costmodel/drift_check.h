#ifndef TAILOR_COMPRESSION_COSTMODEL_DRIFT_CHECK_H_
#define TAILOR_COMPRESSION_COSTMODEL_DRIFT_CHECK_H_
// Engine drift: does a stored cost table still predict the engine it is asked about? A fresh
// set of held-out architectures, drawn from the parent's search space with a seed of their
// own (so they are not the table's validation set), is served in the engine as it is now and
// compared with the table's predictions. The table holds while the latency MAPE stays within
// its own validated error: its worst held-out architecture, never less than its MAPE (the
// same bound as the verify check, coordinator/cost_table_check.h).
//
// No LibTorch here: the engine is the injected measure function.

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/costmodel/cost_model.h"
#include "compression/costmodel/profile_grid.h"
#include "compression/costmodel/search_space.h"
#include "compression/model/config.h"

namespace tailor::costmodel {

// One dummy-weight model served as the engine's tables are measured: latency as the table
// predicts it (the builtin's robust per-step figure, llama.cpp's median request) and memory.
struct RecheckServed {
  double latency_ms = 0;
  double memory_mib = 0;
};
using RecheckServeFn =
    std::function<absl::StatusOr<RecheckServed>(const model::HybridConfig& config, uint64_t seed)>;

struct RecheckOptions {
  int architectures = 4;
  uint64_t seed = 0x5eed0d21f7ULL;  // not a profile seed: fresh architectures
  SearchSpaceOptions space;
  // Engines that cannot serve a model without layers (llama.cpp).
  bool require_present_layer = false;
  ProgressFn progress;
};

struct RecheckResult {
  std::vector<ArchitectureMeasurement> architectures;
  ValidationSummary summary;
  double bound = 0;  // max(table latency_max_error, table latency_mape)
  bool holds = false;
};

absl::StatusOr<RecheckResult> RecheckCostTable(const CostModel& table,
                                               const model::HybridConfig& parent,
                                               const RecheckServeFn& serve,
                                               const RecheckOptions& options);

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_DRIFT_CHECK_H_
