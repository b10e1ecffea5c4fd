#ifndef TAILOR_COMPRESSION_HF_HF_IMPORT_H_
#define TAILOR_COMPRESSION_HF_HF_IMPORT_H_

// Import of a Hugging Face checkpoint into tailor's own model (docs/model.md, "Import into
// the model family"). The dense families map onto the hybrid family's block variants, no
// second model class: HF decoder layer i becomes internal layers 2i (attention, normed by
// input_layernorm) and 2i + 1 (SwiGLU MLP, or for a sparse layer of MixtralForCausalLM /
// Qwen3MoeForCausalLM the moe block with its experts stacked, hf_import_moe.h; normed by
// post_attention_layernorm), which is exactly the pre-norm residual of the HF modeling code.
//
// Supported: LlamaForCausalLM, MistralForCausalLM (without a sliding window shorter than
// max_position_embeddings), Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM (same
// sliding-window rule), Qwen3MoeForCausalLM; NemotronHForCausalLM in hf_import_nemotron_h.h.
//
// Also the pieces tailor-engine --next-token-logprobs uses: loading either layout from a
// folder and the next-token log-probabilities of a prompt.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_config.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"

namespace tailor::hf {

// The internal config of an HF config; Unimplemented naming what tailor cannot express:
// a sliding window shorter than max_position_embeddings (Mistral, Mixtral), a Mixtral /
// Qwen3-MoE router other than softmax or with a shared expert, Nemotron-H Mamba layers
// without conv biases or with a time_step_limit other than the default.
absl::StatusOr<model::HybridConfig> HybridConfigFromHf(const HfConfig& config);

// HF tensor name -> internal (state-dict) name, for every tensor of ExpectedTensors(config).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> HfTensorMapping(
    const HfConfig& config);

struct HfImportOptions {
  // Bytes the F32 model may take; 0 reads MemAvailable from /proc/meminfo. Tests inject it.
  uint64_t memory_limit_bytes = 0;
};

// The checkpoint's weights in a new model (F32; BF16 and F16 converted). Each tensor is
// copied straight from its memory-mapped shard into the model's parameter, so no second
// copy of the weights is held. Errors name the shard and the HF tensor. The F32 model of a
// BF16 checkpoint takes twice the shards' bytes, which HfCheckpoint::Open's memory check
// does not cover: a model larger than the limit is ResourceExhausted naming both sizes,
// before anything is allocated.
absl::StatusOr<model::HybridLM> ImportHfModel(const HfCheckpoint& checkpoint,
                                              const HfImportOptions& options = {});

// True when DIR/config.json is a Hugging Face config (it has `architectures`); tailor's own
// config.json has none.
// `format` (parent { format }: an architectures value or model_type) forces the HF layout and
// overrides the detection from config.json in the functions below.
bool IsHfCheckpointDir(const std::string& dir, absl::string_view format = "");
bool IsHfConfigJson(absl::string_view config_json, absl::string_view format = "");

// A tailor model folder (LoadHybridLM) or an HF checkpoint folder (Open + ImportHfModel).
absl::StatusOr<model::HybridLM> LoadModelDir(const std::string& dir,
                                            absl::string_view format = "");

// The internal config of either layout's folder without loading weights: what the profile
// job and the block-removal solver read of a parent. Errors name DIR/config.json.
absl::StatusOr<model::HybridConfig> ReadModelConfig(const std::string& dir,
                                                    absl::string_view format = "");

// The same from config.json's text (a caller that also keys the text, like the profile job,
// reads the file once); errors name `source`.
absl::StatusOr<model::HybridConfig> ModelConfigFromJson(absl::string_view config_json,
                                                        absl::string_view source,
                                                        absl::string_view format = "");

// log P(next token | tokens[0..p]) for each p in `positions` (empty: the last position only),
// each vocab-size long, from one FP32 causal forward pass. Tokens must be in [0, vocab) and
// no more than max_seq; positions in [0, tokens.size()).
absl::StatusOr<std::vector<std::vector<float>>> NextTokenLogprobs(
    model::HybridLM& model, const std::vector<int64_t>& tokens,
    const std::vector<int64_t>& positions = {});

}  // namespace tailor::hf

#endif  // TAILOR_COMPRESSION_HF_HF_IMPORT_H_
