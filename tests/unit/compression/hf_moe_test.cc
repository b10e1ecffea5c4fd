// The MoE families (MixtralForCausalLM, Qwen3MoeForCausalLM): the `moe` block's router
// variants on hand-made inputs, the Nemotron-H-style block (sigmoid router, score bias,
// groups, relu2 experts) against a dense reference and under permutation and slicing, the
// config JSON of the variants, the import and GGUF export of both tiny checkpoints, and
// tailor's next-token distribution against llama.cpp's on the GGUF tailor exported.

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "compression/gguf/gguf_reader.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/gguf/llama_cpp_sidecar.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_import.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"
#include "compression/model/moe.h"
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
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using model::FfnActivation;
using model::MoeRouter;
using model::MoeSpec;

std::string NewDir() { return testing::NewTestDir("hf_moe_"); }

MoeSpec Spec(int64_t experts, int64_t top_k) {
  MoeSpec s;
  s.experts = experts;
  s.top_k = top_k;
  s.expert_ffn = 4;
  return s;
}

// Routing as {expert: weight} of row 0, sorted by expert.
std::vector<std::pair<int64_t, double>> Row0(const model::MoeRouting& r) {
  std::vector<std::pair<int64_t, double>> out;
  for (int64_t j = 0; j < r.experts.size(1); ++j) {
    out.emplace_back(r.experts[0][j].item<int64_t>(), r.weights[0][j].item<double>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

at::Tensor Row(std::vector<float> v) {
  return torch::tensor(v, torch::kFloat).view({1, static_cast<int64_t>(v.size())});
}

// --- router math ---------------------------------------------------------------------

TEST(MoeRouterTest, DefaultIsSoftmaxOverTheTopKLogits) {  // Mixtral, Qwen3-MoE normalised
  const auto r = Row0(model::RouteTokens(Spec(4, 2), Row({1, 3, 2, 0}), {}));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].first, 1);
  EXPECT_EQ(r[1].first, 2);
  EXPECT_NEAR(r[0].second, std::exp(1.0) / (std::exp(1.0) + 1), 1e-6);
  EXPECT_NEAR(r[1].second, 1 / (std::exp(1.0) + 1), 1e-6);
}

TEST(MoeRouterTest, SoftmaxWithoutRenormalisationKeepsTheFullSoftmax) {  // norm_topk_prob false
  MoeSpec s = Spec(4, 2);
  s.norm_top_k = false;
  const auto r = Row0(model::RouteTokens(s, Row({1, 3, 2, 0}), {}));
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1;
  EXPECT_EQ(r[0].first, 1);
  EXPECT_NEAR(r[0].second, std::exp(3.0) / z, 1e-6);
  EXPECT_EQ(r[1].first, 2);
  EXPECT_NEAR(r[1].second, std::exp(2.0) / z, 1e-6);
}

TEST(MoeRouterTest, SigmoidBiasChoosesButDoesNotWeigh) {  // Nemotron-H
  MoeSpec s = Spec(4, 2);
  s.router = MoeRouter::kSigmoid;
  s.score_bias = true;
  s.scale = 2.5;
  // Expert 0 has the lowest score but the bias makes it a choice; its weight stays sigmoid(0).
  const at::Tensor bias = torch::tensor({3.0f, 0.0f, 0.0f, 0.0f});
  const auto r = Row0(model::RouteTokens(s, Row({0, 1, -1, 2}), bias));
  const double s0 = 0.5, s3 = 1 / (1 + std::exp(-2.0));
  EXPECT_EQ(r[0].first, 0);
  EXPECT_EQ(r[1].first, 3);
  EXPECT_NEAR(r[0].second, 2.5 * s0 / (s0 + s3), 1e-6);
  EXPECT_NEAR(r[1].second, 2.5 * s3 / (s0 + s3), 1e-6);
  s.norm_top_k = false;
  const auto raw = Row0(model::RouteTokens(s, Row({0, 1, -1, 2}), bias));
  EXPECT_NEAR(raw[0].second, 2.5 * s0, 1e-6);
  EXPECT_NEAR(raw[1].second, 2.5 * s3, 1e-6);
}

TEST(MoeRouterTest, GroupsRankedByTheirTwoBestChoices) {
  MoeSpec s = Spec(4, 2);
  s.router = MoeRouter::kSigmoid;
  s.score_bias = true;
  s.groups = 2;
  s.top_groups = 1;
  // All scores 0.5; choice = [0.9, 0.1, 0.6, 0.5]: expert 0 is best, but group {2, 3} sums
  // to 1.1 > 1.0, so only experts 2 and 3 are eligible.
  const auto r = Row0(model::RouteTokens(s, Row({0, 0, 0, 0}),
                                         torch::tensor({0.4f, -0.4f, 0.1f, 0.0f})));
  EXPECT_EQ(r[0].first, 2);
  EXPECT_EQ(r[1].first, 3);
  EXPECT_NEAR(r[0].second, 0.5, 1e-6);
  // The reference masks the other groups with 0, not -inf: with negative choice values in
  // the kept group, the masked experts win (choice [-0.5, -0.5, -0.1, -0.2]).
  const auto masked = Row0(model::RouteTokens(s, Row({0, 0, 0, 0}),
                                              torch::tensor({-1.0f, -1.0f, -0.6f, -0.7f})));
  EXPECT_EQ(masked[0].first, 0);
  EXPECT_EQ(masked[1].first, 1);
}

// --- the Nemotron-H-style block -----------------------------------------------------------

model::HybridConfig VariantConfig() {
  model::HybridConfig c;
  c.vocab = 40;
  c.hidden = 16;
  c.max_seq = 32;
  c.layers.push_back(model::LayerSpec::Attention(2, 1, 8));
  // 8 experts in 2 groups of 4, only the best group eligible.
  model::LayerSpec moe = model::LayerSpec::Moe(8, 2, 6, 5);
  moe.moe.router = MoeRouter::kSigmoid;
  moe.moe.score_bias = true;
  moe.moe.groups = 2;
  moe.moe.top_groups = 1;
  moe.moe.scale = 2.5;
  moe.moe.norm_top_k = true;
  moe.moe.activation = FfnActivation::kReluSquared;
  c.layers.push_back(moe);
  return c;
}

model::HybridLM VariantModel() {
  absl::StatusOr<model::HybridLM> m = model::CreateHybridLM(VariantConfig(), 7);
  EXPECT_THAT(m.status(), IsOk());
  torch::NoGradGuard no_grad;
  // A bias large enough to change choices, so moving it with its expert matters.
  for (auto& p : (*m)->named_parameters()) {
    if (p.key() == "layers.1.moe.score_bias") p.value().copy_(torch::randn({8}) * 0.3);
  }
  return *m;
}

at::Tensor Logits(model::HybridLM& m, const at::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  absl::StatusOr<model::ForwardOutput> out = m->Forward(tokens);
  EXPECT_THAT(out.status(), IsOk());
  return out->logits;
}

TEST(MoeVariantTest, ConfigJsonWritesOnlyNonDefaultVariantsAndParsesStrictly) {
  const model::HybridConfig c = VariantConfig();
  const std::string json = model::HybridConfigToJson(c);
  EXPECT_THAT(json, HasSubstr("\"router\": \"sigmoid\""));
  EXPECT_THAT(json, HasSubstr("\"activation\": \"relu2\""));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("norm_top_k")));  // default
  absl::StatusOr<model::HybridConfig> back = model::ParseHybridConfigJson(json);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(*back, c);
  model::HybridConfig demo;
  demo.vocab = 8, demo.hidden = 8, demo.max_seq = 8;
  demo.layers.push_back(model::LayerSpec::Moe(4, 2, 8, 8));
  const nlohmann::json demo_moe =
      nlohmann::json::parse(model::HybridConfigToJson(demo))["layers"][0]["moe"];
  EXPECT_EQ(demo_moe.size(), 4u) << demo_moe.dump();  // the demo family's text is unchanged
  std::string bad = json;
  bad.replace(bad.find("\"sigmoid\""), 9, "\"sigmoidal\"");
  EXPECT_THAT(model::ParseHybridConfigJson(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layers[1].moe.router: unknown router \"sigmoidal\"")));
  model::HybridConfig odd = c;
  odd.layers[1].moe.groups = 3;
  EXPECT_THAT(model::ValidateHybridConfig(odd),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layers[1].moe.groups: must divide experts (8), got 3")));
  odd.layers[1].moe.groups = 2;
  odd.layers[1].moe.top_groups = 3;
  EXPECT_THAT(model::ValidateHybridConfig(odd),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers[1].moe.top_groups")));
  odd.layers[1].moe.top_groups = 1;
  odd.layers[1].moe.top_k = 5;  // only the 4 experts of one group are eligible
  EXPECT_THAT(model::ValidateHybridConfig(odd),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers[1].moe.top_k")));
  // relu2: two matrices per expert and per shared expert, plus the score bias.
  const int64_t moe_params = 16 + 8 * 16 + 8 * 2 * 16 * 6 + 2 * 16 * 5 + 8;
  model::HybridConfig only_moe = c;
  only_moe.layers.erase(only_moe.layers.begin());
  EXPECT_EQ(only_moe.ParameterCount(), 2 * 40 * 16 + 16 + moe_params);
}

// The block against a dense reference: every token through its chosen relu2 experts.
TEST(MoeVariantTest, ForwardEqualsDenseReference) {
  torch::manual_seed(3);
  model::MixerInit init;
  init.hidden = 16;
  model::MoeImpl block(VariantConfig().layers[1].moe, init);
  auto params = block.named_parameters();
  ASSERT_EQ(params.find("w_gate"), nullptr);  // relu2: no gate projections
  ASSERT_EQ(params.find("shared_gate"), nullptr);
  {
    torch::NoGradGuard no_grad;
    params["score_bias"].copy_(torch::randn({8}) * 0.03);
  }
  const at::Tensor x = torch::randn({1, 6, 16});
  model::LayerContext ctx;
  const at::Tensor y = block.Forward(x, ctx).view({6, 16});
  const at::Tensor xf = x.view({6, 16});
  const model::MoeRouting r = model::RouteTokens(
      block.spec(), torch::matmul(xf, params["router"].t()), params["score_bias"]);
  for (int64_t n = 0; n < 6; ++n) {
    at::Tensor want = torch::zeros({16});
    for (int64_t j = 0; j < 2; ++j) {
      const int64_t e = r.experts[n][j].item<int64_t>();
      const at::Tensor up = torch::relu(torch::mv(params["w_up"][e], xf[n]));
      want += r.weights[n][j] * torch::mv(params["w_down"][e], up * up);
    }
    const at::Tensor su = torch::relu(torch::mv(params["shared_up"], xf[n]));
    want += torch::mv(params["shared_down"], su * su);
    EXPECT_TRUE(torch::allclose(y[n], want, 1e-5, 1e-7)) << n;
  }
}

TEST(MoeVariantTest, PermutationKeepsTheFunctionAndMovesTheScoreBias) {
  model::HybridLM m = VariantModel();
  const at::Tensor tokens = torch::randint(0, 40, {2, 12}, torch::kLong);
  const at::Tensor before = Logits(m, tokens);
  const at::Tensor bias = m->StateDict().at("layers.1.moe.score_bias").clone();
  model::Permutation perm;
  perm.hidden = {15, 3, 2, 1, 0, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  perm.layers.resize(2);
  // The groups trade places and experts move inside them.
  perm.layers[1].experts = {7, 5, 6, 4, 0, 2, 1, 3};
  for (int e = 0; e < 8; ++e) perm.layers[1].expert_ffn.push_back({5, 4, 3, 2, 1, 0});
  perm.layers[1].shared_ffn = {4, 0, 1, 2, 3};
  ASSERT_THAT(model::PermuteHybridLM(m, perm), IsOk());
  EXPECT_TRUE(torch::allclose(Logits(m, tokens), before, 1e-5, 1e-5));
  const at::Tensor moved = m->StateDict().at("layers.1.moe.score_bias");
  EXPECT_TRUE(torch::equal(moved, bias.index_select(0, torch::tensor({7, 5, 6, 4, 0, 2, 1, 3}))));
  model::LayerPermutation across;
  across.experts = {0, 1, 2, 4, 3, 5, 6, 7};  // would regroup experts 3 and 4
  EXPECT_THAT(m->PermuteLayer(1, across),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("whole groups")));
}

TEST(MoeVariantTest, SlicingKeepsVariantsAndPrefixes) {
  model::HybridLM m = VariantModel();
  model::HybridConfig child = VariantConfig();
  child.layers[1].moe.expert_ffn = 4;
  child.layers[1].moe.shared_ffn = 3;
  absl::StatusOr<model::HybridLM> s = model::SliceHybridLM(m, child);
  ASSERT_THAT(s.status(), IsOk());
  const model::TensorMap p = m->StateDict(), c = (*s)->StateDict();
  EXPECT_TRUE(torch::equal(c.at("layers.1.moe.score_bias"), p.at("layers.1.moe.score_bias")));
  EXPECT_TRUE(torch::equal(c.at("layers.1.moe.w_up"), p.at("layers.1.moe.w_up").narrow(1, 0, 4)));
  EXPECT_TRUE(torch::equal(c.at("layers.1.moe.shared_down"),
                           p.at("layers.1.moe.shared_down").narrow(1, 0, 3)));
  model::HybridConfig same = VariantConfig();
  absl::StatusOr<model::HybridLM> full = model::SliceHybridLM(m, same);
  ASSERT_THAT(full.status(), IsOk());
  const at::Tensor tokens = torch::randint(0, 40, {1, 9}, torch::kLong);
  EXPECT_TRUE(torch::equal(Logits(*full, tokens), Logits(m, tokens)));
  model::HybridConfig fewer = VariantConfig();
  fewer.layers[1].moe.experts = 4;
  fewer.layers[1].moe.groups = 1;
  EXPECT_THAT(model::SliceHybridLM(m, fewer).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("moe variants")));
  // The parent's 2 groups of 4, each keeping its first 2: experts {0, 1, 4, 5}.
  fewer.layers[1].moe.groups = 2;
  absl::StatusOr<model::HybridLM> grouped = model::SliceHybridLM(m, fewer);
  ASSERT_THAT(grouped.status(), IsOk());
  const at::Tensor kept = torch::tensor({0, 1, 4, 5}, torch::kLong);
  const model::TensorMap g = (*grouped)->StateDict();
  for (const char* name : {"router", "score_bias", "w_up", "w_down"}) {
    const std::string key = absl::StrCat("layers.1.moe.", name);
    EXPECT_TRUE(torch::equal(g.at(key), p.at(key).index_select(0, kept))) << name;
  }
}

// --- import --------------------------------------------------------------------------

// A BF16 two-shard test checkpoint of `arch`, its config edited by `edit`.
std::string WriteCheckpoint(absl::string_view arch,
                            void (*edit)(nlohmann::json&) = [](nlohmann::json&) {}) {
  const std::string dir = NewDir();
  nlohmann::json config = testing::TinyHfConfig(arch);
  edit(config);
  EXPECT_THAT(testing::WriteHfCheckpointFiles(
                  dir, config, testing::HfTestTensors(config, model::DType::kBF16, 1), 2),
              IsOk());
  return dir;
}

void AllSparse(nlohmann::json& c) { c.erase("mlp_only_layers"); }
void Unnormalised(nlohmann::json& c) { c["norm_topk_prob"] = false; }

float Bf16At(const hf::TensorView& v, int64_t i) {
  uint16_t bits;
  std::memcpy(&bits, v.data + 2 * i, 2);
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

// Every element of HF tensor `hf_name` equals `internal`.
void ExpectSameValues(const hf::HfCheckpoint& c, const std::string& hf_name,
                      const at::Tensor& internal) {
  absl::StatusOr<hf::TensorView> v = c.Tensor(hf_name);
  ASSERT_THAT(v.status(), IsOk());
  ASSERT_EQ(v->dtype, model::DType::kBF16);
  const at::Tensor flat = internal.contiguous().view({-1});
  ASSERT_EQ(flat.numel() * 2, static_cast<int64_t>(v->size_bytes)) << hf_name;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    ASSERT_EQ(flat[i].item<float>(), Bf16At(*v, i)) << hf_name << " element " << i;
  }
}

TEST(HfMoeImportTest, MixtralInternalConfigAndStackedExperts) {
  const std::string dir = WriteCheckpoint("MixtralForCausalLM");
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(dir);
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridConfig> config = hf::HybridConfigFromHf(c->config());
  ASSERT_THAT(config.status(), IsOk());
  ASSERT_EQ(config->num_layers(), 4);
  const model::LayerSpec& moe = config->layers[1];
  ASSERT_EQ(moe.kind, model::LayerKind::kMoe);
  EXPECT_EQ(moe.moe.experts, 4);
  EXPECT_EQ(moe.moe.top_k, 2);
  EXPECT_EQ(moe.moe.expert_ffn, 24);
  EXPECT_EQ(moe.moe.shared_ffn, 0);
  EXPECT_TRUE(moe.moe.is_default_variant());  // softmax over the top-k logits
  absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*c);
  ASSERT_THAT(m.status(), IsOk());
  const model::TensorMap w = (*m)->StateDict();
  ExpectSameValues(*c, "model.layers.1.block_sparse_moe.gate.weight", w.at("layers.3.moe.router"));
  ExpectSameValues(*c, "model.layers.1.post_attention_layernorm.weight", w.at("layers.3.norm"));
  for (int e = 0; e < 4; ++e) {
    const std::string p = absl::StrCat("model.layers.0.block_sparse_moe.experts.", e, ".");
    ExpectSameValues(*c, p + "w1.weight", w.at("layers.1.moe.w_gate")[e]);
    ExpectSameValues(*c, p + "w3.weight", w.at("layers.1.moe.w_up")[e]);
    ExpectSameValues(*c, p + "w2.weight", w.at("layers.1.moe.w_down")[e]);
  }
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> map =
      hf::HfTensorMapping(c->config());
  ASSERT_THAT(map.status(), IsOk());
  EXPECT_EQ(map->size(), hf::ExpectedTensors(c->config()).size());
  EXPECT_THAT(*map, ::testing::Contains(::testing::Pair(
                        "model.layers.1.block_sparse_moe.experts.3.w2.weight",
                        "layers.3.moe.w_down[3]")));
}

TEST(HfMoeImportTest, Qwen3MoeDenseLayersQkNormsAndNormTopkProb) {
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(WriteCheckpoint(
      "Qwen3MoeForCausalLM"));
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*c);
  ASSERT_THAT(m.status(), IsOk());
  const model::HybridConfig& config = (*m)->config();
  ASSERT_EQ(config.num_layers(), 6);
  EXPECT_TRUE(config.layers[0].attention.qk_norm);
  EXPECT_EQ(config.layers[1].kind, model::LayerKind::kMoe);
  EXPECT_EQ(config.layers[3].kind, model::LayerKind::kMlp);  // mlp_only_layers [1]
  EXPECT_EQ(config.layers[3].mlp.ffn, 40);
  EXPECT_EQ(config.layers[5].kind, model::LayerKind::kMoe);
  EXPECT_EQ(config.layers[5].moe.expert_ffn, 16);
  EXPECT_TRUE(config.layers[5].moe.norm_top_k);
  const model::TensorMap w = (*m)->StateDict();
  ExpectSameValues(*c, "model.layers.2.mlp.experts.1.down_proj.weight",
                   w.at("layers.5.moe.w_down")[1]);
  ExpectSameValues(*c, "model.layers.2.mlp.gate.weight", w.at("layers.5.moe.router"));
  ExpectSameValues(*c, "model.layers.1.mlp.up_proj.weight", w.at("layers.3.mlp.w_up"));

  absl::StatusOr<hf::HfCheckpoint> raw =
      hf::HfCheckpoint::Open(WriteCheckpoint("Qwen3MoeForCausalLM", Unnormalised));
  ASSERT_THAT(raw.status(), IsOk());
  absl::StatusOr<model::HybridConfig> rc = hf::HybridConfigFromHf(raw->config());
  ASSERT_THAT(rc.status(), IsOk());
  EXPECT_FALSE(rc->layers[1].moe.norm_top_k);
}

// --- GGUF export ----------------------------------------------------------------------

std::vector<float> Floats(absl::string_view bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::vector<float> HfFloats(const hf::HfCheckpoint& c, const std::string& name) {
  absl::StatusOr<hf::TensorView> v = c.Tensor(name);
  EXPECT_THAT(v.status(), IsOk());
  std::vector<float> out;
  for (int64_t i = 0; i < static_cast<int64_t>(v->size_bytes / 2); ++i) {
    out.push_back(Bf16At(*v, i));
  }
  return out;
}

TEST(HfMoeGgufTest, MixtralIsLlamaWithStackedExperts) {
  const std::string dir = WriteCheckpoint("MixtralForCausalLM");
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(dir);
  ASSERT_THAT(c.status(), IsOk());
  gguf::GgufExportOptions o;
  o.all_f32 = true;
  absl::StatusOr<gguf::GgufExportSummary> s = gguf::ExportHfToGguf(*c, dir + "/m.gguf", o);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->arch, "llama");
  EXPECT_TRUE(s->qk_permuted);
  EXPECT_EQ(s->map.size(), hf::ExpectedTensors(c->config()).size());
  absl::StatusOr<gguf::GgufFile> f = gguf::GgufFile::Read(dir + "/m.gguf");
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(std::get<uint32_t>(*f->Find("llama.expert_count")), 4u);
  EXPECT_EQ(std::get<uint32_t>(*f->Find("llama.expert_used_count")), 2u);
  EXPECT_EQ(std::get<uint32_t>(*f->Find("llama.feed_forward_length")), 24u);
  // embedding, norm, output + 2 x (attn_norm, q, k, v, o, ffn_norm, gate_inp, 3 stacks).
  EXPECT_EQ(f->tensors().size(), 23u);
  EXPECT_THAT(f->FindTensor("blk.1.ffn_gate_inp.weight")->ne, ElementsAre(32, 4));
  EXPECT_THAT(f->FindTensor("blk.1.ffn_gate_exps.weight")->ne, ElementsAre(32, 24, 4));
  EXPECT_THAT(f->FindTensor("blk.1.ffn_down_exps.weight")->ne, ElementsAre(24, 32, 4));
  std::vector<float> want;
  for (int e = 0; e < 4; ++e) {
    const std::vector<float> x =
        HfFloats(*c, absl::StrCat("model.layers.1.block_sparse_moe.experts.", e, ".w3.weight"));
    want.insert(want.end(), x.begin(), x.end());
  }
  EXPECT_EQ(Floats(f->TensorData(*f->FindTensor("blk.1.ffn_up_exps.weight"))), want);
}

TEST(HfMoeGgufTest, Qwen3MoeIsQwen3moeAndRefusesWhatItCannotExpress) {
  const std::string dir = WriteCheckpoint("Qwen3MoeForCausalLM", AllSparse);
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(dir);
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<gguf::GgufExportSummary> s = gguf::ExportHfToGguf(*c, dir + "/m.gguf");
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->arch, "qwen3moe");
  EXPECT_FALSE(s->qk_permuted);
  absl::StatusOr<gguf::GgufFile> f = gguf::GgufFile::Read(dir + "/m.gguf");
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(std::get<uint32_t>(*f->Find("qwen3moe.expert_feed_forward_length")), 16u);
  EXPECT_EQ(std::get<uint32_t>(*f->Find("qwen3moe.expert_count")), 4u);
  const gguf::TensorInfo* down = f->FindTensor("blk.2.ffn_down_exps.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_THAT(down->ne, ElementsAre(16, 32, 4));
  EXPECT_EQ(down->type, gguf::TensorType::kBF16);  // kept without all_f32
  ASSERT_NE(f->FindTensor("blk.0.attn_q_norm.weight"), nullptr);

  const std::pair<void (*)(nlohmann::json&), const char*> refused[] = {
      {[](nlohmann::json&) {}, "mlp_only_layers"},  // the tiny checkpoint's dense layer 1
      {[](nlohmann::json& j) {
         AllSparse(j);
         Unnormalised(j);
       },
       "norm_topk_prob = false"},
  };
  for (const auto& [edit, reason] : refused) {
    const std::string d = WriteCheckpoint("Qwen3MoeForCausalLM", edit);
    absl::StatusOr<hf::HfCheckpoint> k = hf::HfCheckpoint::Open(d);
    ASSERT_THAT(k.status(), IsOk());
    EXPECT_THAT(gguf::ExportHfToGguf(*k, d + "/m.gguf").status(),
                StatusIs(absl::StatusCode::kUnimplemented,
                         ::testing::AllOf(HasSubstr("Qwen3MoeForCausalLM"), HasSubstr(reason))));
    EXPECT_NE(access((d + "/m.gguf").c_str(), F_OK), 0);
  }
}

// --- against llama.cpp ----------------------------------------------------------------

// Controls that the comparison sees the routing: the imported model with the experts' weights
// reversed but not the router rows (every token reaches the wrong experts), or with the
// top-k renormalisation flipped.
absl::StatusOr<model::HybridLM> Control(const model::HybridLM& m, bool misrouted) {
  model::TensorMap w = m->StateDict();
  model::HybridConfig config = m->config();
  for (auto& [name, t] : w) {
    if (misrouted && name.find(".moe.w_") != std::string::npos) t = t.flip({0}).contiguous();
  }
  for (model::LayerSpec& l : config.layers) {
    if (!misrouted && l.kind == model::LayerKind::kMoe) l.moe.norm_top_k = !l.moe.norm_top_k;
  }
  absl::StatusOr<model::HybridLM> out = model::CreateUninitializedHybridLM(config);
  if (!out.ok()) return out.status();
  absl::Status s = (*out)->LoadStateDict(w, "control");
  if (!s.ok()) return s;
  return out;
}

void CheckAgainstLlamaCpp(absl::string_view arch, void (*edit)(nlohmann::json&)) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  const std::string dir = WriteCheckpoint(arch, edit);
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(dir);
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*c);
  ASSERT_THAT(m.status(), IsOk());
  absl::StatusOr<model::HybridLM> misrouted_model = Control(*m, /*misrouted=*/true);
  ASSERT_THAT(misrouted_model.status(), IsOk());
  absl::StatusOr<model::HybridLM> renormalised_model = Control(*m, /*misrouted=*/false);
  ASSERT_THAT(renormalised_model.status(), IsOk());
  const std::string gguf_path = NewDir() + "/model.gguf";
  gguf::GgufExportOptions options;
  options.all_f32 = true;
  ASSERT_THAT(gguf::ExportHfToGguf(*c, gguf_path, options).status(), IsOk());
  auto logprobs_of = [](model::HybridLM model) -> testing::LogprobsFn {
    return [model](const auto& tokens, const auto& positions) mutable {
      return hf::NextTokenLogprobs(model, tokens, positions);
    };
  };
  testing::LlamaCppComparison comparison;
  comparison.controls = {{"misrouted", logprobs_of(*misrouted_model)},
                         {"norm_top_k flipped", logprobs_of(*renormalised_model)}};
  testing::ExpectAgreesWithLlamaCpp(logprobs_of(*m), gguf_path, comparison, std::string(arch));
}

TEST(HfMoeLlamaCppTest, MixtralMatchesLlamaCpp) {
  CheckAgainstLlamaCpp("MixtralForCausalLM", [](nlohmann::json&) {});
}

TEST(HfMoeLlamaCppTest, Qwen3MoeMatchesLlamaCpp) {
  CheckAgainstLlamaCpp("Qwen3MoeForCausalLM", AllSparse);
}

}  // namespace
}  // namespace tailor
