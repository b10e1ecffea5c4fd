#ifndef TAILOR_COMPRESSION_MODEL_CONFIG_H_
#define TAILOR_COMPRESSION_MODEL_CONFIG_H_

// Architecture description of the hybrid decoder LM (see docs/model.md).
//
// One global hidden width; every per-layer width is independent, so a config describes
// both a parent and any heterogeneous child carved out of it. A layer whose width is 0
// is "absent": it keeps its index (so masks, gates and cost tables stay aligned with the
// parent) but holds no weights and is the identity.
//
// No LibTorch here: the coordinator-side code (planner, cost model tables) can read
// configs without pulling in torch.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::model {

enum class LayerKind { kAttention, kMamba, kMoe, kMlp };

// "attention", "mamba", "moe", "mlp".
absl::string_view LayerKindName(LayerKind kind);
absl::StatusOr<LayerKind> ParseLayerKind(absl::string_view name);

// The feed-forward function of an MLP or an expert. kSwiGlu: down(SiLU(gate x) * up x), the
// demo family's and the Llama / Mixtral / Qwen families'. kReluSquared: down(ReLU(up x)^2),
// no gate projection (Nemotron-H MLPs and experts).
enum class FfnActivation { kSwiGlu, kReluSquared };

// "swiglu", "relu2".
absl::string_view FfnActivationName(FfnActivation activation);
absl::StatusOr<FfnActivation> ParseFfnActivation(absl::string_view name);

// Grouped-query attention with rotary positions. heads == 0 means the layer is absent
// (then kv_heads must be 0 too). heads % kv_heads == 0; consecutive query heads share a
// KV head (head h uses KV head h / (heads / kv_heads)). head_dim is independent of hidden.
//
// The flags are the block variants of imported families (docs/model.md, "Block variants");
// their defaults are the demo family's block, and a config leaves them out when default.
struct AttentionSpec {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;   // even (rotary pairs)
  bool qkv_bias = false;  // q/k/v projections add a bias (Qwen2, Llama attention_bias)
  bool o_bias = false;    // the output projection adds a bias (Llama attention_bias)
  bool qk_norm = false;   // per-head RMSNorm of q and k, weights [head_dim], before RoPE (Qwen3)
  bool rope = true;       // false: no rotary positions (Nemotron-H attention)
};

// How the Mamba block's gated RMSNorm (of y * SiLU(z), before the output projection) groups
// channels. kPerHead: over each head's head_dim channels (the demo family's: a head can be
// removed without changing the others). kPerGroup: over each B/C group's heads / groups *
// head_dim channels (Nemotron-H's MambaRMSNormGated with group_size = inner / n_groups).
enum class MambaNorm { kPerHead, kPerGroup };

// "head", "group".
absl::string_view MambaNormName(MambaNorm norm);
absl::StatusOr<MambaNorm> ParseMambaNorm(absl::string_view name);

// Mamba-2-style selective SSM. heads == 0 means the layer is absent. B and C come in
// `groups` groups of `state` channels; head h reads group h / (heads / groups) (HF's
// repeat_interleave, llama.cpp's ssm_scan), so heads are pruned and permuted only inside their
// group and a child keeps the same number of heads in every group. groups = 1 and a per-head
// norm are the demo family's block (and the defaults, left out of config.json).
struct MambaSpec {
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t state = 0;        // SSM state size N (per group)
  int64_t conv_kernel = 0;  // causal depthwise conv width
  int64_t chunk = 0;        // chunk length of the prefill scan
  int64_t groups = 1;       // B/C groups (Nemotron-H n_groups); divides heads
  MambaNorm norm = MambaNorm::kPerHead;
};

// The heads a Mamba layer of `parent` keeps under a head-count choice `width` (a search
// space's global Mamba axis, counted in heads of the widest layer): at most its own, rounded
// down to a multiple of its groups so every B/C group keeps as many heads (the slice and the
// mask keep the first heads of each group), and at least one per group. 0 when absent.
int64_t KeptMambaHeads(const MambaSpec& parent, int64_t width);

// How a MoE block turns router logits into the experts chosen per token and their weights.
// kSoftmax: scores = softmax(logits) over all experts. kSigmoid: scores = sigmoid(logits)
// (Nemotron-H / DeepSeek-V3).
enum class MoeRouter { kSoftmax, kSigmoid };

// "softmax", "sigmoid".
absl::string_view MoeRouterName(MoeRouter router);
absl::StatusOr<MoeRouter> ParseMoeRouter(absl::string_view name);

// Top-k routed experts plus an optional shared expert. experts == 0 (with top_k == 0 and
// expert_ffn == 0) drops the routed part; shared_ffn == 0 drops the shared part; both 0
// means the layer is absent. Routed 0 with shared > 0 is a dense MLP.
//
// Routing per token (docs/model.md, "MoE variants"); the defaults are the demo family's
// block, and a config leaves them out when default:
//   scores = router(logits); choice = scores (+ score_bias when set);
//   with groups > 1 only the top_groups groups of experts/groups consecutive experts, ranked
//   by the sum of their two best choice values, stay eligible (the others' choice -> 0);
//   the top_k experts by choice are used with weight w_e = scores_e, divided by their sum
//   when norm_top_k (softmax: exactly softmax over the top-k logits; sigmoid: sum + 1e-20),
//   then multiplied by `scale`.
// Mixtral = the defaults; Qwen3-MoE = defaults with norm_top_k = norm_topk_prob; Nemotron-H =
// sigmoid, score_bias, groups = n_group, top_groups = topk_group, norm_top_k = norm_topk_prob,
// scale = routed_scaling_factor, activation relu2 (experts and shared expert).
struct MoeSpec {
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t expert_ffn = 0;
  int64_t shared_ffn = 0;
  MoeRouter router = MoeRouter::kSoftmax;
  bool norm_top_k = true;
  // A per-expert bias [experts] added to the scores only to choose experts (Nemotron-H
  // e_score_correction_bias); the weights use the unbiased scores. Parameter `score_bias`.
  bool score_bias = false;
  int64_t groups = 1;      // experts % groups == 0; groups > 1 needs >= 2 experts per group
  int64_t top_groups = 1;  // 1 <= top_groups <= groups
  double scale = 1.0;      // routed_scaling_factor: multiplies the routed experts' weights
  // Of the routed experts and the shared expert. kReluSquared: no w_gate / shared_gate.
  FfnActivation activation = FfnActivation::kSwiGlu;

  // True when every routing / activation field is the default (the demo family's block).
  bool is_default_variant() const;
  // The routing / activation fields (not the widths) are equal.
  bool SameVariant(const MoeSpec& o) const;
};

// The parent's experts (ascending ids) a child with `experts` routed experts keeps: the
// first experts / groups of EVERY routing group (a plain prefix with groups = 1). Experts are
// ranked inside their group, so each group keeps its best and routing still sees `groups`
// groups of consecutive experts. The slice, the prefix and supernet masks and the uniform
// baseline's accounting use this; the search spaces offer only multiples of the groups with
// >= 2 per group. Empty when either count is 0; at most the parent's experts.
std::vector<int64_t> KeptExperts(const MoeSpec& parent, int64_t experts);

// Dense MLP. ffn == 0 means the layer is absent. `bias`: the gate, up and down projections
// add biases (Llama mlp_bias). `activation` kReluSquared: down(ReLU(up x)^2) without a gate
// projection (Nemotron-H '-' layers); its neurons prune like SwiGLU's.
struct MlpSpec {
  int64_t ffn = 0;
  bool bias = false;
  FfnActivation activation = FfnActivation::kSwiGlu;
};

// RoPE frequency scaling. kNone: inv_freq_i = theta^(-2i / head_dim), the demo family's.
// kLlama3: Llama 3.1's rule; frequencies whose wavelength exceeds
// original_max_positions / low_freq_factor are divided by `factor`, those below
// original_max_positions / high_freq_factor are kept, and the band between is interpolated.
struct RopeScalingSpec {
  enum class Type { kNone, kLlama3 };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 1.0;
  int64_t original_max_positions = 0;

  bool operator==(const RopeScalingSpec& o) const {
    return type == o.type && factor == o.factor && low_freq_factor == o.low_freq_factor &&
           high_freq_factor == o.high_freq_factor &&
           original_max_positions == o.original_max_positions;
  }
  bool operator!=(const RopeScalingSpec& o) const { return !(*this == o); }
};

// One residual block: h += gate * mixer(RMSNorm(h)). Only the section matching `kind` is
// meaningful (and serialised).
struct LayerSpec {
  LayerKind kind = LayerKind::kMlp;
  AttentionSpec attention;
  MambaSpec mamba;
  MoeSpec moe;
  MlpSpec mlp;

  static LayerSpec Attention(int64_t heads, int64_t kv_heads, int64_t head_dim);
  static LayerSpec Mamba(int64_t heads, int64_t head_dim, int64_t state, int64_t conv_kernel,
                         int64_t chunk);
  static LayerSpec Moe(int64_t experts, int64_t top_k, int64_t expert_ffn, int64_t shared_ffn);
  static LayerSpec Mlp(int64_t ffn);
  // The same kind and block variant (biases, norms, RoPE, groups, routing, activation) with
  // every width 0: the layer made absent, still reading as its parent's family.
  static LayerSpec AbsentLike(const LayerSpec& layer);

  // False when every width of this layer is 0 (the block is the identity).
  bool present() const;
  bool has_routed_experts() const { return kind == LayerKind::kMoe && moe.experts > 0; }
  bool has_shared_expert() const { return kind == LayerKind::kMoe && moe.shared_ffn > 0; }

  bool operator==(const LayerSpec& other) const;
  bool operator!=(const LayerSpec& other) const { return !(*this == other); }
};

struct HybridConfig {
  int64_t vocab = 0;
  int64_t hidden = 0;
  int64_t max_seq = 0;  // longest sequence (prompt + generated) the model accepts
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  RopeScalingSpec rope_scaling;  // written to config.json only when not kNone
  // The LM head reuses the embedding table (no lm_head tensor), as HF tie_word_embeddings.
  bool tie_embeddings = false;
  std::vector<LayerSpec> layers;

  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
  // Number of weights (embeddings, norms, head included); all experts counted.
  int64_t ParameterCount() const;
  // Weights touched per token: routed experts counted top_k times, not `experts` times.
  int64_t ActiveParameterCount() const;

  bool operator==(const HybridConfig& other) const;
  bool operator!=(const HybridConfig& other) const { return !(*this == other); }
};

// A layer an engine's file layout adds to a model that keeps no layer of kind `absent`:
// llama.cpp's `nemotron_h` aborts without an attention or without a Mamba block, so tailor
// writes an exact zero one instead (gguf::StudentShapeRules::stand_ins). It computes nothing
// but costs what such a layer costs.
struct StandInLayer {
  LayerKind absent = LayerKind::kAttention;
  LayerSpec spec;
};

// `config` as the engine runs it: each stand-in whose kind `config` keeps no present layer of
// appended as one more layer.
HybridConfig WithStandIns(const HybridConfig& config, const std::vector<StandInLayer>& stand_ins);

// The least common multiple of the groups of `config`'s Mamba layers (1 without any): global
// Mamba head choices are multiples of it, so KeptMambaHeads never has to round a choice.
int64_t MambaHeadMultiple(const HybridConfig& config);

// Input limits (docs/operations.md, "Input limits"). Far above any model tailor trains, and
// small enough that no parameter count or byte size computed from a valid config overflows
// int64 (the largest valid config has < 2^62 parameters).
inline constexpr size_t kMaxConfigJsonBytes = 16 << 20;  // config.json text
inline constexpr int64_t kMaxLayers = 1024;              // layers
inline constexpr int64_t kMaxExperts = 1024;             // layers[i].moe.experts
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;   // vocab
inline constexpr int64_t kMaxSeq = int64_t{1} << 24;     // max_seq
// hidden, mlp.ffn, moe.expert_ffn, moe.shared_ffn
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;
// attention.heads, attention.kv_heads, attention.head_dim, mamba.heads, mamba.head_dim,
// mamba.state
inline constexpr int64_t kMaxHeads = 4096;
inline constexpr int64_t kMaxConvKernel = 256;           // mamba.conv_kernel
inline constexpr int64_t kMaxChunk = 65536;              // mamba.chunk

// Checks every field; the error names the field, e.g.
// "layers[3].moe.top_k: must be <= experts (4), got 6" or
// "layers: at most 1024 entries, got 1025".
absl::Status ValidateHybridConfig(const HybridConfig& config);

// JSON form (docs/model.md). Parsing is strict: unknown keys, wrong types and missing
// fields are errors naming the field; the result is validated.
absl::StatusOr<HybridConfig> ParseHybridConfigJson(absl::string_view json_text);
std::string HybridConfigToJson(const HybridConfig& config);

absl::StatusOr<HybridConfig> ReadHybridConfig(const std::string& path);
absl::Status WriteHybridConfig(const HybridConfig& config, const std::string& path);

// Writes `contents` to `path` atomically (temp file in the same folder, then rename), so a
// crash never leaves a half-written config or weights file behind.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_CONFIG_H_
