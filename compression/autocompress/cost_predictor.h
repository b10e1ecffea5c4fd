#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_COST_PREDICTOR_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_COST_PREDICTOR_H_

// The profiled cost model (costmodel::CostModel) as a differentiable CostPredictor over the
// AutoCompress search space (spec §1 Step 3: rho = predicted cost / budget).
//
// Everything the table can say about the space is precomputed once. For every hidden-width
// choice h and every layer l, the layer's costs are tabulated over all combinations k of the
// axes it depends on (its own axes; a Mamba layer also the global Mamba-heads axis; 0 widths
// included), with each spec built by ChildConfig so that the predictor and the extracted
// student can never disagree about what a choice means:
//   t_pre[l][h, k], t_dec[l][h, k]   phase times at the table's reference context
//   S[l][h, k]                       weights + cache of the layer (MiB)
//   W[l][h, k]                       prefill workspace of the layer (MiB)
//   present[l][k]                    1 when the option is a present layer
// plus the fixed terms per hidden choice (T0 per phase, embedding/head/final-norm weights +
// runtime buffers + eps, fixed workspace P0).
//
// For soft choices y (one distribution per axis), the axes are treated as independent:
// q_l = outer product of the distributions of l's axes (flattened like k), p = y[hidden].
//   n_j    = sum_{l of kind j} q_l . present_l                     (expected layer counts)
//   F_r,ph = exp(sum_j gamma_ph[r][j] (n_j - reference_j))          (interaction correction)
//   T      = sum_ph [ F_fixed,ph (p . T0_ph) + sum_l F_kind(l),ph (p . t_ph[l] q_l) ]
//   M      = p . ( fixed + sum_l S[l] q_l + max(P0, max_l W[l] q_l) )
// A stand-in the engine adds when no layer of its kind is kept (model::StandInLayer) enters
// T, M and n_j like one more layer, weighted by the probability that none is kept:
// a_s = prod_{l of its kind} (1 - q_l . present_l).
// A `deci` KV cache (model::KvCacheLayout::kDeciBlocks, CostModel::kv_cache_layout) caches
// V rows for the widest block in every block: each attention layer's V part of S (v_l) is
// replaced by B * max(max_l v_l . q_l, f v1), B = sum_i (1 - (1 - k_a,i)(1 - k_m,i)) the
// expected blocks (k: the probability that block i's attention / MLP is kept), and the K
// rows of the 1-head stand-in attention of a first block without one (v1 per side) are
// added with its probability f = sum_i prod_{j<i} (1 - k_a,j)(1 - k_m,j) (1 - k_a,i) k_m,i.

//   X      = 1000 * batch * output_tokens / T                       (tokens/s)
// For one-hot y every expectation picks a single entry, n_j are the true counts, and the
// result equals CostModel::Predict(ChildConfig(...)) up to rounding.
//
// Design choices:
// - The interaction correction is applied with the EXPECTED counts n_j. It is the same
//   closed form as the cost model's (exact when one-hot); for soft choices it is the factor
//   at the mean context rather than the mean factor, a small Jensen gap that vanishes as the
//   Gumbel temperature anneals, and it keeps d T / d y flowing through the counts.
// - The workspace term uses a plain max over layers of each layer's EXPECTED workspace
//   (inside the hidden expectation). It is exact for one-hot choices, which a smooth max
//   would not be; its gradient reaches only the layer that holds the peak, which is the
//   only layer whose choice can lower the peak anyway.

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/autocompress/search.h"
#include "compression/autocompress/space.h"
#include "compression/costmodel/cost_model.h"
#include "compression/model/config.h"

namespace tailor::autocompress {

class SpaceCostModel {
 public:
  // Tabulates every layer option of `space` (built from `parent`) with `model`. Errors from
  // the cost model (e.g. NOT_FOUND for a layer class the table lacks) name the layer.
  static absl::StatusOr<std::shared_ptr<const SpaceCostModel>> Build(
      const costmodel::CostModel& model, const model::HybridConfig& parent,
      const SearchSpace& space);

  // `choices[a]`: axis a's choice distribution [n_a] (any device, any float type). The result
  // is float64 on the CPU, differentiable in `choices`.
  absl::StatusOr<CostPrediction> Predict(const std::vector<at::Tensor>& choices) const;

  // Predict() as a CostPredictor for RunSearch (shares this object).
  static CostPredictor AsPredictor(std::shared_ptr<const SpaceCostModel> self);

  int64_t tabulated_options() const;  // sum over layers of H * K_l (for logs)

 private:
  struct LayerTable {
    int kind = 0;           // LayerKind as int (interaction row)
    std::vector<int> axes;  // the axes the layer depends on, in the order k is flattened
    at::Tensor time[2];     // [H, K] prefill, decode (ms)
    at::Tensor static_mib;  // [H, K]
    at::Tensor workspace;   // [H, K]
    at::Tensor present;     // [K]
    at::Tensor value_mib;   // [H, K] the V rows of an attention layer's cache (deci only)
  };

  // A layer the engine adds when every layer of `kind` is removed (CostModel::stand_ins):
  // priced with the probability that the choices keep none of `layers`.
  struct StandInTable {
    int kind = 0;
    std::vector<int> layers;  // the parent's layers of that kind
    at::Tensor time[2];       // [H]
    at::Tensor static_mib;    // [H]
    at::Tensor workspace;     // [H]
  };

  SpaceCostModel() = default;
  // `values`: each layer's expected V rows [H]; `kept`: each layer's keep probability.
  at::Tensor DeciCacheCorrection(const std::vector<at::Tensor>& values,
                                 const std::vector<at::Tensor>& kept) const;

  std::vector<int64_t> axis_sizes_;
  int hidden_axis_ = -1;
  std::vector<LayerTable> layers_;
  std::vector<StandInTable> stand_ins_;
  bool deci_blocks_ = false;     // the parent's layers pair up as `deci` blocks
  double deci_one_head_mib_ = 0;  // one KV head's K (or V) rows
  at::Tensor fixed_time_[2];    // [H]
  at::Tensor fixed_memory_;     // [H]
  at::Tensor fixed_workspace_;  // [H]
  costmodel::InteractionModel interaction_;
  double tokens_per_request_ = 0;  // batch * output tokens
};

// Convenience: Build + AsPredictor.
absl::StatusOr<CostPredictor> MakeCostPredictor(const costmodel::CostModel& model,
                                                const model::HybridConfig& parent,
                                                const SearchSpace& space);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_COST_PREDICTOR_H_
