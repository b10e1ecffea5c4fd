#include "tests/testing/hf_test_checkpoint.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compression/model/config.h"

namespace tailor::testing {
namespace {

using Json = nlohmann::json;
using Shape = std::vector<int64_t>;

// Deterministic values on every platform.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  double Uniform() {  // [-1, 1)
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) / static_cast<double>(1ull << 52) - 1.0;
  }

 private:
  uint64_t state_;
};

void AppendValue(float v, model::DType dtype, std::string& out) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (dtype == model::DType::kBF16) {
    bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
    const uint16_t half = static_cast<uint16_t>(bits >> 16);
    out.push_back(static_cast<char>(half & 0xff));
    out.push_back(static_cast<char>(half >> 8));
    return;
  }
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

// The tensor list of one family, as name -> shape.
class Layout {
 public:
  void Add(std::string name, Shape shape) { tensors_.emplace_back(std::move(name), shape); }
  const std::vector<std::pair<std::string, Shape>>& tensors() const { return tensors_; }

 private:
  std::vector<std::pair<std::string, Shape>> tensors_;
};

int64_t Get(const Json& c, const char* key) { return c.at(key).get<int64_t>(); }

int64_t HeadDim(const Json& c) {
  if (c.contains("head_dim") && !c["head_dim"].is_null()) return Get(c, "head_dim");
  return Get(c, "hidden_size") / Get(c, "num_attention_heads");
}

void Attention(const Json& c, const std::string& p, bool qkv_bias, bool o_bias, bool qk_norm,
               Layout& l) {
  const int64_t h = Get(c, "hidden_size"), d = HeadDim(c);
  const int64_t q = Get(c, "num_attention_heads") * d, kv = Get(c, "num_key_value_heads") * d;
  l.Add(p + "q_proj.weight", {q, h});
  l.Add(p + "k_proj.weight", {kv, h});
  l.Add(p + "v_proj.weight", {kv, h});
  l.Add(p + "o_proj.weight", {h, q});
  if (qkv_bias) {
    l.Add(p + "q_proj.bias", {q});
    l.Add(p + "k_proj.bias", {kv});
    l.Add(p + "v_proj.bias", {kv});
  }
  if (o_bias) l.Add(p + "o_proj.bias", {h});
  if (qk_norm) {
    l.Add(p + "q_norm.weight", {d});
    l.Add(p + "k_norm.weight", {d});
  }
}

void GatedMlp(const std::string& p, const std::string& gate, const std::string& up,
              const std::string& down, int64_t f, int64_t h, Layout& l) {
  l.Add(p + gate + ".weight", {f, h});
  l.Add(p + up + ".weight", {f, h});
  l.Add(p + down + ".weight", {h, f});
}

// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// MixtralForCausalLM, Qwen3MoeForCausalLM (modeling_{llama,...}.py, as saved on disk).
Layout DecoderLayout(const Json& c) {
  const std::string arch = c["architectures"][0];
  const int64_t h = Get(c, "hidden_size");
  const bool attention_bias = c.value("attention_bias", false);
  const bool qwen3 = absl::StartsWith(arch, "Qwen3");
  const bool qwen2 = arch == "Qwen2ForCausalLM";
  Layout l;
  l.Add("model.embed_tokens.weight", {Get(c, "vocab_size"), h});
  for (int64_t i = 0; i < Get(c, "num_hidden_layers"); ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    l.Add(p + "input_layernorm.weight", {h});
    l.Add(p + "post_attention_layernorm.weight", {h});
    Attention(c, p + "self_attn.", qwen2 || attention_bias, !qwen2 && attention_bias, qwen3, l);
    if (arch == "MixtralForCausalLM") {
      const int64_t e = Get(c, "num_local_experts");
      l.Add(p + "block_sparse_moe.gate.weight", {e, h});
      for (int64_t x = 0; x < e; ++x) {
        GatedMlp(absl::StrCat(p, "block_sparse_moe.experts.", x, "."), "w1", "w3", "w2",
                 Get(c, "intermediate_size"), h, l);
      }
      continue;
    }
    bool sparse = arch == "Qwen3MoeForCausalLM";
    if (sparse) {
      for (const Json& v : c.value("mlp_only_layers", Json::array())) sparse &= v != i;
      sparse &= (i + 1) % c.value("decoder_sparse_step", 1) == 0;
    }
    if (sparse) {
      const int64_t e = Get(c, "num_experts");
      l.Add(p + "mlp.gate.weight", {e, h});
      for (int64_t x = 0; x < e; ++x) {
        GatedMlp(absl::StrCat(p, "mlp.experts.", x, "."), "gate_proj", "up_proj", "down_proj",
                 Get(c, "moe_intermediate_size"), h, l);
      }
    } else {
      GatedMlp(p + "mlp.", "gate_proj", "up_proj", "down_proj", Get(c, "intermediate_size"), h, l);
    }
  }
  l.Add("model.norm.weight", {h});
  if (!c.value("tie_word_embeddings", false)) l.Add("lm_head.weight", {Get(c, "vocab_size"), h});
  return l;
}

// NemotronHForCausalLM as NVIDIA's checkpoints store it: a `backbone.` prefix and one
// tensor per expert.
Layout NemotronLayout(const Json& c) {
  const int64_t h = Get(c, "hidden_size");
  Layout l;
  l.Add("backbone.embeddings.weight", {Get(c, "vocab_size"), h});
  const std::string pattern = c["hybrid_override_pattern"];
  for (size_t i = 0; i < pattern.size(); ++i) {
    const std::string p = absl::StrCat("backbone.layers.", i, ".");
    const std::string m = p + "mixer.";
    l.Add(p + "norm.weight", {h});
    if (pattern[i] == 'M') {
      const int64_t heads = Get(c, "mamba_num_heads"), inner = heads * Get(c, "mamba_head_dim");
      const int64_t conv = inner + 2 * Get(c, "n_groups") * Get(c, "ssm_state_size");
      l.Add(m + "in_proj.weight", {inner + conv + heads, h});
      l.Add(m + "conv1d.weight", {conv, 1, Get(c, "conv_kernel")});
      l.Add(m + "conv1d.bias", {conv});
      l.Add(m + "dt_bias", {heads});
      l.Add(m + "A_log", {heads});
      l.Add(m + "D", {heads});
      l.Add(m + "norm.weight", {inner});
      l.Add(m + "out_proj.weight", {h, inner});
    } else if (pattern[i] == '*') {
      Attention(c, m, false, false, false, l);
    } else if (pattern[i] == '-') {
      l.Add(m + "up_proj.weight", {Get(c, "intermediate_size"), h});
      l.Add(m + "down_proj.weight", {h, Get(c, "intermediate_size")});
    } else {
      const int64_t e = Get(c, "n_routed_experts"), f = Get(c, "moe_intermediate_size");
      const int64_t s = Get(c, "moe_shared_expert_intermediate_size");
      l.Add(m + "gate.weight", {e, h});
      l.Add(m + "gate.e_score_correction_bias", {e});
      for (int64_t x = 0; x < e; ++x) {
        l.Add(absl::StrCat(m, "experts.", x, ".up_proj.weight"), {f, h});
        l.Add(absl::StrCat(m, "experts.", x, ".down_proj.weight"), {h, f});
      }
      l.Add(m + "shared_experts.up_proj.weight", {s, h});
      l.Add(m + "shared_experts.down_proj.weight", {h, s});
    }
  }
  l.Add("backbone.norm_f.weight", {h});
  if (!c.value("tie_word_embeddings", false)) l.Add("lm_head.weight", {Get(c, "vocab_size"), h});
  return l;
}

Json Base(absl::string_view arch, absl::string_view model_type) {
  return Json{{"architectures", {std::string(arch)}},
              {"model_type", std::string(model_type)},
              {"vocab_size", 64},
              {"hidden_size", 32},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"max_position_embeddings", 128},
              {"torch_dtype", "bfloat16"},
              {"bos_token_id", 1},
              {"eos_token_id", 2}};
}

}  // namespace

nlohmann::json TinyHfConfig(absl::string_view architecture) {
  const std::string a(architecture);
  if (a == "NemotronHForCausalLM") {
    Json c = Base(a, "nemotron_h");
    c.update(Json{{"hybrid_override_pattern", "M*-E"},
                  {"num_hidden_layers", 4},
                  {"head_dim", 8},
                  {"intermediate_size", 48},
                  {"mlp_hidden_act", "relu2"},
                  {"layer_norm_epsilon", 1e-5},
                  {"mamba_num_heads", 4},
                  {"mamba_head_dim", 8},
                  {"ssm_state_size", 8},
                  {"n_groups", 2},
                  {"conv_kernel", 4},
                  {"expand", 1},
                  {"chunk_size", 16},
                  {"use_conv_bias", true},
                  {"mamba_hidden_act", "silu"},
                  {"use_bias", false},
                  {"mlp_bias", false},
                  {"attention_bias", false},
                  {"n_routed_experts", 4},
                  {"num_experts_per_tok", 2},
                  {"moe_intermediate_size", 16},
                  {"moe_shared_expert_intermediate_size", 24},
                  {"n_group", 1},
                  {"topk_group", 1},
                  {"routed_scaling_factor", 2.5},
                  {"norm_topk_prob", true},
                  {"tie_word_embeddings", false}});
    return c;
  }
  Json c;
  if (a == "LlamaForCausalLM") {
    c = Base(a, "llama");
    c.update(Json{{"intermediate_size", 48},
                  {"num_hidden_layers", 2},
                  {"hidden_act", "silu"},
                  {"rms_norm_eps", 1e-5},
                  {"rope_theta", 500000.0},
                  {"attention_bias", false},
                  {"mlp_bias", false},
                  {"tie_word_embeddings", false},
                  {"rope_scaling",
                   {{"rope_type", "llama3"},
                    {"factor", 8.0},
                    {"low_freq_factor", 1.0},
                    {"high_freq_factor", 4.0},
                    {"original_max_position_embeddings", 64}}}});
  } else if (a == "MistralForCausalLM") {
    c = Base(a, "mistral");
    c.update(Json{{"intermediate_size", 48},
                  {"num_hidden_layers", 2},
                  {"hidden_act", "silu"},
                  {"head_dim", 8},
                  {"rms_norm_eps", 1e-5},
                  {"rope_theta", 1000000.0},
                  {"sliding_window", nullptr},
                  {"tie_word_embeddings", false}});
  } else if (a == "Qwen2ForCausalLM") {
    c = Base(a, "qwen2");  // tied, like the small Qwen2.5 models
    c.update(Json{{"intermediate_size", 48},
                  {"num_hidden_layers", 2},
                  {"hidden_act", "silu"},
                  {"rms_norm_eps", 1e-6},
                  {"rope_theta", 1000000},
                  {"use_sliding_window", false},
                  {"sliding_window", 32},
                  {"max_window_layers", 2},
                  {"tie_word_embeddings", true}});
  } else if (a == "Qwen3ForCausalLM") {
    c = Base(a, "qwen3");  // head_dim 16 != hidden / heads, as in the real Qwen3 models
    c.update(Json{{"intermediate_size", 48},
                  {"num_hidden_layers", 2},
                  {"hidden_act", "silu"},
                  {"head_dim", 16},
                  {"rms_norm_eps", 1e-6},
                  {"rope_theta", 1000000},
                  {"attention_bias", false},
                  {"use_sliding_window", false},
                  {"tie_word_embeddings", false}});
  } else if (a == "MixtralForCausalLM") {
    c = Base(a, "mixtral");
    c.update(Json{{"intermediate_size", 24},
                  {"num_hidden_layers", 2},
                  {"hidden_act", "silu"},
                  {"rms_norm_eps", 1e-5},
                  {"rope_theta", 1000000.0},
                  {"num_local_experts", 4},
                  {"num_experts_per_tok", 2},
                  {"sliding_window", nullptr},
                  {"router_aux_loss_coef", 0.02},
                  {"tie_word_embeddings", false}});
  } else if (a == "Qwen3MoeForCausalLM") {
    c = Base(a, "qwen3_moe");  // layer 1 dense (mlp_only_layers), transformers-5 rope keys
    c.update(Json{{"intermediate_size", 40},
                  {"num_hidden_layers", 3},
                  {"hidden_act", "silu"},
                  {"head_dim", 8},
                  {"rms_norm_eps", 1e-6},
                  {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}},
                  {"num_experts", 4},
                  {"num_experts_per_tok", 2},
                  {"moe_intermediate_size", 16},
                  {"norm_topk_prob", true},
                  {"decoder_sparse_step", 1},
                  {"mlp_only_layers", {1}},
                  {"tie_word_embeddings", false}});
  }
  return c;
}

std::vector<model::RawTensor> HfTestTensors(const nlohmann::json& config, model::DType dtype,
                                            uint64_t seed) {
  const bool nemotron = config.value("model_type", "") == "nemotron_h";
  const Layout layout = nemotron ? NemotronLayout(config) : DecoderLayout(config);
  SplitMix rng(seed);
  std::vector<model::RawTensor> out;
  for (const auto& [name, shape] : layout.tensors()) {
    model::RawTensor t{name, dtype, shape, ""};
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const bool norm = absl::EndsWith(name, "norm.weight") || absl::EndsWith(name, "norm_f.weight");
    for (int64_t i = 0; i < n; ++i) {
      const double u = rng.Uniform();
      AppendValue(static_cast<float>(norm ? 1.0 + 0.1 * u : 0.1 * u), dtype, t.data);
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string HfShardName(int index, int count) {
  return absl::StrFormat("model-%05d-of-%05d.safetensors", index, count);
}

absl::Status WriteHfCheckpointFiles(const std::string& dir, const nlohmann::json& config,
                                    const std::vector<model::RawTensor>& tensors, int shards,
                                    bool tokenizer) {
  absl::Status s = model::WriteFileAtomically(dir + "/config.json", config.dump(2));
  if (!s.ok()) return s;
  if (tokenizer) {
    Json vocab = Json::object();
    for (int i = 0; i < 64; ++i) vocab[absl::StrCat("t", i)] = i;
    const Json tok = {{"version", "1.0"},
                      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array()}}}};
    s = model::WriteFileAtomically(dir + "/tokenizer.json", tok.dump());
    if (s.ok()) {
      s = model::WriteFileAtomically(dir + "/tokenizer_config.json",
                                     R"({"bos_token": "t1", "eos_token": "t2"})");
    }
    if (!s.ok()) return s;
  }
  if (shards <= 1) return model::WriteSafetensors(dir + "/model.safetensors", tensors, {});
  std::vector<const model::RawTensor*> order;
  for (const model::RawTensor& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  const size_t per = (order.size() + shards - 1) / shards;
  Json weight_map = Json::object();
  uint64_t total = 0;
  for (int k = 0; k < shards; ++k) {
    std::vector<model::RawTensor> part;
    for (size_t i = k * per; i < std::min(order.size(), (k + 1) * per); ++i) {
      part.push_back(*order[i]);
      weight_map[order[i]->name] = HfShardName(k + 1, shards);
      total += order[i]->data.size();
    }
    s = model::WriteSafetensors(absl::StrCat(dir, "/", HfShardName(k + 1, shards)), part,
                                {{"format", "pt"}});
    if (!s.ok()) return s;
  }
  const Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return model::WriteFileAtomically(dir + "/model.safetensors.index.json", index.dump(2));
}

absl::Status WriteHfTestCheckpoint(const std::string& dir, absl::string_view architecture,
                                   const HfTestCheckpointOptions& options) {
  const Json config = TinyHfConfig(architecture);
  return WriteHfCheckpointFiles(dir, config, HfTestTensors(config, options.dtype, options.seed),
                                options.shards, options.tokenizer);
}

nlohmann::json TinyNemotronHConfig(absl::string_view pattern) {
  nlohmann::json c = TinyHfConfig("NemotronHForCausalLM");
  c["hybrid_override_pattern"] = std::string(pattern);
  c["num_hidden_layers"] = pattern.size();
  if (pattern.find('E') == absl::string_view::npos) {
    for (const char* k : {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                          "moe_shared_expert_intermediate_size", "n_group", "topk_group",
                          "routed_scaling_factor", "norm_topk_prob"}) {
      c.erase(k);
    }
  }
  return c;
}

std::string NewTestDir(absl::string_view prefix) {
  const char* env = std::getenv("TEST_TMPDIR");
  std::string base = env != nullptr && *env != '\0'
                         ? std::string(env)
                         : std::filesystem::temp_directory_path().string();
  std::string pattern = absl::StrCat(base, "/", prefix, "XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

}  // namespace tailor::testing
