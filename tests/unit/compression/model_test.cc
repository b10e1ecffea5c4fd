// HybridLM: cache equivalence per layer kind, masks vs slicing, permutations, gates,
// observers, save/load and input validation.

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "compression/model/hybrid_lm.h"
#include "compression/model/mamba.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::model {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

constexpr double kAtol = 1e-4;

HybridConfig BaseConfig() {
  HybridConfig c;
  c.vocab = 50;
  c.hidden = 32;
  c.max_seq = 40;
  return c;
}

LayerSpec AttentionLayer() { return LayerSpec::Attention(4, 2, 8); }
// chunk 5 so a 20-token prefill crosses several chunk boundaries.
LayerSpec MambaLayer() { return LayerSpec::Mamba(4, 8, 8, 4, 5); }
LayerSpec MoeLayer() { return LayerSpec::Moe(4, 2, 16, 16); }
LayerSpec MlpLayer() { return LayerSpec::Mlp(48); }

HybridConfig MixedConfig() {
  HybridConfig c = BaseConfig();
  c.layers = {AttentionLayer(),  MambaLayer(),
              MoeLayer(),        MlpLayer(),
              LayerSpec::Mlp(0),                                // absent
              MambaLayer(),      LayerSpec::Moe(0, 0, 0, 24)};  // dense via the shared expert
  return c;
}

// The default init (std 0.02) makes tiny logits, against which an absolute tolerance
// would hide real bugs. Tests use unit-gain weights so every block moves the logits O(1).
void UnitGainWeights(HybridLM& m, uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& p : m->parameters()) {
    if (p.dim() >= 2) p.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(p.size(-1))));
  }
}

HybridLM MakeModel(const HybridConfig& c, uint64_t seed = 1) {
  absl::StatusOr<HybridLM> m = CreateHybridLM(c, seed);
  EXPECT_TRUE(m.ok()) << m.status();
  UnitGainWeights(*m, seed);
  return *m;
}

at::Tensor RandomTokens(int64_t b, int64_t t, int64_t vocab, uint64_t seed = 7) {
  torch::manual_seed(seed);
  return torch::randint(0, vocab, {b, t}, torch::kLong);
}

at::Tensor Logits(HybridLM& m, const at::Tensor& tokens, const ForwardOptions& o = {}) {
  absl::StatusOr<ForwardOutput> out = m->Forward(tokens, o);
  EXPECT_TRUE(out.ok()) << out.status();
  return out->logits.detach();
}

void ExpectClose(const at::Tensor& a, const at::Tensor& b, const std::string& what,
                 double atol = kAtol) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double diff = (a - b).abs().max().item<double>();
  EXPECT_LE(diff, atol) << what;
}

// Prefill(prefix) + DecodeStep per remaining token == Forward(all), and the same with the
// prompt split into two prefill chunks.
void CheckCacheEquivalence(const HybridConfig& config) {
  HybridLM model = MakeModel(config);
  const int64_t b = 2, t = 20, prefix = 9;
  at::Tensor tokens = RandomTokens(b, t, config.vocab);
  at::Tensor full = Logits(model, tokens);
  for (int split : {0, 4}) {
    TAILOR_ASSERT_OK_AND_ASSIGN(InferenceCache cache, model->NewCache(b));
    at::Tensor got;
    if (split > 0) {
      TAILOR_ASSERT_OK_AND_ASSIGN(at::Tensor first,
                                  model->Prefill(tokens.narrow(1, 0, split), cache));
      TAILOR_ASSERT_OK_AND_ASSIGN(at::Tensor second,
                                  model->Prefill(tokens.narrow(1, split, prefix - split), cache));
      got = torch::cat({first, second}, 1);
    } else {
      TAILOR_ASSERT_OK_AND_ASSIGN(got, model->Prefill(tokens.narrow(1, 0, prefix), cache));
    }
    ExpectClose(got, full.narrow(1, 0, prefix), "prefill");
    for (int64_t i = prefix; i < t; ++i) {
      TAILOR_ASSERT_OK_AND_ASSIGN(at::Tensor step, model->DecodeStep(tokens.select(1, i), cache));
      ExpectClose(step, full.select(1, i), "decode step " + std::to_string(i));
    }
    EXPECT_EQ(cache.length(), t);
  }
}

// Negative control: the equivalence test must notice a cache that loses its state.
TEST(HybridLMTest, LostCacheStateIsDetected) {
  HybridConfig c = BaseConfig();
  c.layers = {AttentionLayer(), MambaLayer()};
  HybridLM model = MakeModel(c);
  at::Tensor tokens = RandomTokens(1, 12, c.vocab);
  at::Tensor full = Logits(model, tokens);
  EXPECT_GT(full.abs().max().item<double>(), 0.5);  // logits are not trivially small
  for (int layer : {0, 1}) {
    TAILOR_ASSERT_OK_AND_ASSIGN(InferenceCache cache, model->NewCache(1));
    TAILOR_ASSERT_OK(model->Prefill(tokens.narrow(1, 0, 11), cache).status());
    const LayerCache& state = cache.layers()[layer];
    for (const at::Tensor* t : {&state.k, &state.v, &state.ssm, &state.conv_x}) {
      if (t->defined()) t->zero_();
    }
    TAILOR_ASSERT_OK_AND_ASSIGN(at::Tensor step, model->DecodeStep(tokens.select(1, 11), cache));
    EXPECT_GT((step - full.select(1, 11)).abs().max().item<double>(), 1e-2) << layer;
  }
}

class CacheEquivalenceTest : public ::testing::TestWithParam<LayerKind> {};

TEST_P(CacheEquivalenceTest, PrefillPlusDecodeMatchesFullForward) {
  HybridConfig c = BaseConfig();
  switch (GetParam()) {
    case LayerKind::kAttention:
      c.layers = {AttentionLayer(), AttentionLayer()};
      break;
    case LayerKind::kMamba:
      c.layers = {MambaLayer(), MambaLayer()};
      break;
    case LayerKind::kMoe:
      c.layers = {MoeLayer(), LayerSpec::Moe(4, 1, 16, 0)};
      break;
    case LayerKind::kMlp:
      c.layers = {MlpLayer(), MlpLayer()};
      break;
  }
  CheckCacheEquivalence(c);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, CacheEquivalenceTest,
                         ::testing::Values(LayerKind::kAttention, LayerKind::kMamba,
                                           LayerKind::kMoe, LayerKind::kMlp),
                         [](const auto& info) { return std::string(LayerKindName(info.param)); });

TEST(HybridLMTest, MixedModelCacheEquivalence) { CheckCacheEquivalence(MixedConfig()); }

TEST(HybridLMTest, ChunkedScanMatchesRecurrence) {
  torch::manual_seed(3);
  const int64_t b = 2, t = 13, h = 3, p = 4, n = 5;
  at::Tensor x = torch::randn({b, t, h, p});
  at::Tensor dt = torch::rand({b, t, h}) * 0.5;
  at::Tensor a = -torch::rand({h}) * 4 - 0.5;
  at::Tensor bm = torch::randn({b, t, n});
  at::Tensor cm = torch::randn({b, t, n});
  at::Tensor s0 = torch::randn({b, h, p, n});
  auto [y_ref, s_ref] = SsdRecurrentScan(x, dt, a, bm, cm, s0);
  for (int64_t chunk : {1, 4, 5, 13, 64}) {
    auto [y, s] = SsdChunkedScan(x, dt, a, bm, cm, s0, chunk);
    ExpectClose(y, y_ref, "y chunk " + std::to_string(chunk));
    ExpectClose(s, s_ref, "state chunk " + std::to_string(chunk));
  }
}

TEST(HybridLMTest, ParameterCountMatchesConfig) {
  HybridConfig c = MixedConfig();
  HybridLM model = MakeModel(c);
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  EXPECT_EQ(n, c.ParameterCount());
  EXPECT_LT(c.ActiveParameterCount(), c.ParameterCount());
}

TEST(HybridLMTest, SameSeedSameWeights) {
  HybridLM a = MakeModel(MixedConfig(), 5);
  HybridLM b = MakeModel(MixedConfig(), 5);
  at::Tensor tokens = RandomTokens(1, 6, 50);
  EXPECT_TRUE(torch::equal(Logits(a, tokens), Logits(b, tokens)));
}

// A narrower child sliced from the parent computes what the parent computes under the
// matching prefix mask (same expert count, since masked experts keep their routing slot).
TEST(HybridLMTest, PrefixMaskEqualsSlicedModel) {
  HybridConfig parent_config = MixedConfig();
  HybridLM parent = MakeModel(parent_config);
  HybridConfig child = parent_config;
  child.hidden = 20;
  child.layers[0] = LayerSpec::Attention(2, 2, 8);  // 1 query head per group (of 2)
  child.layers[1] = LayerSpec::Mamba(2, 8, 8, 4, 5);
  child.layers[2] = LayerSpec::Moe(4, 2, 9, 5);
  child.layers[3] = LayerSpec::Mlp(0);                // removed
  child.layers[5] = LayerSpec::Mamba(3, 8, 8, 4, 7);  // chunk may differ
  child.layers[6] = LayerSpec::Moe(0, 0, 0, 10);
  TAILOR_ASSERT_OK_AND_ASSIGN(HybridLM sliced, SliceHybridLM(parent, child));
  TAILOR_ASSERT_OK_AND_ASSIGN(ArchMask mask, PrefixMask(parent_config, child));
  at::Tensor tokens = RandomTokens(2, 12, 50);
  ForwardOptions o;
  o.mask = &mask;
  ExpectClose(Logits(parent, tokens, o), Logits(sliced, tokens), "masked vs sliced");

  int64_t n = 0;
  for (const auto& p : sliced->parameters()) n += p.numel();
  EXPECT_EQ(n, child.ParameterCount());
}

TEST(HybridLMTest, PerSequenceMasks) {
  HybridConfig c = MixedConfig();
  HybridLM model = MakeModel(c);
  HybridConfig narrow = c;
  narrow.hidden = 16;
  narrow.layers[2] = LayerSpec::Moe(4, 2, 8, 4);
  TAILOR_ASSERT_OK_AND_ASSIGN(ArchMask m1, PrefixMask(c, narrow));
  TAILOR_ASSERT_OK_AND_ASSIGN(ArchMask full, PrefixMask(c, c));
  // Sequence 0 runs the narrow architecture, sequence 1 the full one.
  ArchMask both;
  both.hidden = torch::stack({m1.hidden, full.hidden});
  for (size_t i = 0; i < m1.layers.size(); ++i) {
    LayerMask l;
    auto pair = [](const at::Tensor& a, const at::Tensor& b) {
      return a.defined() ? torch::stack({a, b}) : at::Tensor();
    };
    l.attention_heads = pair(m1.layers[i].attention_heads, full.layers[i].attention_heads);
    l.mamba_heads = pair(m1.layers[i].mamba_heads, full.layers[i].mamba_heads);
    l.experts = pair(m1.layers[i].experts, full.layers[i].experts);
    l.expert_ffn = pair(m1.layers[i].expert_ffn, full.layers[i].expert_ffn);
    l.shared_ffn = pair(m1.layers[i].shared_ffn, full.layers[i].shared_ffn);
    l.mlp_ffn = pair(m1.layers[i].mlp_ffn, full.layers[i].mlp_ffn);
    both.layers.push_back(l);
  }
  at::Tensor tokens = RandomTokens(2, 10, 50);
  ForwardOptions o;
  o.mask = &both;
  at::Tensor mixed = Logits(model, tokens, o);
  ForwardOptions o1;
  o1.mask = &m1;
  ExpectClose(mixed.narrow(0, 0, 1), Logits(model, tokens.narrow(0, 0, 1), o1), "seq 0");
  ExpectClose(mixed.narrow(0, 1, 1), Logits(model, tokens.narrow(0, 1, 1)), "seq 1");
}

TEST(HybridLMTest, PermutationsKeepLogits) {
  HybridConfig c = MixedConfig();
  HybridLM model = MakeModel(c);
  at::Tensor tokens = RandomTokens(2, 12, 50);
  at::Tensor before = Logits(model, tokens);
  auto reversed = [](int64_t n) {
    std::vector<int64_t> p;
    for (int64_t i = n - 1; i >= 0; --i) p.push_back(i);
    return p;
  };
  Permutation perm;
  perm.hidden = reversed(c.hidden);
  perm.layers.resize(c.layers.size());
  perm.layers[0].attention_kv_heads = {1, 0};
  perm.layers[0].attention_heads = {3, 2, 0, 1};  // stays inside the GQA groups
  perm.layers[1].mamba_heads = {2, 0, 3, 1};
  perm.layers[2].experts = {3, 1, 0, 2};
  for (int e = 0; e < 4; ++e) perm.layers[2].expert_ffn.push_back(reversed(16));
  perm.layers[2].shared_ffn = reversed(16);
  perm.layers[3].mlp_ffn = reversed(48);
  perm.layers[6].shared_ffn = reversed(24);
  TAILOR_ASSERT_OK(PermuteHybridLM(model, perm));
  ExpectClose(Logits(model, tokens), before, "after permutation");
}

TEST(HybridLMTest, BadPermutationsAreRejected) {
  HybridLM model = MakeModel(MixedConfig());
  LayerPermutation bad_group;
  bad_group.attention_heads = {2, 1, 0, 3};  // head 2 belongs to group 1
  EXPECT_THAT(model->PermuteLayer(0, bad_group),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("GQA group")));
  LayerPermutation wrong_kind;
  wrong_kind.mamba_heads = {0, 1, 2, 3};
  EXPECT_THAT(model->PermuteLayer(0, wrong_kind),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers[0].mamba_heads")));
  LayerPermutation repeated;
  repeated.mlp_ffn.assign(48, 0);
  EXPECT_THAT(model->PermuteLayer(3, repeated),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a permutation")));
  EXPECT_THAT(model->PermuteHidden({0, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hidden")));
}

TEST(HybridLMTest, BlockGatesScaleResidualBranches) {
  HybridConfig c = MixedConfig();
  HybridLM model = MakeModel(c);
  at::Tensor tokens = RandomTokens(1, 8, 50);
  ForwardOptions ones;
  ones.block_gates = torch::ones({c.num_layers()});
  ExpectClose(Logits(model, tokens, ones), Logits(model, tokens), "gates = 1");

  // Gate 0 on every block == a model whose layers are all absent.
  ForwardOptions zeros;
  zeros.block_gates = torch::zeros({c.num_layers()});
  HybridConfig empty = c;
  for (LayerSpec& l : empty.layers) {
    const LayerKind kind = l.kind;
    l = LayerSpec{};  // every width 0: absent, same kind
    l.kind = kind;
  }
  TAILOR_ASSERT_OK_AND_ASSIGN(HybridLM none, SliceHybridLM(model, empty));
  ExpectClose(Logits(model, tokens, zeros), Logits(none, tokens), "gates = 0");

  // Gradients reach the gates (block removal needs dL/dg).
  ForwardOptions g;
  g.block_gates = torch::ones({c.num_layers()}, torch::requires_grad());
  TAILOR_ASSERT_OK_AND_ASSIGN(ForwardOutput out, model->Forward(tokens, g));
  out.logits.logsumexp(-1).sum().backward();
  ASSERT_TRUE(g.block_gates.grad().defined());
  EXPECT_GT(g.block_gates.grad().abs().sum().item<double>(), 0.0);
  EXPECT_EQ(g.block_gates.grad()[4].item<double>(), 0.0);  // absent layer
}

class CountingObserver : public ActivationObserver {
 public:
  void Observe(const ActivationSite& site, const at::Tensor& value) override {
    counts[static_cast<int>(site.site)]++;
    if (site.site == Site::kExpertOutput) routed_rows += value.size(0);
    if (site.site == Site::kAttentionHeads) heads_shape = value.sizes().vec();
  }
  void OnLayerBegin(int layer) override { begins++; }
  void OnLayerEnd(int layer) override { ends++; }
  std::map<int, int> counts;
  int64_t routed_rows = 0;
  std::vector<int64_t> heads_shape;
  int begins = 0, ends = 0;
};

TEST(HybridLMTest, ObserverSeesEverySite) {
  HybridConfig c = MixedConfig();
  HybridLM model = MakeModel(c);
  CountingObserver obs;
  ForwardOptions o;
  o.observer = &obs;
  at::Tensor tokens = RandomTokens(2, 6, 50);
  Logits(model, tokens, o);
  EXPECT_EQ(obs.begins, 7);
  EXPECT_EQ(obs.ends, 7);
  EXPECT_EQ(obs.counts[static_cast<int>(Site::kBlockInput)], 6);  // absent layer skipped
  EXPECT_EQ(obs.counts[static_cast<int>(Site::kNormOutput)], 7);  // + final norm
  EXPECT_EQ(obs.counts[static_cast<int>(Site::kMambaHeads)], 2);
  EXPECT_EQ(obs.counts[static_cast<int>(Site::kSharedFfn)], 2);
  EXPECT_EQ(obs.counts[static_cast<int>(Site::kMlpFfn)], 1);
  EXPECT_EQ(obs.counts[static_cast<int>(Site::kRouterProbs)], 1);
  EXPECT_EQ(obs.routed_rows, 2 * 6 * 2);  // every token reaches top_k = 2 experts
  EXPECT_EQ(obs.heads_shape, (std::vector<int64_t>{2, 6, 4, 8}));
}

TEST(HybridLMTest, AuxLossOnlyWithExperts) {
  HybridConfig c = MixedConfig();
  HybridLM model = MakeModel(c);
  TAILOR_ASSERT_OK_AND_ASSIGN(ForwardOutput out, model->Forward(RandomTokens(2, 6, 50)));
  // Perfect balance gives exactly 1 per MoE layer; anything routed gives > 0.
  EXPECT_GT(out.aux_loss.item<double>(), 0.5);
  HybridConfig dense = BaseConfig();
  dense.layers = {MlpLayer()};
  HybridLM d = MakeModel(dense);
  TAILOR_ASSERT_OK_AND_ASSIGN(ForwardOutput dout, d->Forward(RandomTokens(2, 6, 50)));
  EXPECT_EQ(dout.aux_loss.item<double>(), 0.0);
}

TEST(HybridLMTest, SaveLoadRoundTrip) {
  const std::string dir = ::testing::TempDir() + "/hybrid_lm_roundtrip";
  HybridConfig c = MixedConfig();
  HybridLM model = MakeModel(c, 9);
  TAILOR_ASSERT_OK(SaveHybridLM(model, dir));
  TAILOR_ASSERT_OK_AND_ASSIGN(HybridLM loaded, LoadHybridLM(dir));
  EXPECT_EQ(loaded->config(), c);
  at::Tensor tokens = RandomTokens(1, 10, 50);
  EXPECT_TRUE(torch::equal(Logits(model, tokens), Logits(loaded, tokens)));

  TAILOR_ASSERT_OK(SaveHybridLM(model, dir, DType::kBF16));
  TAILOR_ASSERT_OK_AND_ASSIGN(HybridLM bf16, LoadHybridLM(dir));
  // BF16 on disk: the loaded F32 weights are exactly the BF16-rounded originals.
  TensorMap original = model->StateDict();
  for (const auto& [name, t] : bf16->StateDict()) {
    EXPECT_TRUE(torch::equal(t, original.at(name).to(torch::kBFloat16).to(torch::kFloat))) << name;
  }
}

TEST(HybridLMTest, LoadStateDictRejectsMismatches) {
  HybridLM model = MakeModel(MixedConfig());
  TensorMap good = model->StateDict();
  TensorMap missing = good;
  missing.erase("layers.0.attention.q_proj");
  EXPECT_THAT(model->LoadStateDict(missing, "m.safetensors"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("m.safetensors: missing tensor 'layers.0.attention.q_proj'")));
  TensorMap extra = good;
  extra["layers.4.mlp.w_up"] = torch::zeros({48, 32});
  EXPECT_THAT(model->LoadStateDict(extra, "m"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unexpected tensor 'layers.4.mlp.w_up'")));
  TensorMap shape = good;
  shape["lm_head"] = torch::zeros({50, 31});
  EXPECT_THAT(model->LoadStateDict(shape, "m"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 'lm_head': shape")));
  TensorMap dtype = good;
  dtype["embed"] = torch::zeros({50, 32}, torch::kInt);
  EXPECT_THAT(model->LoadStateDict(dtype, "m"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 'embed': dtype Int")));
}

TEST(HybridLMTest, InputValidation) {
  HybridConfig c = MixedConfig();
  HybridLM model = MakeModel(c);
  EXPECT_THAT(model->Forward(torch::full({1, 3}, 50, torch::kLong)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 50)")));
  EXPECT_THAT(model->Forward(torch::zeros({1, 41}, torch::kLong)),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("max_seq 40")));
  EXPECT_THAT(model->Forward(torch::zeros({3}, torch::kLong)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[batch, time]")));
  TAILOR_ASSERT_OK_AND_ASSIGN(InferenceCache cache, model->NewCache(1, 4));
  EXPECT_GT(cache.Bytes(), 0);
  TAILOR_ASSERT_OK(model->Prefill(torch::zeros({1, 4}, torch::kLong), cache).status());
  EXPECT_THAT(model->DecodeStep(torch::zeros({1}, torch::kLong), cache),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("4 of 4")));
  cache.Reset();
  EXPECT_EQ(cache.length(), 0);
  EXPECT_THAT(model->Prefill(torch::zeros({2, 2}, torch::kLong), cache),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("batch 1")));
  ArchMask bad;
  bad.hidden = torch::ones({31});
  ForwardOptions o;
  o.mask = &bad;
  EXPECT_THAT(model->Forward(torch::zeros({1, 2}, torch::kLong), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hidden: mask shape")));
  bad.hidden = at::Tensor();
  bad.layers.resize(7);
  bad.layers[0].mlp_ffn = torch::ones({48});
  EXPECT_THAT(model->Forward(torch::zeros({1, 2}, torch::kLong), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers[0].mlp_ffn")));
}

TEST(HybridLMTest, SliceRejectsWiderChild) {
  HybridConfig c = MixedConfig();
  HybridLM model = MakeModel(c);
  HybridConfig wider = c;
  wider.layers[3] = LayerSpec::Mlp(64);
  EXPECT_THAT(SliceHybridLM(model, wider),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers[3]: mlp ffn 64")));
  HybridConfig kind = c;
  kind.layers[3] = LayerSpec::Attention(2, 1, 8);
  EXPECT_THAT(SliceHybridLM(model, kind),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers[3].kind")));
}

}  // namespace
}  // namespace tailor::model
