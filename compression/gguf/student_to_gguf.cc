#include "compression/gguf/student_to_gguf.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/gguf/hf_to_gguf_nemotron_h.h"
#include "compression/hf/hf_export.h"
#include "compression/hf/hf_import_nemotron_h.h"
#include "compression/model/config.h"
#include "compression/model/deci_blocks.h"
#include "compression/model/safetensors_format.h"

namespace tailor::gguf {
namespace {

// One GGUF block of a `deci` file, from parent decoder layer `layer`.
struct DeciBlock {
  int64_t layer = 0;
  int64_t heads = 0;  // 0: attention-free
  int64_t kv_heads = 0;
  int64_t ffn = 0;
  bool zero_attention = false;  // stand-in (see the header)
  bool zero_ffn = false;
};

absl::Status RefuseForDeci(const hf::HfConfig& p) {
  const absl::string_view name = hf::ArchitectureName(p.architecture);
  auto refuse = [&](absl::string_view why) {
    return absl::UnimplementedError(absl::StrCat(
        "a ", name, " student with per-layer widths has no GGUF layout: ", why,
        "; keep its widths uniform to export it in the family's own arch"));
  };
  if (p.family != hf::Family::kLlama) return refuse("`deci` is the Llama family's layout");
  if (p.qkv_bias || p.o_bias || p.mlp_bias) {
    return refuse("llama.cpp's `deci` sizes attention biases by the hidden width, not by a "
                  "layer's heads");
  }
  if (p.sliding_window != 0) return refuse("`deci` has no sliding-window attention");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DeciBlock>> DeciBlocks(const model::HybridConfig& s,
                                                  int64_t parent_layers) {
  if (s.num_layers() != 2 * parent_layers) {
    return absl::InvalidArgumentError(absl::StrCat("the student has ", s.num_layers(),
                                                   " blocks; a child of this parent has ",
                                                   2 * parent_layers));
  }
  std::vector<DeciBlock> blocks;
  for (const model::DeciBlockSlot& slot : model::DeciBlockSlots(s)) {
    const model::LayerSpec& a = s.layers[2 * slot.pair];
    const model::LayerSpec& m = s.layers[2 * slot.pair + 1];
    DeciBlock b;
    b.layer = slot.pair;
    b.heads = a.attention.heads;
    b.kv_heads = a.attention.kv_heads;
    b.ffn = m.mlp.ffn;
    // llama.cpp aborts on a first block without attention and drops the attention of a
    // block without FFN: exact zero stand-ins instead.
    b.zero_attention = slot.zero_attention;
    if (b.zero_attention) b.heads = b.kv_heads = 1;
    b.zero_ffn = !m.present();
    if (b.zero_ffn) b.ffn = 1;
    blocks.push_back(b);
  }
  if (blocks.empty()) return absl::InvalidArgumentError("the student keeps no block");
  return blocks;
}

// Tensors of the student's safetensors file, and zero / one stand-ins, added to a writer.
class DeciTensors {
 public:
  DeciTensors(const model::SafetensorsFile& weights, GgufWriter& w) : weights_(weights), w_(w) {}

  absl::Status Student(const std::string& internal, const std::string& gguf,
                       std::vector<int64_t> row_order = {}) {
    const model::TensorEntry* e = weights_.Find(internal);
    if (e == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(weights_.source(), ": no tensor ", internal, " (for ", gguf, ")"));
    }
    if (e->dtype != model::DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(weights_.source(), ": ", internal, " is ",
                                                     model::DTypeName(e->dtype), ", want F32"));
    }
    const absl::string_view bytes = weights_.Bytes(*e);
    hf::TensorView view{&e->name, &weights_.source(), e->dtype, &e->shape, bytes.data(),
                        bytes.size()};
    return w_.AddTensor(gguf, e->shape, TensorType::kF32,
                        CheckpointTensorSource(view, TensorType::kF32, std::move(row_order)));
  }

  // A tensor of `shape` holding `value` everywhere (0 or 1).
  absl::Status Constant(const std::string& gguf, const std::vector<int64_t>& shape,
                        float value) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const std::vector<float> values(n, value);
    buffers_.emplace_back(reinterpret_cast<const char*>(values.data()), n * sizeof(float));
    constant_bytes_ += static_cast<int64_t>(buffers_.back().size());
    return w_.AddTensorBytes(gguf, shape, TensorType::kF32, buffers_.back().data(),
                             buffers_.back().size());
  }

  // Bytes of every Constant so far: the stand-ins' weights, which the student does not have.
  int64_t constant_bytes() const { return constant_bytes_; }

 private:
  const model::SafetensorsFile& weights_;
  GgufWriter& w_;
  std::deque<std::string> buffers_;  // outlive Write (AddTensorBytes keeps pointers)
  int64_t constant_bytes_ = 0;
};

// Block `index` of the file; `d` is the head dim (the parent's, which pruning keeps).
absl::Status AddDeciBlock(const DeciBlock& b, int64_t index, int64_t h, int64_t d,
                          DeciTensors& t) {
  const std::string blk = absl::StrCat("blk.", index, ".");
  const std::string attn = absl::StrCat("layers.", 2 * b.layer, ".");
  const std::string mlp = absl::StrCat("layers.", 2 * b.layer + 1, ".");
  if (b.zero_attention) {
    TAILOR_RETURN_IF_ERROR(t.Constant(blk + "attn_norm.weight", {h}, 1.0f));
    for (const char* name : {"attn_q", "attn_k", "attn_v"}) {
      TAILOR_RETURN_IF_ERROR(t.Constant(absl::StrCat(blk, name, ".weight"), {d, h}, 0.0f));
    }
    TAILOR_RETURN_IF_ERROR(t.Constant(blk + "attn_output.weight", {h, d}, 0.0f));
  } else if (b.heads > 0) {
    TAILOR_RETURN_IF_ERROR(t.Student(attn + "norm", blk + "attn_norm.weight"));
    TAILOR_RETURN_IF_ERROR(t.Student(attn + "attention.q_proj", blk + "attn_q.weight",
                                     RopeInterleaveRows(b.heads * d, b.heads)));
    TAILOR_RETURN_IF_ERROR(t.Student(attn + "attention.k_proj", blk + "attn_k.weight",
                                     RopeInterleaveRows(b.kv_heads * d, b.kv_heads)));
    TAILOR_RETURN_IF_ERROR(t.Student(attn + "attention.v_proj", blk + "attn_v.weight"));
    TAILOR_RETURN_IF_ERROR(t.Student(attn + "attention.o_proj", blk + "attn_output.weight"));
  }
  if (b.zero_ffn) {
    TAILOR_RETURN_IF_ERROR(t.Constant(blk + "ffn_norm.weight", {h}, 1.0f));
    TAILOR_RETURN_IF_ERROR(t.Constant(blk + "ffn_gate.weight", {1, h}, 0.0f));
    TAILOR_RETURN_IF_ERROR(t.Constant(blk + "ffn_up.weight", {1, h}, 0.0f));
    return t.Constant(blk + "ffn_down.weight", {h, 1}, 0.0f);
  }
  TAILOR_RETURN_IF_ERROR(t.Student(mlp + "norm", blk + "ffn_norm.weight"));
  TAILOR_RETURN_IF_ERROR(t.Student(mlp + "mlp.w_gate", blk + "ffn_gate.weight"));
  TAILOR_RETURN_IF_ERROR(t.Student(mlp + "mlp.w_up", blk + "ffn_up.weight"));
  return t.Student(mlp + "mlp.w_down", blk + "ffn_down.weight");
}

absl::Status AddDeciMetadata(const hf::HfConfig& p, const model::HybridConfig& s,
                             const std::vector<DeciBlock>& blocks, const std::string& name,
                             GgufWriter& w) {
  std::vector<int32_t> heads, kv_heads, ffn;
  const int64_t head_dim = p.head_dim;
  for (const DeciBlock& b : blocks) {
    heads.push_back(static_cast<int32_t>(b.heads));
    kv_heads.push_back(static_cast<int32_t>(b.kv_heads));
    ffn.push_back(static_cast<int32_t>(b.ffn));
  }
  const std::string a = "deci";
  const std::vector<std::pair<std::string, Value>> kv = {
      {"general.architecture", a},
      {"general.name", name},
      {"general.file_type", uint32_t{0}},
      {a + ".vocab_size", static_cast<uint32_t>(s.vocab)},
      {a + ".context_length", static_cast<uint32_t>(p.max_position_embeddings)},
      {a + ".embedding_length", static_cast<uint32_t>(s.hidden)},
      {a + ".block_count", static_cast<uint32_t>(blocks.size())},
      {a + ".feed_forward_length", ffn},
      {a + ".attention.head_count", heads},
      {a + ".attention.head_count_kv", kv_heads},
      {a + ".attention.key_length", static_cast<uint32_t>(head_dim)},
      {a + ".attention.value_length", static_cast<uint32_t>(head_dim)},
      {a + ".attention.layer_norm_rms_epsilon", static_cast<float>(p.rms_norm_eps)},
      {a + ".rope.dimension_count", static_cast<uint32_t>(head_dim)},
      {a + ".rope.freq_base", static_cast<float>(p.rope_theta)},
  };
  for (const auto& [key, value] : kv) TAILOR_RETURN_IF_ERROR(w.Add(key, value));
  return absl::OkStatus();
}

absl::StatusOr<StudentGgufSummary> ExportDeci(const std::string& student_dir,
                                              const model::HybridConfig& s,
                                              const hf::HfCheckpoint& parent,
                                              const std::string& path,
                                              const GgufExportOptions& options) {
  const hf::HfConfig& p = parent.config();
  TAILOR_RETURN_IF_ERROR(RefuseForDeci(p));
  TAILOR_ASSIGN_OR_RETURN(std::vector<DeciBlock> blocks, DeciBlocks(s, p.num_hidden_layers));
  TAILOR_ASSIGN_OR_RETURN(model::SafetensorsFile weights,
                          model::SafetensorsFile::Read(student_dir + "/model.safetensors"));
  GgufWriter w;
  TAILOR_RETURN_IF_ERROR(AddDeciMetadata(p, s, blocks, GgufModelName(student_dir, options), w));
  TAILOR_RETURN_IF_ERROR(AddVocabularyKeys(BuildVocabulary(parent), w));
  DeciTensors t(weights, w);
  TAILOR_RETURN_IF_ERROR(t.Student("embed", "token_embd.weight"));
  TAILOR_RETURN_IF_ERROR(t.Student("final_norm", "output_norm.weight"));
  if (!s.tie_embeddings) TAILOR_RETURN_IF_ERROR(t.Student("lm_head", "output.weight"));
  std::vector<float> factors;
  if (p.rope_scaling.type == hf::RopeScaling::Type::kLlama3) {
    factors = Llama3RopeFactors(p);
    TAILOR_RETURN_IF_ERROR(w.AddTensorBytes(
        "rope_freqs.weight", {static_cast<int64_t>(factors.size())}, TensorType::kF32,
        reinterpret_cast<const char*>(factors.data()), factors.size() * sizeof(float)));
  }
  StudentGgufSummary summary;
  summary.arch = "deci";
  for (size_t i = 0; i < blocks.size(); ++i) {
    TAILOR_RETURN_IF_ERROR(
        AddDeciBlock(blocks[i], static_cast<int64_t>(i), s.hidden, p.head_dim, t));
    summary.zero_attention += blocks[i].zero_attention;
    summary.zero_ffn += blocks[i].zero_ffn;
    if (blocks[i].zero_attention) {
      summary.stand_in_layers.push_back(model::LayerSpec::Attention(1, 1, p.head_dim));
    }
    if (blocks[i].zero_ffn) summary.stand_in_layers.push_back(model::LayerSpec::Mlp(1));
  }
  summary.blocks = static_cast<int64_t>(blocks.size());
  summary.stand_in_bytes = t.constant_bytes();
  TAILOR_RETURN_IF_ERROR(w.Write(path));
  return summary;
}

// --- Nemotron-H ---------------------------------------------------------------------------

constexpr absl::string_view kNemotronStudent = "a NemotronHForCausalLM student";

absl::Status RefuseNemotronH(int64_t layer, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat(kNemotronStudent, " has no `nemotron_h` GGUF: ",
                                               "layer ", layer, " ", why));
}

// The first kept layer of a kind, for the widths llama.cpp keeps global.
struct FirstOfKind {
  int64_t layer = -1;
  model::LayerSpec spec;
};

// A Mamba layer against the first kept one: llama.cpp sizes every Mamba block from the
// global ssm.* keys.
absl::Status CheckMamba(int64_t i, const model::MambaSpec& m, const hf::MambaConfig& parent,
                        FirstOfKind& first) {
  if (m.head_dim != parent.head_dim || m.state != parent.state_size ||
      m.groups != parent.n_groups || m.conv_kernel != parent.conv_kernel) {
    return RefuseNemotronH(i, "changes the Mamba head size, state, groups or conv width; "
                              "`nemotron_h` has them once, from the parent");
  }
  if (first.layer < 0) {
    first = {i, model::LayerSpec()};
    first.spec.mamba = m;
  } else if (m.heads != first.spec.mamba.heads) {
    return RefuseNemotronH(
        i, absl::StrCat("keeps ", m.heads, " Mamba heads and layer ", first.layer, " keeps ",
                        first.spec.mamba.heads, ": llama.cpp's `nemotron_h` has one "
                        "ssm.time_step_rank / ssm.inner_size for every Mamba layer"));
  }
  return absl::OkStatus();
}

// An 'E' layer against the first kept one: n_expert, the top-k and the shared expert's
// width are global in `nemotron_h_moe`; the expert width is per block.
absl::Status CheckMoe(int64_t i, const model::MoeSpec& m, FirstOfKind& first) {
  if (m.experts == 0) {
    return RefuseNemotronH(i, "keeps its shared expert but no routed expert; "
                              "`nemotron_h_moe` has one expert_count for every 'E' layer");
  }
  if (m.experts <= std::max<int64_t>(1, m.groups)) {
    return RefuseNemotronH(i, absl::StrCat("keeps ", m.experts, " experts in ",
                                           std::max<int64_t>(1, m.groups),
                                           " routing groups; llama.cpp aborts unless there are "
                                           "more experts than groups"));
  }
  if (m.shared_ffn == 0) {
    return RefuseNemotronH(i, "keeps routed experts without the shared expert; "
                              "`nemotron_h_moe` needs the shared expert in every 'E' layer");
  }
  if (first.layer < 0) {
    first = {i, model::LayerSpec()};
    first.spec.moe = m;
    return absl::OkStatus();
  }
  const model::MoeSpec& f = first.spec.moe;
  if (m.experts != f.experts || m.top_k != f.top_k || m.shared_ffn != f.shared_ffn ||
      !m.SameVariant(f)) {
    return RefuseNemotronH(
        i, absl::StrCat("has ", m.experts, " experts (top ", m.top_k, ", shared width ",
                        m.shared_ffn, ") and layer ", first.layer, " ", f.experts, " (top ",
                        f.top_k, ", shared width ", f.shared_ffn, "): `nemotron_h_moe` has one "
                        "expert_count, expert_used_count and shared expert width"));
  }
  return absl::OkStatus();
}

// The exact zero blocks StudentNemotronHShape adds to a student without attention or without
// Mamba, as tailor's layers: one attention head without RoPE, and a Mamba block of one head
// per B/C group.
std::vector<model::StandInLayer> NemotronHStandIns(const hf::HfConfig& p) {
  const NemotronHShape shape = NemotronHShapeOf(p);
  model::LayerSpec attention = model::LayerSpec::Attention(1, 1, shape.head_dim);
  attention.attention.rope = false;
  hf::MambaConfig mamba = shape.mamba;
  mamba.num_heads = p.mamba.n_groups;
  return {{model::LayerKind::kAttention, attention},
          {model::LayerKind::kMamba, hf::NemotronHMambaLayer(mamba)}};
}

// Blocks of the file that are zero stand-ins (see the header), -1 when none.
struct NemotronHStandInBlocks {
  int64_t attention = -1;
  int64_t mamba = -1;
};

// The file's blocks: every layer the student keeps, in order (a removed layer adds nothing
// to the residual stream, so leaving its block out computes the same function), then the
// stand-ins llama.cpp needs. `blocks_of` maps kept layer -> block.
absl::StatusOr<NemotronHShape> StudentNemotronHShape(const hf::HfConfig& p,
                                                     const model::HybridConfig& s,
                                                     std::map<int64_t, int64_t>& blocks_of,
                                                     NemotronHStandInBlocks& stand_ins) {
  if (s.num_layers() != static_cast<int64_t>(p.layers.size())) {
    return absl::InvalidArgumentError(absl::StrCat("the student has ", s.num_layers(),
                                                   " layers; a child of this parent has ",
                                                   p.layers.size()));
  }
  NemotronHShape shape = NemotronHShapeOf(p);
  shape.vocab = s.vocab;
  shape.hidden = s.hidden;  // a child may keep fewer residual channels
  shape.blocks.clear();
  FirstOfKind mamba, moe;
  for (int64_t i = 0; i < s.num_layers(); ++i) {
    const model::LayerSpec& l = s.layers[i];
    if (!l.present()) continue;
    NemotronHBlock b;
    b.kind = p.layers[i];
    if (b.kind == hf::LayerKind::kMamba) {
      TAILOR_RETURN_IF_ERROR(CheckMamba(i, l.mamba, p.mamba, mamba));
    } else if (b.kind == hf::LayerKind::kAttention) {
      if (l.attention.head_dim != p.head_dim) {
        return RefuseNemotronH(i, "changes the attention head size; `nemotron_h` has one "
                                  "attention.key_length");
      }
      b.heads = l.attention.heads;
      b.kv_heads = l.attention.kv_heads;
    } else if (b.kind == hf::LayerKind::kMlp) {
      b.ffn = l.mlp.ffn;
    } else {
      TAILOR_RETURN_IF_ERROR(CheckMoe(i, l.moe, moe));
      b.ffn = l.moe.expert_ffn;
    }
    blocks_of[i] = static_cast<int64_t>(shape.blocks.size());
    shape.blocks.push_back(b);
  }
  // llama.cpp aborts on a nemotron_h without attention blocks (an empty KV cache buffer) or
  // without Mamba blocks: one exact zero stand-in of each that is missing, at the end.
  if (!shape.has(hf::LayerKind::kAttention)) {
    stand_ins.attention = static_cast<int64_t>(shape.blocks.size());
    shape.blocks.push_back({hf::LayerKind::kAttention, 1, 1, 0});
  }
  if (mamba.layer >= 0) {
    shape.mamba.num_heads = mamba.spec.mamba.heads;
  } else {
    stand_ins.mamba = static_cast<int64_t>(shape.blocks.size());
    shape.mamba.num_heads = p.mamba.n_groups;  // one head per B/C group
    shape.blocks.push_back({hf::LayerKind::kMamba, 0, 0, 0});
  }
  if (moe.layer >= 0) {
    shape.moe.num_experts = moe.spec.moe.experts;
    shape.moe.experts_per_token = moe.spec.moe.top_k;
    shape.moe.shared_intermediate = moe.spec.moe.shared_ffn;
  }
  for (const NemotronHBlock& b : shape.blocks) {
    if (b.kind == hf::LayerKind::kAttention) shape.head_count = b.heads;
  }
  return shape;
}

// A tensor of the student's safetensors file as a view (F32, as tailor saves students).
absl::StatusOr<hf::TensorView> StudentView(const model::SafetensorsFile& weights,
                                           const std::string& internal) {
  const model::TensorEntry* e = weights.Find(internal);
  if (e == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(weights.source(), ": no tensor ", internal));
  }
  if (e->dtype != model::DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(weights.source(), ": ", internal, " is ",
                                                   model::DTypeName(e->dtype), ", want F32"));
  }
  const absl::string_view bytes = weights.Bytes(*e);
  return hf::TensorView{&e->name, &weights.source(), e->dtype, &e->shape, bytes.data(),
                        bytes.size()};
}

// The views one after the other: rows of a row-major tensor (in_proj = z | x | B,C | dt).
TensorSource ConcatSource(std::vector<hf::TensorView> views) {
  return [views](const ByteSink& sink) -> absl::Status {
    for (const hf::TensorView& v : views) {
      TAILOR_RETURN_IF_ERROR(CheckpointTensorSource(v, TensorType::kF32)(sink));
    }
    return absl::OkStatus();
  };
}

// "backbone.layers.<layer>.<rest>" -> the layer, or -1 for the model's own tensors.
int64_t HfLayerOf(const std::string& hf) {
  constexpr absl::string_view kPrefix = "backbone.layers.";
  if (!absl::StartsWith(hf, kPrefix)) return -1;
  return std::stoll(hf.substr(kPrefix.size()));
}

// One GGUF tensor from the internal tensors its HF tensor is split into (the import's
// slices, put back in row order), for block `block` of the file.
absl::Status AddNemotronHTensor(const std::vector<const hf::NemotronHTensorSlice*>& parts,
                                int64_t layer, int64_t block, int64_t n_groups,
                                const model::SafetensorsFile& weights, GgufWriter& w) {
  const hf::NemotronHTensorSlice& first = *parts.front();
  std::string gguf;
  if (first.expert >= 0) {  // the stacked [E, rows, cols] tensor is ffn_*_exps as it is
    gguf = NemotronHExpertsGgufName(
        block, absl::StrContains(first.hf, ".up_proj.") ? "up_proj" : "down_proj");
  } else {
    std::string hf = first.hf;
    if (layer >= 0) {
      const std::string from = absl::StrCat("backbone.layers.", layer, ".");
      hf = absl::StrCat("backbone.layers.", block, ".", hf.substr(from.size()));
    }
    TAILOR_ASSIGN_OR_RETURN(gguf, NemotronHGgufTensorName(hf));
  }
  std::vector<hf::TensorView> views;
  std::vector<int64_t> shape;
  for (const hf::NemotronHTensorSlice* s : parts) {
    TAILOR_ASSIGN_OR_RETURN(hf::TensorView v, StudentView(weights, s->internal));
    if (shape.empty()) {
      shape = *v.shape;
    } else {
      shape[0] += (*v.shape)[0];
    }
    views.push_back(v);
  }
  const std::vector<int64_t> gguf_shape = NemotronHGgufShape(gguf, shape, n_groups).first;
  TensorSource source = ConcatSource(std::move(views));
  if (absl::EndsWith(gguf, ".ssm_a")) source = NemotronHNegExpSource(std::move(source));
  return w.AddTensor(gguf, gguf_shape, TensorType::kF32, std::move(source));
}

// Every tensor of the kept layers and the model's own, named as the HF path names them.
absl::Status AddNemotronHStudentTensors(const hf::HfConfig& p,
                                        const std::map<int64_t, int64_t>& blocks_of,
                                        const model::SafetensorsFile& weights, GgufWriter& w) {
  TAILOR_ASSIGN_OR_RETURN(std::vector<hf::NemotronHTensorSlice> slices,
                          hf::NemotronHTensorSlices(p));
  std::vector<std::string> order;  // HF tensors (stacked experts: expert 0's), first seen
  std::map<std::string, std::vector<const hf::NemotronHTensorSlice*>> parts;
  for (const hf::NemotronHTensorSlice& s : slices) {
    if (s.expert > 0) continue;
    if (parts[s.hf].empty()) order.push_back(s.hf);
    parts[s.hf].push_back(&s);
  }
  for (const std::string& hf : order) {
    std::vector<const hf::NemotronHTensorSlice*>& in = parts[hf];
    std::stable_sort(in.begin(), in.end(), [](const auto* a, const auto* b) {
      return a->row_begin < b->row_begin;
    });
    const int64_t layer = HfLayerOf(hf);
    const auto block = blocks_of.find(layer);
    if (layer >= 0 && block == blocks_of.end()) continue;  // removed whole
    TAILOR_RETURN_IF_ERROR(AddNemotronHTensor(in, layer, layer >= 0 ? block->second : -1,
                                              p.mamba.n_groups, weights, w));
  }
  return absl::OkStatus();
}

// Block `block` as attention that adds exactly 0: zero Q/K/V give uniform weights over zero
// values, and the output projection is zero (one query and one KV head).
absl::Status AddZeroAttentionBlock(int64_t block, int64_t h, int64_t d, DeciTensors& t) {
  const std::string blk = absl::StrCat("blk.", block, ".");
  TAILOR_RETURN_IF_ERROR(t.Constant(blk + "attn_norm.weight", {h}, 1.0f));
  for (const char* name : {"attn_q", "attn_k", "attn_v"}) {
    TAILOR_RETURN_IF_ERROR(t.Constant(absl::StrCat(blk, name, ".weight"), {d, h}, 0.0f));
  }
  return t.Constant(blk + "attn_output.weight", {h, d}, 0.0f);
}

// Block `block` as a Mamba mixer that adds exactly 0: every projection and the conv zero
// (x, B, C, z and the scan's output 0; the gated norm of 0 is 0), A = -1, and the output
// projection zero. Sized by the file's global ssm.* keys.
absl::Status AddZeroMambaBlock(int64_t block, int64_t h, const hf::MambaConfig& m,
                               DeciTensors& t) {
  const std::string blk = absl::StrCat("blk.", block, ".");
  const int64_t inner = m.intermediate_size(), conv = m.conv_dim();
  TAILOR_RETURN_IF_ERROR(t.Constant(blk + "attn_norm.weight", {h}, 1.0f));
  TAILOR_RETURN_IF_ERROR(t.Constant(blk + "ssm_in.weight", {inner + conv + m.num_heads, h}, 0));
  TAILOR_RETURN_IF_ERROR(t.Constant(blk + "ssm_conv1d.weight", {conv, m.conv_kernel}, 0.0f));
  TAILOR_RETURN_IF_ERROR(t.Constant(blk + "ssm_conv1d.bias", {conv}, 0.0f));
  TAILOR_RETURN_IF_ERROR(t.Constant(blk + "ssm_dt.bias", {m.num_heads}, 0.0f));
  TAILOR_RETURN_IF_ERROR(t.Constant(blk + "ssm_a", {m.num_heads, 1}, -1.0f));
  TAILOR_RETURN_IF_ERROR(t.Constant(blk + "ssm_d", {m.num_heads, 1}, 0.0f));
  TAILOR_RETURN_IF_ERROR(
      t.Constant(blk + "ssm_norm.weight", {m.n_groups, inner / m.n_groups}, 1.0f));
  return t.Constant(blk + "ssm_out.weight", {h, inner}, 0.0f);
}

// The student's own GGUF, written from its tensors with the HF export's names and keys.
absl::StatusOr<StudentGgufSummary> ExportNemotronH(const std::string& student_dir,
                                                   const model::HybridConfig& s,
                                                   const hf::HfCheckpoint& parent,
                                                   const std::string& path,
                                                   const GgufExportOptions& options) {
  const hf::HfConfig& p = parent.config();
  std::map<int64_t, int64_t> blocks_of;
  NemotronHStandInBlocks stand_ins;
  TAILOR_ASSIGN_OR_RETURN(NemotronHShape shape,
                          StudentNemotronHShape(p, s, blocks_of, stand_ins));
  TAILOR_ASSIGN_OR_RETURN(std::string arch, NemotronHGgufArchitecture(shape, kNemotronStudent));
  TAILOR_ASSIGN_OR_RETURN(model::SafetensorsFile weights,
                          model::SafetensorsFile::Read(student_dir + "/model.safetensors"));
  GgufWriter w;
  TAILOR_RETURN_IF_ERROR(AddNemotronHMetadata(shape, arch, GgufModelName(student_dir, options),
                                              /*file_type=*/0, w));
  TAILOR_RETURN_IF_ERROR(AddVocabularyKeys(BuildVocabulary(parent), w));
  // As the HF export: the dense Nemotron-H's tokenizer adds BOS by template.
  if (arch == "nemotron_h") TAILOR_RETURN_IF_ERROR(w.Add("tokenizer.ggml.add_bos_token", true));
  TAILOR_RETURN_IF_ERROR(AddNemotronHStudentTensors(p, blocks_of, weights, w));
  DeciTensors constants(weights, w);  // the stand-ins' tensors live until Write
  if (stand_ins.attention >= 0) {
    TAILOR_RETURN_IF_ERROR(
        AddZeroAttentionBlock(stand_ins.attention, shape.hidden, shape.head_dim, constants));
  }
  if (stand_ins.mamba >= 0) {
    TAILOR_RETURN_IF_ERROR(
        AddZeroMambaBlock(stand_ins.mamba, shape.hidden, shape.mamba, constants));
  }
  TAILOR_RETURN_IF_ERROR(w.Write(path));
  StudentGgufSummary summary;
  summary.arch = arch;
  summary.zero_attention = stand_ins.attention >= 0;
  summary.zero_mamba = stand_ins.mamba >= 0;
  summary.stand_in_bytes = constants.constant_bytes();
  for (const model::StandInLayer& l : NemotronHStandIns(p)) {
    if (l.absent == model::LayerKind::kAttention ? summary.zero_attention : summary.zero_mamba) {
      summary.stand_in_layers.push_back(l.spec);
    }
  }
  summary.blocks = static_cast<int64_t>(shape.blocks.size());
  return summary;
}

// Through the family's HF layout, in a scratch folder beside `path`.
absl::StatusOr<StudentGgufSummary> ExportFamily(const std::string& student_dir,
                                                const hf::HfCheckpoint& parent,
                                                const std::string& path,
                                                const GgufExportOptions& options) {
  const std::string scratch = path + ".hf.tmp";
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  hf::HfExportOptions hf_options;
  if (options.all_f32) hf_options.dtype = model::DType::kF32;
  absl::StatusOr<hf::HfExportSummary> hf =
      hf::ExportStudentAsHf(student_dir, parent, scratch, hf_options);
  if (!hf.ok()) return hf.status();
  absl::StatusOr<hf::HfCheckpoint> checkpoint = hf::HfCheckpoint::Open(scratch);
  absl::StatusOr<GgufExportSummary> gguf =
      checkpoint.ok() ? ExportHfToGguf(*checkpoint, path, options)
                      : absl::StatusOr<GgufExportSummary>(checkpoint.status());
  std::filesystem::remove_all(scratch, ec);
  if (!gguf.ok()) return gguf.status();
  StudentGgufSummary summary;
  summary.arch = gguf->arch;
  summary.blocks = hf->layout.config.num_hidden_layers;
  return summary;
}

}  // namespace

StudentShapeRules StudentShapeRulesOf(const hf::HfConfig& parent) {
  StudentShapeRules rules;
  const absl::Status deci =
      parent.family == hf::Family::kNemotronH ? absl::OkStatus() : RefuseForDeci(parent);
  if (!deci.ok()) {
    rules.per_layer_widths = false;
    rules.why = std::string(deci.message());
  } else if (parent.family != hf::Family::kNemotronH) {
    rules.kv_cache_layout = model::KvCacheLayout::kDeciBlocks;
  }
  if (parent.family == hf::Family::kNemotronH && parent.moe.shared_intermediate > 0 &&
      parent.moe.num_experts > 0) {
    rules.keep_shared_experts = true;
    rules.why = absl::StrCat(rules.why, rules.why.empty() ? "" : "; ",
                             "llama.cpp's `nemotron_h_moe` needs every 'E' layer's shared expert "
                             "at one width, so an MoE layer keeps it whole or is removed whole");
  }
  if (parent.family == hf::Family::kNemotronH) rules.stand_ins = NemotronHStandIns(parent);
  if (parent.architecture == hf::Architecture::kQwen2) {
    rules.prune_hidden_and_heads = false;
    rules.why = absl::StrCat(rules.why, rules.why.empty() ? "" : "; ",
                             "llama.cpp's `qwen2` sizes attn_q by the hidden width, so a Qwen2 "
                             "student keeps its hidden width and attention heads");
  }
  return rules;
}

absl::StatusOr<StudentGgufSummary> ExportStudentToGguf(const std::string& student_dir,
                                                       const hf::HfCheckpoint& parent,
                                                       const std::string& path,
                                                       const GgufExportOptions& options) {
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig student,
                          model::ReadHybridConfig(student_dir + "/config.json"));
  // Written directly, uniform or not: nemotron_h takes per-layer widths itself.
  if (parent.config().family == hf::Family::kNemotronH) {
    return ExportNemotronH(student_dir, student, parent, path, options);
  }
  absl::StatusOr<hf::FamilyLayout> family = hf::FamilyLayoutOf(parent.config(), student);
  if (family.ok()) return ExportFamily(student_dir, parent, path, options);
  if (family.status().code() != absl::StatusCode::kUnimplemented) return family.status();
  absl::StatusOr<StudentGgufSummary> deci =
      ExportDeci(student_dir, student, parent, path, options);
  if (deci.ok() || deci.status().code() != absl::StatusCode::kUnimplemented) return deci;
  return absl::UnimplementedError(
      absl::StrCat(family.status().message(), "; and ", deci.status().message()));
}

}  // namespace tailor::gguf
