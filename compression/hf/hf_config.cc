#include "compression/hf/hf_config.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compression/model/config.h"
#include "nlohmann/json.hpp"

namespace tailor::hf {
namespace {

using Json = nlohmann::json;

struct ArchitectureInfo {
  Architecture architecture;
  absl::string_view name;
  absl::string_view model_type;
  Family family;
};
constexpr ArchitectureInfo kArchitectures[] = {
    {Architecture::kLlama, "LlamaForCausalLM", "llama", Family::kLlama},
    {Architecture::kMistral, "MistralForCausalLM", "mistral", Family::kLlama},
    {Architecture::kQwen2, "Qwen2ForCausalLM", "qwen2", Family::kLlama},
    {Architecture::kQwen3, "Qwen3ForCausalLM", "qwen3", Family::kQwen3},
    {Architecture::kMixtral, "MixtralForCausalLM", "mixtral", Family::kMixtral},
    {Architecture::kQwen3Moe, "Qwen3MoeForCausalLM", "qwen3_moe", Family::kQwen3Moe},
    {Architecture::kNemotronH, "NemotronHForCausalLM", "nemotron_h", Family::kNemotronH},
};

const ArchitectureInfo& Info(Architecture a) {
  for (const ArchitectureInfo& info : kArchitectures) {
    if (info.architecture == a) return info;
  }
  return kArchitectures[0];
}

std::string SupportedNames(bool model_types) {
  std::vector<absl::string_view> names;
  for (const ArchitectureInfo& info : kArchitectures) {
    names.push_back(model_types ? info.model_type : info.name);
  }
  return absl::StrJoin(names, ", ");
}

// Typed access to the keys of one JSON object; every error names the file and the key.
// JSON null counts as absent: transformers writes null for unset optional keys.
class Keys {
 public:
  Keys(const Json& object, absl::string_view source, absl::string_view prefix = "")
      : object_(object), source_(source), prefix_(prefix) {}

  const Json* Find(absl::string_view key) const {
    auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool Has(absl::string_view key) const { return Find(key) != nullptr; }

  // The first of several spellings of one key that is present (else the first): configs
  // written by older code use other names for some Nemotron-H keys.
  absl::string_view Alias(std::initializer_list<absl::string_view> names) const {
    for (absl::string_view n : names) {
      if (Has(n)) return n;
    }
    return *names.begin();
  }

  absl::Status Error(absl::string_view key, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", prefix_, key, ": ", message));
  }

  // An integer in [min, max]; `fallback` when absent (required when there is none).
  absl::StatusOr<int64_t> Int(absl::string_view key, int64_t min, int64_t max,
                              std::optional<int64_t> fallback = std::nullopt) const {
    const Json* v = Find(key);
    if (v == nullptr) {
      if (fallback.has_value()) return *fallback;
      return Error(key, "missing");
    }
    if (!v->is_number_integer())
      return Error(key, absl::StrCat("must be an integer, got ", v->dump()));
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
      return Error(key, absl::StrCat("must be at most ", max, ", got ", v->dump()));
    }
    const int64_t n = v->get<int64_t>();
    if (n < min) return Error(key, absl::StrCat("must be >= ", min, ", got ", n));
    if (n > max) return Error(key, absl::StrCat("must be at most ", max, ", got ", n));
    return n;
  }

  // A finite number (integers accepted: Qwen configs write rope_theta as 1000000).
  absl::StatusOr<double> Double(absl::string_view key, std::optional<double> fallback) const {
    const Json* v = Find(key);
    if (v == nullptr) {
      if (fallback.has_value()) return *fallback;
      return Error(key, "missing");
    }
    if (!v->is_number()) return Error(key, absl::StrCat("must be a number, got ", v->dump()));
    const double d = v->get<double>();
    if (!std::isfinite(d)) return Error(key, "must be finite");
    return d;
  }

  absl::StatusOr<double> PositiveDouble(absl::string_view key,
                                        std::optional<double> fallback) const {
    TAILOR_ASSIGN_OR_RETURN(double d, Double(key, fallback));
    if (d <= 0) return Error(key, absl::StrCat("must be > 0, got ", d));
    return d;
  }

  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const {
    const Json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Error(key, absl::StrCat("must be true or false, got ", v->dump()));
    return v->get<bool>();
  }

  absl::StatusOr<std::string> String(absl::string_view key, absl::string_view fallback) const {
    const Json* v = Find(key);
    if (v == nullptr) return std::string(fallback);
    if (!v->is_string()) return Error(key, absl::StrCat("must be a string, got ", v->dump()));
    return v->get<std::string>();
  }

  // A key whose only accepted value is `want` (an activation the block math hard-codes).
  absl::Status Expect(absl::string_view key, absl::string_view fallback,
                      absl::string_view want) const {
    TAILOR_ASSIGN_OR_RETURN(std::string got, String(key, fallback));
    if (got != want) {
      return Error(key, absl::StrCat("only \"", want, "\" is supported, got \"", got, "\""));
    }
    return absl::OkStatus();
  }

  // A feature flag tailor does not model: present and true is refused.
  absl::Status Refuse(absl::string_view key, absl::string_view what) const {
    TAILOR_ASSIGN_OR_RETURN(bool on, Bool(key, false));
    if (on) return Error(key, absl::StrCat(what, " is not supported"));
    return absl::OkStatus();
  }

  const Json& object() const { return object_; }

 private:
  const Json& object_;
  absl::string_view source_;
  std::string prefix_;
};

absl::StatusOr<Architecture> DetectArchitecture(const Keys& keys, absl::string_view forced) {
  if (!forced.empty()) {
    absl::StatusOr<Architecture> a = ParseArchitecture(forced);
    if (!a.ok()) return absl::InvalidArgumentError(absl::StrCat("format: ", a.status().message()));
    return a;
  }
  if (const Json* archs = keys.Find("architectures")) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      return keys.Error("architectures",
                        absl::StrCat("must be a non-empty list of strings, got ", archs->dump()));
    }
    const std::string first = (*archs)[0].get<std::string>();
    for (const ArchitectureInfo& info : kArchitectures) {
      if (info.name == first) return info.architecture;
    }
    return keys.Error("architectures", absl::StrCat("unsupported \"", first,
                                                    "\" (supported: ", SupportedNames(false),
                                                    "; parent { format: ... } forces one)"));
  }
  if (keys.Has("model_type")) {
    TAILOR_ASSIGN_OR_RETURN(std::string type, keys.String("model_type", ""));
    for (const ArchitectureInfo& info : kArchitectures) {
      if (info.model_type == type) return info.architecture;
    }
    return keys.Error("model_type", absl::StrCat("unsupported \"", type,
                                                 "\" (supported: ", SupportedNames(true), ")"));
  }
  return keys.Error(
      "architectures",
      absl::StrCat("missing, and so is model_type (supported: ", SupportedNames(false), ")"));
}

// JSON has no infinity. Python's json module writes a bare `Infinity`, which
// QuoteNonFiniteLiterals turns into the string "Infinity"; transformers 5 writes
// {"__float__": "Infinity"}; a null upper limit means none too.
bool IsInfinity(const Json& v) {
  if (v.is_null()) return true;
  if (v.is_string()) return v.get<std::string>() == "Infinity";
  if (v.is_object()) {
    auto it = v.find("__float__");
    return v.size() == 1 && it != v.end() && it->is_string() && *it == "Infinity";
  }
  return false;
}

// Python's json.dumps writes float('inf') and NaN as the bare words Infinity, -Infinity and
// NaN, which strict JSON parsers refuse; real Nemotron-H configs contain them
// (time_step_limit). Quote them outside strings so the file parses and the value is seen
// as a string, then only keys that can be infinite accept it.
std::string QuoteNonFiniteLiterals(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out.push_back(ch);
      if (ch == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') in_string = true;
    bool replaced = false;
    for (absl::string_view word : {"-Infinity", "Infinity", "NaN"}) {
      if (text.substr(i, word.size()) == word) {
        absl::StrAppend(&out, "\"", word, "\"");
        i += word.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out.push_back(ch);
  }
  return out;
}

// llama3 rope scaling: the four parameters of the piecewise frequency rescaling.
absl::Status ParseLlama3Scaling(const Keys& s, RopeScaling& out) {
  out.type = RopeScaling::Type::kLlama3;
  TAILOR_ASSIGN_OR_RETURN(out.factor, s.PositiveDouble("factor", std::nullopt));
  TAILOR_ASSIGN_OR_RETURN(out.low_freq_factor, s.PositiveDouble("low_freq_factor", std::nullopt));
  TAILOR_ASSIGN_OR_RETURN(out.high_freq_factor, s.PositiveDouble("high_freq_factor", std::nullopt));
  if (out.high_freq_factor <= out.low_freq_factor) {
    return s.Error("high_freq_factor",
                   absl::StrCat("must be > low_freq_factor (", out.low_freq_factor, "), got ",
                                out.high_freq_factor));
  }
  TAILOR_ASSIGN_OR_RETURN(out.original_max_position_embeddings,
                          s.Int("original_max_position_embeddings", 1, model::kMaxSeq));
  return absl::OkStatus();
}

// RoPE base and scaling, in either spelling: transformers 4.x writes `rope_theta` and a
// `rope_scaling` object ({"rope_type" or "type": ...}); 5.x writes one `rope_parameters`
// object holding rope_theta and the scaling keys.
absl::Status ParseRope(const Keys& keys, absl::string_view source, HfConfig& c) {
  absl::string_view section = "rope_scaling";
  if (keys.Has("rope_parameters")) section = "rope_parameters";
  const Json* s = keys.Find(section);
  if (s != nullptr && !s->is_object()) {
    return keys.Error(section, absl::StrCat("must be an object, got ", s->dump()));
  }
  const Json empty = Json::object();
  const Keys scaling(s != nullptr ? *s : empty, source, absl::StrCat(section, "."));
  if (section == "rope_parameters") {
    TAILOR_ASSIGN_OR_RETURN(c.rope_theta, scaling.PositiveDouble("rope_theta", 10000.0));
  } else {
    TAILOR_ASSIGN_OR_RETURN(c.rope_theta, keys.PositiveDouble("rope_theta", 10000.0));
  }
  if (s == nullptr) return absl::OkStatus();
  const absl::string_view type_key = scaling.Alias({"rope_type", "type"});
  TAILOR_ASSIGN_OR_RETURN(std::string type, scaling.String(type_key, "default"));
  if (type == "default") return absl::OkStatus();
  if (type == "llama3") return ParseLlama3Scaling(scaling, c.rope_scaling);
  return scaling.Error(type_key,
                       absl::StrCat("unsupported \"", type, "\" (supported: default, llama3)"));
}

// Attention shape keys shared by every family: heads, KV heads (default: heads) and the
// head width (default: hidden_size / heads).
absl::Status ParseAttention(const Keys& keys, HfConfig& c) {
  TAILOR_ASSIGN_OR_RETURN(c.num_attention_heads,
                          keys.Int("num_attention_heads", 1, model::kMaxHeads));
  TAILOR_ASSIGN_OR_RETURN(c.num_key_value_heads, keys.Int("num_key_value_heads", 1,
                                                          model::kMaxHeads, c.num_attention_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return keys.Error("num_key_value_heads",
                      absl::StrCat("must divide num_attention_heads (", c.num_attention_heads,
                                   "), got ", c.num_key_value_heads));
  }
  const absl::string_view head_key = keys.Alias({"head_dim", "attention_head_dim"});
  if (!keys.Has(head_key) && c.hidden_size % c.num_attention_heads != 0) {
    return keys.Error("head_dim", absl::StrCat("missing, and hidden_size (", c.hidden_size,
                                               ") is not a multiple of num_attention_heads (",
                                               c.num_attention_heads, ")"));
  }
  TAILOR_ASSIGN_OR_RETURN(
      c.head_dim, keys.Int(head_key, 1, model::kMaxHeads, c.hidden_size / c.num_attention_heads));
  if (c.rope && c.head_dim % 2 != 0) {
    return keys.Error(head_key, absl::StrCat("must be even (rotary pairs), got ", c.head_dim));
  }
  return absl::OkStatus();
}

absl::Status ParseCommon(const Keys& keys, HfConfig& c) {
  TAILOR_ASSIGN_OR_RETURN(c.vocab_size, keys.Int("vocab_size", 1, model::kMaxVocab));
  TAILOR_ASSIGN_OR_RETURN(c.hidden_size, keys.Int("hidden_size", 1, model::kMaxWidth));
  TAILOR_ASSIGN_OR_RETURN(c.tie_word_embeddings, keys.Bool("tie_word_embeddings", false));
  return absl::OkStatus();
}

struct FamilyDefaults {
  double rms_norm_eps;
  int64_t max_position_embeddings;
};

FamilyDefaults DefaultsOf(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
      return {1e-6, 2048};
    case Architecture::kMistral:
      return {1e-6, 4096 * 32};
    case Architecture::kMixtral:
      return {1e-5, 4096 * 32};
    case Architecture::kNemotronH:
      return {1e-5, 4096};
    default:
      return {1e-6, 32768};
  }
}

// Routed experts of Mixtral and Qwen3-MoE (softmax router). Mixtral's experts are as wide
// as its intermediate_size and always renormalise the top-k weights.
absl::Status ParseSoftmaxMoe(const Keys& keys, HfConfig& c) {
  MoeConfig& m = c.moe;
  const bool mixtral = c.architecture == Architecture::kMixtral;
  const absl::string_view experts_key = mixtral ? absl::string_view("num_local_experts")
                                                : keys.Alias({"num_experts", "num_local_experts"});
  TAILOR_ASSIGN_OR_RETURN(m.num_experts, keys.Int(experts_key, 1, model::kMaxExperts));
  TAILOR_ASSIGN_OR_RETURN(m.experts_per_token, keys.Int("num_experts_per_tok", 1, m.num_experts));
  if (mixtral) {
    m.expert_intermediate = c.intermediate_size;
    m.norm_topk_prob = true;
  } else {
    TAILOR_ASSIGN_OR_RETURN(m.expert_intermediate,
                            keys.Int("moe_intermediate_size", 1, model::kMaxWidth));
    TAILOR_ASSIGN_OR_RETURN(m.norm_topk_prob, keys.Bool("norm_topk_prob", false));
  }
  m.router = Router::kSoftmax;
  return absl::OkStatus();
}

// Qwen3-MoE: layer i is sparse unless listed in mlp_only_layers or (i + 1) is not a
// multiple of decoder_sparse_step; dense layers are SwiGLU MLPs of intermediate_size.
absl::Status ParseQwen3MoeLayers(const Keys& keys, HfConfig& c) {
  TAILOR_ASSIGN_OR_RETURN(int64_t step, keys.Int("decoder_sparse_step", 1, model::kMaxLayers, 1));
  std::vector<bool> dense(c.num_hidden_layers, false);
  if (const Json* only = keys.Find("mlp_only_layers")) {
    if (!only->is_array()) {
      return keys.Error("mlp_only_layers", absl::StrCat("must be a list, got ", only->dump()));
    }
    for (const Json& v : *only) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
          v.get<int64_t>() >= c.num_hidden_layers) {
        return keys.Error("mlp_only_layers",
                          absl::StrCat("entries must be layer indices in [0, ", c.num_hidden_layers,
                                       "), got ", v.dump()));
      }
      dense[v.get<int64_t>()] = true;
    }
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool sparse = !dense[i] && (i + 1) % step == 0;
    c.layers.push_back(sparse ? LayerKind::kAttentionMoe : LayerKind::kAttentionMlp);
  }
  return absl::OkStatus();
}

// Llama, Mistral, Qwen2, Qwen3, Mixtral and Qwen3-MoE: every layer is attention (with RoPE)
// followed by an MLP or routed experts.
absl::Status ParseDecoderFamily(const Keys& keys, absl::string_view source, HfConfig& c) {
  const Architecture a = c.architecture;
  TAILOR_ASSIGN_OR_RETURN(c.num_hidden_layers, keys.Int("num_hidden_layers", 1, model::kMaxLayers));
  TAILOR_RETURN_IF_ERROR(ParseAttention(keys, c));
  TAILOR_RETURN_IF_ERROR(keys.Expect("hidden_act", "silu", "silu"));
  TAILOR_RETURN_IF_ERROR(ParseRope(keys, source, c));
  if (a == Architecture::kQwen2) {
    c.qkv_bias = true;  // Qwen2 has q/k/v biases unconditionally, and no o_proj bias
  } else if (a == Architecture::kLlama || a == Architecture::kQwen3 ||
             a == Architecture::kQwen3Moe) {
    TAILOR_ASSIGN_OR_RETURN(c.qkv_bias, keys.Bool("attention_bias", false));
    c.o_bias = c.qkv_bias;
  }
  if (a == Architecture::kLlama) {
    TAILOR_ASSIGN_OR_RETURN(c.mlp_bias, keys.Bool("mlp_bias", false));
  }
  c.qk_norm = a == Architecture::kQwen3 || a == Architecture::kQwen3Moe;
  if (a == Architecture::kMistral || a == Architecture::kMixtral) {
    TAILOR_ASSIGN_OR_RETURN(c.sliding_window,
                            keys.Int("sliding_window", 1, model::kMaxSeq, int64_t{0}));
  } else if (a != Architecture::kLlama) {
    TAILOR_RETURN_IF_ERROR(keys.Refuse("use_sliding_window", "sliding-window attention"));
  }
  if (a == Architecture::kQwen3Moe) {
    TAILOR_RETURN_IF_ERROR(ParseQwen3MoeLayers(keys, c));
  } else {
    c.layers.assign(c.num_hidden_layers, a == Architecture::kMixtral ? LayerKind::kAttentionMoe
                                                                     : LayerKind::kAttentionMlp);
  }
  // Mixtral's experts are intermediate_size wide; elsewhere it sizes the dense MLPs.
  if (a == Architecture::kMixtral || c.has_kind(LayerKind::kAttentionMlp)) {
    TAILOR_ASSIGN_OR_RETURN(c.intermediate_size,
                            keys.Int("intermediate_size", 1, model::kMaxWidth));
  }
  if (a == Architecture::kMixtral || a == Architecture::kQwen3Moe) {
    TAILOR_RETURN_IF_ERROR(ParseSoftmaxMoe(keys, c));
  }
  return absl::OkStatus();
}

// A Nemotron-H layer type, as a pattern character or a layers_block_type name (both the
// older names and transformers 5's).
std::optional<LayerKind> NemotronLayerKind(absl::string_view s) {
  if (s == "M" || s == "mamba" || s == "linear_attention") return LayerKind::kMamba;
  if (s == "*" || s == "attention" || s == "full_attention") return LayerKind::kAttention;
  if (s == "-" || s == "mlp") return LayerKind::kMlp;
  if (s == "E" || s == "moe") return LayerKind::kMoe;
  return std::nullopt;
}

// Nemotron-H's layer pattern: `hybrid_override_pattern` ("M-M*-E...") or, as newer
// transformers write it, `layers_block_type` (a list of names).
absl::Status ParseNemotronPattern(const Keys& keys, HfConfig& c) {
  std::string key = "hybrid_override_pattern";
  if (keys.Has(key)) {
    TAILOR_ASSIGN_OR_RETURN(std::string pattern, keys.String(key, ""));
    for (size_t i = 0; i < pattern.size(); ++i) {
      const std::optional<LayerKind> k = NemotronLayerKind(pattern.substr(i, 1));
      if (!k.has_value()) {
        return keys.Error(key, absl::StrCat("character ", i, " is '", pattern.substr(i, 1),
                                            "'; the pattern takes M (Mamba), * (attention), "
                                            "- (MLP) and E (MoE)"));
      }
      c.layers.push_back(*k);
    }
  } else if (keys.Has("layers_block_type")) {
    key = "layers_block_type";
    const Json& list = *keys.Find(key);
    if (!list.is_array()) return keys.Error(key, absl::StrCat("must be a list, got ", list.dump()));
    for (const Json& v : list) {
      const std::optional<LayerKind> k =
          v.is_string() ? NemotronLayerKind(v.get<std::string>()) : std::nullopt;
      if (!k.has_value()) {
        return keys.Error(key, absl::StrCat("unknown layer type ", v.dump(),
                                            " (supported: mamba, attention, mlp, moe)"));
      }
      c.layers.push_back(*k);
    }
  } else {
    return keys.Error(key, "missing (and so is layers_block_type)");
  }
  if (c.layers.empty()) return keys.Error(key, "has no layers");
  if (static_cast<int64_t>(c.layers.size()) > model::kMaxLayers) {
    return keys.Error(
        key, absl::StrCat("at most ", model::kMaxLayers, " layers, got ", c.layers.size()));
  }
  c.num_hidden_layers = static_cast<int64_t>(c.layers.size());
  TAILOR_ASSIGN_OR_RETURN(int64_t declared,
                          keys.Int("num_hidden_layers", 1, model::kMaxLayers, c.num_hidden_layers));
  if (declared != c.num_hidden_layers) {
    return keys.Error("num_hidden_layers", absl::StrCat("must equal the length of ", key, " (",
                                                        c.num_hidden_layers, "), got ", declared));
  }
  return absl::OkStatus();
}

absl::Status ParseNemotronMamba(const Keys& keys, HfConfig& c) {
  MambaConfig& m = c.mamba;
  TAILOR_ASSIGN_OR_RETURN(m.num_heads, keys.Int("mamba_num_heads", 1, model::kMaxHeads));
  TAILOR_ASSIGN_OR_RETURN(m.head_dim, keys.Int("mamba_head_dim", 1, model::kMaxHeads));
  TAILOR_ASSIGN_OR_RETURN(m.state_size, keys.Int("ssm_state_size", 1, model::kMaxHeads));
  const absl::string_view groups = keys.Alias({"n_groups", "mamba_n_groups"});
  TAILOR_ASSIGN_OR_RETURN(m.n_groups, keys.Int(groups, 1, model::kMaxHeads));
  if (m.num_heads % m.n_groups != 0) {
    return keys.Error(
        groups, absl::StrCat("must divide mamba_num_heads (", m.num_heads, "), got ", m.n_groups));
  }
  TAILOR_ASSIGN_OR_RETURN(m.conv_kernel, keys.Int(keys.Alias({"conv_kernel", "mamba_d_conv"}), 1,
                                                  model::kMaxConvKernel));
  TAILOR_ASSIGN_OR_RETURN(m.expand,
                          keys.Int(keys.Alias({"expand", "mamba_expand"}), 1, model::kMaxHeads, 2));
  TAILOR_ASSIGN_OR_RETURN(m.chunk_size, keys.Int(keys.Alias({"chunk_size", "mamba_chunk_size"}), 1,
                                                 model::kMaxChunk, 128));
  TAILOR_ASSIGN_OR_RETURN(m.conv_bias,
                          keys.Bool(keys.Alias({"use_conv_bias", "mamba_conv_bias"}), true));
  TAILOR_RETURN_IF_ERROR(keys.Expect("mamba_hidden_act", "silu", "silu"));
  TAILOR_ASSIGN_OR_RETURN(
      m.time_step_min, keys.PositiveDouble(keys.Alias({"time_step_min", "mamba_dt_min"}), 0.001));
  TAILOR_ASSIGN_OR_RETURN(m.time_step_max,
                          keys.PositiveDouble(keys.Alias({"time_step_max", "mamba_dt_max"}), 0.1));
  const absl::string_view limit_key = keys.Alias({"time_step_limit", "mamba_dt_limit"});
  if (const Json* limit = keys.Find(limit_key)) {
    if (!limit->is_array() || limit->size() != 2 || !(*limit)[0].is_number() ||
        !((*limit)[1].is_number() || IsInfinity((*limit)[1]))) {
      return keys.Error(limit_key, absl::StrCat("must be [min, max], got ", limit->dump()));
    }
    m.time_step_limit_min = (*limit)[0].get<double>();
    m.time_step_limit_max = IsInfinity((*limit)[1]) ? 0.0 : (*limit)[1].get<double>();
  }
  return absl::OkStatus();
}

// Nemotron-H MoE ('E'): sigmoid router with score-correction bias and group-limited top k,
// non-gated squared-ReLU experts, one shared expert.
absl::Status ParseNemotronMoe(const Keys& keys, HfConfig& c) {
  MoeConfig& m = c.moe;
  m.router = Router::kSigmoidGrouped;
  TAILOR_ASSIGN_OR_RETURN(m.num_experts, keys.Int("n_routed_experts", 2, model::kMaxExperts));
  TAILOR_ASSIGN_OR_RETURN(m.expert_intermediate,
                          keys.Int("moe_intermediate_size", 1, model::kMaxWidth));
  TAILOR_ASSIGN_OR_RETURN(m.shared_intermediate,
                          keys.Int("moe_shared_expert_intermediate_size", 1, model::kMaxWidth));
  TAILOR_ASSIGN_OR_RETURN(m.n_group, keys.Int("n_group", 1, m.num_experts, int64_t{1}));
  // The group score sums each group's two best experts, so groups need at least two.
  if (m.num_experts % m.n_group != 0 || m.num_experts / m.n_group < 2) {
    return keys.Error("n_group", absl::StrCat("must divide n_routed_experts (", m.num_experts,
                                              ") into groups of at least 2, got ", m.n_group));
  }
  TAILOR_ASSIGN_OR_RETURN(m.topk_group, keys.Int("topk_group", 1, m.n_group, int64_t{1}));
  const int64_t reachable = m.topk_group * (m.num_experts / m.n_group);
  TAILOR_ASSIGN_OR_RETURN(m.experts_per_token, keys.Int("num_experts_per_tok", 1, reachable));
  TAILOR_ASSIGN_OR_RETURN(m.routed_scaling_factor,
                          keys.PositiveDouble("routed_scaling_factor", 1.0));
  TAILOR_ASSIGN_OR_RETURN(m.norm_topk_prob, keys.Bool("norm_topk_prob", true));
  if (keys.Has("moe_latent_size")) {
    return keys.Error("moe_latent_size", "latent expert projections are not supported");
  }
  return absl::OkStatus();
}

absl::Status ParseNemotronH(const Keys& keys, HfConfig& c) {
  c.rope = false;
  TAILOR_RETURN_IF_ERROR(ParseNemotronPattern(keys, c));
  TAILOR_RETURN_IF_ERROR(keys.Expect("mlp_hidden_act", "relu2", "relu2"));
  TAILOR_RETURN_IF_ERROR(keys.Refuse("use_bias", "biases in the Mamba projections"));
  TAILOR_RETURN_IF_ERROR(keys.Refuse("mlp_bias", "MLP biases"));
  if (keys.Has("sliding_window")) {
    return keys.Error("sliding_window", "sliding-window attention is not supported");
  }
  TAILOR_ASSIGN_OR_RETURN(int64_t mtp,
                          keys.Int("num_nextn_predict_layers", 0, model::kMaxLayers, int64_t{0}));
  if (mtp > 0) {
    return keys.Error("num_nextn_predict_layers",
                      absl::StrCat("multi-token prediction layers are not supported, got ", mtp));
  }
  if (c.has_kind(LayerKind::kAttention)) TAILOR_RETURN_IF_ERROR(ParseAttention(keys, c));
  if (c.has_kind(LayerKind::kMlp)) {
    TAILOR_ASSIGN_OR_RETURN(c.intermediate_size,
                            keys.Int("intermediate_size", 1, model::kMaxWidth));
  }
  if (c.has_kind(LayerKind::kMamba)) TAILOR_RETURN_IF_ERROR(ParseNemotronMamba(keys, c));
  if (c.has_kind(LayerKind::kMoe)) TAILOR_RETURN_IF_ERROR(ParseNemotronMoe(keys, c));
  return absl::OkStatus();
}

}  // namespace

absl::string_view ArchitectureName(Architecture a) { return Info(a).name; }
absl::string_view ModelTypeName(Architecture a) { return Info(a).model_type; }
Family FamilyOf(Architecture a) { return Info(a).family; }

absl::string_view FamilyName(Family f) {
  switch (f) {
    case Family::kLlama:
      return "llama";
    case Family::kQwen3:
      return "qwen3";
    case Family::kMixtral:
      return "mixtral";
    case Family::kQwen3Moe:
      return "qwen3_moe";
    case Family::kNemotronH:
      return "nemotron_h";
  }
  return "?";
}

absl::string_view LayerKindName(LayerKind k) {
  switch (k) {
    case LayerKind::kAttentionMlp:
      return "attention+mlp";
    case LayerKind::kAttentionMoe:
      return "attention+moe";
    case LayerKind::kMamba:
      return "mamba";
    case LayerKind::kAttention:
      return "attention";
    case LayerKind::kMlp:
      return "mlp";
    case LayerKind::kMoe:
      return "moe";
  }
  return "?";
}

absl::StatusOr<Architecture> ParseArchitecture(absl::string_view name) {
  for (const ArchitectureInfo& info : kArchitectures) {
    if (info.name == name || info.model_type == name) return info.architecture;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported \"", name, "\" (supported: ", SupportedNames(false),
                   ", or their model_type ", SupportedNames(true), ")"));
}

bool HfConfig::has_kind(LayerKind k) const {
  return std::find(layers.begin(), layers.end(), k) != layers.end();
}

absl::StatusOr<HfConfig> ParseHfConfigJson(absl::string_view json_text, absl::string_view source,
                                           absl::string_view forced_format) {
  if (json_text.size() > model::kMaxConfigJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", json_text.size(),
                                                   " bytes, more than the ",
                                                   model::kMaxConfigJsonBytes, " allowed"));
  }
  const std::string text = QuoteNonFiniteLiterals(json_text);
  const Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  const Keys keys(j, source);
  HfConfig c;
  TAILOR_ASSIGN_OR_RETURN(c.architecture, DetectArchitecture(keys, forced_format));
  c.family = FamilyOf(c.architecture);
  TAILOR_RETURN_IF_ERROR(ParseCommon(keys, c));
  const FamilyDefaults defaults = DefaultsOf(c.architecture);
  TAILOR_ASSIGN_OR_RETURN(
      c.max_position_embeddings,
      keys.Int("max_position_embeddings", 1, model::kMaxSeq, defaults.max_position_embeddings));
  const absl::string_view eps_key = c.family == Family::kNemotronH
                                        ? keys.Alias({"layer_norm_epsilon", "rms_norm_eps"})
                                        : absl::string_view("rms_norm_eps");
  TAILOR_ASSIGN_OR_RETURN(c.rms_norm_eps, keys.PositiveDouble(eps_key, defaults.rms_norm_eps));
  if (c.family == Family::kNemotronH) {
    TAILOR_RETURN_IF_ERROR(ParseNemotronH(keys, c));
  } else {
    TAILOR_RETURN_IF_ERROR(ParseDecoderFamily(keys, source, c));
  }
  return c;
}

absl::StatusOr<HfConfig> ReadHfConfig(const std::string& path, absl::string_view forced_format) {
  TAILOR_ASSIGN_OR_RETURN(std::string text, model::ReadFileToString(path));
  return ParseHfConfigJson(text, path, forced_format);
}

}  // namespace tailor::hf
