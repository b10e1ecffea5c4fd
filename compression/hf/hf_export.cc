#include "compression/hf/hf_export.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/hf/hf_import.h"
#include "compression/hf/hf_import_moe.h"
#include "compression/model/mapped_file.h"
#include "nlohmann/json.hpp"

namespace tailor::hf {
namespace {

using Json = nlohmann::json;

bool IsExportedFamily(const HfConfig& c) {
  return c.family == Family::kLlama || c.family == Family::kQwen3 ||
         c.family == Family::kMixtral || c.family == Family::kQwen3Moe;
}

absl::Status NotExpressible(const HfConfig& parent, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat(
      "the student does not fit the ", ArchitectureName(parent.architecture),
      " layout: ", why, " (its layout has one width per kind for all layers; export as GGUF "
      "`deci` for per-layer widths)"));
}

// The student's widths, checked to be one per kind over the kept decoder layers (dense MLP
// layers and routed-expert layers each agree among themselves).
struct UniformWidths {
  const model::AttentionSpec* attention = nullptr;
  const model::MlpSpec* mlp = nullptr;
  const model::MoeSpec* moe = nullptr;
};

absl::Status CheckUniformFfn(const HfConfig& parent, int64_t layer, const model::LayerSpec& m,
                             UniformWidths& widths) {
  if (m.kind == model::LayerKind::kMlp) {
    if (widths.mlp == nullptr) widths.mlp = &m.mlp;
    if (m.mlp.ffn == widths.mlp->ffn) return absl::OkStatus();
    return NotExpressible(parent, absl::StrCat("decoder layer ", layer, " has MLP width ",
                                               m.mlp.ffn, ", an earlier layer ",
                                               widths.mlp->ffn));
  }
  if (m.moe.experts == 0 || m.moe.shared_ffn != 0) {
    return NotExpressible(parent, absl::StrCat("decoder layer ", layer,
                                               m.moe.experts == 0 ? " has no routed experts left"
                                                                  : " has a shared expert"));
  }
  if (widths.moe == nullptr) widths.moe = &m.moe;
  const model::MoeSpec& w = *widths.moe;
  if (m.moe.experts == w.experts && m.moe.expert_ffn == w.expert_ffn && m.moe.top_k == w.top_k) {
    return absl::OkStatus();
  }
  return NotExpressible(parent, absl::StrCat("decoder layer ", layer, " has ", m.moe.experts,
                                             " experts of width ", m.moe.expert_ffn, " (top ",
                                             m.moe.top_k, "), an earlier layer ", w.experts,
                                             " of width ", w.expert_ffn, " (top ", w.top_k, ")"));
}

absl::Status CheckUniform(const HfConfig& parent, int64_t layer, const model::LayerSpec& a,
                          const model::LayerSpec& m, UniformWidths& widths) {
  if (widths.attention == nullptr) widths.attention = &a.attention;
  if (a.attention.heads != widths.attention->heads ||
      a.attention.kv_heads != widths.attention->kv_heads) {
    return NotExpressible(parent, absl::StrCat("decoder layer ", layer, " has ",
                                               a.attention.heads, "/", a.attention.kv_heads,
                                               " attention/KV heads, an earlier layer ",
                                               widths.attention->heads, "/",
                                               widths.attention->kv_heads));
  }
  return CheckUniformFfn(parent, layer, m, widths);
}

// "layers.{2j + s}.rest" -> "layers.{2 * kept[j] + s}.rest": the family mapping of the
// student's config numbers its layers densely; the student keeps the parent's indices.
std::string ParentIndexed(const std::string& internal, const std::vector<int64_t>& kept) {
  constexpr absl::string_view kLayers = "layers.";
  if (!absl::StartsWith(internal, kLayers)) return internal;
  const size_t dot = internal.find('.', kLayers.size());
  int64_t index = 0;
  if (dot == std::string::npos ||
      !absl::SimpleAtoi(internal.substr(kLayers.size(), dot - kLayers.size()), &index)) {
    return internal;
  }
  return absl::StrCat(kLayers, 2 * kept[index / 2] + index % 2, internal.substr(dot));
}

uint16_t F32ToHalfBits(float f, bool bf16) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (bf16) {
    if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);
    const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);  // to nearest, ties to even
    return static_cast<uint16_t>((bits + rounding) >> 16);
  }
  const uint32_t sign = (bits >> 16) & 0x8000;
  const uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow: inf
  if (abs < 0x38800000) {  // subnormal half (or zero): round the shifted mantissa
    const uint32_t shift = 113 - (abs >> 23);
    if (shift > 24) return static_cast<uint16_t>(sign);
    const uint32_t mantissa = (abs & 0x7fffff) | 0x800000;
    const uint32_t half = 1u << (shift - 1);
    uint32_t h = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    if (rest > half || (rest == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  const uint32_t rebased = abs - (112u << 23);
  uint32_t h = rebased >> 13;
  const uint32_t rest = rebased & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

absl::StatusOr<model::DType> ParentDType(const Json& config) {
  const auto it = config.find("torch_dtype");
  if (it == config.end() || !it->is_string()) return model::DType::kF32;
  const std::string name = it->get<std::string>();
  if (name == "bfloat16") return model::DType::kBF16;
  if (name == "float16") return model::DType::kF16;
  if (name == "float32") return model::DType::kF32;
  return absl::UnimplementedError(
      absl::StrCat("config.json: torch_dtype \"", name, "\" is not exported (F32, BF16, F16)"));
}

// The MoE keys of Mixtral / Qwen3-MoE configs. Qwen3-MoE's dense layers are listed
// explicitly (mlp_only_layers, decoder_sparse_step 1): the parent's step pattern would
// land on other layers once a layer is dropped.
void SetMoeKeys(const HfConfig& student, Json& config) {
  const MoeConfig& m = student.moe;
  config["num_experts_per_tok"] = m.experts_per_token;
  if (student.family == Family::kMixtral) {
    config["num_local_experts"] = m.num_experts;
    config["intermediate_size"] = m.expert_intermediate;  // Mixtral's expert width
    return;
  }
  config["num_experts"] = m.num_experts;
  config["moe_intermediate_size"] = m.expert_intermediate;
  if (student.intermediate_size > 0) config["intermediate_size"] = student.intermediate_size;
  Json dense = Json::array();
  for (size_t i = 0; i < student.layers.size(); ++i) {
    if (student.layers[i] == LayerKind::kAttentionMlp) dense.push_back(i);
  }
  if (!dense.empty() || config.contains("mlp_only_layers")) config["mlp_only_layers"] = dense;
  if (config.contains("decoder_sparse_step")) config["decoder_sparse_step"] = 1;
}

// The parent's config.json with the student's layer count, widths and dtype; every other
// key is the parent's, verbatim.
Json StudentConfigJson(Json parent, const HfConfig& student, model::DType dtype) {
  parent["num_hidden_layers"] = student.num_hidden_layers;
  parent["hidden_size"] = student.hidden_size;  // a child may keep fewer residual channels
  parent["num_attention_heads"] = student.num_attention_heads;
  parent["num_key_value_heads"] = student.num_key_value_heads;
  // Without the key, HF derives head_dim from hidden / heads, which pruning heads changes.
  parent["head_dim"] = student.head_dim;
  parent["torch_dtype"] = TorchDTypeName(dtype);
  if (student.family == Family::kMixtral || student.family == Family::kQwen3Moe) {
    SetMoeKeys(student, parent);
  } else {
    parent["intermediate_size"] = student.intermediate_size;
  }
  return parent;
}

// The student's saved weights, mapped (not read): the export streams from here.
struct MappedWeights {
  model::MappedFile file;
  model::SafetensorsHeader header;

  absl::string_view Bytes(const model::TensorEntry& e) const {
    return file.bytes().substr(header.data_start + e.begin, e.end - e.begin);
  }
};

absl::Status MapWeights(const std::string& path, MappedWeights& out) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": cannot read: ", ec.message()));
  TAILOR_RETURN_IF_ERROR(out.file.Map(path, size));
  TAILOR_ASSIGN_OR_RETURN(out.header,
                          model::ParseSafetensorsHeader(out.file.bytes(), size, path));
  return absl::OkStatus();
}

// Each shard's tensors, converted only when the shard is written: the export holds one
// tensor's converted bytes at a time, never the model.
struct ShardPlan {
  std::vector<std::vector<model::StreamedTensor>> shards;
  uint64_t total_bytes = 0;
};

absl::StatusOr<ShardPlan> PlanTensors(
    const MappedWeights& weights,
    const std::vector<std::pair<std::string, std::string>>& mapping,
    const std::vector<int64_t>& kept, model::DType dtype, uint64_t max_shard_bytes) {
  ShardPlan plan;
  uint64_t shard_bytes = 0;
  const std::string& source = weights.header.source;
  for (const auto& [hf_name, dense_internal] : mapping) {
    const std::string internal = ParentIndexed(dense_internal, kept);
    // "name[e]": expert e of the stacked [experts, ...] tensor.
    const auto [name, slot] = SplitStackSlot(internal);
    const model::TensorEntry* e = weights.header.Find(name);
    if (e == nullptr || (slot >= 0 && (e->shape.empty() || slot >= e->shape[0]))) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": no tensor ", internal, " (for ", hf_name, ")"));
    }
    if (e->dtype != model::DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", name, " is ",
                                                     model::DTypeName(e->dtype), ", want F32"));
    }
    absl::string_view bytes = weights.Bytes(*e);
    std::vector<int64_t> shape = e->shape;
    if (slot >= 0) {
      shape.erase(shape.begin());
      const size_t per = bytes.size() / static_cast<size_t>(e->shape[0]);
      bytes = bytes.substr(static_cast<size_t>(slot) * per, per);
    }
    const uint64_t out_bytes = bytes.size() / 4 * static_cast<uint64_t>(model::DTypeSize(dtype));
    if (plan.shards.empty() || (shard_bytes > 0 && shard_bytes + out_bytes > max_shard_bytes)) {
      plan.shards.emplace_back();
      shard_bytes = 0;
    }
    shard_bytes += out_bytes;
    plan.total_bytes += out_bytes;
    plan.shards.back().push_back(
        {hf_name, dtype, shape, [bytes, dtype]() -> absl::StatusOr<std::string> {
           return ConvertF32(bytes.data(), static_cast<int64_t>(bytes.size() / 4), dtype);
         }});
  }
  return plan;
}

std::string ShardName(size_t index, size_t count) {
  if (count == 1) return "model.safetensors";
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

absl::Status WriteShards(const ShardPlan& plan, const std::string& dir,
                         std::vector<std::string>& names) {
  Json weight_map = Json::object();
  for (size_t i = 0; i < plan.shards.size(); ++i) {
    names.push_back(ShardName(i, plan.shards.size()));
    for (const model::StreamedTensor& t : plan.shards[i]) weight_map[t.name] = names.back();
    TAILOR_RETURN_IF_ERROR(model::WriteSafetensorsStreamed(dir + "/" + names.back(),
                                                           plan.shards[i], {{"format", "pt"}}));
  }
  if (plan.shards.size() == 1) return absl::OkStatus();
  const Json index = {{"metadata", {{"total_size", plan.total_bytes}}},
                      {"weight_map", weight_map}};
  return model::WriteFileAtomically(dir + "/model.safetensors.index.json", index.dump(2));
}

absl::Status CopyTokenizerFiles(const HfCheckpoint& parent, const std::string& dir) {
  for (const std::string& name : parent.tokenizer_files()) {
    std::error_code ec;
    std::filesystem::copy_file(parent.dir() + "/" + name, dir + "/" + name, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat(parent.dir(), "/", name, ": cannot copy: ", ec.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string TorchDTypeName(model::DType d) {
  if (d == model::DType::kBF16) return "bfloat16";
  if (d == model::DType::kF16) return "float16";
  return "float32";
}

std::string ConvertF32(const char* data, int64_t count, model::DType to) {
  if (to == model::DType::kF32) return std::string(data, count * 4);
  std::string out(count * 2, '\0');
  for (int64_t i = 0; i < count; ++i) {
    float f;
    std::memcpy(&f, data + 4 * i, 4);
    const uint16_t h = F32ToHalfBits(f, to == model::DType::kBF16);
    out[2 * i] = static_cast<char>(h & 0xff);
    out[2 * i + 1] = static_cast<char>(h >> 8);
  }
  return out;
}

absl::StatusOr<FamilyLayout> FamilyLayoutOf(const HfConfig& parent,
                                            const model::HybridConfig& student) {
  if (!IsExportedFamily(parent)) {
    return absl::UnimplementedError(absl::StrCat(
        "HF export of ", ArchitectureName(parent.architecture),
        " students is not implemented yet (supported: the Llama family, Qwen3, Mixtral and "
        "Qwen3-MoE)"));
  }
  if (student.num_layers() != 2 * parent.num_hidden_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the student has ", student.num_layers(), " blocks; a child of this ",
        ArchitectureName(parent.architecture), " parent has ", 2 * parent.num_hidden_layers));
  }
  FamilyLayout out;
  UniformWidths widths;
  for (int64_t i = 0; i < parent.num_hidden_layers; ++i) {
    const model::LayerSpec& a = student.layers[2 * i];
    const model::LayerSpec& m = student.layers[2 * i + 1];
    if (!a.present() && !m.present()) continue;  // removed whole: the layout drops it
    if (!a.present() || !m.present()) {
      return NotExpressible(parent, absl::StrCat("decoder layer ", i, " keeps its ",
                                                 a.present() ? "attention" : "MLP",
                                                 " but not its ", a.present() ? "MLP" : "attention"));
    }
    TAILOR_RETURN_IF_ERROR(CheckUniform(parent, i, a, m, widths));
    out.kept_layers.push_back(i);
  }
  if (out.kept_layers.empty()) return NotExpressible(parent, "it keeps no decoder layer");
  out.config = parent;
  out.architecture = std::string(ArchitectureName(parent.architecture));
  out.config.num_hidden_layers = static_cast<int64_t>(out.kept_layers.size());
  out.config.hidden_size = student.hidden;
  out.config.layers.clear();
  for (int64_t i : out.kept_layers) out.config.layers.push_back(parent.layers[i]);
  out.config.num_attention_heads = widths.attention->heads;
  out.config.num_key_value_heads = widths.attention->kv_heads;
  out.config.head_dim = widths.attention->head_dim;
  if (widths.mlp != nullptr) out.config.intermediate_size = widths.mlp->ffn;
  if (widths.moe != nullptr) {
    out.config.moe.num_experts = widths.moe->experts;
    out.config.moe.experts_per_token = widths.moe->top_k;
    out.config.moe.expert_intermediate = widths.moe->expert_ffn;
  }
  return out;
}

namespace {

absl::Status NotDeciLm(absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("DeciLM's block_configs layout: ", why));
}

// One kept decoder layer as a DeciLM block; `heads` is the query-head count every kept
// attention layer must share (0 until the first one).
absl::StatusOr<DeciLmBlock> DeciLmBlockOf(int64_t layer, const model::LayerSpec& a,
                                          const model::LayerSpec& m, int64_t hidden,
                                          int64_t& heads) {
  DeciLmBlock b;
  if (a.present()) {
    if (heads != 0 && a.attention.heads != heads) {
      return NotDeciLm(absl::StrCat("decoder layer ", layer, " keeps ", a.attention.heads,
                                    " query heads, an earlier layer ", heads,
                                    " (one query-head count for every attention layer)"));
    }
    heads = a.attention.heads;
    if (heads * a.attention.head_dim != hidden) {
      return NotDeciLm(absl::StrCat("decoder layer ", layer, ": ", heads, " query heads x ",
                                    a.attention.head_dim, " must equal the hidden width ",
                                    hidden, " (the loaders derive the head size from it)"));
    }
    b.attention = true;
    b.n_heads_in_group = heads / a.attention.kv_heads;
  }
  if (m.present()) {
    const int64_t f = m.mlp.ffn;
    b.ffn = true;
    b.ffn_mult = std::round(1.5e6 * static_cast<double>(f) / static_cast<double>(hidden)) / 1e6;
    if (f % 256 != 0 || DeciLmFfnWidth(b.ffn_mult, hidden) != f) {
      return NotDeciLm(absl::StrCat("decoder layer ", layer, " has FFN width ", f,
                                    ", not a multiple of 256 (widths are ffn_mult x 2/3 x "
                                    "hidden rounded up to 256)"));
    }
  }
  return b;
}

// The parent's config.json as DeciLM's: its architecture, the global widths (no uniform
// KV heads or FFN width: null, as DeciLM configs have them), the block_configs. Keys the
// loaders do not read (head_dim) are dropped; the rest (rope, eps, vocab, ...) verbatim.
Json DeciLmConfigJson(Json parent, const FamilyLayout& layout, model::DType dtype) {
  parent["architectures"] = Json::array({"DeciLMForCausalLM"});
  parent["model_type"] = "nemotron-nas";
  parent["num_hidden_layers"] = layout.config.num_hidden_layers;
  parent["hidden_size"] = layout.config.hidden_size;
  parent["num_attention_heads"] = layout.config.num_attention_heads;
  parent["num_key_value_heads"] = nullptr;
  parent["intermediate_size"] = nullptr;
  parent.erase("head_dim");
  parent["torch_dtype"] = TorchDTypeName(dtype);
  Json blocks = Json::array();
  for (const DeciLmBlock& b : layout.decilm_blocks) {
    Json attention = {{"no_op", !b.attention}, {"replace_with_linear", false}};
    attention["n_heads_in_group"] = b.attention ? Json(b.n_heads_in_group) : Json(nullptr);
    Json ffn = {{"no_op", !b.ffn}, {"replace_with_linear", false}};
    ffn["ffn_mult"] = b.ffn ? Json(b.ffn_mult) : Json(nullptr);
    blocks.push_back({{"attention", attention}, {"ffn", ffn}});
  }
  parent["block_configs"] = blocks;
  return parent;
}

// The Llama tensors of `layout` (its layers numbered densely), without those of no_op parts.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> LayoutTensorMapping(
    const FamilyLayout& layout) {
  TAILOR_ASSIGN_OR_RETURN(auto mapping, HfTensorMapping(layout.config));
  if (layout.decilm_blocks.empty()) return mapping;
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [hf_name, internal] : mapping) {
    bool keep = true;
    for (size_t j = 0; j < layout.decilm_blocks.size(); ++j) {
      const std::string layer = absl::StrCat("model.layers.", j, ".");
      if (!absl::StartsWith(hf_name, layer)) continue;
      const absl::string_view rest = absl::string_view(hf_name).substr(layer.size());
      const bool attention =
          absl::StartsWith(rest, "self_attn.") || absl::StartsWith(rest, "input_layernorm.");
      keep = attention ? layout.decilm_blocks[j].attention : layout.decilm_blocks[j].ffn;
    }
    if (keep) out.emplace_back(std::move(hf_name), std::move(internal));
  }
  return out;
}

// The family's layout, else DeciLM's; Unimplemented with both reasons when neither fits.
absl::StatusOr<FamilyLayout> LayoutOf(const HfConfig& parent, const model::HybridConfig& s) {
  absl::StatusOr<FamilyLayout> family = FamilyLayoutOf(parent, s);
  if (family.status().code() != absl::StatusCode::kUnimplemented) return family;
  if (parent.family != Family::kLlama) return family;
  absl::StatusOr<FamilyLayout> decilm = DeciLmLayoutOf(parent, s);
  if (decilm.status().code() != absl::StatusCode::kUnimplemented) return decilm;
  return absl::UnimplementedError(
      absl::StrCat(family.status().message(), "; and ", decilm.status().message()));
}

}  // namespace

int64_t DeciLmFfnWidth(double ffn_mult, int64_t hidden) {
  const auto f = static_cast<int64_t>(2.0 * ffn_mult * static_cast<double>(hidden) / 3.0);
  return f % 256 == 0 ? f : f + 256 - f % 256;
}

absl::StatusOr<FamilyLayout> DeciLmLayoutOf(const HfConfig& parent,
                                            const model::HybridConfig& student) {
  if (parent.family != Family::kLlama || parent.qkv_bias || parent.o_bias || parent.mlp_bias ||
      parent.sliding_window != 0) {
    return NotDeciLm(absl::StrCat("it is the layout of Llama / Mistral children without "
                                  "biases or sliding window, not of ",
                                  ArchitectureName(parent.architecture), " ones"));
  }
  if (student.num_layers() != 2 * parent.num_hidden_layers) {
    return absl::InvalidArgumentError(absl::StrCat("the student has ", student.num_layers(),
                                                   " blocks; a child of this parent has ",
                                                   2 * parent.num_hidden_layers));
  }
  FamilyLayout out;
  int64_t heads = 0;
  for (int64_t i = 0; i < parent.num_hidden_layers; ++i) {
    const model::LayerSpec& a = student.layers[2 * i];
    const model::LayerSpec& m = student.layers[2 * i + 1];
    if (!a.present() && !m.present()) continue;  // removed whole: dropped
    TAILOR_ASSIGN_OR_RETURN(DeciLmBlock b, DeciLmBlockOf(i, a, m, student.hidden, heads));
    out.decilm_blocks.push_back(b);
    out.kept_layers.push_back(i);
  }
  if (out.kept_layers.empty()) return NotDeciLm("the student keeps no decoder layer");
  out.architecture = "DeciLMForCausalLM";
  out.config = parent;
  out.config.num_hidden_layers = static_cast<int64_t>(out.kept_layers.size());
  out.config.hidden_size = student.hidden;
  out.config.layers.assign(out.kept_layers.size(), LayerKind::kAttentionMlp);
  out.config.num_attention_heads = heads > 0 ? heads : parent.num_attention_heads;
  return out;
}

absl::StatusOr<HfExportSummary> ExportStudentAsHf(const std::string& student_dir,
                                                  const HfCheckpoint& parent,
                                                  const std::string& out_dir,
                                                  const HfExportOptions& options) {
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig student,
                          model::ReadHybridConfig(student_dir + "/config.json"));
  HfExportSummary summary;
  TAILOR_ASSIGN_OR_RETURN(summary.layout, LayoutOf(parent.config(), student));
  TAILOR_ASSIGN_OR_RETURN(std::string parent_text,
                          model::ReadFileToString(parent.dir() + "/config.json"));
  const Json parent_json = Json::parse(parent_text, nullptr, /*allow_exceptions=*/false);
  TAILOR_ASSIGN_OR_RETURN(model::DType parent_dtype, ParentDType(parent_json));
  summary.dtype = options.dtype.value_or(parent_dtype);
  TAILOR_ASSIGN_OR_RETURN(auto mapping, LayoutTensorMapping(summary.layout));
  MappedWeights weights;
  TAILOR_RETURN_IF_ERROR(MapWeights(student_dir + "/model.safetensors", weights));
  TAILOR_ASSIGN_OR_RETURN(ShardPlan plan,
                          PlanTensors(weights, mapping, summary.layout.kept_layers,
                                      summary.dtype, options.max_shard_bytes));
  summary.weight_bytes = plan.total_bytes;

  std::error_code ec;
  if (std::filesystem::exists(out_dir, ec)) {
    return absl::AlreadyExistsError(absl::StrCat(out_dir, ": already exists"));
  }
  const std::string tmp = out_dir + ".tmp";
  std::filesystem::remove_all(tmp, ec);
  if (!std::filesystem::create_directories(tmp, ec)) {
    return absl::UnavailableError(absl::StrCat(tmp, ": cannot create: ", ec.message()));
  }
  absl::Status s = WriteShards(plan, tmp, summary.shards);
  if (s.ok()) s = CopyTokenizerFiles(parent, tmp);
  if (s.ok()) {
    const Json config =
        summary.layout.decilm_blocks.empty()
            ? StudentConfigJson(parent_json, summary.layout.config, summary.dtype)
            : DeciLmConfigJson(parent_json, summary.layout, summary.dtype);
    s = model::WriteFileAtomically(tmp + "/config.json", config.dump(2) + "\n");
  }
  if (s.ok()) {
    std::filesystem::rename(tmp, out_dir, ec);
    if (ec) s = absl::UnavailableError(absl::StrCat(out_dir, ": cannot rename: ", ec.message()));
  }
  if (!s.ok()) {
    std::filesystem::remove_all(tmp, ec);
    return s;
  }
  summary.tokenizer_files = parent.tokenizer_files();
  return summary;
}

}  // namespace tailor::hf
