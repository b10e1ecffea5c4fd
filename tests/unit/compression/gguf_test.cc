// GGUF (compression/gguf): the writer's exact bytes and a round trip through the reader, the
// HF -> GGUF mapping of the Llama and Qwen3 test checkpoints, and llama.cpp itself (the
// node-llama-cpp sidecar) evaluating the exported files, compared with an FP32 forward pass
// written here from the HF tensors, and serving them (llama_cpp_serve: times and the memory
// llama.cpp reports, against exact formulas).

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "compression/gguf/gguf_reader.h"
#include "compression/gguf/gguf_writer.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/gguf/llama_cpp_serve.h"
#include "compression/gguf/llama_cpp_sidecar.h"
#include "compression/hf/hf_checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/llama_cpp_agreement.h"
#include "tests/testing/status_matchers.h"

namespace tailor::gguf {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string NewDir() { return testing::NewTestDir("gguf_"); }

std::string ReadAll(const std::string& path) {
  FILE* in = std::fopen(path.c_str(), "rb");
  std::string out;
  char buf[4096];
  size_t n;
  while (in != nullptr && (n = std::fread(buf, 1, sizeof(buf), in)) > 0) out.append(buf, n);
  if (in != nullptr) std::fclose(in);
  return out;
}

TEST(GgufWriterTest, TinyFileBytesExactly) {
  GgufWriter w;
  ASSERT_THAT(w.Add("a", uint32_t{7}), IsOk());
  const float data[2] = {1.0f, -2.0f};
  ASSERT_THAT(w.AddTensorBytes("t", {2}, TensorType::kF32, reinterpret_cast<const char*>(data),
                               sizeof(data)),
              IsOk());
  const std::string path = NewDir() + "/tiny.gguf";
  ASSERT_THAT(w.Write(path), IsOk());
  std::string expected("GGUF", 4);
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) expected.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(3, 4), put(1, 8), put(1, 8);                          // version, tensors, keys
  put(1, 8), expected += "a", put(4, 4), put(7, 4);         // "a": uint32 7
  put(1, 8), expected += "t", put(1, 4), put(2, 8);         // "t": 1 dim, ne {2}
  put(0, 4), put(0, 8);                                     // F32 at offset 0
  ASSERT_EQ(expected.size(), 74u);
  expected.resize(96, '\0');                                // aligned to 32
  expected.append(reinterpret_cast<const char*>(data), 8);
  expected.resize(128, '\0');
  EXPECT_EQ(ReadAll(path), expected);
  EXPECT_EQ(w.DataSectionOffset(), 96u);
}

TEST(GgufWriterTest, RoundTripThroughReader) {
  GgufWriter w(64);
  ASSERT_THAT(w.Add("general.architecture", std::string("llama")), IsOk());
  ASSERT_THAT(w.Add("x.i", int32_t{-5}), IsOk());
  ASSERT_THAT(w.Add("x.f", 0.25f), IsOk());
  ASSERT_THAT(w.Add("x.b", true), IsOk());
  ASSERT_THAT(w.Add("x.u64", uint64_t{1} << 40), IsOk());
  ASSERT_THAT(w.Add("x.strings", std::vector<std::string>{"a", "", "Ċ"}), IsOk());
  ASSERT_THAT(w.Add("x.ints", std::vector<int32_t>{1, -2}), IsOk());
  ASSERT_THAT(w.Add("x.floats", std::vector<float>{}), IsOk());
  EXPECT_THAT(w.Add("x.i", int32_t{1}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                  HasSubstr("key x.i added twice")));
  std::string matrix(3 * 5 * 2, '\0');
  for (size_t i = 0; i < matrix.size(); ++i) matrix[i] = static_cast<char>(i);
  ASSERT_THAT(w.AddTensorBytes("m", {3, 5}, TensorType::kBF16, matrix.data(), matrix.size()),
              IsOk());
  ASSERT_THAT(w.AddTensor("streamed", {4}, TensorType::kF16,
                          [](const ByteSink& sink) {
                            absl::Status s = sink("abcd", 4);
                            return s.ok() ? sink("efgh", 4) : s;
                          }),
              IsOk());
  EXPECT_THAT(w.AddTensorBytes(std::string(65, 'n'), {1}, TensorType::kF32, "", 4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 to 64 bytes")));
  EXPECT_THAT(w.AddTensorBytes("m", {1}, TensorType::kF32, "", 4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("GGUF tensor m [1]")));
  const std::string path = NewDir() + "/rt.gguf";
  ASSERT_THAT(w.Write(path), IsOk());

  absl::StatusOr<GgufFile> f = GgufFile::Read(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(std::get<uint32_t>(*f->Find("general.alignment")), 64u);
  EXPECT_EQ(std::get<std::string>(*f->Find("general.architecture")), "llama");
  EXPECT_EQ(std::get<int32_t>(*f->Find("x.i")), -5);
  EXPECT_EQ(std::get<float>(*f->Find("x.f")), 0.25f);
  EXPECT_TRUE(std::get<bool>(*f->Find("x.b")));
  EXPECT_EQ(std::get<uint64_t>(*f->Find("x.u64")), uint64_t{1} << 40);
  EXPECT_THAT(std::get<std::vector<std::string>>(*f->Find("x.strings")),
              ElementsAre("a", "", "Ċ"));
  EXPECT_THAT(std::get<std::vector<int32_t>>(*f->Find("x.ints")), ElementsAre(1, -2));
  EXPECT_TRUE(std::get<std::vector<float>>(*f->Find("x.floats")).empty());
  const TensorInfo* m = f->FindTensor("m");
  ASSERT_NE(m, nullptr);
  EXPECT_THAT(m->ne, ElementsAre(5, 3));  // ggml order: fastest dimension first
  EXPECT_EQ(m->type, TensorType::kBF16);
  EXPECT_EQ(f->TensorData(*m), matrix);
  const TensorInfo* s = f->FindTensor("streamed");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->offset % 64, 0u);
  EXPECT_EQ(f->TensorData(*s), "abcdefgh");
}

TEST(GgufWriterTest, SourceProducingTheWrongSizeFailsNamingTheTensorAndLeavesNoFile) {
  GgufWriter w;
  ASSERT_THAT(w.AddTensor("short", {4}, TensorType::kF32,
                          [](const ByteSink& sink) { return sink("abc", 3); }),
              IsOk());
  const std::string path = NewDir() + "/bad.gguf";
  EXPECT_THAT(w.Write(path), StatusIs(absl::StatusCode::kInternal,
                                      HasSubstr("tensor short: 3 bytes produced, 16 expected")));
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
}

TEST(GgufReaderTest, TruncatedFileIsDataLoss) {
  EXPECT_THAT(GgufFile::Parse(std::string("GGUF\3\0\0\0", 8), "x.gguf").status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("x.gguf: tensor count: truncated")));
}

// --- HF -> GGUF mapping -----------------------------------------------------------------

struct Exported {
  std::string dir;
  std::string gguf;
  GgufExportSummary summary;
};

Exported Export(absl::string_view arch, bool all_f32 = true,
                model::DType dtype = model::DType::kF32) {
  Exported e;
  e.dir = NewDir();
  testing::HfTestCheckpointOptions o;
  o.dtype = dtype;
  EXPECT_THAT(testing::WriteHfTestCheckpoint(e.dir, arch, o), IsOk());
  absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(e.dir);
  EXPECT_THAT(ckpt.status(), IsOk());
  e.gguf = e.dir + "/model.gguf";
  GgufExportOptions options;
  options.all_f32 = all_f32;
  absl::StatusOr<GgufExportSummary> s = ExportHfToGguf(*ckpt, e.gguf, options);
  EXPECT_THAT(s.status(), IsOk());
  if (s.ok()) e.summary = *s;
  return e;
}

TEST(HfToGgufTest, TensorNames) {
  EXPECT_EQ(*GgufTensorName("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(*GgufTensorName("model.layers.12.self_attn.o_proj.weight"),
            "blk.12.attn_output.weight");
  EXPECT_EQ(*GgufTensorName("model.layers.0.self_attn.q_proj.bias"), "blk.0.attn_q.bias");
  EXPECT_EQ(*GgufTensorName("model.layers.1.self_attn.k_norm.weight"),
            "blk.1.attn_k_norm.weight");
  EXPECT_EQ(*GgufTensorName("model.layers.1.post_attention_layernorm.weight"),
            "blk.1.ffn_norm.weight");
  EXPECT_EQ(*GgufTensorName("model.layers.0.block_sparse_moe.gate.weight"),
            "blk.0.ffn_gate_inp.weight");
  // Experts are written stacked (hf_to_gguf_moe.h), never one by one.
  EXPECT_THAT(GgufTensorName("model.layers.0.block_sparse_moe.experts.1.w1.weight").status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("model.layers.0.block_sparse_moe.experts.1.w1.weight")));
}

TEST(HfToGgufTest, RopeInterleaveRows) {
  // One head of 8 rows: HF pairs (0,4) (1,5) (2,6) (3,7); llama.cpp wants them adjacent.
  EXPECT_THAT(RopeInterleaveRows(8, 1), ElementsAre(0, 4, 1, 5, 2, 6, 3, 7));
  EXPECT_THAT(RopeInterleaveRows(8, 2), ElementsAre(0, 2, 1, 3, 4, 6, 5, 7));
}

TEST(HfToGgufTest, UnsupportedFamiliesAreRefusedNamingThem) {
  // Mixtral and Qwen3-MoE export now (compression_hf_moe_test).
  for (const char* arch : {"NemotronHForCausalLM"}) {
    const std::string dir = NewDir();
    ASSERT_THAT(testing::WriteHfTestCheckpoint(dir, arch), IsOk());
    absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(dir);
    ASSERT_THAT(ckpt.status(), IsOk());
    EXPECT_THAT(ExportHfToGguf(*ckpt, dir + "/m.gguf").status(),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(arch)));
    EXPECT_NE(access((dir + "/m.gguf").c_str(), F_OK), 0);
  }
}

const std::vector<float> Floats(absl::string_view bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::vector<float> HfFloats(const hf::HfCheckpoint& c, const std::string& name) {
  absl::StatusOr<hf::TensorView> t = c.Tensor(name);
  EXPECT_THAT(t.status(), IsOk());
  return Floats(absl::string_view(t->data, t->size_bytes));
}

TEST(HfToGgufTest, LlamaMetadataTensorsAndPermutation) {
  const Exported e = Export("LlamaForCausalLM");
  EXPECT_EQ(e.summary.arch, "llama");
  EXPECT_TRUE(e.summary.qk_permuted);
  absl::StatusOr<GgufFile> f = GgufFile::Read(e.gguf);
  ASSERT_THAT(f.status(), IsOk());
  auto u32 = [&](const char* k) { return std::get<uint32_t>(*f->Find(k)); };
  EXPECT_EQ(std::get<std::string>(*f->Find("general.architecture")), "llama");
  EXPECT_EQ(u32("llama.vocab_size"), 64u);
  EXPECT_EQ(u32("llama.context_length"), 128u);
  EXPECT_EQ(u32("llama.embedding_length"), 32u);
  EXPECT_EQ(u32("llama.block_count"), 2u);
  EXPECT_EQ(u32("llama.feed_forward_length"), 48u);
  EXPECT_EQ(u32("llama.attention.head_count"), 4u);
  EXPECT_EQ(u32("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(u32("llama.attention.key_length"), 8u);
  EXPECT_EQ(std::get<float>(*f->Find("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(std::get<float>(*f->Find("llama.rope.freq_base")), 500000.0f);
  EXPECT_EQ(std::get<std::string>(*f->Find("tokenizer.ggml.model")), "gpt2");
  const auto& tokens = std::get<std::vector<std::string>>(*f->Find("tokenizer.ggml.tokens"));
  ASSERT_EQ(tokens.size(), 64u);
  EXPECT_EQ(tokens[10], "Ċ");  // the byte-level newline llama.cpp looks up
  EXPECT_EQ(tokens[32], "Ġ");  // space
  EXPECT_EQ(tokens[33], "!");
  EXPECT_EQ(u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(u32("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_FALSE(e.summary.vocabulary.carried);  // the test tokenizer is not byte-level

  // 1 embedding + 2 x 9 + norm + output + rope_freqs.
  EXPECT_EQ(f->tensors().size(), 22u);
  const TensorInfo* q = f->FindTensor("blk.1.attn_q.weight");
  const TensorInfo* k = f->FindTensor("blk.1.attn_k.weight");
  ASSERT_NE(q, nullptr);
  ASSERT_NE(k, nullptr);
  EXPECT_THAT(q->ne, ElementsAre(32, 32));
  EXPECT_THAT(k->ne, ElementsAre(32, 16));
  EXPECT_THAT(f->FindTensor("blk.0.ffn_gate.weight")->ne, ElementsAre(32, 48));
  EXPECT_THAT(f->FindTensor("blk.0.ffn_down.weight")->ne, ElementsAre(48, 32));
  EXPECT_THAT(f->FindTensor("token_embd.weight")->ne, ElementsAre(32, 64));
  ASSERT_NE(f->FindTensor("output.weight"), nullptr);
  absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(e.dir);
  ASSERT_THAT(ckpt.status(), IsOk());
  const std::vector<float> hf_k = HfFloats(*ckpt, "model.layers.1.self_attn.k_proj.weight");
  const std::vector<float> gg_k = Floats(f->TensorData(*k));
  const std::vector<int64_t> order = RopeInterleaveRows(16, 2);
  for (int64_t r = 0; r < 16; ++r) {
    for (int64_t c = 0; c < 32; ++c) ASSERT_EQ(gg_k[r * 32 + c], hf_k[order[r] * 32 + c]);
  }
  EXPECT_EQ(Floats(f->TensorData(*f->FindTensor("blk.0.attn_v.weight"))),
            HfFloats(*ckpt, "model.layers.0.self_attn.v_proj.weight"));
  // llama3 scaling, factor 8, original context 64, theta 5e5, head_dim 8: the highest
  // frequency (wavelength 2 pi < 64 / 4) is unscaled, the lowest (wavelength 2 pi * 5e5^0.75
  // > 64) divided by 8.
  const std::vector<float> rope = Floats(f->TensorData(*f->FindTensor("rope_freqs.weight")));
  ASSERT_EQ(rope.size(), 4u);
  EXPECT_EQ(rope[0], 1.0f);
  EXPECT_EQ(rope[3], 8.0f);
}

TEST(HfToGgufTest, Qwen3KeepsRowOrderAndWritesQkNorms) {
  const Exported e = Export("Qwen3ForCausalLM");
  EXPECT_EQ(e.summary.arch, "qwen3");
  EXPECT_FALSE(e.summary.qk_permuted);
  absl::StatusOr<GgufFile> f = GgufFile::Read(e.gguf);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(std::get<uint32_t>(*f->Find("qwen3.attention.key_length")), 16u);
  EXPECT_EQ(std::get<uint32_t>(*f->Find("qwen3.rope.dimension_count")), 16u);
  EXPECT_THAT(f->FindTensor("blk.0.attn_q.weight")->ne, ElementsAre(32, 64));
  EXPECT_THAT(f->FindTensor("blk.0.attn_q_norm.weight")->ne, ElementsAre(16));
  EXPECT_THAT(f->FindTensor("blk.1.attn_k_norm.weight")->ne, ElementsAre(16));
  EXPECT_EQ(f->FindTensor("rope_freqs.weight"), nullptr);
  absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(e.dir);
  ASSERT_THAT(ckpt.status(), IsOk());
  EXPECT_EQ(Floats(f->TensorData(*f->FindTensor("blk.1.attn_q.weight"))),
            HfFloats(*ckpt, "model.layers.1.self_attn.q_proj.weight"));
}

TEST(HfToGgufTest, Qwen2TiedEmbeddingsHaveNoOutputAndBf16IsKept) {
  const Exported e = Export("Qwen2ForCausalLM", /*all_f32=*/false, model::DType::kBF16);
  absl::StatusOr<GgufFile> f = GgufFile::Read(e.gguf);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(e.summary.arch, "qwen2");
  EXPECT_EQ(f->FindTensor("output.weight"), nullptr);
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, TensorType::kBF16);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.bias")->type, TensorType::kF32);  // vectors F32
  EXPECT_EQ(f->FindTensor("output_norm.weight")->type, TensorType::kF32);
  EXPECT_EQ(std::get<uint32_t>(*f->Find("general.file_type")), 32u);
}

// --- llama.cpp on the exported files ----------------------------------------------------

// A straightforward FP32-weights forward pass (in double) of a Llama / Qwen3 checkpoint,
// written from the HF modeling code's definitions and reading the HF tensors, so agreement
// with llama.cpp on the GGUF shows the mapping (names, permutation, rope, metadata) right.
class Reference {
 public:
  explicit Reference(const hf::HfCheckpoint& c) : c_(c), cfg_(c.config()) {
    const int64_t half = cfg_.head_dim / 2;
    const double pi = std::acos(-1.0);
    for (int64_t i = 0; i < half; ++i) {
      double f = std::pow(cfg_.rope_theta, -2.0 * i / cfg_.head_dim);
      const hf::RopeScaling& r = cfg_.rope_scaling;
      if (r.type == hf::RopeScaling::Type::kLlama3) {  // transformers' llama3 rule
        const double old = r.original_max_position_embeddings, wavelen = 2 * pi / f;
        if (wavelen > old / r.low_freq_factor) {
          f /= r.factor;
        } else if (wavelen >= old / r.high_freq_factor) {
          const double smooth =
              (old / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
          f = (1 - smooth) * f / r.factor + smooth * f;
        }
      }
      inv_freq_.push_back(f);
    }
  }

  // Log-softmax of the next-token logits after each position.
  std::vector<std::vector<double>> LogProbs(const std::vector<int32_t>& tokens) const {
    const int64_t h = cfg_.hidden_size, n = static_cast<int64_t>(tokens.size());
    const std::vector<float> embed = W("model.embed_tokens.weight");
    std::vector<std::vector<double>> x(n, std::vector<double>(h));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < h; ++j) x[t][j] = embed[tokens[t] * h + j];
    }
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) Layer(l, x);
    const std::vector<float> norm = W("model.norm.weight");
    const std::vector<float> head =
        W(cfg_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
    std::vector<std::vector<double>> out;
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> logits = MatVec(head, RmsNorm(x[t], norm), cfg_.vocab_size);
      double mx = logits[0], sum = 0;
      for (double v : logits) mx = std::max(mx, v);
      for (double v : logits) sum += std::exp(v - mx);
      for (double& v : logits) v -= mx + std::log(sum);
      out.push_back(std::move(logits));
    }
    return out;
  }

 private:
  std::vector<float> W(const std::string& name) const { return HfFloats(c_, name); }

  static std::vector<double> MatVec(const std::vector<float>& w, const std::vector<double>& v,
                                    int64_t rows) {
    const int64_t cols = static_cast<int64_t>(v.size());
    std::vector<double> out(rows, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) out[r] += w[r * cols + c] * v[c];
    }
    return out;
  }

  std::vector<double> RmsNorm(const std::vector<double>& v, const std::vector<float>& w,
                              int64_t offset = 0, int64_t len = -1) const {
    if (len < 0) len = static_cast<int64_t>(v.size());
    double ms = 0;
    for (int64_t i = 0; i < len; ++i) ms += v[offset + i] * v[offset + i];
    const double scale = 1.0 / std::sqrt(ms / len + cfg_.rms_norm_eps);
    std::vector<double> out(len);
    for (int64_t i = 0; i < len; ++i) out[i] = v[offset + i] * scale * w[i];
    return out;
  }

  // Per-head q/k norm (Qwen3) and HF "rotate half" RoPE at position `pos`, in place.
  void HeadsRope(std::vector<double>& v, int64_t heads, int64_t pos,
                 const std::string& norm) const {
    const int64_t d = cfg_.head_dim, half = d / 2;
    const std::vector<float> w = cfg_.qk_norm ? W(norm) : std::vector<float>();
    for (int64_t hd = 0; hd < heads; ++hd) {
      if (cfg_.qk_norm) {
        const std::vector<double> n = RmsNorm(v, w, hd * d, d);
        std::copy(n.begin(), n.end(), v.begin() + hd * d);
      }
      for (int64_t i = 0; i < half; ++i) {
        const double a = pos * inv_freq_[i], x1 = v[hd * d + i], x2 = v[hd * d + i + half];
        v[hd * d + i] = x1 * std::cos(a) - x2 * std::sin(a);
        v[hd * d + i + half] = x2 * std::cos(a) + x1 * std::sin(a);
      }
    }
  }

  void Layer(int64_t l, std::vector<std::vector<double>>& x) const {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    const int64_t h = cfg_.hidden_size, d = cfg_.head_dim, nh = cfg_.num_attention_heads;
    const int64_t nkv = cfg_.num_key_value_heads, n = static_cast<int64_t>(x.size());
    const std::vector<float> wq = W(p + "self_attn.q_proj.weight"),
                             wk = W(p + "self_attn.k_proj.weight"),
                             wv = W(p + "self_attn.v_proj.weight"),
                             wo = W(p + "self_attn.o_proj.weight"),
                             in_norm = W(p + "input_layernorm.weight");
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<double> a = RmsNorm(x[t], in_norm);
      q[t] = MatVec(wq, a, nh * d);
      k[t] = MatVec(wk, a, nkv * d);
      v[t] = MatVec(wv, a, nkv * d);
      HeadsRope(q[t], nh, t, p + "self_attn.q_norm.weight");
      HeadsRope(k[t], nkv, t, p + "self_attn.k_norm.weight");
    }
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> attn(nh * d, 0.0);
      for (int64_t hd = 0; hd < nh; ++hd) {
        const int64_t g = hd / (nh / nkv);
        std::vector<double> s(t + 1);
        double mx = -1e300, sum = 0;
        for (int64_t u = 0; u <= t; ++u) {
          s[u] = 0;
          for (int64_t i = 0; i < d; ++i) s[u] += q[t][hd * d + i] * k[u][g * d + i];
          s[u] /= std::sqrt(static_cast<double>(d));
          mx = std::max(mx, s[u]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t u = 0; u <= t; ++u) {
          for (int64_t i = 0; i < d; ++i) attn[hd * d + i] += s[u] / sum * v[u][g * d + i];
        }
      }
      const std::vector<double> o = MatVec(wo, attn, h);
      for (int64_t j = 0; j < h; ++j) x[t][j] += o[j];
    }
    const std::vector<float> post = W(p + "post_attention_layernorm.weight"),
                             wg = W(p + "mlp.gate_proj.weight"), wu = W(p + "mlp.up_proj.weight"),
                             wd = W(p + "mlp.down_proj.weight");
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<double> a = RmsNorm(x[t], post);
      std::vector<double> g = MatVec(wg, a, cfg_.intermediate_size);
      const std::vector<double> u = MatVec(wu, a, cfg_.intermediate_size);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const std::vector<double> m = MatVec(wd, g, h);
      for (int64_t j = 0; j < h; ++j) x[t][j] += m[j];
    }
  }

  const hf::HfCheckpoint& c_;
  const hf::HfConfig& cfg_;
  std::vector<double> inv_freq_;
};

void CheckAgainstLlamaCpp(absl::string_view arch) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  const Exported e = Export(arch);
  const std::vector<int32_t> tokens = {1, 17, 5, 33, 60, 2, 9, 41, 41, 12, 0, 63, 28, 7, 50, 3};
  absl::StatusOr<NextTokenLogprobs> got = RunNextTokenLogprobs(e.gguf, tokens, {});
  ASSERT_THAT(got.status(), IsOk());
  EXPECT_EQ(got->node_llama_cpp_version, "3.21.1");
  ASSERT_EQ(got->vocab_size, 64);
  ASSERT_EQ(got->logprobs.size(), tokens.size());
  absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(e.dir);
  ASSERT_THAT(ckpt.status(), IsOk());
  const std::vector<std::vector<double>> ref = Reference(*ckpt).LogProbs(tokens);
  double max_kl = 0;
  int argmax_agree = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    double mass = 0, kl = 0;
    int64_t a_ref = 0, a_got = 0;
    for (int64_t v = 0; v < 64; ++v) {
      const double lp = got->logprobs[t][v];
      ASSERT_TRUE(std::isfinite(lp)) << "position " << t << " token " << v;
      mass += std::exp(lp);
      kl += std::exp(ref[t][v]) * (ref[t][v] - lp);
      if (ref[t][v] > ref[t][a_ref]) a_ref = v;
      if (lp > got->logprobs[t][a_got]) a_got = v;
    }
    EXPECT_NEAR(mass, 1.0, 1e-4) << "position " << t;
    max_kl = std::max(max_kl, kl);
    argmax_agree += a_ref == a_got;
  }
  std::printf("%s: llama.cpp %s vs FP32 reference over %zu positions: max KL %.3g, argmax "
              "agreement %d/%zu\n",
              std::string(arch).c_str(), got->llama_cpp_release.c_str(), tokens.size(), max_kl,
              argmax_agree, tokens.size());
  EXPECT_LE(max_kl, 1e-4);
}

TEST(LlamaCppSidecarTest, LlamaExportMatchesReference) { CheckAgainstLlamaCpp("LlamaForCausalLM"); }
TEST(LlamaCppSidecarTest, Qwen3ExportMatchesReference) { CheckAgainstLlamaCpp("Qwen3ForCausalLM"); }

TEST(LlamaCppSidecarTest, FailuresAreErrorsNotCrashes) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  const std::string dir = NewDir();
  // Not a GGUF: the child exits non-zero and the error carries its message.
  FILE* f = std::fopen((dir + "/bad.gguf").c_str(), "wb");
  std::fputs("not a gguf", f);
  std::fclose(f);
  EXPECT_THAT(RunNextTokenLogprobs(dir + "/bad.gguf", {1, 2}, {}).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("exit code 1")));
  // A child that aborts (as llama.cpp does on GGML_ASSERT) is reported by its signal.
  const std::string abort_script = dir + "/abort.mjs";
  f = std::fopen(abort_script.c_str(), "wb");
  std::fputs("process.stderr.write('GGML_ASSERT(x) failed\\n'); process.abort();\n", f);
  std::fclose(f);
  SidecarOptions options;
  options.script = abort_script;
  EXPECT_THAT(RunNextTokenLogprobs(dir + "/bad.gguf", {1}, {}, options).status(),
              StatusIs(absl::StatusCode::kInternal,
                       ::testing::AllOf(HasSubstr("signal 6 (Aborted)"),
                                        HasSubstr("GGML_ASSERT(x) failed"))));
  EXPECT_THAT(RunNextTokenLogprobsBatch(dir + "/bad.gguf", {{1}, {2}}, {}, options).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("signal 6 (Aborted)")));
  // A hang is killed at the timeout.
  const std::string hang_script = dir + "/hang.mjs";
  f = std::fopen(hang_script.c_str(), "wb");
  std::fputs("setInterval(() => {}, 1000);\n", f);
  std::fclose(f);
  options.script = hang_script;
  options.timeout = absl::Milliseconds(500);
  EXPECT_THAT(RunNextTokenLogprobs(dir + "/bad.gguf", {1}, {}, options).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("timeout")));
}

// The batch answer: one result per prompt, each with its own positions and rows.
TEST(LlamaCppSidecarBatchTest, OutputIsParsedPromptByPrompt) {
  const std::string json = R"({"vocab_size": 2, "results": [)"
                           R"({"positions": [0, 1], "logprobs": [[-0.5, -1.0], [null, 0.0]]},)"
                           R"({"positions": [1], "logprobs": [[-2.0, -0.25]]}],)"
                           R"( "node_llama_cpp": "3.21.1", "llama_cpp": "b1"})";
  absl::StatusOr<std::vector<NextTokenLogprobs>> got = ParseSidecarBatchOutput(json, 2);
  ASSERT_THAT(got.status(), IsOk());
  ASSERT_EQ(got->size(), 2u);
  const NextTokenLogprobs& a = (*got)[0];
  EXPECT_EQ(a.vocab_size, 2);
  EXPECT_THAT(a.positions, ElementsAre(0, 1));
  EXPECT_THAT(a.logprobs[0], ElementsAre(-0.5, -1.0));
  EXPECT_EQ(a.logprobs[1][0], -std::numeric_limits<double>::infinity());  // underflowed
  EXPECT_EQ(a.node_llama_cpp_version, "3.21.1");
  EXPECT_EQ(a.llama_cpp_release, "b1");
  const NextTokenLogprobs& b = (*got)[1];
  EXPECT_THAT(b.positions, ElementsAre(1));
  EXPECT_THAT(b.logprobs, ElementsAre(ElementsAre(-2.0, -0.25)));
  EXPECT_EQ(b.node_llama_cpp_version, "3.21.1");
}

TEST(LlamaCppSidecarBatchTest, MalformedOutputIsAnErrorNamingWhatIsWrong) {
  const auto error = [](const std::string& json, size_t prompts) {
    return ParseSidecarBatchOutput(json, prompts).status();
  };
  EXPECT_THAT(error("Segmentation fault", 1),
              StatusIs(absl::StatusCode::kInternal,
                       ::testing::StrEq("llama.cpp sidecar: unexpected output: Segmentation "
                                        "fault")));
  EXPECT_THAT(error(R"({"vocab_size": 2, "results": {}})", 1),
              StatusIs(absl::StatusCode::kInternal,
                       ::testing::StrEq("llama.cpp sidecar: vocab_size or results malformed")));
  const std::string one = R"({"positions": [0], "logprobs": [[-0.5, -1.0]]})";
  EXPECT_THAT(error(absl::StrCat(R"({"vocab_size": 2, "results": [)", one, "]}"), 2),
              StatusIs(absl::StatusCode::kInternal,
                       ::testing::StrEq("llama.cpp sidecar: 1 results for 2 prompts")));
  EXPECT_THAT(
      error(absl::StrCat(R"({"vocab_size": 2, "results": [)", one,
                         R"(, {"positions": [0], "logprobs": [[-0.5]]}]})"),
            2),
      StatusIs(absl::StatusCode::kInternal,
               ::testing::StrEq("llama.cpp sidecar: prompt 1: a row has 1 values, vocab_size "
                                "is 2")));
  EXPECT_THAT(
      error(absl::StrCat(R"({"vocab_size": 2, "results": [)", one, R"(, {"rows": []}]})"), 2),
      StatusIs(absl::StatusCode::kInternal,
               ::testing::StrEq("llama.cpp sidecar: prompt 1: positions or logprobs "
                                "missing or not arrays")));
}

// The request travels on the child's stdin, and the whole batch runs under one timeout
// scaled by the number of prompts. A stand-in script: needs node only.
TEST(LlamaCppSidecarBatchTest, RequestGoesOnStdinAndTheTimeoutScalesWithThePrompts) {
  if (std::system("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not on PATH";
  const std::string dir = NewDir();
  const std::string echo_script = dir + "/echo.mjs";
  FILE* f = std::fopen(echo_script.c_str(), "wb");
  // One row per position holding [tokens.length, tokens[position]]: what was asked, back.
  std::fputs(
      "import { readFileSync } from 'node:fs';\n"
      "const r = JSON.parse(readFileSync(0, 'utf8'));\n"
      "const results = r.prompts.map((p) => ({ positions: p.positions,\n"
      "  logprobs: p.positions.map((i) => [p.tokens.length, p.tokens[i]]) }));\n"
      "process.stdout.write(JSON.stringify({ vocab_size: 2, results }));\n",
      f);
  std::fclose(f);
  SidecarOptions options;
  options.script = echo_script;
  absl::StatusOr<std::vector<NextTokenLogprobs>> got =
      RunNextTokenLogprobsBatch("unused.gguf", {{7, 8, 9}, {4, 5}}, {0, 1}, options);
  ASSERT_THAT(got.status(), IsOk());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_THAT((*got)[0].logprobs, ElementsAre(ElementsAre(3, 7), ElementsAre(3, 8)));
  EXPECT_THAT((*got)[1].logprobs, ElementsAre(ElementsAre(2, 4), ElementsAre(2, 5)));

  const std::string hang_script = dir + "/hang.mjs";
  f = std::fopen(hang_script.c_str(), "wb");
  std::fputs("setInterval(() => {}, 1000);\n", f);
  std::fclose(f);
  options.script = hang_script;
  options.timeout = absl::Milliseconds(300);
  options.timeout_per_extra_prompt = absl::Milliseconds(100);
  EXPECT_THAT(
      RunNextTokenLogprobsBatch("unused.gguf", {{1}, {2}, {3}}, {}, options).status(),
      StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("killed after the 500ms timeout")));
}

// Each prompt of a batch starts from a clean state: prompt B's numbers are bit-identical
// alone, after prompt A in the same child, and through the one-prompt path.
TEST(LlamaCppSidecarBatchTest, NoStateCarriesOverBetweenPrompts) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  const Exported e = Export("LlamaForCausalLM");
  const std::vector<int32_t> a = testing::TestPrompt(0, 24, 64);
  const std::vector<int32_t> b = testing::TestPrompt(1, 24, 64);
  const std::vector<int64_t> positions = {0, 5, 23};
  absl::StatusOr<std::vector<NextTokenLogprobs>> both =
      RunNextTokenLogprobsBatch(e.gguf, {a, b}, positions);
  absl::StatusOr<std::vector<NextTokenLogprobs>> b_alone =
      RunNextTokenLogprobsBatch(e.gguf, {b}, positions);
  absl::StatusOr<NextTokenLogprobs> b_single = RunNextTokenLogprobs(e.gguf, b, positions);
  ASSERT_THAT(both.status(), IsOk());
  ASSERT_THAT(b_alone.status(), IsOk());
  ASSERT_THAT(b_single.status(), IsOk());
  ASSERT_EQ(both->size(), 2u);
  EXPECT_THAT((*both)[1].positions, ElementsAre(0, 5, 23));
  EXPECT_EQ((*both)[1].logprobs, (*b_alone)[0].logprobs);
  EXPECT_EQ((*both)[1].logprobs, b_single->logprobs);
  EXPECT_NE((*both)[0].logprobs, (*both)[1].logprobs);  // A is another prompt indeed
  // And A is what it is alone, too.
  absl::StatusOr<NextTokenLogprobs> a_single = RunNextTokenLogprobs(e.gguf, a, positions);
  ASSERT_THAT(a_single.status(), IsOk());
  EXPECT_EQ((*both)[0].logprobs, a_single->logprobs);
}

// --- serving cost in llama.cpp (llama_cpp_serve) ------------------------------------------

int64_t Pad256(int64_t n) { return (n + 255) / 256 * 256; }

// On the Llama test export, B=2, I=8, O=4, P=4: the samples, and llama.cpp's memory figures
// against the exact formulas they follow (llama_cpp_serve.h), for both KV cache types and
// both harnesses: the native loop creates the context node-llama-cpp creates and generates
// the same greedy tokens (the same end-of-generation count), so every memory figure is the
// node script's (the cache's to the log's two decimals).
TEST(LlamaCppServeTest, MeasuresRequestsAndTheMemoryLlamaCppReports) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  const std::string no_native = ServeHarnessMissing({});
  ASSERT_EQ(no_native, "") << "the native harness is built with the tests";
  const Exported e = Export("LlamaForCausalLM");
  absl::StatusOr<GgufFile> file = GgufFile::Read(e.gguf);
  ASSERT_THAT(file.status(), IsOk());
  int64_t tensor_bytes = 0;
  for (const TensorInfo& t : file->tensors()) tensor_bytes += static_cast<int64_t>(t.size_bytes);
  absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(e.dir);
  ASSERT_THAT(ckpt.status(), IsOk());
  const int64_t layers = ckpt->config().num_hidden_layers;
  const int64_t kv_width = ckpt->config().num_key_value_heads * ckpt->config().head_dim;

  ServeBenchmarkOptions o;
  o.batch_size = 2;
  o.input_tokens = 8;
  o.output_tokens = 4;
  o.cached_prefix_tokens = 4;
  o.warmup = 1;
  o.repetitions = 3;
  for (const auto& [kv_type, kv_bytes] : {std::pair<std::string, int64_t>{"f16", 2}, {"f32", 4}}) {
    o.kv_type = kv_type;
    std::vector<LlamaCppServeMeasurement> both;
    for (ServeHarness harness : {ServeHarness::kNode, ServeHarness::kNative}) {
      SCOPED_TRACE(kv_type + " KV, " + ServeHarnessName(harness) + " harness");
      o.harness = harness;
      const absl::Time start = absl::Now();
      absl::StatusOr<LlamaCppServeMeasurement> m = RunServeBenchmark(e.gguf, o);
      const absl::Duration wall = absl::Now() - start;
      ASSERT_THAT(m.status(), IsOk());
      EXPECT_EQ(m->harness, harness);
      ASSERT_EQ(m->request_ms.size(), 3u);
      ASSERT_EQ(m->prefill_ms.size(), 3u);
      ASSERT_EQ(m->decode_ms.size(), 3u);
      ASSERT_EQ(m->cpu_ms.size(), 3u);
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_GT(m->request_ms[i], 0);
        EXPECT_GT(m->prefill_ms[i], 0);
        EXPECT_GT(m->decode_ms[i], 0);
        EXPECT_GE(m->cpu_ms[i], 0);
        EXPECT_LE(m->prefill_ms[i] + m->decode_ms[i], m->request_ms[i] * 1.01);
      }
      // llama_model_size: ggml_nbytes summed over the file's tensors, i.e. their data sizes
      // without the GGUF alignment padding between them.
      EXPECT_EQ(m->weights_bytes, tensor_bytes);
      // node-llama-cpp pads B x (P + I + O) = 32 cells to 256; llama.cpp splits them into one
      // stream per sequence (no unified cache) and pads each to 256 again: 2 x 256.
      const int64_t per_sequence = Pad256(Pad256(2 * 16) / 2);
      EXPECT_EQ(m->kv_cache_cells, 2 * per_sequence);
      EXPECT_EQ(m->kv_cache_cells, 512);
      // The allocated cache, plus the compute buffers that the log rounds to 0.01 MiB (the
      // native harness reads the cache from the log too: one more rounding).
      const int64_t kv_cache = layers * 2 * kv_width * m->kv_cache_cells * kv_bytes;
      EXPECT_NEAR(static_cast<double>(m->context_buffer_bytes - kv_cache),
                  static_cast<double>(m->compute_buffer_bytes), 5243);
      EXPECT_GT(m->compute_buffer_bytes, 0);
      // The serialized state after the last request: "llama" (4 + 5 bytes), the stream count,
      // then per sequence its cell count, u = P + I + O - 1 cells of (pos, n_seq_id, seq_id),
      // v_trans and n_layer, per layer a 12-byte K and V header, and the K and V rows.
      const int64_t u = 4 + 8 + 4 - 1;
      EXPECT_EQ(m->state_bytes, 4 + 5 + 4 + 2 * (4 + 12 * u + 8 + 2 * layers * 12 +
                                                 2 * layers * u * kv_width * kv_bytes));
      EXPECT_GT(m->rss_before_load_bytes, 0);
      EXPECT_GE(m->rss_peak_bytes, m->rss_before_load_bytes);
      EXPECT_EQ(m->threads, 1);
      EXPECT_EQ(m->node_llama_cpp_version, "3.21.1");
      EXPECT_FALSE(m->llama_cpp_release.empty());
      std::printf("serve benchmark (%s KV, %s): child process %.0f ms; request_ms %.3f %.3f "
                  "%.3f; weights %lld B, state %lld B, compute %lld B, context %lld B, KV "
                  "cells %lld\n",
                  kv_type.c_str(), ServeHarnessName(harness).c_str(),
                  absl::ToDoubleMilliseconds(wall), m->request_ms[0], m->request_ms[1],
                  m->request_ms[2], static_cast<long long>(m->weights_bytes),
                  static_cast<long long>(m->state_bytes),
                  static_cast<long long>(m->compute_buffer_bytes),
                  static_cast<long long>(m->context_buffer_bytes),
                  static_cast<long long>(m->kv_cache_cells));
      both.push_back(*std::move(m));
    }
    ASSERT_EQ(both.size(), 2u);
    const LlamaCppServeMeasurement& node = both[0];
    const LlamaCppServeMeasurement& native = both[1];
    EXPECT_EQ(native.eog_tokens, node.eog_tokens);  // the same greedy tokens
    EXPECT_EQ(native.weights_bytes, node.weights_bytes);
    EXPECT_EQ(native.state_bytes, node.state_bytes);
    EXPECT_EQ(native.compute_buffer_bytes, node.compute_buffer_bytes);
    EXPECT_EQ(native.kv_cache_cells, node.kv_cache_cells);
    // Natively the cache is exact too, but in a sanitizer build (its runtime owns the
    // allocator) it comes from the log: one more rounding.
    EXPECT_TRUE(node.cache_bytes_exact);
    EXPECT_NEAR(native.context_buffer_bytes, node.context_buffer_bytes,
                native.cache_bytes_exact ? 5243 : 2 * 5243);
    EXPECT_EQ(native.llama_cpp_release, node.llama_cpp_release);
  }
}

// Greedy decoding of the test weights reaches the end-of-generation token within 100 tokens:
// every sequence still generates all of them.
TEST(LlamaCppServeTest, EndOfGenerationTokensDoNotEndASequence) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  const Exported e = Export("LlamaForCausalLM");
  ServeBenchmarkOptions o;
  o.batch_size = 2;
  o.input_tokens = 8;
  o.output_tokens = 100;
  o.warmup = 0;
  o.repetitions = 1;
  absl::StatusOr<LlamaCppServeMeasurement> m = RunServeBenchmark(e.gguf, o);
  ASSERT_THAT(m.status(), IsOk());  // the script fails when a sequence stops early
  EXPECT_GT(m->eog_tokens, 0);
  // And the state holds all of them: P + I + O - 1 = 107 cells per sequence.
  absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(e.dir);
  ASSERT_THAT(ckpt.status(), IsOk());
  const int64_t layers = ckpt->config().num_hidden_layers;
  const int64_t kv_width = ckpt->config().num_key_value_heads * ckpt->config().head_dim;
  const int64_t u = 8 + 100 - 1;
  EXPECT_EQ(m->state_bytes,
            4 + 5 + 4 + 2 * (4 + 12 * u + 8 + 2 * layers * 12 + 2 * layers * u * kv_width * 2));
}

TEST(LlamaCppServeTest, BadOptionsAndAMissingModelAreErrorsNamingThem) {
  ServeBenchmarkOptions o;
  o.batch_size = 0;
  EXPECT_THAT(RunServeBenchmark("unused.gguf", o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch_size")));
  o = {};
  o.repetitions = 0;
  EXPECT_THAT(RunServeBenchmark("unused.gguf", o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repetitions")));
  o = {};
  o.cached_prefix_tokens = -1;
  EXPECT_THAT(RunServeBenchmark("unused.gguf", o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cached_prefix_tokens")));
  o = {};
  o.kv_type = "q8_0";
  EXPECT_THAT(RunServeBenchmark("unused.gguf", o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kv_type")));
  const std::string missing = NewDir() + "/missing.gguf";
  EXPECT_THAT(RunServeBenchmark(missing, {}).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(missing)));
}

// Writes `text` to `path` (a stand-in model, script or program of the serve tests).
void WriteText(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

// The flags the script gets, and a sample count that does not match the repetitions. A
// stand-in script: needs node only.
TEST(LlamaCppServeTest, FlagsReachTheScriptAndTheSampleCountIsChecked) {
  if (std::system("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not on PATH";
  const std::string dir = NewDir();
  const std::string gguf = dir + "/model.gguf";
  WriteText(gguf, "unused");
  const std::string argv_script = dir + "/argv.mjs";
  WriteText(argv_script,
            "process.stderr.write(process.argv.slice(3).join(' ') + '\\n'); process.exit(1);\n");
  ServeBenchmarkOptions o;
  o.harness = ServeHarness::kNode;
  o.batch_size = 2;
  o.seed = 18446744073709551615ull;
  o.kv_type = "f32";
  o.sidecar.script = argv_script;
  EXPECT_THAT(RunServeBenchmark(gguf, o).status(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("--batch-size 2 --input 1 --output 1 --prefix 0 --threads 1 "
                                 "--warmup 1 --repetitions 5 --seed 18446744073709551615 "
                                 "--kv-type f32")));
  const std::string two_samples = dir + "/two.mjs";
  WriteText(two_samples, absl::StrCat("process.stdout.write(",
               "JSON.stringify({request_ms: [1, 2], prefill_ms: [1, 1], decode_ms: [0, 1], "
               "cpu_ms: [1, 2], eog_tokens: 0, weights_bytes: 1, state_bytes: 1, "
               "compute_buffer_bytes: 1, context_buffer_bytes: 1, kv_cache_cells: 256, "
               "rss_before_load_bytes: 1, "
               "rss_peak_bytes: 1, threads: 1, node_llama_cpp: 'x', llama_cpp: 'y'})", ");\n"));
  o.sidecar.script = two_samples;
  o.repetitions = 3;
  EXPECT_THAT(RunServeBenchmark(gguf, o).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("2 samples for 3 repetitions")));
}

// A node script answering as the native harness: the measurement is refused, since its
// figures would be labelled with the wrong harness.
TEST(LlamaCppServeTest, AnAnswerFromTheOtherHarnessIsRefused) {
  if (std::system("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not on PATH";
  const std::string dir = NewDir();
  const std::string gguf = dir + "/model.gguf";
  WriteText(gguf, "unused");
  const std::string script = dir + "/native.mjs";
  WriteText(script, absl::StrCat("process.stdout.write(",
               "JSON.stringify({request_ms: [1], prefill_ms: [1], decode_ms: [0], cpu_ms: [1], "
               "eog_tokens: 0, weights_bytes: 1, state_bytes: 1, compute_buffer_bytes: 1, "
               "context_buffer_bytes: 1, kv_cache_cells: 256, rss_before_load_bytes: 1, "
               "rss_peak_bytes: 1, threads: 1, node_llama_cpp: 'x', llama_cpp: 'y', "
               "harness: 'native'})", ");\n"));
  ServeBenchmarkOptions o;
  o.harness = ServeHarness::kNode;
  o.sidecar.script = script;
  o.repetitions = 1;
  EXPECT_THAT(RunServeBenchmark(gguf, o).status(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("asked the node harness, the native one answered")));
}

// The native harness gets the library folder first, then the node script's flags.
TEST(LlamaCppServeTest, TheNativeHarnessGetsTheLibrariesAndTheFlags) {
  const std::string dir = NewDir();
  const std::string gguf = dir + "/model.gguf";
  WriteText(gguf, "unused");
  const std::string program = dir + "/argv.sh";
  WriteText(program, "#!/bin/sh\necho \"$@\" >&2\nexit 1\n");
  ASSERT_EQ(chmod(program.c_str(), 0755), 0);
  ServeBenchmarkOptions o;
  o.native_program = program;
  o.lib_dir = "/opt/llama/bins";
  o.input_tokens = 128;
  o.output_tokens = 32;
  EXPECT_THAT(RunServeBenchmark(gguf, o).status(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("--lib-dir /opt/llama/bins --model " + gguf +
                                 " --batch-size 1 --input 128 --output 32 --prefix 0 "
                                 "--threads 1 --warmup 1 --repetitions 5 --seed 1 "
                                 "--kv-type f16")));
  o.native_program = dir + "/missing";
  EXPECT_THAT(RunServeBenchmark(gguf, o).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(dir + "/missing")));
  EXPECT_THAT(ServeHarnessMissing(o), HasSubstr("no " + dir + "/missing"));
  EXPECT_THAT(ParseServeHarness("python").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"python\"")));
}

// The harness declares the pinned release's structs: it refuses libraries of another package
// version (whose structs may differ) and says which, instead of misreading them.
TEST(LlamaCppServeTest, TheNativeHarnessRefusesAnotherPackageVersion) {
  ServeBenchmarkOptions o;
  if (access(DefaultNativeServeProgram().c_str(), X_OK) != 0) {
    GTEST_SKIP() << "no " << DefaultNativeServeProgram();
  }
  const std::string root = NewDir();
  const std::string lib_dir = root + "/bins/linux-x64";
  ASSERT_EQ(std::system(("mkdir -p " + lib_dir).c_str()), 0);
  WriteText(root + "/package.json",
            R"({"name": "@node-llama-cpp/linux-x64", "version": "3.22.0"})");
  const std::string gguf = root + "/model.gguf";
  WriteText(gguf, "unused");
  o.lib_dir = lib_dir;
  EXPECT_THAT(RunServeBenchmark(gguf, o).status(),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("@node-llama-cpp/linux-x64 3.22.0"),
                             HasSubstr("declares the C API of 3.21.1"))));
  // The agent's start-up check says the same before any job (the folder holds the build
  // metadata the check looks for first).
  WriteText(lib_dir + "/_nlcBuildMetadata.json",
            R"({"buildOptions": {"llamaCpp": {"release": "v0.5.0"}}})");
  EXPECT_THAT(CheckServeHarness(o),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("3.22.0")));
  if (ServeHarnessMissing({}).empty()) {
    EXPECT_THAT(CheckServeHarness({}), IsOk());
  }
  o.lib_dir = root + "/nowhere";
  EXPECT_THAT(RunServeBenchmark(gguf, o).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("package.json")));
}

constexpr char kServeOutput[] =
    R"({"request_ms": [3.5, 2.25], "prefill_ms": [1.5, 1], "decode_ms": [2, 1.25],)"
    R"( "cpu_ms": [3.25, 2], "eog_tokens": 3, "weights_bytes": 78480, "state_bytes": 4333,)"
    R"( "compute_buffer_bytes": 94372, "context_buffer_bytes": 160064, "kv_cache_cells": 512,)"
    R"( "rss_before_load_bytes": 90521600, "rss_peak_bytes": 103895040, "threads": 2,)"
    R"( "node_llama_cpp": "3.21.1", "llama_cpp": "b1234"})";

TEST(LlamaCppServeTest, OutputIsParsedFieldByField) {
  absl::StatusOr<LlamaCppServeMeasurement> m = ParseServeBenchmarkOutput(kServeOutput);
  ASSERT_THAT(m.status(), IsOk());
  EXPECT_THAT(m->request_ms, ElementsAre(3.5, 2.25));
  EXPECT_THAT(m->prefill_ms, ElementsAre(1.5, 1));
  EXPECT_THAT(m->decode_ms, ElementsAre(2, 1.25));
  EXPECT_THAT(m->cpu_ms, ElementsAre(3.25, 2));
  EXPECT_EQ(m->eog_tokens, 3);
  EXPECT_EQ(m->weights_bytes, 78480);
  EXPECT_EQ(m->state_bytes, 4333);
  EXPECT_EQ(m->compute_buffer_bytes, 94372);
  EXPECT_EQ(m->context_buffer_bytes, 160064);
  EXPECT_EQ(m->kv_cache_cells, 512);
  EXPECT_EQ(m->rss_before_load_bytes, 90521600);
  EXPECT_EQ(m->rss_peak_bytes, 103895040);
  EXPECT_EQ(m->threads, 2);
  EXPECT_EQ(m->node_llama_cpp_version, "3.21.1");
  EXPECT_EQ(m->llama_cpp_release, "b1234");
}

TEST(LlamaCppServeTest, MalformedOutputIsAnErrorNamingTheField) {
  const std::string full = kServeOutput;
  // Each field removed in turn: the error names it.
  for (const char* field :
       {"request_ms", "prefill_ms", "decode_ms", "cpu_ms", "eog_tokens", "weights_bytes",
       "state_bytes",
        "compute_buffer_bytes", "context_buffer_bytes", "kv_cache_cells",
        "rss_before_load_bytes", "rss_peak_bytes", "threads", "node_llama_cpp", "llama_cpp"}) {
    nlohmann::json j = nlohmann::json::parse(full);
    j.erase(field);
    EXPECT_THAT(ParseServeBenchmarkOutput(j.dump()).status(),
                StatusIs(absl::StatusCode::kInternal, HasSubstr(absl::StrCat("\"", field, "\""))));
  }
  nlohmann::json j = nlohmann::json::parse(full);
  j["weights_bytes"] = "78480";
  EXPECT_THAT(ParseServeBenchmarkOutput(j.dump()).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("\"weights_bytes\"")));
  j = nlohmann::json::parse(full);
  j["decode_ms"] = {1.0};
  EXPECT_THAT(ParseServeBenchmarkOutput(j.dump()).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("differ in length")));
  EXPECT_THAT(ParseServeBenchmarkOutput("serve_benchmark: oops").status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("unexpected output")));
}

}  // namespace
}  // namespace tailor::gguf
