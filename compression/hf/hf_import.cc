#include "compression/hf/hf_import.h"

#include <torch/torch.h>

#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compression/hf/hf_import_internal.h"
#include "compression/hf/hf_import_moe.h"
#include "compression/hf/hf_import_nemotron_h.h"
#include "nlohmann/json.hpp"

namespace tailor::hf {
namespace internal {
namespace {

at::ScalarType TorchType(model::DType d) {
  switch (d) {
    case model::DType::kBF16:
      return torch::kBFloat16;
    case model::DType::kF16:
      return torch::kHalf;
    default:
      return torch::kFloat;
  }
}

}  // namespace

at::Tensor TensorOfView(const TensorView& v) {
  const at::ScalarType st = TorchType(v.dtype);
  void* data = const_cast<char*>(v.data);  // read only: the tensor is a copy_ source
  const auto element = static_cast<uintptr_t>(c10::elementSize(st));
  if (reinterpret_cast<uintptr_t>(data) % element == 0) {
    return torch::from_blob(data, *v.shape, torch::dtype(st));
  }
  at::Tensor out = torch::empty(*v.shape, torch::dtype(st));
  std::memcpy(out.data_ptr(), v.data, v.size_bytes);
  return out;
}

namespace {

std::string GiB(uint64_t bytes) {
  return absl::StrFormat("%.2f GiB (%d bytes)", static_cast<double>(bytes) / (1ull << 30), bytes);
}

}  // namespace

absl::Status CheckModelFits(const HfCheckpoint& checkpoint, const model::HybridConfig& config,
                            uint64_t limit) {
  if (limit == 0) {
    TAILOR_ASSIGN_OR_RETURN(limit, AvailableMemoryBytes());
  }
  const uint64_t bytes = static_cast<uint64_t>(config.ParameterCount()) * sizeof(float);
  if (bytes > limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat(checkpoint.dir(), ": the imported model takes ", GiB(bytes),
                     " in F32, more than the ", GiB(limit), " of memory available"));
  }
  return absl::OkStatus();
}

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace internal

namespace {

using internal::CheckModelFits;
using internal::ShapeString;
using internal::TensorOfView;


constexpr absl::string_view kSupported =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
    "MixtralForCausalLM, Qwen3MoeForCausalLM, "
    "NemotronHForCausalLM";

// What tailor's model family still lacks for the families it cannot import yet, so the
// error says what the next step is rather than only "unsupported".
absl::Status RefuseUnsupported(const HfConfig& c) {
  const absl::string_view arch = ArchitectureName(c.architecture);
  switch (c.family) {
    case Family::kLlama:
    case Family::kQwen3:
      break;
    case Family::kMixtral:
    case Family::kQwen3Moe:
      // hf_config.cc gives these families a softmax router without shared experts, which
      // is what MoeLayerSpec builds; anything else would be a different block.
      if (c.moe.router != Router::kSoftmax || c.moe.shared_intermediate != 0) {
        return absl::UnimplementedError(
            absl::StrCat(arch, ": only a softmax router without shared experts is imported"));
      }
      break;
    case Family::kNemotronH:
      return RefuseUnsupportedNemotronH(c);  // hf_import_nemotron_h.cc
  }
  if (c.sliding_window > 0 && c.sliding_window < c.max_position_embeddings) {
    return absl::UnimplementedError(absl::StrCat(
        arch, ": sliding_window ", c.sliding_window, " is shorter than max_position_embeddings ",
        c.max_position_embeddings, "; tailor's attention attends to every earlier position"));
  }
  return absl::OkStatus();
}

model::AttentionSpec AttentionOf(const HfConfig& c) {
  model::AttentionSpec a;
  a.heads = c.num_attention_heads;
  a.kv_heads = c.num_key_value_heads;
  a.head_dim = c.head_dim;
  a.qkv_bias = c.qkv_bias;
  a.o_bias = c.o_bias;
  a.qk_norm = c.qk_norm;
  a.rope = c.rope;
  return a;
}

// Maps the part of an HF layer tensor name after "model.layers.{i}." onto an internal name.
absl::StatusOr<std::string> MapLayerTensor(int64_t layer, absl::string_view rest) {
  const std::string attn = absl::StrCat("layers.", 2 * layer, ".");
  const std::string mlp = absl::StrCat("layers.", 2 * layer + 1, ".");
  static const auto* const kTable = new std::map<std::string, std::pair<bool, std::string>>{
      {"input_layernorm.weight", {false, "norm"}},
      {"post_attention_layernorm.weight", {true, "norm"}},
      {"self_attn.q_proj.weight", {false, "attention.q_proj"}},
      {"self_attn.k_proj.weight", {false, "attention.k_proj"}},
      {"self_attn.v_proj.weight", {false, "attention.v_proj"}},
      {"self_attn.o_proj.weight", {false, "attention.o_proj"}},
      {"self_attn.q_proj.bias", {false, "attention.q_bias"}},
      {"self_attn.k_proj.bias", {false, "attention.k_bias"}},
      {"self_attn.v_proj.bias", {false, "attention.v_bias"}},
      {"self_attn.o_proj.bias", {false, "attention.o_bias"}},
      {"self_attn.q_norm.weight", {false, "attention.q_norm"}},
      {"self_attn.k_norm.weight", {false, "attention.k_norm"}},
      {"mlp.gate_proj.weight", {true, "mlp.w_gate"}},
      {"mlp.up_proj.weight", {true, "mlp.w_up"}},
      {"mlp.down_proj.weight", {true, "mlp.w_down"}},
      {"mlp.gate_proj.bias", {true, "mlp.b_gate"}},
      {"mlp.up_proj.bias", {true, "mlp.b_up"}},
      {"mlp.down_proj.bias", {true, "mlp.b_down"}},
  };
  auto it = kTable->find(std::string(rest));
  if (it == kTable->end()) {
    // Router and experts of a sparse layer (Mixtral, Qwen3-MoE) live in its second block.
    absl::StatusOr<std::string> moe = MapMoeLayerTensor(rest);
    if (moe.ok()) return absl::StrCat(mlp, *moe);
    return absl::UnimplementedError(absl::StrCat("no internal tensor for model.layers.", layer,
                                                 ".", rest));
  }
  return absl::StrCat(it->second.first ? mlp : attn, it->second.second);
}

absl::StatusOr<std::string> MapTensor(absl::string_view name) {
  if (name == "model.embed_tokens.weight") return std::string("embed");
  if (name == "model.norm.weight") return std::string("final_norm");
  if (name == "lm_head.weight") return std::string("lm_head");
  constexpr absl::string_view kLayers = "model.layers.";
  if (absl::StartsWith(name, kLayers)) {
    const absl::string_view tail = name.substr(kLayers.size());
    const size_t dot = tail.find('.');
    int64_t layer = 0;
    if (dot != absl::string_view::npos && absl::SimpleAtoi(tail.substr(0, dot), &layer)) {
      return MapLayerTensor(layer, tail.substr(dot + 1));
    }
  }
  return absl::UnimplementedError(absl::StrCat("no internal tensor for ", name));
}

// Stacks each expert-stacked parameter's slots into one tensor in `views`. The stack is one
// parameter in the checkpoint's dtype at a time, never a second copy of the model.
absl::Status StackExperts(const std::string& dir,
                          std::map<std::string, std::vector<at::Tensor>>& stacks,
                          model::TensorMap& views) {
  for (auto& [name, experts] : stacks) {
    for (size_t e = 0; e < experts.size(); ++e) {
      if (!experts[e].defined()) {
        return absl::InternalError(absl::StrCat(dir, ": no checkpoint tensor maps to ", name,
                                                "[", e, "]"));
      }
      // Shards may store experts in different dtypes; stack needs one.
      if (experts[e].scalar_type() != experts[0].scalar_type()) {
        for (at::Tensor& t : experts) t = t.to(torch::kFloat);
      }
    }
    views.emplace(name, torch::stack(experts));
    experts.clear();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<model::HybridConfig> HybridConfigFromHf(const HfConfig& c) {
  if (c.family == Family::kNemotronH) return NemotronHHybridConfig(c);
  TAILOR_RETURN_IF_ERROR(RefuseUnsupported(c));
  model::HybridConfig out;
  out.vocab = c.vocab_size;
  out.hidden = c.hidden_size;
  out.max_seq = c.max_position_embeddings;
  out.rope_theta = c.rope_theta;
  out.norm_eps = c.rms_norm_eps;
  out.tie_embeddings = c.tie_word_embeddings;
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3) {
    out.rope_scaling.type = model::RopeScalingSpec::Type::kLlama3;
    out.rope_scaling.factor = c.rope_scaling.factor;
    out.rope_scaling.low_freq_factor = c.rope_scaling.low_freq_factor;
    out.rope_scaling.high_freq_factor = c.rope_scaling.high_freq_factor;
    out.rope_scaling.original_max_positions = c.rope_scaling.original_max_position_embeddings;
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    model::LayerSpec attention;
    attention.kind = model::LayerKind::kAttention;
    attention.attention = AttentionOf(c);
    model::LayerSpec mlp = model::LayerSpec::Mlp(c.intermediate_size);
    mlp.mlp.bias = c.mlp_bias;
    out.layers.push_back(attention);
    out.layers.push_back(c.layers[i] == LayerKind::kAttentionMoe ? MoeLayerSpec(c) : mlp);
  }
  absl::Status valid = model::ValidateHybridConfig(out);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(ArchitectureName(c.architecture),
                                                   ": the internal config is invalid: ",
                                                   valid.message()));
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> HfTensorMapping(
    const HfConfig& config) {
  if (config.family == Family::kNemotronH) return NemotronHTensorMapping(config);
  TAILOR_RETURN_IF_ERROR(RefuseUnsupported(config));
  std::vector<std::pair<std::string, std::string>> out;
  for (const ExpectedTensor& t : ExpectedTensors(config)) {
    TAILOR_ASSIGN_OR_RETURN(std::string internal, MapTensor(t.name));
    out.emplace_back(t.name, std::move(internal));
  }
  return out;
}

absl::StatusOr<model::HybridLM> ImportHfModel(const HfCheckpoint& checkpoint,
                                              const HfImportOptions& options) {
  if (checkpoint.config().family == Family::kNemotronH) {
    return ImportNemotronH(checkpoint, options.memory_limit_bytes);
  }
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig config, HybridConfigFromHf(checkpoint.config()));
  TAILOR_ASSIGN_OR_RETURN(auto mapping, HfTensorMapping(checkpoint.config()));
  TAILOR_RETURN_IF_ERROR(CheckModelFits(checkpoint, config, options.memory_limit_bytes));
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM model, model::CreateUninitializedHybridLM(config));
  try {
    const auto params = model->named_parameters(/*recurse=*/true);
    model::TensorMap views;
    std::map<std::string, std::vector<at::Tensor>> stacks;  // stacked parameter -> experts
    for (const auto& [hf_name, internal] : mapping) {
      TAILOR_ASSIGN_OR_RETURN(TensorView view, checkpoint.Tensor(hf_name));
      const std::string where = absl::StrCat(*view.file, ": tensor ", hf_name, " (-> ", internal,
                                             ")");
      // "name[e]": expert e of a stacked [experts, ...] parameter.
      const auto [name, slot] = SplitStackSlot(internal);
      const at::Tensor* param = params.find(name);
      if (param == nullptr || (slot >= 0 && slot >= param->size(0))) {
        return absl::InternalError(absl::StrCat(where, ": the model has no such parameter"));
      }
      at::Tensor t = TensorOfView(view);
      const at::IntArrayRef want = slot < 0 ? param->sizes() : param->sizes().slice(1);
      if (t.sizes() != want) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": shape ", ShapeString(t.sizes()),
                                                       ", the model needs ", ShapeString(want)));
      }
      if (slot < 0) {
        views.emplace(name, std::move(t));
      } else {
        std::vector<at::Tensor>& experts = stacks[name];
        experts.resize(param->size(0));
        experts[slot] = std::move(t);
      }
    }
    TAILOR_RETURN_IF_ERROR(StackExperts(checkpoint.dir(), stacks, views));
    // Checks that every parameter got a tensor, then copies (converting to F32).
    // Each tensor's shard pages are released once copied: the import's peak is the F32
    // model, not the F32 model plus every mapped shard (docs/benchmarks.md, bench/hf_io).
    TAILOR_RETURN_IF_ERROR(model->LoadStateDict(
        views, checkpoint.dir(),
        [&](const at::Tensor& t) { checkpoint.ReleasePages(t.data_ptr(), t.nbytes()); }));
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat(checkpoint.dir(), ": import: ", e.what_without_backtrace()));
  }
  return model;
}

bool IsHfConfigJson(absl::string_view config_json, absl::string_view format) {
  if (!format.empty()) return true;
  const nlohmann::json j = nlohmann::json::parse(config_json.begin(), config_json.end(), nullptr,
                                                 /*allow_exceptions=*/false);
  return j.is_object() && (j.contains("architectures") || j.contains("model_type"));
}

bool IsHfCheckpointDir(const std::string& dir, absl::string_view format) {
  if (!format.empty()) return true;
  absl::StatusOr<std::string> text = model::ReadFileToString(dir + "/config.json");
  return text.ok() && IsHfConfigJson(*text, format);
}

absl::StatusOr<model::HybridConfig> ModelConfigFromJson(absl::string_view config_json,
                                                        absl::string_view source,
                                                        absl::string_view format) {
  if (!IsHfConfigJson(config_json, format)) {
    absl::StatusOr<model::HybridConfig> own = model::ParseHybridConfigJson(config_json);
    if (own.ok()) return own;
    return absl::Status(own.status().code(), absl::StrCat(source, ": ", own.status().message()));
  }
  TAILOR_ASSIGN_OR_RETURN(HfConfig config, ParseHfConfigJson(config_json, source, format));
  absl::StatusOr<model::HybridConfig> internal = HybridConfigFromHf(config);
  if (!internal.ok()) {
    return absl::Status(internal.status().code(),
                        absl::StrCat(source, ": ", internal.status().message()));
  }
  return internal;
}

absl::StatusOr<model::HybridConfig> ReadModelConfig(const std::string& dir,
                                                    absl::string_view format) {
  const std::string path = dir + "/config.json";
  if (!IsHfCheckpointDir(dir, format)) return model::ReadHybridConfig(path);
  TAILOR_ASSIGN_OR_RETURN(std::string text, model::ReadFileToString(path));
  return ModelConfigFromJson(text, path, format);
}

absl::StatusOr<model::HybridLM> LoadModelDir(const std::string& dir, absl::string_view format) {
  if (!IsHfCheckpointDir(dir, format)) return model::LoadHybridLM(dir);
  HfCheckpointOptions options;
  options.format = std::string(format);
  TAILOR_ASSIGN_OR_RETURN(HfCheckpoint checkpoint, HfCheckpoint::Open(dir, options));
  return ImportHfModel(checkpoint);
}

absl::StatusOr<std::vector<std::vector<float>>> NextTokenLogprobs(
    model::HybridLM& model, const std::vector<int64_t>& tokens,
    const std::vector<int64_t>& positions) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> at = positions;
  if (at.empty() && n > 0) at.push_back(n - 1);
  for (int64_t p : at) {
    if (p < 0 || p >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("position ", p, " is outside the ", n, " prompt tokens"));
    }
  }
  try {
    torch::NoGradGuard no_grad;
    const at::Tensor ids = torch::tensor(tokens, torch::kLong).view({1, n});
    TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput out, model->Forward(ids));
    const at::Tensor logprobs =
        torch::log_softmax(out.logits[0].to(torch::kFloat), -1).to(torch::kCPU).contiguous();
    std::vector<std::vector<float>> result;
    for (int64_t p : at) {
      const float* row = logprobs[p].data_ptr<float>();
      result.emplace_back(row, row + logprobs.size(1));
    }
    return result;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("NextTokenLogprobs: ", e.what_without_backtrace()));
  }
}

}  // namespace tailor::hf
