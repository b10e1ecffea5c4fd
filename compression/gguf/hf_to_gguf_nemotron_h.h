#ifndef TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_NEMOTRON_H_H_
#define TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_NEMOTRON_H_H_

// GGUF export of NemotronHForCausalLM as llama.cpp's `nemotron_h` arch (`nemotron_h_moe` with
// 'E' layers: router, score-correction bias, stacked experts, shared expert), with the tensor
// names, transforms and metadata of llama.cpp's converter (convert_hf_to_gguf.py,
// NemotronHModel over GraniteHybridModel / Mamba2Model; docs/model.md, "Nemotron-H"):
//   in_proj -> ssm_in, conv1d -> ssm_conv1d (squeezed to [channels, kernel]) + bias,
//   dt_bias -> ssm_dt.bias, A_log -> ssm_a = -exp(A_log) as [heads, 1], D -> ssm_d [heads, 1],
//   norm -> ssm_norm [n_groups, inner / n_groups], out_proj -> ssm_out; attention q/k/v/o;
//   MLP up/down -> ffn_up / ffn_down.
// llama.cpp tells the layer kinds apart only by per-layer arrays: a layer is recurrent iff its
// head_count_kv and feed_forward_length are both 0, attention iff only feed_forward_length
// is 0. So those two are arrays and head_count stays a scalar (llama.cpp derives the head size
// from it) unless attention blocks differ in query heads (students; AddNemotronHMetadata).
// Configs llama.cpp cannot run (no Mamba layer, no attention head count, 'E' next to dense
// '-' layers) are Unimplemented.
//
// No LibTorch here.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_config.h"

namespace tailor::gguf {

// One block of a nemotron_h file and its widths (what llama.cpp reads per layer).
struct NemotronHBlock {
  hf::LayerKind kind = hf::LayerKind::kMamba;
  int64_t heads = 0;     // attention: query heads (attention.head_count, scalar when uniform)
  int64_t kv_heads = 0;  // attention: attention.head_count_kv
  int64_t ffn = 0;       // MLP width, or an 'E' layer's expert width (feed_forward_length)
};

// What the metadata says: the blocks in file order and the keys llama.cpp keeps global
// (the Mamba sizes, the head size, the expert counts). Built from an HF config
// (NemotronHShapeOf) or from a student of one (student_to_gguf.cc), so both exports write
// the same keys the same way.
struct NemotronHShape {
  int64_t vocab = 0;
  int64_t hidden = 0;
  double rms_eps = 0;
  int64_t head_count = 0;  // written when every attention block has it (or there are none)
  int64_t head_dim = 0;
  hf::MambaConfig mamba;  // num_heads / n_groups / state_size / conv_kernel of every 'M'
  hf::MoeConfig moe;      // of every 'E' (expert_intermediate when uniform)
  std::vector<NemotronHBlock> blocks;

  bool has(hf::LayerKind kind) const;
};

NemotronHShape NemotronHShapeOf(const hf::HfConfig& config);

// "nemotron_h" / "nemotron_h_moe", or Unimplemented saying why the config has no GGUF
// equivalent here.
absl::StatusOr<std::string> NemotronHGgufArchitecture(const hf::HfConfig& config);

// The same for a shape (what llama.cpp cannot run: no Mamba block, no head count, 'E' next
// to '-'); `what` names the model in the message.
absl::StatusOr<std::string> NemotronHGgufArchitecture(const NemotronHShape& shape,
                                                      absl::string_view what);

// general.* and the arch's keys. head_count is a scalar unless the attention blocks differ
// in query heads; then an array whose non-attention entries repeat the first attention
// block's count (llama.cpp derives the head size from entry 0 and ignores the others).
// expert_feed_forward_length likewise (an array only when the 'E' blocks differ).
absl::Status AddNemotronHMetadata(const NemotronHShape& shape, const std::string& arch,
                                  const std::string& name, uint32_t file_type, GgufWriter& w);

// The GGUF shape of a tensor given its HF-style row-major shape (conv1d [channels, 1, k] or
// [channels, k]), and whether it must be F32 whatever the options say.
std::pair<std::vector<int64_t>, bool> NemotronHGgufShape(absl::string_view gguf_name,
                                                         const std::vector<int64_t>& shape,
                                                         int64_t n_groups);

// "blk.N.ffn_up_exps.weight" / "blk.N.ffn_down_exps.weight" for proj "up_proj" / "down_proj".
std::string NemotronHExpertsGgufName(int64_t block, absl::string_view proj);

// A = -exp(A_log) in F32, computed while the file is written (llama.cpp stores A).
TensorSource NemotronHNegExpSource(TensorSource a_log_f32);

// "backbone.layers.3.mixer.A_log" -> "blk.3.ssm_a"; Unimplemented naming the tensor otherwise.
absl::StatusOr<std::string> NemotronHGgufTensorName(absl::string_view hf_name);

absl::StatusOr<GgufExportSummary> ExportNemotronHToGguf(const hf::HfCheckpoint& checkpoint,
                                                        const std::string& path,
                                                        const GgufExportOptions& options);

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_NEMOTRON_H_H_
