#ifndef TAILOR_COMPRESSION_COSTMODEL_COST_MODEL_H_
#define TAILOR_COMPRESSION_COSTMODEL_COST_MODEL_H_

// Predicts latency, throughput and memory of any architecture in the search space from a
// profiled cost table (spec section 1, step 1; method in docs/costmodel.md):
//
//   T = sum_phase [ T0_phase(hidden) F_fixed,phase(n)
//                   + sum_l t_phase,l(config_l) F_kind(l),phase(n) ]
//   M = W + C + P + R + eps,   P = max(P0(hidden), max_l workspace_l(config_l))
//
// t and workspace come from the table by multilinear interpolation over the profiled grid
// of each layer class (exact at profiled configurations); F is the interaction correction
// (interaction.h) from the counts n of present layers per kind (all 1 without one); W, C
// and R are formulas (memory_model.h) times the table's per-term scales (1 for the built-in
// engine; fitted by the whole-model profiler); eps is the table's calibration. Removed
// layers cost nothing.
//
// ChoiceCosts is the same model laid out per search choice, for a differentiable search:
// with one-hot (or soft) choice weights p[l][o], expected counts
//   n_j = sum_l sum_o p[l][o] [option o of layer l is a present layer of kind j]
// and F as above,
//   T = sum_phase [ fixed_ms[phase] F_fixed,phase(n)
//                   + sum_l sum_o p[l][o] phase_ms[phase][l][o] F_kind(l),phase(n) ]
//   M = fixed_memory_mib + sum_l sum_o p[l][o] * memory_mib[l][o]
//       + max(fixed_workspace_mib, max_l sum_o p[l][o] * workspace_mib[l][o])
// which equals Predict() for one-hot weights (LatencyOfChoices; the max can be smoothed).

#include <array>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/costmodel/cost_table.h"
#include "compression/costmodel/interaction.h"
#include "compression/costmodel/interpolation.h"
#include "compression/costmodel/search_space.h"
#include "compression/model/config.h"
#include "compression/model/kv_cache_layout.h"

namespace tailor::v1 {
class CostTable;
}  // namespace tailor::v1

namespace tailor::costmodel {

struct MemoryBreakdown {
  double weights_mib = 0;    // W
  double cache_mib = 0;      // C
  double workspace_mib = 0;  // P
  double runtime_mib = 0;    // R
  double eps_mib = 0;
  double total_mib = 0;
};

struct Prediction {
  double latency_ms = 0;
  double prefill_ms = 0;  // includes T0's prefill part
  double decode_ms = 0;
  double throughput_tokens_per_s = 0;  // batch * output_tokens / latency
  double memory_mib = 0;
  MemoryBreakdown memory;
};

// One layer's interpolated costs (times at the reference context).
struct LayerCost {
  double prefill_ms = 0;
  double decode_ms = 0;
  double workspace_mib = 0;  // max over both phases
  double static_mib = 0;     // its weights + cache (W_l + C_l)
};

struct ChoiceCosts {
  std::array<double, 2> fixed_ms{};  // T0 at the hidden width: [0] prefill, [1] decode
  double fixed_memory_mib = 0;       // embedding/head/final-norm weights + R + eps
  double fixed_workspace_mib = 0;    // P0
  // [phase][layer][option], at the reference context (multiply by F).
  std::array<std::vector<std::vector<double>>, 2> phase_ms;
  std::vector<std::vector<double>> latency_ms;     // [layer][option] prefill + decode
  std::vector<int> kind;                           // [layer] LayerKind as int
  std::vector<std::vector<bool>> present;          // [layer][option]
  std::vector<std::vector<double>> memory_mib;     // [layer][option] W_l + C_l
  std::vector<std::vector<double>> workspace_mib;  // [layer][option]
  InteractionModel interaction;
};

// T of one architecture (an option per layer) from ChoiceCosts: equals Predict().
double LatencyOfChoices(const ChoiceCosts& costs, const std::vector<int>& options);

class CostModel {
 public:
  // Builds one interpolation grid per (layer kind, class, phase). FAILED_PRECONDITION when a
  // class's profiled points do not form a full grid; INVALID_ARGUMENT for a table without
  // entries or fixed costs.
  static absl::StatusOr<CostModel> FromData(CostTableData table);
  // From the coordinator's proto (defined in cost_table_proto.cc, built with protobuf).
  static absl::StatusOr<CostModel> FromTable(const v1::CostTable& table);

  const CostTableData& table() const { return table_; }
  const engine::Workload& workload() const { return table_.workload; }

  // The layers the engine adds to a model that lacks a kind (model::StandInLayer): Predict
  // prices model::WithStandIns(arch), what the engine runs. A property of the parent's file
  // layout in the table's engine, not of the table: the profiler and the search set it from
  // gguf::StudentShapeRules. None by default.
  void SetStandIns(std::vector<model::StandInLayer> stand_ins) {
    stand_ins_ = std::move(stand_ins);
  }
  const std::vector<model::StandInLayer>& stand_ins() const { return stand_ins_; }
  // How the engine's file layout sizes the KV cache (model::KvCacheLayout): Predict's C. Like
  // the stand-ins, set from gguf::StudentShapeRules; per layer by default.
  void SetKvCacheLayout(model::KvCacheLayout layout) { kv_cache_layout_ = layout; }
  model::KvCacheLayout kv_cache_layout() const { return kv_cache_layout_; }

  // The table's workload.
  absl::StatusOr<Prediction> Predict(const model::HybridConfig& arch) const;
  // INVALID_ARGUMENT unless `workload` is the table's: times are only valid for the
  // contract they were profiled under (another one needs another table).
  absl::StatusOr<Prediction> Predict(const model::HybridConfig& arch,
                                     const engine::Workload& workload) const;

  // T0 of `arch` (both phases): its hidden width's fixed cost in its context.
  absl::StatusOr<double> FixedCost(const model::HybridConfig& arch) const;

  // NOT_FOUND when the table has no class for the layer (e.g. another head_dim).
  absl::StatusOr<LayerCost> CostOfLayer(const model::LayerSpec& spec, int64_t hidden) const;

  absl::StatusOr<ChoiceCosts> CostsOfChoices(const SearchSpace& space, int hidden_index,
                                             int mamba_heads_index) const;

 private:
  struct Grid {
    GridInterpolator time;
    GridInterpolator workspace;
  };
  // (kind, class, phase) -> grid.
  using GridKey = std::tuple<std::string, std::string, std::string>;

  CostModel() = default;
  absl::StatusOr<const Grid*> FindGrid(const std::string& kind, const std::string& cls,
                                       const std::string& phase) const;
  absl::StatusOr<double> FixedTime(int64_t hidden, const std::string& phase) const;
  absl::StatusOr<double> FixedWorkspace(int64_t hidden) const;

  CostTableData table_;
  std::map<GridKey, std::shared_ptr<const Grid>> grids_;
  std::vector<model::StandInLayer> stand_ins_;
  model::KvCacheLayout kv_cache_layout_ = model::KvCacheLayout::kPerLayer;
};

// The interpolation class and coordinates of a layer (its LayerParams). Layers of one
// class share a grid; coordinates are the axes interpolated over:
//   attention  class head_dim          axes hidden, kv, heads per kv group
//   mamba      class head_dim/state/conv/chunk   axes hidden, heads
//   moe        class routed,top_k=K    axes hidden, experts, expert_ffn, shared_ffn
//              class shared (no routed experts)  axes hidden, shared_ffn
//   mlp        class ""                axes hidden, ffn
//   fixed      class ""                axis hidden
struct GridCoordinates {
  std::string cls;
  std::vector<double> x;
};
GridCoordinates CoordinatesOf(const std::string& kind, const std::map<std::string, double>& params);

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_COST_MODEL_H_
