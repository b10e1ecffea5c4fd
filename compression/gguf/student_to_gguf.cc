#include "compression/gguf/student_to_gguf.h"

#include <deque>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/hf/hf_export.h"
#include "compression/model/config.h"
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
  for (int64_t i = 0; i < parent_layers; ++i) {
    const model::LayerSpec& a = s.layers[2 * i];
    const model::LayerSpec& m = s.layers[2 * i + 1];
    if (!a.present() && !m.present()) continue;
    DeciBlock b;
    b.layer = i;
    b.heads = a.attention.heads;
    b.kv_heads = a.attention.kv_heads;
    b.ffn = m.mlp.ffn;
    // llama.cpp aborts on a first block without attention and drops the attention of a
    // block without FFN: exact zero stand-ins instead.
    b.zero_attention = blocks.empty() && !a.present();
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
    return w_.AddTensorBytes(gguf, shape, TensorType::kF32, buffers_.back().data(),
                             buffers_.back().size());
  }

 private:
  const model::SafetensorsFile& weights_;
  GgufWriter& w_;
  std::deque<std::string> buffers_;  // outlive Write (AddTensorBytes keeps pointers)
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
  }
  summary.blocks = static_cast<int64_t>(blocks.size());
  TAILOR_RETURN_IF_ERROR(w.Write(path));
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

absl::StatusOr<StudentGgufSummary> ExportStudentToGguf(const std::string& student_dir,
                                                       const hf::HfCheckpoint& parent,
                                                       const std::string& path,
                                                       const GgufExportOptions& options) {
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig student,
                          model::ReadHybridConfig(student_dir + "/config.json"));
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
