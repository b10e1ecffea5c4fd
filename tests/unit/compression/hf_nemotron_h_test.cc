// Nemotron-H in tailor's model family: the block variants it needs (grouped Mamba-2 with the
// per-group gated RMSNorm, the squared-ReLU MLP) on small hand-made inputs, the import of
// NemotronHForCausalLM checkpoints, the `nemotron_h` GGUF export, and tailor's next-token
// distribution against llama.cpp's (node-llama-cpp sidecar) on that GGUF: an implementation
// tailor did not write, so agreement shows the block math, the tensor split and the export
// right.

#include <stdlib.h>
#include <unistd.h>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/gguf/gguf_reader.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/gguf/llama_cpp_sidecar.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_import.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"
#include "compression/model/mamba.h"
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
using Json = nlohmann::json;

std::string NewDir() { return testing::NewTestDir("hf_nemotron_h_"); }

double MaxDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// --- block variants ----------------------------------------------------------------------

model::HybridConfig GroupedConfig() {
  model::HybridConfig c;
  c.vocab = 32;
  c.hidden = 16;
  c.max_seq = 32;
  model::LayerSpec mamba = model::LayerSpec::Mamba(4, 4, 6, 4, 5);
  mamba.mamba.groups = 2;
  mamba.mamba.norm = model::MambaNorm::kPerGroup;
  model::LayerSpec mlp = model::LayerSpec::Mlp(24);
  mlp.mlp.activation = model::FfnActivation::kReluSquared;
  c.layers = {mamba, mlp};
  return c;
}

TEST(NemotronHVariantsTest, ConfigJsonWritesOnlyNonDefaultsAndParsesStrictly) {
  const model::HybridConfig c = GroupedConfig();
  const std::string json = model::HybridConfigToJson(c);
  EXPECT_THAT(json, HasSubstr("\"groups\": 2"));
  EXPECT_THAT(json, HasSubstr("\"norm\": \"group\""));
  EXPECT_THAT(json, HasSubstr("\"activation\": \"relu2\""));
  absl::StatusOr<model::HybridConfig> back = model::ParseHybridConfigJson(json);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(*back, c);
  // Defaults stay out of the text: the demo family's configs are unchanged.
  model::HybridConfig plain = c;
  plain.layers[0].mamba.groups = 1;
  plain.layers[0].mamba.norm = model::MambaNorm::kPerHead;
  plain.layers[1].mlp.activation = model::FfnActivation::kSwiGlu;
  const std::string plain_json = model::HybridConfigToJson(plain);
  EXPECT_THAT(plain_json, ::testing::Not(HasSubstr("groups")));
  EXPECT_THAT(plain_json, ::testing::Not(HasSubstr("\"norm\"")));
  EXPECT_THAT(plain_json, ::testing::Not(HasSubstr("activation")));
  // Field-named errors.
  Json bad = Json::parse(json);
  bad["layers"][0]["mamba"]["groups"] = 3;
  EXPECT_THAT(model::ParseHybridConfigJson(bad.dump()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layers[0].mamba.groups: must divide heads (4), got 3")));
  bad = Json::parse(json);
  bad["layers"][0]["mamba"]["norm"] = "channel";
  EXPECT_THAT(model::ParseHybridConfigJson(bad.dump()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers[0].mamba.norm")));
  bad = Json::parse(json);
  bad["layers"][1]["mlp"]["activation"] = "gelu";
  EXPECT_THAT(model::ParseHybridConfigJson(bad.dump()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers[1].mlp.activation")));
  // The count matches the weights: B/C rows per group, no gate projection for relu2.
  for (const model::HybridConfig& config : {c, plain}) {
    absl::StatusOr<model::HybridLM> m = model::CreateHybridLM(config, 1);
    ASSERT_THAT(m.status(), IsOk());
    int64_t n = 0;
    for (const at::Tensor& p : (*m)->parameters()) n += p.numel();
    EXPECT_EQ(n, config.ParameterCount());
  }
}

TEST(NemotronHVariantsTest, ChunkedScanWithGroupsEqualsRecurrenceAndPerHeadGroups) {
  torch::manual_seed(3);
  const int64_t b = 2, t = 13, h = 4, g = 2, p = 3, n = 5;
  const at::Tensor x = torch::randn({b, t, h, p});
  const at::Tensor dt = torch::rand({b, t, h}) * 0.5 + 0.05;
  const at::Tensor a = -torch::rand({h}) * 3 - 0.2;
  const at::Tensor bm = torch::randn({b, t, g, n}), cm = torch::randn({b, t, g, n});
  const at::Tensor state = torch::randn({b, h, p, n});
  auto [y_chunk, s_chunk] = model::SsdChunkedScan(x, dt, a, bm, cm, state, 4);
  auto [y_rec, s_rec] = model::SsdRecurrentScan(x, dt, a, bm, cm, state);
  EXPECT_LT(MaxDiff(y_chunk, y_rec), 1e-4);
  EXPECT_LT(MaxDiff(s_chunk, s_rec), 1e-4);
  // Head i reads group i / (h / g): each head alone, with its group's B/C as the only group,
  // gives the same output.
  for (int64_t i = 0; i < h; ++i) {
    const int64_t group = i / (h / g);
    auto [yi, si] = model::SsdRecurrentScan(
        x.narrow(2, i, 1), dt.narrow(2, i, 1), a.narrow(0, i, 1), bm.select(2, group),
        cm.select(2, group), state.narrow(1, i, 1));
    EXPECT_LT(MaxDiff(yi, y_rec.narrow(2, i, 1)), 1e-5) << "head " << i;
  }
}

at::Tensor Tokens() { return torch::randint(0, 32, {2, 11}, torch::kLong); }

TEST(NemotronHVariantsTest, PermutedGroupedLayersComputeTheSameFunction) {
  absl::StatusOr<model::HybridLM> m = model::CreateHybridLM(GroupedConfig(), 7);
  ASSERT_THAT(m.status(), IsOk());
  torch::NoGradGuard no_grad;
  const at::Tensor tokens = Tokens();
  absl::StatusOr<model::ForwardOutput> before = (*m)->Forward(tokens);
  ASSERT_THAT(before.status(), IsOk());
  model::Permutation perm;
  perm.layers.resize(2);
  perm.layers[0].mamba_heads = {1, 0, 3, 2};  // inside groups {0, 1} and {2, 3}
  std::vector<int64_t> ffn(24);
  for (int64_t i = 0; i < 24; ++i) ffn[i] = (i * 7) % 24;
  perm.layers[1].mlp_ffn = ffn;
  ASSERT_THAT(model::PermuteHybridLM(*m, perm), IsOk());
  absl::StatusOr<model::ForwardOutput> after = (*m)->Forward(tokens);
  ASSERT_THAT(after.status(), IsOk());
  EXPECT_LT(MaxDiff(before->logits, after->logits), 1e-5);
  // A head cannot leave its B/C group.
  model::Permutation across;
  across.layers.resize(2);
  across.layers[0].mamba_heads = {2, 1, 0, 3};
  EXPECT_THAT(model::PermuteHybridLM(*m, across),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("inside their group")));
}

TEST(NemotronHVariantsTest, GroupedHeadMaskEqualsTheSlicedChild) {
  absl::StatusOr<model::HybridLM> parent = model::CreateHybridLM(GroupedConfig(), 9);
  ASSERT_THAT(parent.status(), IsOk());
  model::HybridConfig child = GroupedConfig();
  child.layers[0].mamba.heads = 2;  // one head per group
  child.layers[1].mlp.ffn = 10;
  absl::StatusOr<model::HybridLM> sliced = model::SliceHybridLM(*parent, child);
  ASSERT_THAT(sliced.status(), IsOk());
  model::ArchMask mask;
  mask.layers.resize(2);
  mask.layers[0].mamba_heads = torch::tensor({1.f, 0.f, 1.f, 0.f});  // first of each group
  mask.layers[1].mlp_ffn = torch::cat({torch::ones({10}), torch::zeros({14})});
  torch::NoGradGuard no_grad;
  const at::Tensor tokens = Tokens();
  model::ForwardOptions options;
  options.mask = &mask;
  absl::StatusOr<model::ForwardOutput> masked = (*parent)->Forward(tokens, options);
  absl::StatusOr<model::ForwardOutput> small = (*sliced)->Forward(tokens);
  ASSERT_THAT(masked.status(), IsOk());
  ASSERT_THAT(small.status(), IsOk());
  EXPECT_LT(MaxDiff(masked->logits, small->logits), 1e-5);
  // Uneven groups are not a child of a grouped layer.
  child.layers[0].mamba.heads = 3;
  EXPECT_THAT(model::SliceHybridLM(*parent, child).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("groups")));
}

TEST(NemotronHVariantsTest, PrefillAndDecodeEqualTheFullForward) {
  absl::StatusOr<model::HybridLM> m = model::CreateHybridLM(GroupedConfig(), 11);
  ASSERT_THAT(m.status(), IsOk());
  torch::NoGradGuard no_grad;
  const at::Tensor tokens = Tokens();
  absl::StatusOr<model::ForwardOutput> full = (*m)->Forward(tokens);
  ASSERT_THAT(full.status(), IsOk());
  absl::StatusOr<model::InferenceCache> cache = (*m)->NewCache(2, 16);
  ASSERT_THAT(cache.status(), IsOk());
  absl::StatusOr<at::Tensor> pre = (*m)->Prefill(tokens.narrow(1, 0, 7), *cache);
  ASSERT_THAT(pre.status(), IsOk());
  EXPECT_LT(MaxDiff(*pre, full->logits.narrow(1, 0, 7)), 1e-4);
  for (int64_t i = 7; i < 11; ++i) {
    absl::StatusOr<at::Tensor> step = (*m)->DecodeStep(tokens.select(1, i), *cache);
    ASSERT_THAT(step.status(), IsOk());
    EXPECT_LT(MaxDiff(*step, full->logits.select(1, i)), 1e-4) << "position " << i;
  }
}

// --- import ------------------------------------------------------------------------------

Json NemotronConfig(const std::string& pattern) { return testing::TinyNemotronHConfig(pattern); }

constexpr char kPattern[] = "M*-M-";

std::string WriteNemotron(const std::string& pattern = kPattern,
                          model::DType dtype = model::DType::kBF16, uint64_t seed = 1) {
  const std::string dir = NewDir();
  const Json config = NemotronConfig(pattern);
  EXPECT_THAT(testing::WriteHfCheckpointFiles(dir, config,
                                              testing::HfTestTensors(config, dtype, seed)),
              IsOk());
  return dir;
}

TEST(NemotronHImportTest, InternalConfigAndMapping) {
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(WriteNemotron());
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridConfig> config = hf::HybridConfigFromHf(c->config());
  ASSERT_THAT(config.status(), IsOk());
  ASSERT_EQ(config->num_layers(), 5);
  const model::LayerSpec& m = config->layers[0];
  EXPECT_EQ(m.kind, model::LayerKind::kMamba);
  EXPECT_EQ(m.mamba.heads, 4);
  EXPECT_EQ(m.mamba.head_dim, 8);
  EXPECT_EQ(m.mamba.state, 8);
  EXPECT_EQ(m.mamba.groups, 2);
  EXPECT_EQ(m.mamba.norm, model::MambaNorm::kPerGroup);
  EXPECT_EQ(m.mamba.chunk, 16);
  EXPECT_EQ(config->layers[1].kind, model::LayerKind::kAttention);
  EXPECT_FALSE(config->layers[1].attention.rope);
  EXPECT_EQ(config->layers[1].attention.head_dim, 8);
  EXPECT_EQ(config->layers[2].kind, model::LayerKind::kMlp);
  EXPECT_EQ(config->layers[2].mlp.activation, model::FfnActivation::kReluSquared);
  EXPECT_EQ(config->layers[2].mlp.ffn, 48);
  EXPECT_EQ(config->norm_eps, 1e-5);
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> map =
      hf::HfTensorMapping(c->config());
  ASSERT_THAT(map.status(), IsOk());
  for (const hf::ExpectedTensor& e : hf::ExpectedTensors(c->config())) {
    EXPECT_TRUE(std::any_of(map->begin(), map->end(),
                            [&](const auto& p) { return p.first == e.name; }))
        << e.name;
  }
  EXPECT_THAT(*map, ::testing::Contains(::testing::Pair("backbone.layers.3.mixer.in_proj.weight",
                                                        "layers.3.mamba.bc_proj")));
}

TEST(NemotronHImportTest, Bf16TwoShardWeightsLandSplitAndExact) {
  const std::string dir = WriteNemotron();
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(dir);
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = hf::LoadModelDir(dir);  // detected as HF
  ASSERT_THAT(m.status(), IsOk());
  const model::TensorMap state = (*m)->StateDict();
  absl::StatusOr<hf::TensorView> in_proj = c->Tensor("backbone.layers.0.mixer.in_proj.weight");
  ASSERT_THAT(in_proj.status(), IsOk());
  at::Tensor hf_in = torch::from_blob(const_cast<char*>(in_proj->data), *in_proj->shape,
                                      torch::kBFloat16)
                         .to(torch::kFloat);
  // [z 32 | x 32 | B 16 | C 16 | dt 4]
  EXPECT_TRUE(torch::equal(state.at("layers.0.mamba.z_proj"), hf_in.narrow(0, 0, 32)));
  EXPECT_TRUE(torch::equal(state.at("layers.0.mamba.x_proj"), hf_in.narrow(0, 32, 32)));
  EXPECT_TRUE(torch::equal(state.at("layers.0.mamba.bc_proj"), hf_in.narrow(0, 64, 32)));
  EXPECT_TRUE(torch::equal(state.at("layers.0.mamba.dt_proj"), hf_in.narrow(0, 96, 4)));
  absl::StatusOr<hf::TensorView> conv = c->Tensor("backbone.layers.0.mixer.conv1d.weight");
  ASSERT_THAT(conv.status(), IsOk());
  at::Tensor hf_conv =
      torch::from_blob(const_cast<char*>(conv->data), *conv->shape, torch::kBFloat16)
          .to(torch::kFloat)
          .squeeze(1);
  EXPECT_TRUE(torch::equal(state.at("layers.0.mamba.conv_bc"), hf_conv.narrow(0, 32, 32)));
}

TEST(NemotronHImportTest, MoeLayersImportAsTheSigmoidRoutedRelu2Variant) {
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(WriteNemotron("M*-E"));
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*c);
  ASSERT_THAT(m.status(), IsOk());
  const model::MoeSpec& moe = (*m)->config().layers[3].moe;
  EXPECT_EQ((*m)->config().layers[3].kind, model::LayerKind::kMoe);
  EXPECT_EQ(moe.experts, 4);
  EXPECT_EQ(moe.top_k, 2);
  EXPECT_EQ(moe.expert_ffn, 16);
  EXPECT_EQ(moe.shared_ffn, 24);
  EXPECT_EQ(moe.router, model::MoeRouter::kSigmoid);
  EXPECT_TRUE(moe.score_bias);
  EXPECT_EQ(moe.scale, 2.5);
  EXPECT_EQ(moe.activation, model::FfnActivation::kReluSquared);
  // Expert 2's up projection is row 2 of the stack.
  absl::StatusOr<hf::TensorView> up = c->Tensor("backbone.layers.3.mixer.experts.2.up_proj.weight");
  ASSERT_THAT(up.status(), IsOk());
  const at::Tensor want =
      torch::from_blob(const_cast<char*>(up->data), *up->shape, torch::kBFloat16).to(torch::kFloat);
  EXPECT_TRUE(torch::equal((*m)->StateDict().at("layers.3.moe.w_up")[2], want));
  // llama.cpp's nemotron_h_moe runs every FFN layer as MoE: no GGUF for '-' next to 'E'.
  EXPECT_THAT(gguf::GgufArchitecture(c->config()).status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("nemotron_h_moe")));
}

TEST(NemotronHImportTest, ImportedModelSurvivesSaveAndLoad) {
  absl::StatusOr<model::HybridLM> m = hf::LoadModelDir(WriteNemotron("M*-E"));
  ASSERT_THAT(m.status(), IsOk());
  const std::string out = NewDir();
  ASSERT_THAT(model::SaveHybridLM(*m, out), IsOk());
  absl::StatusOr<model::HybridLM> back = model::LoadHybridLM(out);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ((*back)->config(), (*m)->config());
  torch::NoGradGuard no_grad;
  const at::Tensor tokens = torch::randint(0, 64, {1, 20}, torch::kLong);
  absl::StatusOr<model::ForwardOutput> a = (*m)->Forward(tokens);
  absl::StatusOr<model::ForwardOutput> b = (*back)->Forward(tokens);
  ASSERT_THAT(a.status(), IsOk());
  ASSERT_THAT(b.status(), IsOk());
  EXPECT_TRUE(torch::equal(a->logits, b->logits));
}

TEST(NemotronHImportTest, RefusalsNameWhatIsWrong) {
  // A tensor of the wrong shape is refused naming it.
  const std::string dir = NewDir();
  const Json config = NemotronConfig(kPattern);
  std::vector<model::RawTensor> tensors =
      testing::HfTestTensors(config, model::DType::kBF16, 1);
  for (model::RawTensor& t : tensors) {
    if (t.name == "backbone.layers.3.mixer.in_proj.weight") {
      t.shape[0] -= 1;
      t.data.resize(t.data.size() - 2 * t.shape[1]);
    }
  }
  ASSERT_THAT(testing::WriteHfCheckpointFiles(dir, config, tensors), IsOk());
  EXPECT_THAT(hf::HfCheckpoint::Open(dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("backbone.layers.3.mixer.in_proj.weight")));
}

// --- GGUF export -------------------------------------------------------------------------

TEST(NemotronHGgufTest, MetadataAndTensorsAsLlamaCppsConverterWritesThem) {
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(WriteNemotron());
  ASSERT_THAT(c.status(), IsOk());
  const std::string path = NewDir() + "/m.gguf";
  absl::StatusOr<gguf::GgufExportSummary> summary = gguf::ExportHfToGguf(*c, path);
  ASSERT_THAT(summary.status(), IsOk());
  EXPECT_EQ(summary->arch, "nemotron_h");
  absl::StatusOr<gguf::GgufFile> f = gguf::GgufFile::Read(path);
  ASSERT_THAT(f.status(), IsOk());
  const gguf::Value* kv = f->Find("nemotron_h.attention.head_count_kv");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(std::get<std::vector<int32_t>>(*kv), (std::vector<int32_t>{0, 2, 0, 0, 0}));
  const gguf::Value* ff = f->Find("nemotron_h.feed_forward_length");
  ASSERT_NE(ff, nullptr);
  EXPECT_EQ(std::get<std::vector<int32_t>>(*ff), (std::vector<int32_t>{0, 0, 48, 0, 48}));
  EXPECT_EQ(std::get<uint32_t>(*f->Find("nemotron_h.attention.head_count")), 4u);
  EXPECT_EQ(std::get<uint32_t>(*f->Find("nemotron_h.ssm.group_count")), 2u);
  EXPECT_EQ(std::get<uint32_t>(*f->Find("nemotron_h.ssm.time_step_rank")), 4u);
  EXPECT_EQ(std::get<uint32_t>(*f->Find("nemotron_h.ssm.inner_size")), 32u);
  const gguf::TensorInfo* a = f->FindTensor("blk.0.ssm_a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne, (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(a->type, gguf::TensorType::kF32);
  // A = -exp(A_log).
  absl::StatusOr<hf::TensorView> a_log = c->Tensor("backbone.layers.0.mixer.A_log");
  ASSERT_THAT(a_log.status(), IsOk());
  const at::Tensor want =
      -torch::exp(torch::from_blob(const_cast<char*>(a_log->data), {4}, torch::kBFloat16)
                      .to(torch::kFloat));
  const absl::string_view bytes = f->TensorData(*a);
  const at::Tensor got =
      torch::from_blob(const_cast<char*>(bytes.data()), {4}, torch::kFloat).clone();
  EXPECT_LT(MaxDiff(got, want), 1e-6);
  EXPECT_EQ(f->FindTensor("blk.0.ssm_norm.weight")->ne, (std::vector<uint64_t>{16, 2}));
  EXPECT_EQ(f->FindTensor("blk.0.ssm_conv1d.weight")->ne, (std::vector<uint64_t>{4, 64}));
  EXPECT_EQ(f->FindTensor("blk.0.ssm_conv1d.weight")->type, gguf::TensorType::kF32);
  EXPECT_EQ(f->FindTensor("blk.0.ssm_in.weight")->type, gguf::TensorType::kBF16);
  EXPECT_NE(f->FindTensor("blk.2.ffn_up.weight"), nullptr);
  EXPECT_NE(f->FindTensor("blk.1.attn_output.weight"), nullptr);
}

// --- against llama.cpp -------------------------------------------------------------------

// The same weights under `config` (a deliberately wrong variant), to show the comparison
// tells such a mistake apart: the test weights are small and the distributions flat.
absl::StatusOr<model::HybridLM> Control(const model::HybridLM& m,
                                        const model::HybridConfig& config) {
  absl::StatusOr<model::HybridLM> out = model::CreateUninitializedHybridLM(config);
  if (!out.ok()) return out.status();
  absl::Status s = (*out)->LoadStateDict(m->StateDict(), "control");
  if (!s.ok()) return s;
  return out;
}

// `wrong` changes the imported config into a plausible mistake (the control, printed as
// `mistake`).
void CheckAgainstLlamaCpp(const std::string& pattern, const std::string& want_arch,
                          const std::string& mistake,
                          const std::function<void(model::HybridConfig&)>& wrong) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  const std::string dir = WriteNemotron(pattern);
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(dir);
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*c);
  ASSERT_THAT(m.status(), IsOk());
  const std::string gguf_path = NewDir() + "/model.gguf";
  gguf::GgufExportOptions options;
  options.all_f32 = true;
  absl::StatusOr<gguf::GgufExportSummary> summary = gguf::ExportHfToGguf(*c, gguf_path, options);
  ASSERT_THAT(summary.status(), IsOk());
  EXPECT_EQ(summary->arch, want_arch);
  model::HybridConfig wrong_config = (*m)->config();
  wrong(wrong_config);
  absl::StatusOr<model::HybridLM> control = Control(*m, wrong_config);
  ASSERT_THAT(control.status(), IsOk());
  auto logprobs_of = [](model::HybridLM model) -> testing::LogprobsFn {
    return [model](const auto& tokens, const auto& positions) mutable {
      return hf::NextTokenLogprobs(model, tokens, positions);
    };
  };
  testing::LlamaCppComparison comparison;
  comparison.length = 40;  // more than two of the scan's 16-step chunks
  comparison.controls = {{mistake, logprobs_of(*control)}};
  testing::ExpectAgreesWithLlamaCpp(logprobs_of(*m), gguf_path, comparison,
                                    "NemotronH " + pattern + " (" + want_arch + ")");
}

TEST(NemotronHLlamaCppTest, DenseMatchesLlamaCppOnTheExportedGguf) {
  const auto per_head = [](model::HybridConfig& c) {
    for (model::LayerSpec& l : c.layers) l.mamba.norm = model::MambaNorm::kPerHead;
  };
  CheckAgainstLlamaCpp(kPattern, "nemotron_h", "gated norm per head, not per B/C group", per_head);
}

// 'E' layers (sigmoid router with score-correction bias, relu2 experts and shared expert)
// as llama.cpp's nemotron_h_moe, which has no dense '-' layers.
TEST(NemotronHLlamaCppTest, MoeMatchesLlamaCppOnTheExportedGguf) {
  const auto unscaled = [](model::HybridConfig& c) {
    for (model::LayerSpec& l : c.layers) l.moe.scale = 1.0;
  };
  CheckAgainstLlamaCpp("M*EME", "nemotron_h_moe", "routed_scaling_factor ignored", unscaled);
}

}  // namespace
}  // namespace tailor
