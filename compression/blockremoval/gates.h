#ifndef TAILOR_COMPRESSION_BLOCKREMOVAL_GATES_H_
#define TAILOR_COMPRESSION_BLOCKREMOVAL_GATES_H_

// The model side of block removal (spec §2): gate gradients, the Fisher matrix H = AᵀA/m,
// the Block Influence baseline, held-out losses and the model with blocks removed.
//
// Gates. Every block of the hybrid LM has exactly one residual branch,
// h += g_i * mixer_i(RMSNorm_i(h)) (attention, Mamba, MoE and MLP are separate blocks, not
// two branches of one), so the model's own per-block gate (ForwardOptions::block_gates)
// is the spec's "gate on both residual branches": it scales the block's entire residual
// contribution, and g_i = 0 is exactly the model with block i removed.
//
// Variables. Only present blocks are variables: a block the parent already lacks cannot
// be removed again. `layers` maps variable v to its layer index.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/blockremoval/qubo.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"
#include "compression/tasks/suites.h"

namespace tailor::blockremoval {

// Indices of the present layers of `config` (the QUBO variables), ascending.
std::vector<int> PresentLayers(const model::HybridConfig& config);

// `count` samples of the uniform mixture of all eight task suites, deterministic in `seed`.
std::vector<tasks::Sample> CalibrationSamples(uint64_t seed, int64_t count, tasks::Split split);

// The answer loss (mean cross-entropy over answer tokens, what the parent was trained on)
// of one sample (batch 1) with the given gates ([num_layers]; undefined = all 1).
// Differentiable in `gates`.
absl::StatusOr<at::Tensor> SampleLoss(model::HybridLM& model, const tasks::Sample& sample,
                                      const at::Tensor& gates = {});

// Rows of A: d loss_s / d g_v at g = 1 for every sample s (batch 1 each) and every variable
// v of `layers`, as float64 [samples, layers.size()]. Parameters are frozen during the call
// (only the gates need gradients) and restored after.
absl::StatusOr<at::Tensor> GateGradients(model::HybridLM& model,
                                         const std::vector<tasks::Sample>& samples,
                                         const std::vector<int>& layers);

// H = AᵀA / rows (symmetrised against rounding) as a Qubo.
absl::StatusOr<Qubo> FisherQubo(const at::Tensor& a);

// Block Influence: 1 - cos(block input, block output) per token, summed over non-pad tokens
// per layer (ranks combine sums and token counts exactly). A block that barely changes the
// residual stream scores low and is removed first.
struct InfluenceSums {
  std::vector<double> sum;  // per layer (0 for absent layers)
  double tokens = 0;
};
absl::StatusOr<InfluenceSums> BlockInfluence(model::HybridLM& model,
                                             const std::vector<tasks::Sample>& samples,
                                             int64_t batch_size = 16);

// The M variables with the lowest mean influence (ties by index), ascending.
std::vector<int> LowestInfluence(const std::vector<double>& influence_per_variable, int m);

// `config` with layers `removed` made absent (all widths 0, the block variant kept:
// LayerSpec::AbsentLike; the index stays, so masks and cost tables stay aligned).
// INVALID_ARGUMENT for an out-of-range or already absent layer.
absl::StatusOr<model::HybridConfig> RemoveBlocks(const model::HybridConfig& config,
                                                 const std::vector<int>& removed);

// The parent without layers `removed` (fresh module; the parent is untouched).
absl::StatusOr<model::HybridLM> WithoutBlocks(const model::HybridLM& parent,
                                              const std::vector<int>& removed);

// Mean answer loss over every answer token of `samples` (token-weighted), no autograd.
absl::StatusOr<double> HeldOutLoss(model::HybridLM& model, const std::vector<tasks::Sample>& samples,
                                   int64_t batch_size = 16);

}  // namespace tailor::blockremoval

#endif  // TAILOR_COMPRESSION_BLOCKREMOVAL_GATES_H_
