#include "compression/hf/parent_architecture.h"

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "compression/model/architecture_key.h"
#include "nlohmann/json.hpp"

namespace tailor::hf {
namespace {

using Json = nlohmann::json;

// The widths a layer of this kind has; the other sections of the config do not apply to it.
Json LayerDescription(const HfConfig& c, LayerKind kind) {
  Json layer = {{"kind", std::string(LayerKindName(kind))}};
  const bool attention = kind == LayerKind::kAttentionMlp ||
                         kind == LayerKind::kAttentionMoe || kind == LayerKind::kAttention;
  if (attention) {
    layer["heads"] = c.num_attention_heads;
    layer["kv_heads"] = c.num_key_value_heads;
    layer["head_dim"] = c.head_dim;
    layer["qkv_bias"] = c.qkv_bias;
    layer["o_bias"] = c.o_bias;
    layer["qk_norm"] = c.qk_norm;
  }
  if (kind == LayerKind::kAttentionMlp || kind == LayerKind::kMlp) {
    layer["ffn"] = c.intermediate_size;
    layer["mlp_bias"] = c.mlp_bias;
  }
  if (kind == LayerKind::kAttentionMoe || kind == LayerKind::kMoe) {
    layer["experts"] = c.moe.num_experts;
    layer["top_k"] = c.moe.experts_per_token;
    layer["expert_ffn"] = c.moe.expert_intermediate;
    layer["shared_ffn"] = c.moe.shared_intermediate;
  }
  if (kind == LayerKind::kMamba) {
    layer["heads"] = c.mamba.num_heads;
    layer["head_dim"] = c.mamba.head_dim;
    layer["state"] = c.mamba.state_size;
    layer["groups"] = c.mamba.n_groups;
    layer["conv_kernel"] = c.mamba.conv_kernel;
  }
  return layer;
}

}  // namespace

std::string HfArchitectureKey(const HfConfig& c) {
  Json layers = Json::array();
  for (LayerKind kind : c.layers) layers.push_back(LayerDescription(c, kind));
  const Json description = {
      {"layout", "hf"},
      {"family", std::string(FamilyName(c.family))},
      {"vocab", c.vocab_size},
      {"hidden", c.hidden_size},
      {"tie_embeddings", c.tie_word_embeddings},
      {"layers", std::move(layers)},
  };
  // nlohmann::json objects are key-sorted, so the dump is canonical.
  return Sha256::Hex(description.dump());
}

absl::StatusOr<std::string> ParentArchitectureKey(absl::string_view config_json,
                                                  absl::string_view source,
                                                  absl::string_view format) {
  const Json parsed = Json::parse(config_json.begin(), config_json.end(), nullptr,
                                  /*allow_exceptions=*/false);
  const bool hf = !format.empty() || (parsed.is_object() && (parsed.contains("architectures") ||
                                                             parsed.contains("model_type")));
  if (!hf) return model::ArchitectureKeyOfConfigJson(config_json);
  absl::StatusOr<HfConfig> config = ParseHfConfigJson(config_json, source, format);
  if (!config.ok()) return config.status();
  return HfArchitectureKey(*config);
}

}  // namespace tailor::hf
