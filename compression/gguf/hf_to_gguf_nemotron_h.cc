#include "compression/gguf/hf_to_gguf_nemotron_h.h"

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tailor::gguf {
namespace {


// Mixer-local HF names (after "backbone.layers.N.") and their GGUF names (after "blk.N.").
constexpr std::pair<absl::string_view, absl::string_view> kLayerNames[] = {
    {"norm.weight", "attn_norm.weight"},
    {"mixer.in_proj.weight", "ssm_in.weight"},
    {"mixer.conv1d.weight", "ssm_conv1d.weight"},
    {"mixer.conv1d.bias", "ssm_conv1d.bias"},
    {"mixer.dt_bias", "ssm_dt.bias"},
    {"mixer.A_log", "ssm_a"},  // no ".weight": llama.cpp's name for A and D
    {"mixer.D", "ssm_d"},
    {"mixer.norm.weight", "ssm_norm.weight"},
    {"mixer.out_proj.weight", "ssm_out.weight"},
    {"mixer.q_proj.weight", "attn_q.weight"},
    {"mixer.k_proj.weight", "attn_k.weight"},
    {"mixer.v_proj.weight", "attn_v.weight"},
    {"mixer.o_proj.weight", "attn_output.weight"},
    {"mixer.up_proj.weight", "ffn_up.weight"},
    {"mixer.down_proj.weight", "ffn_down.weight"},
    {"mixer.gate.weight", "ffn_gate_inp.weight"},
    {"mixer.gate.e_score_correction_bias", "exp_probs_b.bias"},
    {"mixer.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
    {"mixer.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
};

bool IsMoe(const hf::HfConfig& c) { return c.has_kind(hf::LayerKind::kMoe); }

// The int32 per-block array of `field` (0 for blocks of other kinds), and whether the
// blocks of `kind` all have the same value.
template <typename F>
std::pair<std::vector<int32_t>, bool> PerBlock(const NemotronHShape& s, hf::LayerKind kind,
                                               F field) {
  std::vector<int32_t> out;
  int64_t first = -1;
  bool uniform = true;
  for (const NemotronHBlock& b : s.blocks) {
    const int64_t v = b.kind == kind ? field(b) : 0;
    out.push_back(static_cast<int32_t>(v));
    if (b.kind != kind) continue;
    if (first < 0) first = v;
    uniform = uniform && v == first;
  }
  return {out, uniform};
}

uint32_t U32(int64_t v) { return static_cast<uint32_t>(v); }

TensorType NativeType(model::DType d) {
  if (d == model::DType::kBF16) return TensorType::kBF16;
  if (d == model::DType::kF16) return TensorType::kF16;
  return TensorType::kF32;
}

}  // namespace

// The converter's transform; the mixer uses A_log, llama.cpp stores A.
TensorSource NemotronHNegExpSource(TensorSource a_log_f32) {
  return [a_log_f32](const ByteSink& sink) -> absl::Status {
    std::string f32;
    absl::Status s = a_log_f32([&f32](const char* data, size_t size) {
          f32.append(data, size);
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
    for (size_t i = 0; i + 4 <= f32.size(); i += 4) {
      float v;
      std::memcpy(&v, f32.data() + i, 4);
      v = -std::exp(v);
      std::memcpy(f32.data() + i, &v, 4);
    }
    return sink(f32.data(), f32.size());
  };
}

// llama.cpp's ssm_conv and ssm_scan read conv1d, A and D as F32, and norms and vectors are
// F32 as the converter writes them.
std::pair<std::vector<int64_t>, bool> NemotronHGgufShape(absl::string_view gguf,
                                                         const std::vector<int64_t>& shape,
                                                         int64_t n_groups) {
  const bool vector = shape.size() == 1;
  if (absl::EndsWith(gguf, ".ssm_conv1d.weight")) return {{shape[0], shape.back()}, true};
  if (absl::EndsWith(gguf, ".ssm_a") || absl::EndsWith(gguf, ".ssm_d")) {
    return {{shape[0], 1}, true};
  }
  if (absl::EndsWith(gguf, ".ssm_norm.weight")) {
    return {{n_groups, shape[0] / n_groups}, true};
  }
  return {shape, vector};
}

std::string NemotronHExpertsGgufName(int64_t block, absl::string_view proj) {
  return absl::StrCat("blk.", block, proj == "up_proj" ? ".ffn_up_exps" : ".ffn_down_exps",
                      ".weight");
}

bool NemotronHShape::has(hf::LayerKind kind) const {
  for (const NemotronHBlock& b : blocks) {
    if (b.kind == kind) return true;
  }
  return false;
}

NemotronHShape NemotronHShapeOf(const hf::HfConfig& c) {
  NemotronHShape s;
  s.vocab = c.vocab_size;
  s.hidden = c.hidden_size;
  s.rms_eps = c.rms_norm_eps;
  s.head_count = c.num_attention_heads;
  s.head_dim = c.head_dim;
  s.mamba = c.mamba;
  s.moe = c.moe;
  for (hf::LayerKind k : c.layers) {
    NemotronHBlock b;
    b.kind = k;
    if (k == hf::LayerKind::kAttention) {
      b.heads = c.num_attention_heads;
      b.kv_heads = c.num_key_value_heads;
    }
    if (k == hf::LayerKind::kMlp) b.ffn = c.intermediate_size;
    if (k == hf::LayerKind::kMoe) b.ffn = c.moe.expert_intermediate;
    s.blocks.push_back(b);
  }
  return s;
}

namespace {

// nemotron_h_moe's expert keys, as the converter writes them; per-block expert widths as an
// array (llama.cpp's Puzzle models: n_ff_exp per layer).
absl::Status AddMoeMetadata(const NemotronHShape& s, const std::string& a, GgufWriter& w) {
  const hf::MoeConfig& m = s.moe;
  const auto [expert_ffn, uniform] =
      PerBlock(s, hf::LayerKind::kMoe, [](const NemotronHBlock& b) { return b.ffn; });
  int64_t first = 0;
  for (const NemotronHBlock& b : s.blocks) {
    if (b.kind == hf::LayerKind::kMoe && first == 0) first = b.ffn;
  }
  const Value expert_width = uniform ? Value(U32(first)) : Value(expert_ffn);
  const std::vector<std::pair<std::string, Value>> kv = {
      {a + ".expert_used_count", U32(m.experts_per_token)},
      {a + ".expert_feed_forward_length", expert_width},
      {a + ".expert_shared_feed_forward_length", U32(m.shared_intermediate)},
      {a + ".expert_count", U32(m.num_experts)},
      {a + ".expert_shared_count", U32(1)},
      {a + ".expert_weights_norm", m.norm_topk_prob},
      {a + ".expert_weights_scale", static_cast<float>(m.routed_scaling_factor)},
      {a + ".expert_group_count", U32(m.n_group)},
      {a + ".expert_group_used_count", U32(m.topk_group)},
  };
  for (const auto& [key, value] : kv) {
    absl::Status s = w.Add(key, value);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// attention.head_count: a scalar when every attention block has the same query heads (the
// converter's form), else per block, the non-attention entries repeating the first attention
// block's count: llama.cpp reads the head size only when entry 0 is non-zero and uses the
// count only in attention blocks.
Value HeadCount(const NemotronHShape& s) {
  auto [heads, uniform] =
      PerBlock(s, hf::LayerKind::kAttention, [](const NemotronHBlock& b) { return b.heads; });
  if (uniform) return U32(s.head_count);
  int32_t first = 0;
  for (size_t i = 0; i < s.blocks.size() && first == 0; ++i) {
    if (s.blocks[i].kind == hf::LayerKind::kAttention) first = heads[i];
  }
  for (size_t i = 0; i < s.blocks.size(); ++i) {
    if (s.blocks[i].kind != hf::LayerKind::kAttention) heads[i] = first;
  }
  return heads;
}

}  // namespace

absl::Status AddNemotronHMetadata(const NemotronHShape& s, const std::string& a,
                                  const std::string& name, uint32_t file_type, GgufWriter& w) {
  std::vector<int32_t> head_count_kv, feed_forward;
  for (const NemotronHBlock& b : s.blocks) {
    head_count_kv.push_back(static_cast<int32_t>(b.kv_heads));
    feed_forward.push_back(static_cast<int32_t>(b.ffn));
  }
  const hf::MambaConfig& m = s.mamba;
  const std::vector<std::pair<std::string, Value>> kv = {
      {"general.architecture", a},
      {"general.name", name},
      {"general.file_type", file_type},
      {a + ".vocab_size", U32(s.vocab)},
      // The converter's value: without RoPE nothing ties the model to a trained length.
      {a + ".context_length", U32(1 << 20)},
      {a + ".embedding_length", U32(s.hidden)},
      {a + ".block_count", U32(static_cast<int64_t>(s.blocks.size()))},
      {a + ".feed_forward_length", feed_forward},
      {a + ".attention.head_count", HeadCount(s)},
      {a + ".attention.head_count_kv", head_count_kv},
      {a + ".attention.key_length", U32(s.head_dim)},
      {a + ".attention.value_length", U32(s.head_dim)},
      // llama.cpp's nemotron_h reads the RMS epsilon; the converter writes both.
      {a + ".attention.layer_norm_rms_epsilon", static_cast<float>(s.rms_eps)},
      {a + ".attention.layer_norm_epsilon", static_cast<float>(s.rms_eps)},
      {a + ".rope.scaling.finetuned", false},
      {a + ".ssm.conv_kernel", U32(m.conv_kernel)},
      {a + ".ssm.inner_size", U32(m.intermediate_size())},
      {a + ".ssm.state_size", U32(m.state_size)},
      {a + ".ssm.time_step_rank", U32(m.num_heads)},  // llama.cpp keeps the head count here
      {a + ".ssm.group_count", U32(m.n_groups)},
  };
  for (const auto& [key, value] : kv) {
    absl::Status s = w.Add(key, value);
    if (!s.ok()) return s;
  }
  return s.has(hf::LayerKind::kMoe) ? AddMoeMetadata(s, a, w) : absl::OkStatus();
}

namespace {

// The experts' up (or down) projections of layer `layer`, stacked into one [E, rows, cols]
// tensor streamed expert by expert (the converter's torch.stack).
absl::Status AddStackedExperts(const hf::HfCheckpoint& ckpt, int layer, absl::string_view proj,
                               bool all_f32, GgufExportSummary& summary, GgufWriter& w) {
  std::vector<hf::TensorView> views;
  for (int64_t e = 0; e < ckpt.config().moe.num_experts; ++e) {
    const std::string hf_name =
        absl::StrCat("backbone.layers.", layer, ".mixer.experts.", e, ".", proj, ".weight");
    absl::StatusOr<hf::TensorView> view = ckpt.Tensor(hf_name);
    if (!view.ok()) return view.status();
    views.push_back(*view);
  }
  const std::string name = NemotronHExpertsGgufName(layer, proj);
  const std::vector<int64_t>& one = *views[0].shape;
  const TensorType type = all_f32 ? TensorType::kF32 : NativeType(views[0].dtype);
  absl::Status s = w.AddTensor(
      name, {static_cast<int64_t>(views.size()), one[0], one[1]}, type,
      [views, type](const ByteSink& sink) -> absl::Status {
        for (const hf::TensorView& v : views) {
          absl::Status s = CheckpointTensorSource(v, type)(sink);
          if (!s.ok()) return s;
        }
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  for (const hf::TensorView& v : views) summary.map.emplace_back(*v.name, name);
  return absl::OkStatus();
}

// "backbone.layers.N.mixer.experts.E.P.weight": N, E and P; false for other names.
bool ParseExpertName(absl::string_view hf_name, int* layer, int* expert, std::string* proj) {
  const std::vector<absl::string_view> parts = absl::StrSplit(hf_name, '.');
  return parts.size() == 8 && parts[0] == "backbone" && parts[3] == "mixer" &&
         parts[4] == "experts" && absl::SimpleAtoi(parts[2], layer) &&
         absl::SimpleAtoi(parts[5], expert) && (*proj = std::string(parts[6]), true);
}

absl::Status AddTensors(const hf::HfCheckpoint& ckpt, bool all_f32, GgufExportSummary& summary,
                        GgufWriter& w) {
  const hf::HfConfig& c = ckpt.config();
  for (const hf::ExpectedTensor& e : hf::ExpectedTensors(c)) {
    int layer = 0, expert = 0;
    std::string proj;
    if (ParseExpertName(e.name, &layer, &expert, &proj)) {
      if (expert > 0) continue;  // stacked with expert 0
      absl::Status s = AddStackedExperts(ckpt, layer, proj, all_f32, summary, w);
      if (!s.ok()) return s;
      continue;
    }
    absl::StatusOr<std::string> name = NemotronHGgufTensorName(e.name);
    if (!name.ok()) return name.status();
    absl::StatusOr<hf::TensorView> view = ckpt.Tensor(e.name);
    if (!view.ok()) return view.status();
    const auto [shape, force_f32] = NemotronHGgufShape(*name, *view->shape, c.mamba.n_groups);
    const TensorType type = all_f32 || force_f32 ? TensorType::kF32 : NativeType(view->dtype);
    const bool a = absl::EndsWith(*name, ".ssm_a");
    absl::Status s = w.AddTensor(
        *name, shape, type,
        a ? NemotronHNegExpSource(CheckpointTensorSource(*view, TensorType::kF32))
          : CheckpointTensorSource(*view, type));
    if (!s.ok()) return s;
    summary.map.emplace_back(e.name, *name);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> NemotronHGgufArchitecture(const NemotronHShape& s,
                                                      absl::string_view arch) {
  const bool moe = s.has(hf::LayerKind::kMoe);
  if (moe && s.has(hf::LayerKind::kMlp)) {
    return absl::UnimplementedError(absl::StrCat(
        "GGUF export of ", arch, " with both MoE ('E') and dense MLP ('-') layers: llama.cpp's "
        "`nemotron_h_moe` runs every FFN layer as MoE"));
  }
  if (!s.has(hf::LayerKind::kMamba)) {
    return absl::UnimplementedError(absl::StrCat(
        "GGUF export of ", arch, " without a Mamba ('M') layer: llama.cpp's `nemotron_h` "
        "aborts on it"));
  }
  if (s.head_count <= 0) {
    return absl::UnimplementedError(absl::StrCat(
        "GGUF export of ", arch, " without attention heads: llama.cpp's `nemotron_h` derives "
        "the head size from attention.head_count"));
  }
  return std::string(moe ? "nemotron_h_moe" : "nemotron_h");
}

absl::StatusOr<std::string> NemotronHGgufArchitecture(const hf::HfConfig& c) {
  const absl::string_view arch = hf::ArchitectureName(c.architecture);
  absl::StatusOr<std::string> out = NemotronHGgufArchitecture(NemotronHShapeOf(c), arch);
  if (!out.ok()) return out;
  if (!c.mamba.conv_bias || c.mamba.time_step_limit_min > 0 || c.mamba.time_step_limit_max > 0) {
    return absl::UnimplementedError(absl::StrCat(
        "GGUF export of ", arch, " with use_conv_bias false or a time_step_limit other than "
        "[0, inf) is not implemented (llama.cpp never clamps dt)"));
  }
  return out;
}

absl::StatusOr<std::string> NemotronHGgufTensorName(absl::string_view hf_name) {
  if (hf_name == "backbone.embeddings.weight") return std::string("token_embd.weight");
  if (hf_name == "backbone.norm_f.weight") return std::string("output_norm.weight");
  if (hf_name == "lm_head.weight") return std::string("output.weight");
  const std::vector<absl::string_view> parts = absl::StrSplit(hf_name, absl::MaxSplits('.', 3));
  int layer = 0;
  if (parts.size() == 4 && parts[0] == "backbone" && parts[1] == "layers" &&
      absl::SimpleAtoi(parts[2], &layer)) {
    for (const auto& [hf, gguf] : kLayerNames) {
      if (parts[3] == hf) return absl::StrCat("blk.", layer, ".", gguf);
    }
  }
  return absl::UnimplementedError(absl::StrCat("tensor ", hf_name, " has no nemotron_h name"));
}

absl::StatusOr<GgufExportSummary> ExportNemotronHToGguf(const hf::HfCheckpoint& checkpoint,
                                                        const std::string& path,
                                                        const GgufExportOptions& options) {
  const hf::HfConfig& c = checkpoint.config();
  GgufExportSummary summary;
  absl::StatusOr<std::string> arch = NemotronHGgufArchitecture(c);
  if (!arch.ok()) return arch.status();
  summary.arch = *arch;
  summary.vocabulary = BuildVocabulary(checkpoint);
  absl::StatusOr<uint32_t> file_type =
      GgufFileType(checkpoint, "backbone.embeddings.weight", options.all_f32);
  if (!file_type.ok()) return file_type.status();
  GgufWriter w;
  absl::Status s = AddNemotronHMetadata(NemotronHShapeOf(c), summary.arch,
                                        GgufModelName(checkpoint.dir(), options), *file_type, w);
  if (s.ok()) s = AddVocabularyKeys(summary.vocabulary, w);
  // The converter sets it for the dense Nemotron-H: its tokenizer adds BOS by template.
  if (s.ok() && !IsMoe(c)) s = w.Add("tokenizer.ggml.add_bos_token", true);
  if (s.ok()) s = AddTensors(checkpoint, options.all_f32, summary, w);
  if (s.ok()) s = w.Write(path);
  if (!s.ok()) return s;
  return summary;
}

}  // namespace tailor::gguf
