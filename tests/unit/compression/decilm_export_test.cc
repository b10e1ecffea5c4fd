// Llama-family students with per-layer widths in DeciLM's block_configs layout (what vLLM's
// nemotron_nas and llama.cpp's converter load): the exact config.json, the tensors of the
// kept parts only, and a reader written here from the layout's rules (not tailor's
// exporter) that loads the folder into the model family and computes exactly the student.
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/hf/hf_export.h"
#include "compression/hf/hf_import.h"
#include "compression/model/hybrid_lm.h"
#include "compression/model/safetensors_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/status_matchers.h"

namespace tailor {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;
using Json = nlohmann::json;

struct Parent {
  hf::HfCheckpoint checkpoint;
  model::HybridLM model{nullptr};
};

// A 3-layer Llama whose MLP width (512) is a multiple of 256, as full-size ones' are.
Parent ImportParent() {
  const std::string dir = testing::NewTestDir("decilm_parent_");
  Json config = testing::TinyHfConfig("LlamaForCausalLM");
  config["intermediate_size"] = 512;
  config["num_hidden_layers"] = 3;
  EXPECT_THAT(testing::WriteHfCheckpointFiles(
                  dir, config, testing::HfTestTensors(config, model::DType::kBF16, 3)),
              IsOk());
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(dir);
  EXPECT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*c);
  EXPECT_THAT(m.status(), IsOk());
  return {*std::move(c), *std::move(m)};
}

// The parent with decoder layer i's query / KV heads and MLP width (0 removes the part),
// sliced and saved; returns the folder.
std::string SaveChild(const Parent& p, const std::vector<std::array<int64_t, 3>>& layers,
                      model::HybridLM* out = nullptr) {
  model::HybridConfig c = p.model->config();
  for (size_t i = 0; i < layers.size(); ++i) {
    model::LayerSpec& a = c.layers[2 * i];
    a.attention.heads = layers[i][0];
    a.attention.kv_heads = layers[i][1];
    if (a.attention.heads == 0) a.attention.head_dim = 0;
    c.layers[2 * i + 1].mlp.ffn = layers[i][2];
  }
  absl::StatusOr<model::HybridLM> child = model::SliceHybridLM(p.model, c);
  EXPECT_THAT(child.status(), IsOk());
  const std::string dir = testing::NewTestDir("decilm_child_");
  EXPECT_THAT(model::SaveHybridLM(*child, dir), IsOk());
  if (out != nullptr) *out = *child;
  return dir;
}

absl::StatusOr<hf::HfExportSummary> Export(const Parent& p, const std::string& child,
                                           const std::string& out) {
  hf::HfExportOptions f32;
  f32.dtype = model::DType::kF32;
  return hf::ExportStudentAsHf(child, p.checkpoint, out, f32);
}

TEST(DeciLmExportTest, FfnWidthFollowsTheLoadersFormula) {
  EXPECT_EQ(hf::DeciLmFfnWidth(5.25, 4096), 14336);     // Llama-3.1-8B's MLP
  EXPECT_EQ(hf::DeciLmFfnWidth(1.95, 16384), 21504);    // 21299 rounded up
  EXPECT_EQ(hf::DeciLmFfnWidth(31.40625, 16384), 343040);
  EXPECT_EQ(hf::DeciLmFfnWidth(12.0, 32), 256);
}

TEST(DeciLmExportTest, PerLayerStudentIsWrittenAsBlockConfigs) {
  const Parent p = ImportParent();
  // Layer 0 whole but a 256-wide MLP, layer 1 without attention, layer 2 without MLP: the
  // Llama layout cannot hold it.
  const std::string child = SaveChild(p, {{4, 2, 256}, {0, 0, 512}, {4, 2, 0}});
  const std::string out = testing::NewTestDir("decilm_out_") + "/hf";
  absl::StatusOr<hf::HfExportSummary> s = Export(p, child, out);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->layout.architecture, "DeciLMForCausalLM");
  EXPECT_EQ(s->layout.kept_layers, (std::vector<int64_t>{0, 1, 2}));
  const Json config = Json::parse(*model::ReadFileToString(out + "/config.json"));
  EXPECT_EQ(config["architectures"], Json::array({"DeciLMForCausalLM"}));
  EXPECT_EQ(config["model_type"], "nemotron-nas");
  EXPECT_EQ(config["num_hidden_layers"], 3);
  EXPECT_EQ(config["num_attention_heads"], 4);
  EXPECT_TRUE(config["num_key_value_heads"].is_null());
  EXPECT_TRUE(config["intermediate_size"].is_null());
  EXPECT_FALSE(config.contains("head_dim"));
  EXPECT_EQ(config["rope_scaling"]["rope_type"], "llama3");  // the parent's, verbatim
  const Json want = Json::parse(R"([
    {"attention": {"n_heads_in_group": 2, "no_op": false, "replace_with_linear": false},
     "ffn": {"ffn_mult": 12.0, "no_op": false, "replace_with_linear": false}},
    {"attention": {"n_heads_in_group": null, "no_op": true, "replace_with_linear": false},
     "ffn": {"ffn_mult": 24.0, "no_op": false, "replace_with_linear": false}},
    {"attention": {"n_heads_in_group": 2, "no_op": false, "replace_with_linear": false},
     "ffn": {"ffn_mult": null, "no_op": true, "replace_with_linear": false}}])");
  EXPECT_EQ(config["block_configs"], want);

  absl::StatusOr<model::SafetensorsFile> f =
      model::SafetensorsFile::Read(out + "/" + s->shards.at(0));
  ASSERT_THAT(f.status(), IsOk());
  std::set<std::string> names;
  for (const model::TensorEntry& e : f->tensors()) names.insert(e.name);
  EXPECT_EQ(names.count("model.layers.1.self_attn.q_proj.weight"), 0u);
  EXPECT_EQ(names.count("model.layers.1.input_layernorm.weight"), 0u);
  EXPECT_EQ(names.count("model.layers.2.mlp.up_proj.weight"), 0u);
  EXPECT_EQ(names.count("model.layers.2.post_attention_layernorm.weight"), 0u);
  EXPECT_EQ(names.count("model.layers.2.input_layernorm.weight"), 1u);
  EXPECT_EQ(f->Find("model.layers.0.mlp.gate_proj.weight")->shape,
            (std::vector<int64_t>{256, 32}));
  EXPECT_EQ(f->Find("model.layers.1.mlp.down_proj.weight")->shape,
            (std::vector<int64_t>{32, 512}));
  EXPECT_EQ(f->Find("model.layers.2.self_attn.k_proj.weight")->shape,
            (std::vector<int64_t>{16, 32}));  // 4 / n_heads_in_group = 2 KV heads of 8
  // embed, norm, head; layer 0 norm + q/k/v/o and norm + gate/up/down; 1 the MLP; 2 attention
  EXPECT_EQ(names.size(), 3u + (5 + 4) + 4 + 5);
}

// Reads a DeciLM folder the way its loaders do (block_configs -> per-layer shapes with the
// ffn_mult formula, Llama tensor names) into tailor's model family.
absl::StatusOr<model::HybridLM> ReadDeciLm(const std::string& dir, const Parent& p) {
  const Json config = Json::parse(*model::ReadFileToString(dir + "/config.json"));
  const int64_t hidden = config["hidden_size"], heads = config["num_attention_heads"];
  model::HybridConfig c = p.model->config();
  c.hidden = hidden;
  for (size_t j = 0; j < config["block_configs"].size(); ++j) {
    const Json& b = config["block_configs"][j];
    model::LayerSpec& a = c.layers[2 * j];
    a.attention.heads = b["attention"]["no_op"] ? 0 : heads;
    a.attention.kv_heads =
        b["attention"]["no_op"] ? 0 : heads / b["attention"]["n_heads_in_group"].get<int64_t>();
    a.attention.head_dim = b["attention"]["no_op"] ? 0 : hidden / heads;
    int64_t f = 0;
    if (!b["ffn"]["no_op"]) {
      f = static_cast<int64_t>(2 * b["ffn"]["ffn_mult"].get<double>() * hidden / 3);
      f = (f + 255) / 256 * 256;
    }
    c.layers[2 * j + 1].mlp.ffn = f;
  }
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM m, model::CreateUninitializedHybridLM(c));
  TAILOR_ASSIGN_OR_RETURN(model::SafetensorsFile f,
                          model::SafetensorsFile::Read(dir + "/model.safetensors"));
  TAILOR_ASSIGN_OR_RETURN(auto names, hf::HfTensorMapping(p.checkpoint.config()));
  model::TensorMap tensors;
  for (const auto& [hf_name, internal] : names) {
    const model::TensorEntry* e = f.Find(hf_name);
    if (e == nullptr) continue;  // a no_op part
    const absl::string_view bytes = f.Bytes(*e);
    tensors[internal] = torch::from_blob(const_cast<char*>(bytes.data()), e->shape,
                                         torch::kFloat32).clone();
  }
  TAILOR_RETURN_IF_ERROR(m->LoadStateDict(tensors, dir));
  return m;
}

TEST(DeciLmExportTest, AReaderOfTheLayoutComputesExactlyTheStudent) {
  const Parent p = ImportParent();
  model::HybridLM student{nullptr};
  const std::string child = SaveChild(p, {{4, 2, 256}, {0, 0, 512}, {4, 2, 0}}, &student);
  const std::string out = testing::NewTestDir("decilm_out_") + "/hf";
  ASSERT_THAT(Export(p, child, out).status(), IsOk());
  absl::StatusOr<model::HybridLM> back = ReadDeciLm(out, p);
  ASSERT_THAT(back.status(), IsOk());
  const std::vector<int64_t> tokens = {1, 5, 17, 33, 60, 2, 9, 41};
  auto ours = hf::NextTokenLogprobs(student, tokens, {0, 3, 7});
  auto theirs = hf::NextTokenLogprobs(*back, tokens, {0, 3, 7});
  ASSERT_THAT(ours.status(), IsOk());
  ASSERT_THAT(theirs.status(), IsOk());
  EXPECT_EQ(*ours, *theirs);  // F32 export: the same numbers
}

TEST(DeciLmExportTest, WhatNeitherLayoutHoldsIsRefusedWithBothReasons) {
  const Parent p = ImportParent();
  const std::string dir = testing::NewTestDir("decilm_out_");
  // An FFN width that is not a multiple of 256.
  EXPECT_THAT(Export(p, SaveChild(p, {{4, 2, 200}, {4, 2, 512}, {4, 2, 512}}), dir + "/a")
                  .status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("does not fit the LlamaForCausalLM layout: decoder layer 1 "
                                 "has MLP width 512, an earlier layer 200")));
  EXPECT_THAT(Export(p, SaveChild(p, {{4, 2, 200}, {4, 2, 512}, {4, 2, 512}}), dir + "/b")
                  .status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("; and DeciLM's block_configs layout: decoder layer 0 has FFN "
                                 "width 200, not a multiple of 256 (widths are ffn_mult x 2/3 "
                                 "x hidden rounded up to 256)")));
  // Pruned query heads: DeciLM has one query-head count, heads x head size = hidden.
  EXPECT_THAT(Export(p, SaveChild(p, {{2, 1, 256}, {4, 2, 512}, {4, 2, 512}}), dir + "/c")
                  .status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("DeciLM's block_configs layout: decoder layer 0: 2 query heads "
                                 "x 8 must equal the hidden width 32")));
  EXPECT_FALSE(std::filesystem::exists(dir + "/a"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/a.tmp"));
}

}  // namespace
}  // namespace tailor
