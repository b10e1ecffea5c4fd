#ifndef TAILOR_COMPRESSION_GGUF_STUDENT_TO_GGUF_H_
#define TAILOR_COMPRESSION_GGUF_STUDENT_TO_GGUF_H_

// A student of a Hugging Face parent as a GGUF file llama.cpp serves (docs/model.md,
// "Export"). A student that fits the parent family's own layout (uniform widths; see
// hf::FamilyLayoutOf) is written through that layout and ExportHfToGguf, so it gets the
// family's arch (`llama`, `qwen2`, `qwen3`, ...). A Llama-family student with per-layer
// widths is written as arch `deci` (llama.cpp's loader for Llama-3.1-Nemotron-51B-style
// models): per-layer head_count, head_count_kv and feed_forward_length arrays.
//
// `deci` has patterns llama.cpp cannot run (it aborts the process): a first layer without
// attention, a last layer without FFN, a layer with attention but no FFN (its attention is
// skipped, not added). tailor writes such blocks with exact zero stand-ins instead: one
// attention head whose output projection is zero, or an FFN of width 1 whose projections
// are zero. Both contribute exactly 0 to the residual stream, so the file computes what
// the student computes; they cost one KV head / one FFN channel.
//
// A student of a Nemotron-H parent is written directly as `nemotron_h` (`nemotron_h_moe`
// with 'E' layers), uniform or not: llama.cpp takes per-layer query heads, KV heads, MLP
// widths and expert widths there, so every kept layer is one block with its own widths and a
// layer removed whole is left out (it adds nothing). The Mamba sizes, the head size and the
// expert count / top-k / shared expert width are global: a student whose kept layers differ
// in those is Unimplemented naming the layer. llama.cpp aborts without an attention block or
// without a Mamba block; a student that keeps none gets an exact zero stand-in at the end
// (attention with one head and a zero output projection; a Mamba mixer with one head per
// group, zero projections and a zero output projection).
//
// Qwen3 (q/k norms), Qwen2 (q/k/v biases) and MoE (Mixtral, Qwen3-MoE) students with
// per-layer widths are Unimplemented naming the reason (`deci` has no such tensors); uniform
// ones go through the family's layout (`qwen3`, `qwen2`, `llama` with experts, `qwen3moe`).
// The search never picks the others (StudentShapeRulesOf).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/model/config.h"
#include "compression/model/kv_cache_layout.h"

namespace tailor::gguf {

struct StudentGgufSummary {
  std::string arch;  // "llama", "qwen2", "qwen3", "deci", "nemotron_h", "nemotron_h_moe"
  int64_t blocks = 0;          // GGUF blocks written (stand-ins included)
  int64_t zero_attention = 0;  // stand-in blocks (see above)
  int64_t zero_ffn = 0;
  int64_t zero_mamba = 0;
  // Bytes of the stand-ins' tensors: what the file holds beyond the student's own weights
  // (the whole-model profiler's memory fit takes them out of what llama.cpp reports).
  int64_t stand_in_bytes = 0;
  // The stand-ins as the layers llama.cpp runs (at the student's hidden width): the
  // profiler's time fit counts them, so their time does not land in T0.
  std::vector<model::LayerSpec> stand_in_layers;
};

// The student shapes the layouts tailor writes for `parent` can express: what the search
// restricts its space to (autocompress::SpaceOptions), so a student it picks is one the export
// writes, never one discovered unexportable after distillation (or by an engine failing to
// load it).
struct StudentShapeRules {
  // GGUF `deci` (Llama family without biases or sliding window) and `nemotron_h` take
  // per-layer widths and removed layers; every other family's layouts have one width per
  // kind for all layers.
  bool per_layer_widths = true;
  // llama.cpp's `qwen2` sizes attn_q by the hidden width (heads x head_dim = hidden): a Qwen2
  // student keeps its hidden width and its heads.
  bool prune_hidden_and_heads = true;
  // `nemotron_h_moe` needs the shared expert and has one width for it: an MoE layer keeps its
  // shared expert whole whenever it keeps routed experts, else it is removed whole.
  bool keep_shared_experts = false;
  // What the layout adds to a student that keeps no layer of a kind (`nemotron_h`: a zero
  // attention block, a zero Mamba block): the cost model prices it (CostModel::SetStandIns).
  std::vector<model::StandInLayer> stand_ins;
  // How llama.cpp sizes the student's KV cache (`deci`: by block, V at the widest block's
  // KV heads): the cost model's C (CostModel::SetKvCacheLayout).
  model::KvCacheLayout kv_cache_layout = model::KvCacheLayout::kPerLayer;
  std::string why;  // each restriction's reason, "" without any
};
StudentShapeRules StudentShapeRulesOf(const hf::HfConfig& parent);

// Writes `path` (atomically) from tailor's model folder `student_dir` (a child of
// `parent`'s import). Errors name the tensor, the layer or the reason.
absl::StatusOr<StudentGgufSummary> ExportStudentToGguf(const std::string& student_dir,
                                                       const hf::HfCheckpoint& parent,
                                                       const std::string& path,
                                                       const GgufExportOptions& options = {});

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_STUDENT_TO_GGUF_H_
