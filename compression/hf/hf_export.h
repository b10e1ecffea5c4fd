#ifndef TAILOR_COMPRESSION_HF_HF_EXPORT_H_
#define TAILOR_COMPRESSION_HF_HF_EXPORT_H_

// A student of a Hugging Face parent written back in the parent family's own HF layout
// (docs/model.md, "Export"): config.json (the parent's, with the student's layer count and
// widths), safetensors shards with model.safetensors.index.json, and the parent's tokenizer
// files. That is what vLLM, transformers and llama.cpp's converter load.
//
// The family layout has one width per kind for every decoder layer, so only students with
// uniform widths fit it: every kept decoder layer has the same attention heads / KV heads
// and the same MLP width, and a decoder layer is kept whole or removed whole. Any other
// student is Unimplemented naming the first layer that does not fit (GGUF `deci` expresses
// per-layer widths: compression/gguf/student_to_gguf.h).
//
// Supported families: Llama, Mistral, Qwen2, Qwen3, Mixtral and Qwen3-MoE (every kept MoE
// layer with the same expert count, expert width and top-k; Qwen3-MoE's dense layers listed
// in mlp_only_layers). Nemotron-H students are Unimplemented naming the family (GGUF
// `nemotron_h` carries them).
//
// Weights are converted from the student's F32 to the parent's dtype (BF16 / F16 by
// round-to-nearest-even) unless `dtype` says otherwise: a student imported from a BF16
// parent and exported untouched is bit-identical to the parent.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_config.h"
#include "compression/model/config.h"
#include "compression/model/safetensors_format.h"

namespace tailor::hf {

// One decoder layer of DeciLM's `block_configs` (DeciLmLayoutOf).
struct DeciLmBlock {
  bool attention = false;        // false: "no_op"
  int64_t n_heads_in_group = 0;  // query heads per KV head (KV heads = heads / this)
  bool ffn = false;              // false: "no_op"
  double ffn_mult = 0;           // width = DeciLmFfnWidth(ffn_mult, hidden)
};

// Which decoder layers of `parent` a student keeps and the config it then has.
struct FamilyLayout {
  HfConfig config;                  // the student's HF config (DeciLM: the global fields)
  std::vector<int64_t> kept_layers;  // parent decoder-layer index of each student layer
  // Non-empty (one per kept layer): the DeciLM layout instead of the family's own.
  std::vector<DeciLmBlock> decilm_blocks;
  std::string architecture;  // what config.json's `architectures` names
};

// The family layout of `student` (internal config, a child of `parent`'s import), or
// Unimplemented naming the first layer the layout cannot express.
absl::StatusOr<FamilyLayout> FamilyLayoutOf(const HfConfig& parent,
                                            const model::HybridConfig& student);

// DeciLM (`DeciLMForCausalLM`, model_type "nemotron-nas": Llama-3.1-Nemotron-51B,
// -Super-49B, -Ultra-253B), the layout engines serve Llama-family children with per-layer
// widths in (vLLM's nemotron_nas, llama.cpp's converter to `deci`): per decoder layer an
// attention with the global query heads and its own KV heads, or none, and an FFN of width
// DeciLmFfnWidth(ffn_mult), or none. So it expresses a student whose kept attention layers all
// keep the same query heads (with heads x head_dim = hidden, which those loaders assume) and
// whose FFN widths are multiples of 256: typically a block-removal student of a full-size
// parent. Anything else is Unimplemented naming the layer and the width. Llama / Mistral
// parents without biases or sliding window only.
absl::StatusOr<FamilyLayout> DeciLmLayoutOf(const HfConfig& parent,
                                            const model::HybridConfig& student);

// DeciLM's FFN width for `ffn_mult`: int(2 * ffn_mult * hidden / 3) rounded up to a multiple
// of 256 (the loaders' _ffn_mult_to_intermediate_size).
int64_t DeciLmFfnWidth(double ffn_mult, int64_t hidden);

struct HfExportOptions {
  // F32, BF16 or F16; unset keeps the parent's torch_dtype (F32 when it names none).
  std::optional<model::DType> dtype;
  uint64_t max_shard_bytes = uint64_t{4} << 30;  // a new shard starts past this size
};

struct HfExportSummary {
  FamilyLayout layout;
  model::DType dtype = model::DType::kF32;
  std::vector<std::string> shards;           // file names, in order
  std::vector<std::string> tokenizer_files;  // carried from the parent
  uint64_t weight_bytes = 0;
};

// Writes the student in tailor's model folder `student_dir` (config.json +
// model.safetensors, as SaveHybridLM writes it) as an HF checkpoint folder `out_dir`
// (created; must not exist): in the family's layout when the student fits it, else in the
// DeciLM layout when that fits (Unimplemented giving both reasons when neither does). Written to `out_dir`.tmp and renamed when complete, so a
// failed export leaves nothing behind. Errors name the tensor or file.
absl::StatusOr<HfExportSummary> ExportStudentAsHf(const std::string& student_dir,
                                                  const HfCheckpoint& parent,
                                                  const std::string& out_dir,
                                                  const HfExportOptions& options = {});

// config.json's torch_dtype name of `d` (F32, BF16 or F16).
std::string TorchDTypeName(model::DType d);

// F32 values as `to` (F32 copies; BF16 / F16 round to nearest even), little-endian bytes.
std::string ConvertF32(const char* data, int64_t count, model::DType to);

}  // namespace tailor::hf

#endif  // TAILOR_COMPRESSION_HF_HF_EXPORT_H_
