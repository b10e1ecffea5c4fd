#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_SUPERNET_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_SUPERNET_H_

// Supernet masks from soft architecture choices (spec §1 Step 3). On a prefix axis the
// mask is the expected keep-mask of the choice distribution y:
//   m_i = sum_j y_j * 1[i < width_j]
// so a one-hot y gives exactly the hard prefix mask of that width (= model::PrefixMask) and
// the gradient of the KD loss reaches y through every unit the choices disagree on.
// Attention heads are kept per GQA group: head h (group size g) is kept by choice j when
// h % g < width_j; Mamba heads likewise per B/C group (the first
// model::KeptMambaHeads(width_j) / groups of each group), routed experts per routing group
// (model::KeptExperts(width_j): the first width_j / groups of each). Routed experts are masked
// on their OUTPUTS after top-k (what the model does with LayerMask::experts); see
// MoeForwardWithMasking for the ablation.

#include <ATen/core/Tensor.h>

#include <vector>

#include "absl/status/statusor.h"
#include "compression/autocompress/space.h"
#include "compression/model/config.h"
#include "compression/model/layers.h"

namespace tailor::autocompress {

// [choices, channels] 0/1 matrix M with M[j, i] = 1 when choice j keeps unit i of the
// axis; `group` > 0 ranks units inside consecutive groups of that size (GQA). SoftArchMask
// builds the Mamba and expert axes' matrices per layer instead (their groups,
// model::KeptMambaHeads, model::KeptExperts).
at::Tensor KeepMatrix(const ChoiceAxis& axis, int64_t channels, int64_t group = 0);

// `choices[a]` is axis a's choice vector, [n_a] or [N, n_a] (one row per sequence: give
// each sequence its architecture's row so several sampled architectures share a batch).
// The result is a model::ArchMask with masks [C] or [N, C], differentiable in `choices`.
absl::StatusOr<model::ArchMask> SoftArchMask(const model::HybridConfig& parent,
                                             const SearchSpace& space,
                                             const std::vector<at::Tensor>& choices);

// One-hot choice vectors for indices (one per axis), float32 on the CPU.
std::vector<at::Tensor> OneHotChoices(const SearchSpace& space, const std::vector<int>& indices);

// --- MoE masking ablation ----------------------------------------------------------------

enum class MoeMaskMode {
  // The method: top-k on the unmasked router, then expert outputs * mask. A masked expert
  // keeps its slot, so d loss / d mask_e (and the router's gradient) stays non-zero.
  kOutput,
  // The rejected alternative: scores = softmax(router) * mask, top-k on those, gates
  // renormalised over the chosen. A masked expert is never chosen: no gradient reaches it.
  kRoutingScore,
};

// The routed part of a model::MoeImpl layer (`moe` must be one with routed experts) on
// x [B, T, hidden] with expert_mask [experts], computed functionally from its weights so
// both masking modes can be compared on one layer. kOutput equals the model's own forward
// of the routed part. The shared expert is not included.
absl::StatusOr<at::Tensor> MoeForwardWithMasking(const model::Mixer& moe, int64_t top_k,
                                                 const at::Tensor& x, const at::Tensor& expert_mask,
                                                 MoeMaskMode mode);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_SUPERNET_H_
