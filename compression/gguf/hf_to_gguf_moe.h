#ifndef TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_MOE_H_
#define TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_MOE_H_

// GGUF export of the MoE families as llama.cpp loads them (docs/model.md, "Export to GGUF"):
// MixtralForCausalLM as arch `llama` with experts, Qwen3MoeForCausalLM as `qwen3moe`.
// The router becomes blk.N.ffn_gate_inp.weight [experts, hidden]; the per-expert HF tensors
// are stacked into blk.N.ffn_{gate,up,down}_exps.weight ([E, F, hidden], [E, F, hidden],
// [E, hidden, F] row-major), streamed expert after expert from the shards. hf_to_gguf.cc
// dispatches here for the two families.
//
// No LibTorch here.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/gguf/gguf_writer.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_config.h"

namespace tailor::gguf {

// "llama" for Mixtral, "qwen3moe" for Qwen3-MoE; Unimplemented naming what the GGUF arch
// cannot express: a sliding window (Mixtral), norm_topk_prob = false or dense layers
// (mlp_only_layers, decoder_sparse_step > 1) or attention biases (Qwen3-MoE).
absl::StatusOr<std::string> MoeGgufArchitecture(const hf::HfConfig& config);

// "model.layers.N.block_sparse_moe.gate.weight" / "model.layers.N.mlp.gate.weight" ->
// "blk.N.ffn_gate_inp.weight"; NotFound for any other name.
absl::StatusOr<std::string> MoeRouterGgufName(absl::string_view hf_name);

// True for "model.layers.N.{block_sparse_moe,mlp}.experts.E.*": AddStackedExperts writes
// these, the generic one-tensor-per-tensor loop skips them.
bool IsHfExpertTensor(absl::string_view hf_name);

// {arch}.expert_count, {arch}.expert_used_count and, for qwen3moe,
// {arch}.expert_feed_forward_length.
absl::Status AddMoeMetadata(const hf::HfConfig& config, const std::string& arch,
                            GgufWriter& writer);

// blk.N.ffn_{gate,up,down}_exps.weight of every sparse layer, stacked over the experts in
// expert order. `all_f32`: F32; otherwise the checkpoint's dtype (F32 when experts differ).
absl::Status AddStackedExperts(const hf::HfCheckpoint& checkpoint, bool all_f32,
                               GgufExportSummary& summary, GgufWriter& writer);

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_MOE_H_
