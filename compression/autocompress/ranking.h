#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_RANKING_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_RANKING_H_

// Activation-importance ranking of the parent (spec §1 Step 2, Minitron's estimator) and
// the permutation that puts the most important units first, so every candidate of the
// search space is a prefix of each ranked axis and one set of weights serves them all.
//
// Channel score of an activation a[batch, seq, c] (the model's layout):
//   score_c = sqrt( sum over batches and sequences of (mean_seq |a[b, :, c]|)^2 ).
// Read at: hidden channels after every RMSNorm (block pre-norms and the final norm,
// summed), FFN neurons at the input of the down projection (MLP, each routed expert,
// shared expert), attention and Mamba heads at the input of the output projection.
// A head's score is the L2 norm of its channels' scores (Minitron aggregates a head's
// head_dim channels the same way). Routed-expert FFN inputs arrive as rows of routed
// tokens with no sequence structure, so each row counts as a sequence of length 1.
// Experts: mean L2 norm of the expert's output per routed token (0 if never routed).
// Depth: mean over tokens of 1 - cos(h_in, h_out) per block (reported, not permuted).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compression/model/hybrid_lm.h"
#include "compression/model/layers.h"

namespace tailor::autocompress {

// Scores of one layer; empty vectors for axes the layer does not have.
struct LayerImportance {
  std::vector<double> attention_heads;          // [heads]
  std::vector<double> mamba_heads;              // [heads]
  std::vector<double> experts;                  // [experts]
  std::vector<std::vector<double>> expert_ffn;  // [experts][expert_ffn]
  std::vector<double> shared_ffn;               // [shared_ffn]
  std::vector<double> mlp_ffn;                  // [ffn]
  double depth = 0.0;                           // 1 - cos(h_in, h_out), mean over tokens
};

struct Importance {
  std::vector<double> hidden;
  std::vector<LayerImportance> layers;
  // Per axis of a search space, per choice index: the KD loss of the ranked parent with that
  // axis alone at that width, on the repair's batches (the parent's own width: 0). When set
  // (uniform.h MeasureAxisKd), the repair and the ladders price a step by it instead of by
  // the unit scores above, which are shares WITHIN one axis and so cannot weigh axes against
  // each other. Empty: not measured.
  std::vector<std::vector<double>> axis_kd;
  // Why axis_kd was not measured ("" when it was, or nothing tried): MeasureAxisKd's limits.
  std::string axis_kd_skipped;
};

// Accumulates scores from forward passes; pass it as ForwardOptions::observer.
class ImportanceObserver : public model::ActivationObserver {
 public:
  explicit ImportanceObserver(const model::HybridConfig& config);
  void Observe(const model::ActivationSite& site, const at::Tensor& value) override;
  // Scores so far (square roots / means taken here, so accumulation can continue).
  Importance Result() const;

 private:
  struct LayerAcc {
    at::Tensor attention_heads;          // [heads, head_dim] sums of squares
    at::Tensor mamba_heads;              // [heads, head_dim]
    at::Tensor expert_norm_sum;          // [experts]
    at::Tensor expert_tokens;            // [experts]
    std::vector<at::Tensor> expert_ffn;  // [experts] of [expert_ffn]
    at::Tensor shared_ffn, mlp_ffn;
    at::Tensor block_input;  // last kBlockInput, held until kBlockOutput arrives
    double depth_sum = 0.0;
    int64_t depth_tokens = 0;
  };
  model::HybridConfig config_;
  at::Tensor hidden_;  // [hidden] sums of squares
  std::vector<LayerAcc> layers_;
};

// sum_b (mean_t |a[b, :, c]|)^2 over the leading dims: a is [B, T, C...] -> [C...].
at::Tensor SquaredMeanAbs(const at::Tensor& a);

// Runs the model (no grad) on each calibration batch [B, T] with the observer.
absl::StatusOr<Importance> RankImportance(model::HybridLM& model,
                                          const std::vector<at::Tensor>& batches);

// Indices sorted by descending score; ties keep the lower index first (stable).
std::vector<int64_t> DescendingOrder(const std::vector<double>& scores);

// DescendingOrder inside each of `groups` equal consecutive groups (units never leave their
// group): e.g. scores {1, 3, 4, 2} in 2 groups -> {1, 0, 2, 3}. groups <= 1: DescendingOrder.
std::vector<int64_t> GroupedDescendingOrder(const std::vector<double>& scores, int64_t groups);

// The permutation that puts the most important units first. Attention: KV groups by the
// sum of their heads' scores, then query heads inside each group (GQA keeps groups whole).
// Mamba heads: inside their B/C group. Experts: per layer, inside their routing group when
// the layer has groups. MLP neurons (SwiGLU or relu2) and expert / shared FFN neurons: by
// their score at the input of the down projection.
absl::StatusOr<model::Permutation> RankedPermutation(const model::HybridConfig& config,
                                                     const Importance& importance);

// Reorders the parent's weights in place by the ranking (the function is unchanged).
absl::Status PermuteModel(model::HybridLM& model, const Importance& importance);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_RANKING_H_
