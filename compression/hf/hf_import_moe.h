#ifndef TAILOR_COMPRESSION_HF_HF_IMPORT_MOE_H_
#define TAILOR_COMPRESSION_HF_HF_IMPORT_MOE_H_

// The routed-expert part of the import of MixtralForCausalLM and Qwen3MoeForCausalLM
// (docs/model.md, "Import into the model family"): a sparse HF decoder layer i becomes the
// internal attention block 2i and a `moe` block 2i + 1 whose per-expert HF tensors are
// stacked into one [experts, ...] parameter each.
//
// Stacked tensors are named in the HF -> internal mapping with the expert as a slot suffix,
// "layers.3.moe.w_gate[2]"; ImportHfModel stacks the slots of one parameter in expert order.

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/hf/hf_config.h"
#include "compression/model/config.h"

namespace tailor::hf {

// The internal block of a sparse layer (HfConfig::moe): routed SwiGLU experts, softmax
// router; norm_top_k = norm_topk_prob (always true for Mixtral); no shared expert.
model::LayerSpec MoeLayerSpec(const HfConfig& config);

// The internal name, relative to the MoE block ("moe.router", "moe.w_up[5]"), of the part of
// an HF tensor name after "model.layers.{i}." when it is a router or expert tensor of
// Mixtral (block_sparse_moe.gate, block_sparse_moe.experts.E.w1/w3/w2) or Qwen3-MoE
// (mlp.gate, mlp.experts.E.gate_proj/up_proj/down_proj); NotFound otherwise.
absl::StatusOr<std::string> MapMoeLayerTensor(absl::string_view rest);

// "layers.3.moe.w_gate[2]" -> {"layers.3.moe.w_gate", 2}; {name, -1} without a slot.
std::pair<std::string, int64_t> SplitStackSlot(absl::string_view internal);

}  // namespace tailor::hf

#endif  // TAILOR_COMPRESSION_HF_HF_IMPORT_MOE_H_
