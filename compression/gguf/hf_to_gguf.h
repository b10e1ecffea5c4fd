#ifndef TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_H_
#define TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_H_

// Export of a Hugging Face checkpoint (compression/hf) to a GGUF file llama.cpp loads
// (docs/model.md, "Export to GGUF"). Supported: the Llama family (LlamaForCausalLM,
// MistralForCausalLM -> arch `llama`; Qwen2ForCausalLM -> `qwen2`), Qwen3ForCausalLM
// (`qwen3`), the MoE families (MixtralForCausalLM -> `llama` with experts,
// Qwen3MoeForCausalLM -> `qwen3moe`; hf_to_gguf_moe.h) and NemotronHForCausalLM
// (`nemotron_h`, or `nemotron_h_moe` with 'E' layers; hf_to_gguf_nemotron_h.h). A config
// feature the GGUF arch cannot express is Unimplemented naming it (GgufArchitecture).
//
// Tensor data is streamed from the checkpoint's memory-mapped shards into the file; Q/K
// rows are permuted for the `llama` arch (see hf_to_gguf.cc) and BF16/F16 converted to F32
// where the options ask for it.
//
// No LibTorch here.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/gguf/gguf_writer.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_config.h"

namespace tailor::gguf {

struct GgufExportOptions {
  // true: every tensor F32 (what exact comparisons with an FP32 reference need).
  // false: matrices keep the checkpoint's dtype (F32, F16 or BF16); vectors (norms, biases,
  // rope factors) are F32 either way, as llama.cpp's own converter writes them.
  bool all_f32 = false;
  std::string name;  // general.name; empty: the checkpoint folder's name
};

// The vocabulary written to the GGUF (tokenizer.ggml.*).
struct GgufVocabulary {
  std::string model = "gpt2";       // "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre = "default";      // "gpt2": llama.cpp's split pattern ("llama-bpe", ...)
  std::vector<std::string> tokens;  // exactly vocab_size entries
  std::vector<int32_t> types;       // tokenizer::TokenType values (1 normal, 3 control, ...)
  std::vector<std::string> merges;  // "gpt2": "a b" (may be empty)
  std::vector<float> scores;        // "llama": one per token
  int64_t unk = -1;                 // "llama": the unknown piece
  bool add_space_prefix = false;    // "llama": SentencePiece's add_dummy_prefix
  int64_t bos = -1;                 // -1: not written
  int64_t eos = -1;
  bool carried = false;  // true: the checkpoint's tokenizer; false: synthesized
  std::string note;      // the tokenizer carried, or why one was synthesized
};

struct GgufExportSummary {
  std::string arch;                                       // GgufArchitecture's
  std::vector<std::pair<std::string, std::string>> map;   // HF tensor -> GGUF tensor
  bool qk_permuted = false;
  GgufVocabulary vocabulary;
};

// "llama", "qwen2", "qwen3", "qwen3moe", "nemotron_h" or "nemotron_h_moe"; Unimplemented
// naming a config feature the GGUF arch cannot express (Mistral / Mixtral sliding_window,
// Qwen3 o_proj biases, Qwen3-MoE norm_topk_prob = false or dense layers, the Nemotron-H
// configs of NemotronHGgufArchitecture).
absl::StatusOr<std::string> GgufArchitecture(const hf::HfConfig& config);

// The GGUF name of an HF tensor ("model.layers.3.self_attn.q_proj.weight" ->
// "blk.3.attn_q.weight"); Unimplemented naming it when it has none.
absl::StatusOr<std::string> GgufTensorName(absl::string_view hf_name);

// The Q/K row order llama.cpp's `llama` arch expects: HF keeps each head's RoPE pairs as
// (i, i + D/2) ("rotate half"), llama.cpp's normal RoPE pairs (2i, 2i + 1). Returns, for each
// output row, the source row, over `n_heads` heads of `rows / n_heads` rows each.
std::vector<int64_t> RopeInterleaveRows(int64_t rows, int64_t n_heads);

// llama3 rope scaling as llama.cpp's `rope_freqs` tensor: one divisor per frequency pair.
std::vector<float> Llama3RopeFactors(const hf::HfConfig& config);

// tokenizer.json's byte-level BPE vocabulary when it maps onto [0, vocab_size), else a
// synthesized byte-level one (the 256 GPT-2 byte symbols first, then placeholders).
GgufVocabulary BuildVocabulary(const hf::HfCheckpoint& checkpoint);

// Streams a checkpoint tensor as `to` (F32: BF16 / F16 converted; otherwise the stored bytes),
// rows in `row_order` (empty: as stored), about 1 MiB at a time. Shared by the family
// exporters (hf_to_gguf_nemotron_h.cc).
TensorSource CheckpointTensorSource(hf::TensorView view, TensorType to,
                                    std::vector<int64_t> row_order = {});

// general.file_type of an export: 0 when every tensor is F32, else the type of
// `embedding` (the dtype most matrices share): 1 F16, 32 BF16.
absl::StatusOr<uint32_t> GgufFileType(const hf::HfCheckpoint& checkpoint,
                                      absl::string_view embedding, bool all_f32);

// general.name: options.name, else the last component of `dir`.
std::string GgufModelName(const std::string& dir, const GgufExportOptions& options);

// The tokenizer.ggml.* keys of `vocabulary`.
absl::Status AddVocabularyKeys(const GgufVocabulary& vocabulary, GgufWriter& writer);

// Writes `path` (atomically). Errors name the tensor or key.
absl::StatusOr<GgufExportSummary> ExportHfToGguf(const hf::HfCheckpoint& checkpoint,
                                                 const std::string& path,
                                                 const GgufExportOptions& options = {});

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_HF_TO_GGUF_H_
