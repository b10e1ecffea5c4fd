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

// Which decoder layers of `parent` a student keeps and the family config it then has.
struct FamilyLayout {
  HfConfig config;                  // the student's HF config
  std::vector<int64_t> kept_layers;  // parent decoder-layer index of each student layer
};

// The family layout of `student` (internal config, a child of `parent`'s import), or
// Unimplemented naming the first layer the layout cannot express.
absl::StatusOr<FamilyLayout> FamilyLayoutOf(const HfConfig& parent,
                                            const model::HybridConfig& student);

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
// (created; must not exist). Written to `out_dir`.tmp and renamed when complete, so a
// failed export leaves nothing behind. Errors name the tensor or file.
absl::StatusOr<HfExportSummary> ExportStudentAsHf(const std::string& student_dir,
                                                  const HfCheckpoint& parent,
                                                  const std::string& out_dir,
                                                  const HfExportOptions& options = {});

// F32 values as `to` (F32 copies; BF16 / F16 round to nearest even), little-endian bytes.
std::string ConvertF32(const char* data, int64_t count, model::DType to);

}  // namespace tailor::hf

#endif  // TAILOR_COMPRESSION_HF_HF_EXPORT_H_
