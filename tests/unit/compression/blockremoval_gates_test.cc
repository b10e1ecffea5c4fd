#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "compression/blockremoval/gates.h"
#include "compression/tasks/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tailor::blockremoval {
namespace {

using model::HybridConfig;
using model::LayerSpec;
using ::testing::ElementsAre;

// Every layer kind, plus an absent layer (not a variable).
HybridConfig TinyConfig() {
  HybridConfig c;
  c.vocab = tasks::kVocabSize;
  c.hidden = 16;
  c.max_seq = 64;
  c.layers = {LayerSpec::Attention(2, 1, 8), LayerSpec::Mamba(2, 8, 4, 4, 8),
              LayerSpec::Mlp(0), LayerSpec::Moe(4, 2, 16, 8), LayerSpec::Mlp(32)};
  return c;
}

model::HybridLM TinyModel(bool f64) {
  auto m = model::CreateHybridLM(TinyConfig(), 5);
  EXPECT_TRUE(m.ok()) << m.status();
  if (f64) (*m)->to(torch::kFloat64);
  return *m;
}

TEST(BlockRemovalGatesTest, PresentLayersSkipAbsent) {
  EXPECT_THAT(PresentLayers(TinyConfig()), ElementsAre(0, 1, 3, 4));
}

// d loss / d g_v from autograd equals the central difference of the loss in g_v (float64
// model, so the difference is accurate to ~1e-9).
TEST(BlockRemovalGatesTest, GateGradientsMatchFiniteDifferences) {
  model::HybridLM m = TinyModel(/*f64=*/true);
  const std::vector<int> layers = PresentLayers(m->config());
  const auto samples = CalibrationSamples(11, 3, tasks::Split::kTrain);
  auto a = GateGradients(m, samples, layers);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->sizes(), (std::vector<int64_t>{3, 4}));
  torch::NoGradGuard no_grad;
  const double eps = 1e-5;
  for (size_t s = 0; s < samples.size(); ++s) {
    for (size_t v = 0; v < layers.size(); ++v) {
      at::Tensor plus = torch::ones({5}, torch::kFloat64), minus = plus.clone();
      plus[layers[v]] = 1 + eps;
      minus[layers[v]] = 1 - eps;
      const double lp = SampleLoss(m, samples[s], plus)->item<double>();
      const double lm = SampleLoss(m, samples[s], minus)->item<double>();
      const double fd = (lp - lm) / (2 * eps);
      const double g = (*a)[s][v].item<double>();
      EXPECT_NEAR(g, fd, 1e-6 * std::max(1.0, std::abs(fd))) << "sample " << s << " var " << v;
    }
  }
  // Parameters keep their requires_grad flags.
  for (const at::Tensor& p : m->parameters()) EXPECT_TRUE(p.requires_grad());
}

TEST(BlockRemovalGatesTest, FisherQuboIsAtAOverRows) {
  const at::Tensor a = torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kFloat64).reshape({2, 2});
  auto q = FisherQubo(a);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->n, 2);
  // AᵀA = [[10, 14], [14, 20]], / 2 rows.
  EXPECT_THAT(q->h, ElementsAre(5.0, 7.0, 7.0, 10.0));
  EXPECT_FALSE(FisherQubo(torch::zeros({3}, torch::kFloat64)).ok());
}

TEST(BlockRemovalGatesTest, RemovedModelEqualsZeroGates) {
  model::HybridLM m = TinyModel(/*f64=*/false);
  auto child = WithoutBlocks(m, {1, 3});
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_FALSE((*child)->config().layers[1].present());
  EXPECT_FALSE((*child)->config().layers[3].present());
  EXPECT_TRUE((*child)->config().layers[4].present());
  EXPECT_EQ((*child)->config().layers[3].kind, model::LayerKind::kMoe);
  const auto samples = CalibrationSamples(3, 2, tasks::Split::kEval);
  torch::NoGradGuard no_grad;
  at::Tensor gates = torch::ones({5});
  gates[1] = 0;
  gates[3] = 0;
  for (const auto& s : samples) {
    const double gated = SampleLoss(m, s, gates)->item<double>();
    const double removed = SampleLoss(*child, s)->item<double>();
    EXPECT_NEAR(gated, removed, 1e-5);
  }
  EXPECT_EQ(RemoveBlocks(m->config(), {2}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RemoveBlocks(m->config(), {7}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BlockRemovalGatesTest, HeldOutLossIsTokenWeightedMean) {
  model::HybridLM m = TinyModel(/*f64=*/true);
  const auto samples = CalibrationSamples(4, 5, tasks::Split::kEval);
  double total = 0, tokens = 0;
  for (const auto& s : samples) {
    const double n = static_cast<double>(s.tokens.size() - s.answer_begin);
    total += SampleLoss(m, s)->item<double>() * n;
    tokens += n;
  }
  auto loss = HeldOutLoss(m, samples, /*batch_size=*/2);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, total / tokens, 1e-9);
}

TEST(BlockRemovalGatesTest, BlockInfluenceCountsTokensAndRanks) {
  model::HybridLM m = TinyModel(/*f64=*/false);
  const auto samples = CalibrationSamples(9, 4, tasks::Split::kTrain);
  auto bi = BlockInfluence(m, samples, 3);
  ASSERT_TRUE(bi.ok()) << bi.status();
  double tokens = 0;
  // Inputs are each sample but its last token (the last is only a target).
  for (const auto& s : samples) tokens += static_cast<double>(s.tokens.size() - 1);
  EXPECT_EQ(bi->tokens, tokens);
  ASSERT_EQ(bi->sum.size(), 5u);
  EXPECT_EQ(bi->sum[2], 0.0);  // absent layer
  for (int l : {0, 1, 3, 4}) {
    EXPECT_GT(bi->sum[l], 0.0);
    EXPECT_LE(bi->sum[l] / bi->tokens, 2.0);
  }
  EXPECT_THAT(LowestInfluence({0.3, 0.1, 0.2, 0.05}, 2), ElementsAre(1, 3));
  EXPECT_THAT(LowestInfluence({0.3, 0.1, 0.1}, 1), ElementsAre(1));
}

}  // namespace
}  // namespace tailor::blockremoval
