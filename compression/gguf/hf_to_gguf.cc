#include "compression/gguf/hf_to_gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "compression/gguf/hf_to_gguf_moe.h"
#include "compression/gguf/hf_to_gguf_nemotron_h.h"
#include "compression/tokenizer/byte_level_bpe.h"
#include "compression/tokenizer/sentencepiece_tokenizer.h"
#include "nlohmann/json.hpp"

namespace tailor::gguf {
namespace {

using Json = nlohmann::json;

// IEEE half to float, written out so the export needs no F16 support from the compiler.
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);  // inf / NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Appends `n` elements of `src` (in dtype `from`) to `out` as `to`. Only same-type copies
// and conversions to F32 occur.
void AppendElements(const char* src, int64_t n, model::DType from, TensorType to,
                    std::string& out) {
  if (to != TensorType::kF32 || from == model::DType::kF32) {
    out.append(src, n * model::DTypeSize(from));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t v = static_cast<uint16_t>(static_cast<uint8_t>(src[2 * i]) |
                                             (static_cast<uint8_t>(src[2 * i + 1]) << 8));
    float f;
    if (from == model::DType::kBF16) {
      const uint32_t bits = static_cast<uint32_t>(v) << 16;
      std::memcpy(&f, &bits, 4);
    } else {
      f = HalfToFloat(v);
    }
    char b[4];
    std::memcpy(b, &f, 4);  // GGUF is little-endian, as are the hosts tailor runs on
    out.append(b, 4);
  }
}

TensorType NativeType(model::DType d) {
  if (d == model::DType::kBF16) return TensorType::kBF16;
  if (d == model::DType::kF16) return TensorType::kF16;
  return TensorType::kF32;
}

// A source that streams a checkpoint tensor, rows optionally reordered, in pieces of about
// 1 MiB (never the whole tensor at once).
TensorSource RowSource(hf::TensorView view, TensorType to, std::vector<int64_t> row_order) {
  return [view, to, order = std::move(row_order)](const ByteSink& sink) -> absl::Status {
    const std::vector<int64_t>& shape = *view.shape;
    const int64_t rows = shape[0];
    int64_t row_len = 1;
    for (size_t d = 1; d < shape.size(); ++d) row_len *= shape[d];
    const int64_t row_bytes = row_len * model::DTypeSize(view.dtype);
    std::string buffer;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t src = order.empty() ? r : order[r];
      AppendElements(view.data + src * row_bytes, row_len, view.dtype, to, buffer);
      if (buffer.size() >= (1u << 20) || r + 1 == rows) {
        absl::Status s = sink(buffer.data(), buffer.size());
        if (!s.ok()) return s;
        buffer.clear();
      }
    }
    return absl::OkStatus();
  };
}

// Layer-local HF names (after "model.layers.N.") and their GGUF names (after "blk.N.").
constexpr std::pair<absl::string_view, absl::string_view> kLayerNames[] = {
    {"input_layernorm", "attn_norm"},     {"post_attention_layernorm", "ffn_norm"},
    {"self_attn.q_proj", "attn_q"},       {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},       {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},  {"self_attn.k_norm", "attn_k_norm"},
    {"mlp.gate_proj", "ffn_gate"},        {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
};

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream s;
  s << in.rdbuf();
  return std::move(s).str();
}

GgufVocabulary SynthesizedVocabulary(int64_t vocab_size, std::string note) {
  GgufVocabulary v;
  v.note = std::move(note);
  for (int64_t i = 0; i < vocab_size; ++i) {
    v.tokens.push_back(i < 256 ? tokenizer::ByteSymbol(static_cast<uint8_t>(i))
                               : absl::StrCat("<|tailor_token_", i, "|>"));
    v.types.push_back(i < 256 ? 1 : 4);
  }
  return v;
}

// The checkpoint's own tokenizer: tokenizer.json when it is a byte-level BPE (its split
// pattern may be one tailor does not implement: ids still evaluate exactly, llama.cpp then
// splits text with its "default" pattern), else a tokenizer.model llama.cpp reproduces.
absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> CheckpointTokenizer(
    const hf::HfCheckpoint& checkpoint) {
  const auto& files = checkpoint.tokenizer_files();
  auto has = [&](const char* f) { return std::find(files.begin(), files.end(), f) != files.end(); };
  absl::Status json_error = absl::NotFoundError("no tokenizer.json or tokenizer.model");
  if (has("tokenizer.json")) {
    auto bpe = tokenizer::ByteLevelBpe::Load(checkpoint.dir() + "/tokenizer.json",
                                             {.require_pre_tokenizer = false});
    if (bpe.ok()) return std::unique_ptr<tokenizer::Tokenizer>(*std::move(bpe));
    json_error = bpe.status();
  }
  if (!has("tokenizer.model")) return json_error;
  auto spm = tokenizer::SentencePieceTokenizer::Load(checkpoint.dir() + "/tokenizer.model");
  if (spm.ok()) return std::unique_ptr<tokenizer::Tokenizer>(*std::move(spm));
  return spm.status();
}

// The tokenizer's vocabulary padded to the embedding's `vocab_size` rows, or an error saying
// why it cannot be carried (the caller then synthesizes one).
absl::StatusOr<GgufVocabulary> CarriedVocabulary(const hf::HfCheckpoint& checkpoint,
                                                 int64_t vocab_size) {
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> t = CheckpointTokenizer(checkpoint);
  if (!t.ok()) return t.status();
  const tokenizer::Vocabulary& tv = (*t)->vocabulary();
  if (static_cast<int64_t>(tv.tokens.size()) > vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("the tokenizer has ", tv.tokens.size(),
                                                   " tokens, more than vocab_size ", vocab_size));
  }
  GgufVocabulary v;
  v.model = tv.model;
  v.pre = tv.pre;
  v.tokens = tv.tokens;
  for (tokenizer::TokenType type : tv.types) v.types.push_back(static_cast<int32_t>(type));
  v.scores = tv.scores;
  v.merges = tv.merges;
  v.unk = tv.unk;
  v.add_space_prefix = tv.add_space_prefix;
  std::set<std::string> unique(v.tokens.begin(), v.tokens.end());
  for (int64_t i = static_cast<int64_t>(v.tokens.size()); i < vocab_size; ++i) {
    // Rows of the embedding no token names (padding) get unused placeholders.
    std::string name = absl::StrCat("<|tailor_unused_", i, "|>");
    if (!unique.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("token \"", name, "\" appears twice"));
    }
    v.tokens.push_back(std::move(name));
    v.types.push_back(static_cast<int32_t>(tokenizer::TokenType::kUnused));
    if (!v.scores.empty()) v.scores.push_back(0.0f);
  }
  v.carried = true;
  v.note = (*t)->Describe();
  return v;
}

// bos/eos from config.json (eos may be a list: the first is the one generation starts with).
void SpecialIds(const std::string& dir, GgufVocabulary& v) {
  absl::StatusOr<std::string> text = ReadText(dir + "/config.json");
  if (!text.ok()) return;
  const Json c = Json::parse(*text, nullptr, false);
  if (c.is_discarded()) return;
  auto id = [&](const char* key) -> int64_t {
    if (!c.contains(key)) return -1;
    const Json& x = c[key].is_array() && !c[key].empty() ? c[key][0] : c[key];
    const int64_t i = x.is_number_integer() ? x.get<int64_t>() : -1;
    return i >= 0 && i < static_cast<int64_t>(v.tokens.size()) ? i : -1;
  };
  v.bos = id("bos_token_id");
  v.eos = id("eos_token_id");
}


uint32_t U32(int64_t v) { return static_cast<uint32_t>(v); }

absl::Status AddModelMetadata(const hf::HfConfig& c, const std::string& arch,
                              const std::string& name, uint32_t file_type, GgufWriter& w) {
  const std::vector<std::pair<std::string, Value>> kv = {
      {"general.architecture", arch},
      {"general.name", name},
      {"general.file_type", file_type},
      {arch + ".vocab_size", U32(c.vocab_size)},
      {arch + ".context_length", U32(c.max_position_embeddings)},
      {arch + ".embedding_length", U32(c.hidden_size)},
      {arch + ".block_count", U32(c.num_hidden_layers)},
      {arch + ".feed_forward_length", U32(c.intermediate_size)},
      {arch + ".attention.head_count", U32(c.num_attention_heads)},
      {arch + ".attention.head_count_kv", U32(c.num_key_value_heads)},
      // Written always: Qwen3's head_dim is not hidden / heads, and llama.cpp would
      // otherwise derive it from those.
      {arch + ".attention.key_length", U32(c.head_dim)},
      {arch + ".attention.value_length", U32(c.head_dim)},
      {arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps)},
      {arch + ".rope.dimension_count", U32(c.head_dim)},
      {arch + ".rope.freq_base", static_cast<float>(c.rope_theta)},
  };
  for (const auto& [key, value] : kv) {
    absl::Status s = w.Add(key, value);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddVocabularyKeys(const GgufVocabulary& v, GgufWriter& w) {
  absl::Status s = w.Add("tokenizer.ggml.model", v.model);
  if (v.model == "llama") {  // SentencePiece: pieces merge by score
    if (s.ok()) s = w.Add("tokenizer.ggml.tokens", v.tokens);
    if (s.ok()) s = w.Add("tokenizer.ggml.scores", v.scores);
    if (s.ok()) s = w.Add("tokenizer.ggml.token_type", v.types);
    if (s.ok()) s = w.Add("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
    if (s.ok() && v.unk >= 0) s = w.Add("tokenizer.ggml.unknown_token_id", U32(v.unk));
  } else {
    // The split pattern ("default", llama.cpp's generic one, when the tokenizer's is not one
    // tailor implements: ids evaluate exactly, only text -> ids may split differently).
    if (s.ok()) s = w.Add("tokenizer.ggml.pre", v.pre);
    if (s.ok()) s = w.Add("tokenizer.ggml.tokens", v.tokens);
    if (s.ok()) s = w.Add("tokenizer.ggml.token_type", v.types);
    if (s.ok()) s = w.Add("tokenizer.ggml.merges", v.merges);  // llama.cpp requires the key
  }
  if (s.ok() && v.bos >= 0) s = w.Add("tokenizer.ggml.bos_token_id", U32(v.bos));
  if (s.ok() && v.eos >= 0) s = w.Add("tokenizer.ggml.eos_token_id", U32(v.eos));
  return s;
}

namespace {

// Adds every checkpoint tensor under its GGUF name, Q/K rows permuted for `llama`.
absl::Status AddModelTensors(const hf::HfCheckpoint& ckpt, bool permute, bool all_f32,
                             GgufExportSummary& summary, GgufWriter& w) {
  const hf::HfConfig& c = ckpt.config();
  for (const hf::ExpectedTensor& e : hf::ExpectedTensors(c)) {
    if (IsHfExpertTensor(e.name)) continue;  // stacked by AddStackedExperts
    absl::StatusOr<std::string> name = GgufTensorName(e.name);
    if (!name.ok()) return name.status();
    absl::StatusOr<hf::TensorView> view = ckpt.Tensor(e.name);
    if (!view.ok()) return view.status();
    const std::vector<int64_t>& shape = *view->shape;
    std::vector<int64_t> order;
    const bool q = absl::StrContains(e.name, "self_attn.q_proj.");
    const bool k = absl::StrContains(e.name, "self_attn.k_proj.");
    if (permute && (q || k)) {
      order = RopeInterleaveRows(shape[0], q ? c.num_attention_heads : c.num_key_value_heads);
    }
    const TensorType type =
        all_f32 || shape.size() == 1 ? TensorType::kF32 : NativeType(view->dtype);
    absl::Status s = w.AddTensor(*name, shape, type, RowSource(*view, type, std::move(order)));
    if (!s.ok()) return s;
    summary.map.emplace_back(e.name, *name);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint32_t> GgufFileType(const hf::HfCheckpoint& checkpoint,
                                      absl::string_view embedding, bool all_f32) {
  if (all_f32) return 0u;
  absl::StatusOr<hf::TensorView> embed = checkpoint.Tensor(embedding);
  if (!embed.ok()) return embed.status();
  if (embed->dtype == model::DType::kF16) return 1u;
  if (embed->dtype == model::DType::kBF16) return 32u;
  return 0u;
}

std::string GgufModelName(const std::string& dir, const GgufExportOptions& options) {
  if (!options.name.empty()) return options.name;
  std::string name = dir;
  while (!name.empty() && name.back() == '/') name.pop_back();
  return name.substr(name.find_last_of('/') + 1);
}

TensorSource CheckpointTensorSource(hf::TensorView view, TensorType to,
                                    std::vector<int64_t> row_order) {
  return RowSource(std::move(view), to, std::move(row_order));
}

absl::StatusOr<std::string> GgufArchitecture(const hf::HfConfig& config) {
  const absl::string_view name = hf::ArchitectureName(config.architecture);
  const bool llama3_rope = config.rope_scaling.type == hf::RopeScaling::Type::kLlama3;
  if (llama3_rope && config.family != hf::Family::kLlama) {
    return absl::UnimplementedError(absl::StrCat(
        name, ": llama3 rope scaling is only exported for the `llama` arch"));
  }
  switch (config.architecture) {
    case hf::Architecture::kLlama:
    case hf::Architecture::kMistral:
      if (config.sliding_window != 0) {
        return absl::UnimplementedError(absl::StrCat(
            name, ": sliding_window ", config.sliding_window,
            " has no GGUF `llama` equivalent (llama.cpp would attend to the whole context)"));
      }
      return std::string("llama");
    case hf::Architecture::kQwen2:
      if (llama3_rope) {
        return absl::UnimplementedError(absl::StrCat(
            name, ": llama3 rope scaling is only exported for the `llama` arch"));
      }
      if (config.num_attention_heads * config.head_dim != config.hidden_size) {
        // Checked: such a file fails llama.cpp's load ("attn_q.weight has wrong shape").
        return absl::UnimplementedError(absl::StrCat(
            name, ": llama.cpp's `qwen2` sizes attn_q as [hidden, hidden], so "
            "num_attention_heads x head_dim (", config.num_attention_heads, " x ",
            config.head_dim, ") must equal hidden_size (", config.hidden_size, ")"));
      }
      return std::string("qwen2");
    case hf::Architecture::kNemotronH:
      return NemotronHGgufArchitecture(config);  // hf_to_gguf_nemotron_h.cc
    case hf::Architecture::kMixtral:
    case hf::Architecture::kQwen3Moe:
      return MoeGgufArchitecture(config);  // hf_to_gguf_moe.cc
    case hf::Architecture::kQwen3:
      if (config.o_bias) {
        return absl::UnimplementedError(absl::StrCat(
            name, ": attention_bias (o_proj.bias) is not loaded by llama.cpp's `qwen3` arch"));
      }
      return std::string("qwen3");
    default:
      return absl::UnimplementedError(absl::StrCat(
          "GGUF export of ", name,
          " is not implemented yet (supported: LlamaForCausalLM, MistralForCausalLM, "
          "Qwen2ForCausalLM, Qwen3ForCausalLM)"));
  }
}

absl::StatusOr<std::string> GgufTensorName(absl::string_view hf_name) {
  if (hf_name == "model.embed_tokens.weight") return std::string("token_embd.weight");
  if (hf_name == "model.norm.weight") return std::string("output_norm.weight");
  if (hf_name == "lm_head.weight") return std::string("output.weight");
  const std::vector<absl::string_view> parts = absl::StrSplit(hf_name, absl::MaxSplits('.', 3));
  int layer = 0;
  if (parts.size() == 4 && parts[0] == "model" && parts[1] == "layers" &&
      absl::SimpleAtoi(parts[2], &layer)) {
    for (const auto& [hf, gguf] : kLayerNames) {
      for (absl::string_view suffix : {".weight", ".bias"}) {
        if (parts[3] == absl::StrCat(hf, suffix)) {
          return absl::StrCat("blk.", layer, ".", gguf, suffix);
        }
      }
    }
  }
  absl::StatusOr<std::string> router = MoeRouterGgufName(hf_name);  // hf_to_gguf_moe.cc
  if (router.ok()) return router;
  return absl::UnimplementedError(absl::StrCat("tensor ", hf_name, " has no GGUF name"));
}

std::vector<int64_t> RopeInterleaveRows(int64_t rows, int64_t n_heads) {
  const int64_t d = rows / n_heads, half = d / 2;
  std::vector<int64_t> order(rows);
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t p = 0; p < d; ++p) {
      // Output position p = 2j + s takes element j of half s.
      order[h * d + p] = h * d + (p % 2) * half + p / 2;
    }
  }
  return order;
}

std::vector<float> Llama3RopeFactors(const hf::HfConfig& config) {
  const hf::RopeScaling& r = config.rope_scaling;
  const double pi = std::acos(-1.0);
  const double old_context = static_cast<double>(r.original_max_position_embeddings);
  const double low_wavelen = old_context / r.low_freq_factor;
  const double high_wavelen = old_context / r.high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < config.head_dim; i += 2) {
    // HF computes the inverse frequencies in float32; so do we, for the same wavelengths.
    const float inv_freq = static_cast<float>(
        1.0 / std::pow(config.rope_theta, static_cast<double>(i) / config.head_dim));
    const double wavelen = 2 * pi / inv_freq;
    double factor = 1.0;  // short wavelengths: unscaled
    if (wavelen > low_wavelen) {
      factor = r.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (old_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      factor = 1.0 / ((1.0 - smooth) / r.factor + smooth);
    }
    factors.push_back(static_cast<float>(factor));
  }
  return factors;
}

GgufVocabulary BuildVocabulary(const hf::HfCheckpoint& checkpoint) {
  const int64_t vocab_size = checkpoint.config().vocab_size;
  absl::StatusOr<GgufVocabulary> carried = CarriedVocabulary(checkpoint, vocab_size);
  GgufVocabulary v = carried.ok() ? *std::move(carried)
                                  : SynthesizedVocabulary(vocab_size,
                                                          std::string(carried.status().message()));
  SpecialIds(checkpoint.dir(), v);
  return v;
}


absl::StatusOr<GgufExportSummary> ExportHfToGguf(const hf::HfCheckpoint& checkpoint,
                                                 const std::string& path,
                                                 const GgufExportOptions& options) {
  const hf::HfConfig& c = checkpoint.config();
  if (c.family == hf::Family::kNemotronH) return ExportNemotronHToGguf(checkpoint, path, options);
  GgufExportSummary summary;
  absl::StatusOr<std::string> arch = GgufArchitecture(c);
  if (!arch.ok()) return arch.status();
  summary.arch = *arch;
  summary.qk_permuted = summary.arch == "llama";
  summary.vocabulary = BuildVocabulary(checkpoint);

  absl::StatusOr<uint32_t> file_type =
      GgufFileType(checkpoint, "model.embed_tokens.weight", options.all_f32);
  if (!file_type.ok()) return file_type.status();
  GgufWriter w;
  absl::Status s = AddModelMetadata(c, summary.arch, GgufModelName(checkpoint.dir(), options),
                                    *file_type, w);
  if (s.ok()) s = AddVocabularyKeys(summary.vocabulary, w);
  if (s.ok()) s = AddModelTensors(checkpoint, summary.qk_permuted, options.all_f32, summary, w);
  if (s.ok() && c.moe.num_experts > 0) {  // Mixtral, Qwen3-MoE (hf_to_gguf_moe.cc)
    s = AddMoeMetadata(c, summary.arch, w);
    if (s.ok()) s = AddStackedExperts(checkpoint, options.all_f32, summary, w);
  }
  // llama3 rope scaling: llama.cpp divides each frequency by its factor from this tensor.
  std::vector<float> factors;
  if (s.ok() && c.rope_scaling.type == hf::RopeScaling::Type::kLlama3) {
    factors = Llama3RopeFactors(c);
    s = w.AddTensorBytes("rope_freqs.weight", {static_cast<int64_t>(factors.size())},
                         TensorType::kF32, reinterpret_cast<const char*>(factors.data()),
                         factors.size() * sizeof(float));
  }
  if (s.ok()) s = w.Write(path);
  if (!s.ok()) return s;
  return summary;
}

}  // namespace tailor::gguf
