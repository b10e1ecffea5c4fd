#ifndef TAILOR_COMPRESSION_HF_HF_IMPORT_NEMOTRON_H_H_
#define TAILOR_COMPRESSION_HF_HF_IMPORT_NEMOTRON_H_H_

// Import of NemotronHForCausalLM checkpoints into tailor's model (docs/model.md, "Nemotron-H").
// Each Nemotron-H layer is one internal block with the layer's own pre-norm:
//   'M' -> mamba {groups = n_groups, norm: group} (in_proj split into z / x / B,C / dt rows,
//          conv1d into its x and B,C channels), '*' -> attention {rope: false},
//   '-' -> mlp {activation: relu2},
//   'E' -> moe {router: sigmoid, score_bias, groups: n_group, top_groups: topk_group,
//          norm_top_k: norm_topk_prob, scale: routed_scaling_factor, activation: relu2}
//          (per-expert tensors stacked).
// hf_import.cc dispatches here for Family::kNemotronH.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_config.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"

namespace tailor::hf {

// Unimplemented naming what tailor lacks for this Nemotron-H config (a conv without bias, a
// time_step_limit that would clamp dt); OK otherwise.
absl::Status RefuseUnsupportedNemotronH(const HfConfig& config);

// A Nemotron-H 'M' layer as tailor's Mamba layer (per-group norm, the config's B/C groups).
model::LayerSpec NemotronHMambaLayer(const MambaConfig& m);

// The internal config; `config.family` must be kNemotronH.
absl::StatusOr<model::HybridConfig> NemotronHHybridConfig(const HfConfig& config);

// Where an internal tensor comes from: rows [row_begin, row_begin + rows) of the HF tensor
// viewed as [rows, everything else] (rows < 0: the whole tensor, shape unchanged). With
// expert >= 0 the HF tensor is that expert's entry of the stacked internal tensor.
struct NemotronHTensorSlice {
  std::string hf;
  std::string internal;
  int64_t row_begin = 0;
  int64_t rows = -1;
  int64_t expert = -1;
};

// Every internal tensor of the model, each with its HF source; every tensor of
// ExpectedTensors(config) is the source of at least one.
absl::StatusOr<std::vector<NemotronHTensorSlice>> NemotronHTensorSlices(const HfConfig& config);

// (HF tensor, internal tensor) pairs of NemotronHTensorSlices; a split HF tensor appears once
// per internal tensor it feeds.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> NemotronHTensorMapping(
    const HfConfig& config);

// The checkpoint's weights in a new F32 model; errors name the shard and the HF tensor.
// `memory_limit_bytes` as HfImportOptions (0 reads MemAvailable).
absl::StatusOr<model::HybridLM> ImportNemotronH(const HfCheckpoint& checkpoint,
                                                uint64_t memory_limit_bytes);

}  // namespace tailor::hf

#endif  // TAILOR_COMPRESSION_HF_HF_IMPORT_NEMOTRON_H_H_
