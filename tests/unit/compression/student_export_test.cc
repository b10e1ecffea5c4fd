// Students of Hugging Face parents handed back in layouts engines load: the family's own
// HF layout (a parent imported and exported untouched is bit-identical; a uniformly pruned
// child re-imports to the same model) and GGUF, where a Llama child with per-layer widths
// is a `deci` file whose next-token distribution in llama.cpp equals tailor's.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/gguf/llama_cpp_sidecar.h"
#include "compression/gguf/student_to_gguf.h"
#include "compression/hf/hf_export.h"
#include "compression/hf/hf_import.h"
#include "compression/model/hybrid_lm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/llama_cpp_agreement.h"
#include "tests/testing/status_matchers.h"

namespace tailor {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

struct Parent {
  std::string dir;
  hf::HfCheckpoint checkpoint;
  model::HybridLM model;
};

Parent ImportParent(absl::string_view arch) {
  const std::string dir = testing::NewTestDir("student_parent_");
  EXPECT_THAT(testing::WriteHfTestCheckpoint(dir, arch), IsOk());
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(dir);
  EXPECT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*c);
  EXPECT_THAT(m.status(), IsOk());
  return {dir, *std::move(c), *std::move(m)};
}

// The child of `parent` with `layers` (the parent's other settings), sliced and saved.
std::string SaveChild(const model::HybridLM& parent, std::vector<model::LayerSpec> layers,
                      model::HybridLM* child_out = nullptr) {
  model::HybridConfig config = parent->config();
  for (size_t i = 0; i < layers.size(); ++i) {
    model::LayerSpec& l = config.layers[i];
    if (l.kind == model::LayerKind::kAttention) {
      l.attention.heads = layers[i].attention.heads;
      l.attention.kv_heads = layers[i].attention.kv_heads;
      if (l.attention.heads == 0) l.attention.head_dim = 0;
    } else {
      l.mlp.ffn = layers[i].mlp.ffn;
    }
  }
  absl::StatusOr<model::HybridLM> child = model::SliceHybridLM(parent, config);
  EXPECT_THAT(child.status(), IsOk());
  const std::string dir = testing::NewTestDir("student_");
  EXPECT_THAT(model::SaveHybridLM(*child, dir), IsOk());
  if (child_out != nullptr) *child_out = *child;
  return dir;
}

model::LayerSpec Attn(int64_t heads, int64_t kv) { return model::LayerSpec::Attention(heads, kv, 8); }
model::LayerSpec Mlp(int64_t ffn) { return model::LayerSpec::Mlp(ffn); }

TEST(StudentExportTest, UntouchedParentRoundTripsBitIdentical) {
  Parent p = ImportParent("LlamaForCausalLM");
  const std::string student = testing::NewTestDir("student_same_");
  ASSERT_THAT(model::SaveHybridLM(p.model, student), IsOk());
  const std::string out = testing::NewTestDir("student_out_") + "/hf";
  absl::StatusOr<hf::HfExportSummary> s = hf::ExportStudentAsHf(student, p.checkpoint, out);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->dtype, model::DType::kBF16);  // the parent's torch_dtype
  EXPECT_EQ(s->layout.kept_layers, (std::vector<int64_t>{0, 1}));
  absl::StatusOr<hf::HfCheckpoint> again = hf::HfCheckpoint::Open(out);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(again->tensor_names(), p.checkpoint.tensor_names());
  for (const std::string& name : p.checkpoint.tensor_names()) {
    const hf::TensorView a = *p.checkpoint.Tensor(name);
    const hf::TensorView b = *again->Tensor(name);
    ASSERT_EQ(a.dtype, b.dtype) << name;
    ASSERT_EQ(*a.shape, *b.shape) << name;
    EXPECT_EQ(std::string(a.data, a.size_bytes), std::string(b.data, b.size_bytes)) << name;
  }
  EXPECT_EQ(again->tokenizer_files(), p.checkpoint.tokenizer_files());
  // Import -> export -> import: the same model.
  absl::StatusOr<model::HybridLM> reimported = hf::ImportHfModel(*again);
  ASSERT_THAT(reimported.status(), IsOk());
  EXPECT_EQ((*reimported)->config(), p.model->config());
}

TEST(StudentExportTest, UniformChildReimportsToTheSameModel) {
  Parent p = ImportParent("Qwen3ForCausalLM");
  model::HybridLM child = nullptr;
  // Decoder layer 1 removed whole; layer 0 keeps 2 of 4 heads (1 KV head) and 24 channels.
  const std::string student = SaveChild(
      p.model, {model::LayerSpec::Attention(2, 1, 16), Mlp(24), Attn(0, 0), Mlp(0)}, &child);
  const std::string out = testing::NewTestDir("student_out_") + "/hf";
  hf::HfExportOptions options;
  options.dtype = model::DType::kF32;
  absl::StatusOr<hf::HfExportSummary> s =
      hf::ExportStudentAsHf(student, p.checkpoint, out, options);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->layout.kept_layers, std::vector<int64_t>{0});
  const nlohmann::json config =
      nlohmann::json::parse(*model::ReadFileToString(out + "/config.json"));
  EXPECT_EQ(config["num_hidden_layers"], 1);
  EXPECT_EQ(config["num_attention_heads"], 2);
  EXPECT_EQ(config["num_key_value_heads"], 1);
  EXPECT_EQ(config["intermediate_size"], 24);
  EXPECT_EQ(config["head_dim"], 16);
  EXPECT_EQ(config["torch_dtype"], "float32");
  EXPECT_EQ(config["rope_theta"], 1000000);  // the parent's other keys, verbatim
  absl::StatusOr<model::HybridLM> back = hf::LoadModelDir(out);
  ASSERT_THAT(back.status(), IsOk());
  const std::vector<int64_t> tokens = {1, 5, 17, 33, 60, 2};
  auto ours = hf::NextTokenLogprobs(child, tokens, {0, 3, 5});
  auto theirs = hf::NextTokenLogprobs(*back, tokens, {0, 3, 5});
  ASSERT_THAT(ours.status(), IsOk());
  ASSERT_THAT(theirs.status(), IsOk());
  EXPECT_EQ(*ours, *theirs);  // F32 export: exactly the same numbers
}

TEST(StudentExportTest, PerLayerWidthsAreRefusedByTheFamilyLayoutNamingTheLayer) {
  Parent p = ImportParent("LlamaForCausalLM");
  const std::string mixed = SaveChild(p.model, {Attn(4, 2), Mlp(48), Attn(2, 1), Mlp(48)});
  const std::string out = testing::NewTestDir("student_out_") + "/hf";
  EXPECT_THAT(hf::ExportStudentAsHf(mixed, p.checkpoint, out).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("decoder layer 1 has 2/1 attention/KV heads, an earlier layer "
                                 "4/2")));
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  const std::string half = SaveChild(p.model, {Attn(4, 2), Mlp(0), Attn(4, 2), Mlp(48)});
  EXPECT_THAT(hf::ExportStudentAsHf(half, p.checkpoint, out).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("decoder layer 0 keeps its attention but not its MLP")));
}

// tailor's student against llama.cpp on the GGUF tailor wrote for it.
void ExpectLlamaCppAgrees(model::HybridLM child, const std::string& gguf, const char* label) {
  testing::ExpectAgreesWithLlamaCpp(
      [&](const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions) {
        return hf::NextTokenLogprobs(child, tokens, positions);
      },
      gguf, testing::LlamaCppComparison(), label);
}

TEST(StudentExportLlamaCppTest, HeterogeneousLlamaChildIsADeciFileEqualToTailor) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  Parent p = ImportParent("LlamaForCausalLM");
  gguf::GgufExportOptions options;
  options.all_f32 = true;
  {
    model::HybridLM child = nullptr;
    const std::string dir =
        SaveChild(p.model, {Attn(2, 1), Mlp(32), Attn(4, 2), Mlp(16)}, &child);
    const std::string path = testing::NewTestDir("student_gguf_") + "/deci.gguf";
    absl::StatusOr<gguf::StudentGgufSummary> s =
        gguf::ExportStudentToGguf(dir, p.checkpoint, path, options);
    ASSERT_THAT(s.status(), IsOk());
    EXPECT_EQ(s->arch, "deci");
    EXPECT_EQ(s->blocks, 2);
    EXPECT_EQ(s->zero_attention + s->zero_ffn, 0);
    ExpectLlamaCppAgrees(child, path, "deci, per-layer heads and widths");
  }
  {
    // A first block without attention and a last one without FFN abort llama.cpp; the
    // zero stand-ins keep the file equal to the student.
    model::HybridLM child = nullptr;
    const std::string dir =
        SaveChild(p.model, {Attn(0, 0), Mlp(32), Attn(4, 2), Mlp(0)}, &child);
    const std::string path = testing::NewTestDir("student_gguf_") + "/deci.gguf";
    absl::StatusOr<gguf::StudentGgufSummary> s =
        gguf::ExportStudentToGguf(dir, p.checkpoint, path, options);
    ASSERT_THAT(s.status(), IsOk());
    EXPECT_EQ(s->arch, "deci");
    EXPECT_EQ(s->zero_attention, 1);
    EXPECT_EQ(s->zero_ffn, 1);
    ASSERT_EQ(s->stand_in_layers.size(), 2u);
    EXPECT_EQ(s->stand_in_layers[0].attention.heads, 1);
    EXPECT_EQ(s->stand_in_layers[1].mlp.ffn, 1);
    EXPECT_GT(s->stand_in_bytes, 0);
    ExpectLlamaCppAgrees(child, path, "deci with zero stand-ins");
  }
}

TEST(StudentExportLlamaCppTest, UniformChildKeepsTheFamilyArch) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  Parent p = ImportParent("Qwen3ForCausalLM");
  model::HybridLM child = nullptr;
  const std::string dir = SaveChild(
      p.model,
      {model::LayerSpec::Attention(2, 1, 16), Mlp(24), model::LayerSpec::Attention(2, 1, 16),
       Mlp(24)},
      &child);
  const std::string path = testing::NewTestDir("student_gguf_") + "/qwen3.gguf";
  gguf::GgufExportOptions options;
  options.all_f32 = true;
  absl::StatusOr<gguf::StudentGgufSummary> s =
      gguf::ExportStudentToGguf(dir, p.checkpoint, path, options);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->arch, "qwen3");
  ExpectLlamaCppAgrees(child, path, "qwen3, uniformly pruned");
  // Per-layer widths have no Qwen3 GGUF layout: refused up front, naming why.
  const std::string mixed = SaveChild(
      p.model,
      {model::LayerSpec::Attention(2, 1, 16), Mlp(24), model::LayerSpec::Attention(4, 2, 16),
       Mlp(24)});
  EXPECT_THAT(gguf::ExportStudentToGguf(mixed, p.checkpoint, path + ".2", options).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("`deci` is the Llama family's layout")));
}

}  // namespace
}  // namespace tailor
