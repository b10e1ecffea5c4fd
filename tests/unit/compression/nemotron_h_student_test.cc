// Students of Nemotron-H parents handed back as GGUF: written directly from the student's
// tensors as llama.cpp's `nemotron_h` / `nemotron_h_moe` with per-layer widths (query and KV
// heads, MLP and expert widths), removed layers left out, and compared with tailor's own
// next-token distribution in llama.cpp (node-llama-cpp sidecar). What the arch cannot hold
// (per-layer Mamba heads, no Mamba layer) is refused with the layer and the reason.

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "compression/gguf/gguf_reader.h"
#include "compression/gguf/llama_cpp_sidecar.h"
#include "compression/gguf/student_to_gguf.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_import.h"
#include "compression/model/config.h"
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
using ::testing::Eq;
using Json = nlohmann::json;

struct Parent {
  hf::HfCheckpoint checkpoint;
  model::HybridLM model;
};

// The tiny Nemotron-H checkpoint with `pattern` (MoE keys only with 'E' layers), imported.
Parent ImportNemotron(const std::string& pattern) {
  const Json c = testing::TinyNemotronHConfig(pattern);
  const std::string dir = testing::NewTestDir("nemotron_parent_");
  EXPECT_THAT(testing::WriteHfCheckpointFiles(
                  dir, c, testing::HfTestTensors(c, model::DType::kBF16, /*seed=*/5)),
              IsOk());
  absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(dir);
  EXPECT_THAT(ckpt.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*ckpt);
  EXPECT_THAT(m.status(), IsOk());
  return {*std::move(ckpt), *std::move(m)};
}

// The child `edit` makes of the parent's config, sliced and saved; its folder.
template <typename Edit>
std::string SaveChild(const model::HybridLM& parent, Edit edit, model::HybridLM* out) {
  model::HybridConfig config = parent->config();
  edit(config.layers);
  absl::StatusOr<model::HybridLM> child = model::SliceHybridLM(parent, config);
  EXPECT_THAT(child.status(), IsOk());
  const std::string dir = testing::NewTestDir("nemotron_student_");
  EXPECT_THAT(model::SaveHybridLM(*child, dir), IsOk());
  if (out != nullptr) *out = *child;
  return dir;
}

// The layer removed whole (every width 0, as the config validation wants it).
void Remove(model::LayerSpec& l) {
  l.attention.heads = l.attention.kv_heads = l.attention.head_dim = 0;
  l.mamba.heads = 0;
  l.mlp.ffn = 0;
  l.moe.experts = l.moe.top_k = l.moe.expert_ffn = l.moe.shared_ffn = 0;
}

// tailor's student against llama.cpp on the GGUF tailor wrote for it: 40 positions, more
// than two of the Mamba scan's 16-step chunks.
void ExpectLlamaCppAgrees(model::HybridLM child, const std::string& gguf, const char* label) {
  testing::LlamaCppComparison comparison;
  comparison.length = 40;
  testing::ExpectAgreesWithLlamaCpp(
      [&](const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions) {
        return hf::NextTokenLogprobs(child, tokens, positions);
      },
      gguf, comparison, label);
}

std::vector<int32_t> IntArray(const gguf::GgufFile& f, const std::string& key) {
  const gguf::Value* v = f.Find(key);
  if (v == nullptr || !std::holds_alternative<std::vector<int32_t>>(*v)) return {};
  return std::get<std::vector<int32_t>>(*v);
}

uint32_t U32(const gguf::GgufFile& f, const std::string& key) {
  const gguf::Value* v = f.Find(key);
  return v != nullptr && std::holds_alternative<uint32_t>(*v) ? std::get<uint32_t>(*v) : 0;
}

// Bytes of every tensor in the file.
int64_t TensorBytes(const std::string& path) {
  absl::StatusOr<gguf::GgufFile> f = gguf::GgufFile::Read(path);
  EXPECT_THAT(f.status(), IsOk());
  int64_t bytes = 0;
  if (f.ok()) {
    for (const auto& t : f->tensors()) bytes += static_cast<int64_t>(f->TensorData(t).size());
  }
  return bytes;
}

std::string Export(const std::string& student, const Parent& p, gguf::StudentGgufSummary* s) {
  const std::string path = testing::NewTestDir("nemotron_gguf_") + "/student.gguf";
  absl::StatusOr<gguf::StudentGgufSummary> summary =
      gguf::ExportStudentToGguf(student, p.checkpoint, path);
  EXPECT_THAT(summary.status(), IsOk());
  if (summary.ok()) *s = *summary;
  return path;
}

// The parent itself through the student path: the same keys (but the name) and, tensor by
// tensor, the same F32 bytes as the HF checkpoint's export. Both paths share the metadata
// writer and the tensor names; this shows the split tensors are put back as llama.cpp's.
TEST(NemotronHStudentTest, UntouchedParentIsTheHfExportTensorForTensor) {
  for (const char* pattern : {"M*-M-", "M*EME"}) {
    Parent p = ImportNemotron(pattern);
    const std::string student = testing::NewTestDir("nemotron_student_");
    ASSERT_THAT(model::SaveHybridLM(p.model, student), IsOk());
    gguf::StudentGgufSummary s;
    absl::StatusOr<gguf::GgufFile> ours = gguf::GgufFile::Read(Export(student, p, &s));
    const std::string theirs_path = testing::NewTestDir("nemotron_gguf_") + "/hf.gguf";
    gguf::GgufExportOptions options;
    options.all_f32 = true;
    ASSERT_THAT(gguf::ExportHfToGguf(p.checkpoint, theirs_path, options).status(), IsOk());
    absl::StatusOr<gguf::GgufFile> theirs = gguf::GgufFile::Read(theirs_path);
    ASSERT_THAT(ours.status(), IsOk());
    ASSERT_THAT(theirs.status(), IsOk());
    ASSERT_EQ(ours->metadata().size(), theirs->metadata().size()) << pattern;
    for (size_t i = 0; i < ours->metadata().size(); ++i) {
      const auto& [key, value] = ours->metadata()[i];
      EXPECT_EQ(key, theirs->metadata()[i].first) << pattern;
      if (key != "general.name") {
        EXPECT_EQ(value, theirs->metadata()[i].second) << key;
      }
    }
    ASSERT_EQ(ours->tensors().size(), theirs->tensors().size()) << pattern;
    for (const gguf::TensorInfo& t : theirs->tensors()) {
      const gguf::TensorInfo* o = ours->FindTensor(t.name);
      ASSERT_NE(o, nullptr) << t.name;
      EXPECT_EQ(o->ne, t.ne) << t.name;
      EXPECT_EQ(o->type, t.type) << t.name;
      EXPECT_EQ(ours->TensorData(*o), theirs->TensorData(t)) << t.name;
    }
  }
}

// Layers M * - M * - -: both Mamba layers keep 2 of 4 heads (one per B/C group), attention
// layer 4 keeps 2 query / 1 KV head of 4 / 2 (layer 1 all of them), the MLP layers keep 32
// and 16 of 48 channels, and the last MLP layer is removed.
TEST(NemotronHStudentTest, HeterogeneousDenseStudentEqualsTailorInLlamaCpp) {
  Parent p = ImportNemotron("M*-M*--");
  model::HybridLM child = nullptr;
  const std::string dir = SaveChild(
      p.model,
      [](std::vector<model::LayerSpec>& l) {
        l[0].mamba.heads = l[3].mamba.heads = 2;
        l[4].attention.heads = 2;
        l[4].attention.kv_heads = 1;
        l[2].mlp.ffn = 32;
        l[5].mlp.ffn = 16;
        Remove(l[6]);
      },
      &child);
  gguf::StudentGgufSummary s;
  const std::string path = Export(dir, p, &s);
  EXPECT_EQ(s.arch, "nemotron_h");
  EXPECT_EQ(s.blocks, 6);
  absl::StatusOr<gguf::GgufFile> f = gguf::GgufFile::Read(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(U32(*f, "nemotron_h.block_count"), 6u);
  EXPECT_EQ(IntArray(*f, "nemotron_h.attention.head_count"),
            (std::vector<int32_t>{4, 4, 4, 4, 2, 4}));
  EXPECT_EQ(IntArray(*f, "nemotron_h.attention.head_count_kv"),
            (std::vector<int32_t>{0, 2, 0, 0, 1, 0}));
  EXPECT_EQ(IntArray(*f, "nemotron_h.feed_forward_length"),
            (std::vector<int32_t>{0, 0, 32, 0, 0, 16}));
  EXPECT_EQ(U32(*f, "nemotron_h.ssm.time_step_rank"), 2u);
  EXPECT_EQ(U32(*f, "nemotron_h.ssm.inner_size"), 16u);
  EXPECT_EQ(U32(*f, "nemotron_h.ssm.group_count"), 2u);
  EXPECT_EQ(f->FindTensor("blk.6.attn_norm.weight"), nullptr);
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  ExpectLlamaCppAgrees(child, path, "nemotron_h student, per-layer heads and widths");
}

// Layers M * E M E: Mamba layer 3 removed, layer 0 keeps 2 of 4 heads, the attention keeps
// one KV group of 2 (2 query heads of 4), the 'E' layers keep experts 8 and 12 channels wide
// (of 16).
TEST(NemotronHStudentTest, HeterogeneousMoeStudentEqualsTailorInLlamaCpp) {
  Parent p = ImportNemotron("M*EME");
  model::HybridLM child = nullptr;
  const std::string dir = SaveChild(
      p.model,
      [](std::vector<model::LayerSpec>& l) {
        l[0].mamba.heads = 2;
        l[1].attention.heads = 2;
        l[1].attention.kv_heads = 1;
        l[2].moe.expert_ffn = 8;
        l[4].moe.expert_ffn = 12;
        Remove(l[3]);
      },
      &child);
  gguf::StudentGgufSummary s;
  const std::string path = Export(dir, p, &s);
  EXPECT_EQ(s.arch, "nemotron_h_moe");
  EXPECT_EQ(s.blocks, 4);
  absl::StatusOr<gguf::GgufFile> f = gguf::GgufFile::Read(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(U32(*f, "nemotron_h_moe.attention.head_count"), 2u);  // uniform: a scalar
  EXPECT_EQ(IntArray(*f, "nemotron_h_moe.attention.head_count_kv"),
            (std::vector<int32_t>{0, 1, 0, 0}));
  EXPECT_EQ(IntArray(*f, "nemotron_h_moe.feed_forward_length"),
            (std::vector<int32_t>{0, 0, 8, 12}));
  EXPECT_EQ(IntArray(*f, "nemotron_h_moe.expert_feed_forward_length"),
            (std::vector<int32_t>{0, 0, 8, 12}));
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  ExpectLlamaCppAgrees(child, path, "nemotron_h_moe student, per-layer expert widths");
}

// llama.cpp aborts on a nemotron_h without attention blocks (GGML_ASSERT(buffer): an empty
// KV cache) or without Mamba blocks: a student that removed all of either gets an exact zero
// stand-in block and still equals tailor.
TEST(NemotronHStudentTest, StudentsWithoutAttentionOrMambaGetZeroStandIns) {
  Parent p = ImportNemotron("M*-M-");
  const std::string missing = testing::LlamaCppSidecarMissing();
  // The cost model prices what the export adds (gguf::StudentShapeRules::stand_ins): the
  // same layers as the files below.
  const std::vector<model::StandInLayer> rules =
      gguf::StudentShapeRulesOf(p.checkpoint.config()).stand_ins;
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].absent, model::LayerKind::kAttention);
  EXPECT_EQ(rules[1].absent, model::LayerKind::kMamba);
  {
    model::HybridLM child = nullptr;
    const std::string dir = SaveChild(
        p.model, [](std::vector<model::LayerSpec>& l) { Remove(l[1]); }, &child);
    gguf::StudentGgufSummary s;
    const std::string path = Export(dir, p, &s);
    EXPECT_EQ(s.arch, "nemotron_h");
    EXPECT_EQ(s.blocks, 5);
    EXPECT_EQ(s.zero_attention, 1);
    EXPECT_EQ(s.zero_mamba, 0);
    // One query and one KV head of 8 over hidden 32: norm, Q, K, V and the output, F32.
    EXPECT_EQ(s.stand_in_bytes, 4 * (32 + 4 * 8 * 32));
    ASSERT_EQ(s.stand_in_layers.size(), 1u);
    EXPECT_EQ(s.stand_in_layers[0].kind, model::LayerKind::kAttention);
    EXPECT_EQ(s.stand_in_layers[0].attention.heads, 1);
    EXPECT_EQ(s.stand_in_layers[0].attention.kv_heads, 1);
    EXPECT_EQ(s.stand_in_layers[0].attention.head_dim, 8);
    EXPECT_EQ(s.stand_in_layers[0], rules[0].spec);
    EXPECT_EQ(TensorBytes(path), 4 * child->config().ParameterCount() + s.stand_in_bytes);
    if (missing.empty()) ExpectLlamaCppAgrees(child, path, "nemotron_h, zero attention");
  }
  {
    model::HybridLM child = nullptr;
    const std::string dir = SaveChild(
        p.model,
        [](std::vector<model::LayerSpec>& l) {
          Remove(l[0]);
          Remove(l[3]);
          l[2].mlp.ffn = 40;
        },
        &child);
    gguf::StudentGgufSummary s;
    const std::string path = Export(dir, p, &s);
    EXPECT_EQ(s.blocks, 4);
    EXPECT_EQ(s.zero_attention, 0);
    EXPECT_EQ(s.zero_mamba, 1);
    EXPECT_GT(s.stand_in_bytes, 0);
    // One Mamba head per B/C group (2), of the parent's head size and state (8).
    ASSERT_EQ(s.stand_in_layers.size(), 1u);
    EXPECT_EQ(s.stand_in_layers[0].kind, model::LayerKind::kMamba);
    EXPECT_EQ(s.stand_in_layers[0].mamba.heads, 2);
    EXPECT_EQ(s.stand_in_layers[0].mamba.head_dim, 8);
    EXPECT_EQ(s.stand_in_layers[0].mamba.state, 8);
    EXPECT_EQ(s.stand_in_layers[0], rules[1].spec);
    EXPECT_EQ(TensorBytes(path), 4 * child->config().ParameterCount() + s.stand_in_bytes);
    if (missing.empty()) ExpectLlamaCppAgrees(child, path, "nemotron_h, zero Mamba");
  }
}

// What `nemotron_h` keeps global is refused naming the layer: Mamba heads per layer, and
// the experts' top-k per layer.
TEST(NemotronHStudentTest, WhatNemotronHCannotHoldIsRefused) {
  const std::string path = testing::NewTestDir("nemotron_gguf_") + "/refused.gguf";
  Parent dense = ImportNemotron("M*-M-");
  const std::string mixed = SaveChild(
      dense.model, [](std::vector<model::LayerSpec>& l) { l[3].mamba.heads = 2; }, nullptr);
  EXPECT_THAT(gguf::ExportStudentToGguf(mixed, dense.checkpoint, path).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       Eq("a NemotronHForCausalLM student has no `nemotron_h` GGUF: layer 3 "
                          "keeps 2 Mamba heads and layer 0 keeps 4: llama.cpp's `nemotron_h` "
                          "has one ssm.time_step_rank / ssm.inner_size for every Mamba "
                          "layer")));
  Parent moe = ImportNemotron("M*EME");
  const std::string top_k = SaveChild(
      moe.model, [](std::vector<model::LayerSpec>& l) { l[4].moe.top_k = 1; }, nullptr);
  EXPECT_THAT(gguf::ExportStudentToGguf(top_k, moe.checkpoint, path).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       Eq("a NemotronHForCausalLM student has no `nemotron_h` GGUF: layer 4 "
                          "has 4 experts (top 1, shared width 24) and layer 2 4 (top 2, "
                          "shared width 24): `nemotron_h_moe` has one expert_count, "
                          "expert_used_count and shared expert width")));
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace tailor
