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
// from it). Configs llama.cpp cannot run (no Mamba layer, no attention head count, 'E' next to
// dense '-' layers) are Unimplemented.
//
// No LibTorch here.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_config.h"

namespace tailor::gguf {

// "nemotron_h" / "nemotron_h_moe", or Unimplemented saying why the config has no GGUF
// equivalent here.
absl::StatusOr<std::string> NemotronHGgufArchitecture(const hf::HfConfig& config);

// "backbone.layers.3.mixer.A_log" -> "blk.3.ssm_a"; Unimplemented naming the tensor otherwise.
absl::StatusOr<std::string> NemotronHGgufTensorName(absl::string_view hf_name);

absl::StatusOr<GgufExportSummary> ExportNemotronHToGguf(const hf::HfCheckpoint& checkpoint,
                                                        const std::string& path,
                                                        const GgufExportOptions& options);

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_NEMOTRON_H_H_
