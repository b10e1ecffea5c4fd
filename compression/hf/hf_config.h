#ifndef TAILOR_COMPRESSION_HF_HF_CONFIG_H_
#define TAILOR_COMPRESSION_HF_HF_CONFIG_H_

// The config.json of a Hugging Face causal LM, parsed into one typed struct for the
// families tailor imports (docs/model.md, "Hugging Face checkpoints").
//
// Key names and defaults follow the families' own configuration classes in transformers;
// a key that would change the block math in a way tailor does not model (another rope
// type, sliding-window attention in Qwen, biases in Nemotron-H, ...) is refused naming the
// key, never ignored: a config read wrongly would load without error and compute garbage.
//
// No LibTorch here.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::hf {

// The `architectures` values tailor reads. Mistral and Qwen2 are Llama-family layouts.
enum class Architecture {
  kLlama,      // LlamaForCausalLM
  kMistral,    // MistralForCausalLM
  kQwen2,      // Qwen2ForCausalLM: q/k/v biases
  kQwen3,      // Qwen3ForCausalLM: per-head q_norm / k_norm
  kMixtral,    // MixtralForCausalLM
  kQwen3Moe,   // Qwen3MoeForCausalLM
  kNemotronH,  // NemotronHForCausalLM
};

// Families share a tensor layout and block math.
enum class Family { kLlama, kQwen3, kMixtral, kQwen3Moe, kNemotronH };

absl::string_view ArchitectureName(Architecture a);  // "LlamaForCausalLM", ...
absl::string_view ModelTypeName(Architecture a);     // "llama", "qwen3_moe", ...
absl::string_view FamilyName(Family f);              // "llama", "qwen3", ...
Family FamilyOf(Architecture a);
// Accepts an architectures value or a model_type ("Qwen2ForCausalLM" or "qwen2"); the
// error lists the supported ones.
absl::StatusOr<Architecture> ParseArchitecture(absl::string_view name);

// What a decoder layer holds. Llama-family layers are attention + MLP; Nemotron-H layers
// are one mixer each, from `hybrid_override_pattern` (M, *, -, E).
enum class LayerKind {
  kAttentionMlp,  // self_attn + SwiGLU mlp
  kAttentionMoe,  // self_attn + routed experts (Mixtral, Qwen3-MoE)
  kMamba,         // Nemotron-H 'M': Mamba-2 mixer
  kAttention,     // Nemotron-H '*': attention without RoPE
  kMlp,           // Nemotron-H '-': up/down MLP with squared ReLU
  kMoe,           // Nemotron-H 'E': sigmoid-routed up/down experts + shared expert
};
absl::string_view LayerKindName(LayerKind k);

// RoPE frequency scaling: none, or Llama 3.1's piecewise scaling with its four parameters.
struct RopeScaling {
  enum class Type { kNone, kLlama3 };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 1.0;
  int64_t original_max_position_embeddings = 0;
};

// How routed experts are chosen and weighted.
enum class Router {
  kSoftmax,  // Mixtral / Qwen3-MoE: softmax over all experts, top k (then maybe renormalised)
  kSigmoidGrouped,  // Nemotron-H: sigmoid scores, + e_score_correction_bias for choice only,
                    // group-limited top k, optional renormalisation, routed_scaling_factor
};

struct MoeConfig {
  int64_t num_experts = 0;          // num_local_experts / num_experts / n_routed_experts
  int64_t experts_per_token = 0;    // num_experts_per_tok
  int64_t expert_intermediate = 0;  // moe_intermediate_size (Mixtral: intermediate_size)
  int64_t shared_intermediate = 0;  // Nemotron-H moe_shared_expert_intermediate_size; else 0
  Router router = Router::kSoftmax;
  bool norm_topk_prob = true;  // Mixtral always renormalises the top-k weights
  double routed_scaling_factor = 1.0;
  int64_t n_group = 1;  // Nemotron-H expert groups and the groups kept per token
  int64_t topk_group = 1;
};

// Nemotron-H Mamba-2 mixers. The inner width is num_heads * head_dim (what the modeling code
// uses; `expand` is recorded but does not size anything).
struct MambaConfig {
  int64_t num_heads = 0;   // mamba_num_heads
  int64_t head_dim = 0;    // mamba_head_dim
  int64_t state_size = 0;  // ssm_state_size
  int64_t n_groups = 0;    // B/C groups; heads and the gated norm are split into these
  int64_t conv_kernel = 0;
  int64_t expand = 0;
  int64_t chunk_size = 0;
  bool conv_bias = true;  // use_conv_bias
  double time_step_min = 0.001;
  double time_step_max = 0.1;
  double time_step_limit_min = 0.0;  // time_step_limit (default (0, inf))
  double time_step_limit_max = 0.0;  // 0 here means no upper limit

  int64_t intermediate_size() const { return num_heads * head_dim; }
  int64_t conv_dim() const { return intermediate_size() + 2 * n_groups * state_size; }
};

struct HfConfig {
  Architecture architecture = Architecture::kLlama;
  Family family = Family::kLlama;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // default: num_attention_heads
  int64_t head_dim = 0;             // default: hidden_size / num_attention_heads
  int64_t intermediate_size = 0;    // dense MLP width (0 when no layer has a dense MLP)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;  // Nemotron-H: layer_norm_epsilon
  bool rope = true;            // false for Nemotron-H (its attention has no RoPE)
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  int64_t sliding_window = 0;  // Mistral / Mixtral; 0 = full attention

  bool qkv_bias = false;  // Qwen2 always; Llama / Qwen3 with attention_bias
  bool o_bias = false;    // Llama / Qwen3 with attention_bias
  bool mlp_bias = false;  // Llama mlp_bias
  bool qk_norm = false;   // Qwen3, Qwen3-MoE

  std::vector<LayerKind> layers;  // one per decoder layer
  MoeConfig moe;                  // when any layer has routed experts
  MambaConfig mamba;              // when any layer is Mamba

  bool has_kind(LayerKind k) const;
};

// `source` names the file in errors: "config.json: num_key_value_heads: must divide
// num_attention_heads (32), got 5". `forced_format` (an architectures value or model_type,
// empty to detect) overrides detection from `architectures` / `model_type`. Every error is
// InvalidArgument naming the key.
absl::StatusOr<HfConfig> ParseHfConfigJson(absl::string_view json_text, absl::string_view source,
                                           absl::string_view forced_format = "");
absl::StatusOr<HfConfig> ReadHfConfig(const std::string& path,
                                      absl::string_view forced_format = "");

}  // namespace tailor::hf

#endif  // TAILOR_COMPRESSION_HF_HF_CONFIG_H_
