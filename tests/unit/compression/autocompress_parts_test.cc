// AutoCompress search pieces: search space, Gumbel schedule, dead-zone penalty, router
// init, supernet masks (incl. the MoE output-masking ablation) and extraction.

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <utility>
#include <vector>

#include "compression/autocompress/extract.h"
#include "compression/autocompress/gumbel.h"
#include "compression/autocompress/penalty.h"
#include "compression/autocompress/router.h"
#include "compression/autocompress/space.h"
#include "compression/autocompress/supernet.h"
#include "compression/model/hybrid_lm.h"
#include "gtest/gtest.h"

namespace tailor::autocompress {
namespace {

using model::HybridConfig;
using model::LayerSpec;

HybridConfig MixedConfig() {
  HybridConfig c;
  c.vocab = 50;
  c.hidden = 32;
  c.max_seq = 40;
  c.layers = {LayerSpec::Attention(6, 2, 8), LayerSpec::Mamba(4, 8, 8, 4, 5),
              LayerSpec::Moe(4, 2, 16, 16), LayerSpec::Mlp(48), LayerSpec::Mlp(0)};
  return c;
}

SearchSpace Space(const HybridConfig& c) {
  absl::StatusOr<SearchSpace> s = BuildSearchSpace(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(SearchSpaceTest, AxesAndWidths) {
  const SearchSpace s = Space(MixedConfig());
  ASSERT_EQ(s.axes.size(), 7u);
  EXPECT_EQ(s.axes[0].name, "hidden");
  EXPECT_EQ(s.axes[0].widths, (std::vector<int64_t>{8, 16, 24, 32}));
  EXPECT_EQ(s.axes[1].name, "mamba_heads");
  EXPECT_EQ(s.axes[1].widths, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(s.axes[2].name, "layers[0].attention_heads_per_group");
  EXPECT_EQ(s.axes[2].widths, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(s.axes[3].name, "layers[2].experts");
  EXPECT_EQ(s.axes[3].widths, (std::vector<int64_t>{0, 2, 3, 4}));  // >= top_k or 0
  EXPECT_EQ(s.axes[4].widths, (std::vector<int64_t>{0, 4, 8, 12, 16}));
  EXPECT_EQ(s.axes[5].name, "layers[2].shared_ffn");
  EXPECT_EQ(s.axes[6].name, "layers[3].mlp_ffn");
  EXPECT_EQ(s.total_choices(), 4 + 4 + 4 + 4 + 5 + 5 + 5);
}

TEST(SearchSpaceTest, ChildConfigFollowsChoices) {
  const HybridConfig p = MixedConfig();
  const SearchSpace s = Space(p);
  absl::StatusOr<HybridConfig> c = ChildConfig(p, s, {1, 2, 1, 2, 0, 3, 0});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden, 16);
  EXPECT_EQ(c->layers[0], LayerSpec::Attention(2, 2, 8));
  EXPECT_EQ(c->layers[1].mamba.heads, 3);
  // expert_ffn 0 drops the routed part: a dense MLP through the shared expert.
  EXPECT_EQ(c->layers[2], LayerSpec::Moe(0, 0, 0, 12));
  EXPECT_FALSE(c->layers[3].present());
  EXPECT_FALSE(ChildConfig(p, s, {0, 0, 0}).ok());
  EXPECT_FALSE(ChildConfig(p, s, {4, 0, 0, 0, 0, 0, 0}).ok());
}

TEST(SearchSpaceTest, UniformLayersTieEachKindAndWidthIntoOneAxis) {
  HybridConfig p = MixedConfig();
  p.layers = {LayerSpec::Attention(6, 2, 8), LayerSpec::Mlp(48), LayerSpec::Attention(6, 2, 8),
              LayerSpec::Mlp(48), LayerSpec::Mlp(24)};
  SpaceOptions o;
  o.uniform_layers = true;
  absl::StatusOr<SearchSpace> s = BuildSearchSpace(p, o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->axes.size(), 4u);
  EXPECT_EQ(s->axes[1].name, "layers[0,2].attention_heads_per_group");
  EXPECT_EQ(s->axes[1].widths, (std::vector<int64_t>{1, 2, 3}));  // no 0: nothing removed
  EXPECT_EQ(s->axes[1].layers(), (std::vector<int>{0, 2}));
  EXPECT_EQ(s->axes[2].name, "layers[1,3].mlp_ffn");
  EXPECT_EQ(s->axes[3].name, "layers[4].mlp_ffn");  // another parent width: its own axis
  EXPECT_TRUE(s->axes[2].covers(3));
  EXPECT_FALSE(s->axes[2].covers(4));
  EXPECT_TRUE(s->axes[0].layers().empty());

  absl::StatusOr<HybridConfig> c = ChildConfig(p, *s, {3, 0, 1, 3});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layers[0], LayerSpec::Attention(2, 2, 8));
  EXPECT_EQ(c->layers[2], LayerSpec::Attention(2, 2, 8));
  EXPECT_EQ(c->layers[1].mlp.ffn, 24);
  EXPECT_EQ(c->layers[3].mlp.ffn, 24);
  EXPECT_EQ(c->layers[4].mlp.ffn, 24);

  // One soft choice, the same expected mask on every layer it covers.
  absl::StatusOr<model::ArchMask> m = SoftArchMask(p, *s, OneHotChoices(*s, {3, 0, 1, 3}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(torch::equal(m->layers[0].attention_heads, m->layers[2].attention_heads));
  EXPECT_EQ(m->layers[1].mlp_ffn.sum().item<float>(), 24.0f);
  EXPECT_EQ(m->layers[3].mlp_ffn.sum().item<float>(), 24.0f);
  EXPECT_EQ(m->layers[4].mlp_ffn.sum().item<float>(), 24.0f);
}

TEST(GumbelScheduleTest, ExactValuesAtStartMiddleEnd) {
  GumbelSchedule s;
  s.steps = 5;
  EXPECT_DOUBLE_EQ(s.LogitScale(0), 1.0);
  EXPECT_DOUBLE_EQ(s.Temperature(0), 1.0);
  EXPECT_DOUBLE_EQ(s.LogitScale(2), 5.5);
  EXPECT_DOUBLE_EQ(s.Temperature(2), std::sqrt(0.05));
  EXPECT_DOUBLE_EQ(s.LogitScale(4), 10.0);
  EXPECT_DOUBLE_EQ(s.Temperature(4), 0.05);
  EXPECT_DOUBLE_EQ(s.LogitScale(99), 10.0);  // clamped past the end
  GumbelSchedule paper;                      // 250 steps
  EXPECT_DOUBLE_EQ(paper.LogitScale(249), 10.0);
  EXPECT_DOUBLE_EQ(paper.Temperature(249), 0.05);
}

TEST(GumbelSoftmaxTest, FormulaAndSampling) {
  at::Tensor z = torch::tensor({0.5, -1.0, 2.0}, torch::kDouble);
  at::Tensor g = torch::tensor({0.1, 0.7, -0.3}, torch::kDouble);
  at::Tensor y = GumbelSoftmaxWithNoise(z, g, 2.0, 0.5);
  at::Tensor e = ((z * 2.0 + g) / 0.5).exp();
  EXPECT_TRUE(torch::allclose(y, e / e.sum(), 0.0, 1e-15));
  at::Generator gen1 = at::detail::createCPUGenerator(11);
  at::Generator gen2 = at::detail::createCPUGenerator(11);
  GumbelSchedule s;
  at::Tensor a = SampleGumbelSoftmax(z, s, 3, gen1);
  at::Tensor b = SampleGumbelSoftmax(z, s, 3, gen2);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_NEAR(a.sum().item<double>(), 1.0, 1e-12);
}

TEST(PenaltyTest, DeadZoneValues) {
  at::Tensor rho = torch::tensor({0.97, 0.99, 1.0, 1.05}, torch::kDouble);
  at::Tensor p = BudgetPenalty(rho, 0.02);
  EXPECT_NEAR(p[0].item<double>(), 0.01, 1e-12);
  EXPECT_EQ(p[1].item<double>(), 0.0);
  EXPECT_EQ(p[2].item<double>(), 0.0);
  EXPECT_NEAR(p[3].item<double>(), 0.05, 1e-12);
  at::Tensor r = torch::tensor({1.05, 0.9}, torch::requires_grad().dtype(torch::kDouble));
  BudgetPenalty(r).sum().backward();
  EXPECT_EQ(r.grad()[0].item<double>(), 1.0);
  EXPECT_EQ(r.grad()[1].item<double>(), -1.0);
}

TEST(RouterTest, UniformAtStepZeroAndLearns) {
  const SearchSpace s = Space(MixedConfig());
  RouterOptions o;
  ArchRouter router(s, o);
  std::vector<at::Tensor> p = router->Probabilities();
  ASSERT_EQ(p.size(), s.axes.size());
  for (size_t a = 0; a < p.size(); ++a) {
    const int64_t n = s.axes[a].widths.size();
    ASSERT_EQ(p[a].size(0), n);
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(p[a][j].item<float>(), 1.0f / n);
  }
  // One Adam step that rewards choice 0 of axis 0 moves it off uniform, in that direction.
  auto opt = MakeRouterOptimizer(router, o);
  opt->zero_grad();
  (-router->Forward()[0][0]).backward();
  opt->step();
  p = router->Probabilities();
  EXPECT_GT(p[0][0].item<float>(), 0.25f);
}

TEST(SupernetTest, ExpectedKeepMask) {
  ChoiceAxis axis;
  axis.widths = {1, 2, 4};
  at::Tensor y = torch::tensor({0.2, 0.3, 0.5}, torch::kDouble);
  at::Tensor m = torch::matmul(y, KeepMatrix(axis, 4).to(torch::kDouble));
  EXPECT_TRUE(torch::allclose(m, torch::tensor({1.0, 0.8, 0.5, 0.5}, torch::kDouble), 0, 1e-15));
  // GQA: group size 3, keep 1 head per group -> heads 0 and 3.
  EXPECT_TRUE(
      torch::equal(KeepMatrix(axis, 6, 3)[0], torch::tensor({1.f, 0.f, 0.f, 1.f, 0.f, 0.f})));
}

TEST(SupernetTest, OneHotChoicesGiveThePrefixMask) {
  const HybridConfig p = MixedConfig();
  const SearchSpace s = Space(p);
  const std::vector<int> idx = {2, 1, 2, 2, 3, 1, 2};
  absl::StatusOr<model::ArchMask> soft = SoftArchMask(p, s, OneHotChoices(s, idx));
  ASSERT_TRUE(soft.ok()) << soft.status();
  absl::StatusOr<HybridConfig> child = ChildConfig(p, s, idx);
  ASSERT_TRUE(child.ok());
  absl::StatusOr<model::ArchMask> hard = model::PrefixMask(p, *child);
  ASSERT_TRUE(hard.ok());
  EXPECT_TRUE(torch::equal(soft->hidden, hard->hidden));
  for (int i = 0; i < 4; ++i) {
    const model::LayerMask& a = soft->layers[i];
    const model::LayerMask& b = hard->layers[i];
    const std::vector<std::pair<const at::Tensor*, const at::Tensor*>> fields = {
        {&a.attention_heads, &b.attention_heads},
        {&a.mamba_heads, &b.mamba_heads},
        {&a.experts, &b.experts},
        {&a.expert_ffn, &b.expert_ffn},
        {&a.shared_ffn, &b.shared_ffn},
        {&a.mlp_ffn, &b.mlp_ffn}};
    for (const auto& [x, y] : fields) {
      ASSERT_EQ(x->defined(), y->defined()) << i;
      if (x->defined()) {
        EXPECT_TRUE(torch::equal(*x, *y)) << i;
      }
    }
  }
  // Per-sequence rows: [N, n] choices give [N, C] masks accepted by the model.
  std::vector<at::Tensor> rows;
  for (const at::Tensor& y : OneHotChoices(s, idx)) rows.push_back(y.unsqueeze(0).repeat({3, 1}));
  absl::StatusOr<model::ArchMask> batched = SoftArchMask(p, s, rows);
  ASSERT_TRUE(batched.ok());
  EXPECT_TRUE(model::ValidateArchMask(*batched, p, 3).ok());
}

// Spec ablation: experts masked on OUTPUTS after top-k keep receiving gradient (through
// their mask entry, i.e. to the router) even when masked off; masking routing scores
// starves them.
TEST(SupernetTest, OutputMaskingKeepsGradientForLowRankedExperts) {
  HybridConfig c;
  c.vocab = 20;
  c.hidden = 16;
  c.max_seq = 16;
  c.layers = {LayerSpec::Moe(4, 2, 8, 0)};
  absl::StatusOr<model::HybridLM> m = model::CreateHybridLM(c, 5);
  ASSERT_TRUE(m.ok());
  model::Mixer& moe = *(*m)->mixer(0);
  torch::manual_seed(9);
  at::Tensor x = torch::randn({2, 6, 16});
  at::Tensor target = torch::randn({2, 6, 16});

  // kOutput reproduces the model's own MoE forward.
  model::LayerMask lm;
  lm.experts = torch::tensor({1.f, 1.f, 0.5f, 0.f});
  model::LayerContext ctx;
  ctx.mask = &lm;
  at::Tensor own = moe.Forward(x, ctx);
  absl::StatusOr<at::Tensor> mine =
      MoeForwardWithMasking(moe, 2, x, lm.experts, MoeMaskMode::kOutput);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_TRUE(torch::allclose(*mine, own, 0, 1e-6));

  for (MoeMaskMode mode : {MoeMaskMode::kOutput, MoeMaskMode::kRoutingScore}) {
    // Keep 2 experts (the hard end of the Gumbel schedule): experts 2, 3 masked off.
    at::Tensor mask = torch::tensor({1.f, 1.f, 0.f, 0.f}, torch::requires_grad());
    absl::StatusOr<at::Tensor> y = MoeForwardWithMasking(moe, 2, x, mask, mode);
    ASSERT_TRUE(y.ok());
    (*y - target).pow(2).sum().backward();
    const at::Tensor g = mask.grad();
    if (mode == MoeMaskMode::kOutput) {
      EXPECT_NE(g[2].item<float>(), 0.0f);
      EXPECT_NE(g[3].item<float>(), 0.0f);
    } else {
      EXPECT_EQ(g[2].item<float>(), 0.0f);
      EXPECT_EQ(g[3].item<float>(), 0.0f);
    }
  }
}

TEST(ExtractTest, ThresholdLogic) {
  const SearchSpace s = Space(MixedConfig());
  std::vector<at::Tensor> probs;
  for (const ChoiceAxis& a : s.axes) {
    at::Tensor p = torch::zeros({static_cast<int64_t>(a.widths.size())});
    p[1] = 0.96;
    p[0] = 0.04;
    probs.push_back(p);
  }
  absl::StatusOr<ExtractionDecision> d = DecideExtraction(s, probs);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->converged);
  EXPECT_EQ(d->indices, std::vector<int>(s.axes.size(), 1));
  probs[3] = torch::tensor({0.f, 0.06f, 0.94f, 0.f});
  d = DecideExtraction(s, probs);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->converged);
  EXPECT_EQ(d->indices[3], 2);
  EXPECT_EQ(d->weakest_axis, "layers[2].experts");
  EXPECT_FLOAT_EQ(static_cast<float>(d->min_top), 0.94f);
  probs[3] = torch::tensor({0.f, 0.05f, 0.95f, 0.f});  // exactly at the threshold
  d = DecideExtraction(s, probs, 0.95f);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->converged);
  probs.pop_back();
  EXPECT_FALSE(DecideExtraction(s, probs).ok());
}

TEST(ExtractTest, StudentConfigMatchesChoice) {
  const HybridConfig p = MixedConfig();
  const SearchSpace s = Space(p);
  absl::StatusOr<model::HybridLM> parent = model::CreateHybridLM(p, 1);
  ASSERT_TRUE(parent.ok());
  const std::vector<int> idx = {1, 1, 1, 1, 2, 4, 3};
  absl::StatusOr<Student> st = ExtractStudent(*parent, s, idx);
  ASSERT_TRUE(st.ok()) << st.status();
  HybridConfig want = p;
  want.hidden = 16;
  want.layers[0] = LayerSpec::Attention(2, 2, 8);
  want.layers[1].mamba.heads = 2;
  want.layers[2] = LayerSpec::Moe(2, 2, 8, 16);
  want.layers[3] = LayerSpec::Mlp(36);
  EXPECT_EQ(st->config, want);
  EXPECT_EQ(st->model->config(), want);
  // Weights are the prefix of the parent's.
  const auto sd = st->model->StateDict();
  const auto pd = (*parent)->StateDict();
  EXPECT_TRUE(torch::equal(sd.at("embed"), pd.at("embed").narrow(1, 0, 16)));
  EXPECT_TRUE(torch::equal(sd.at("layers.3.mlp.w_down"),
                           pd.at("layers.3.mlp.w_down").narrow(0, 0, 16).narrow(1, 0, 36)));
}

}  // namespace
}  // namespace tailor::autocompress
