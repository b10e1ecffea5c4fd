// AutoCompress search loop: budget loss, forward KL, and a few steps on a tiny model in
// which the penalty drives the router toward a tiny memory budget.

#include <torch/torch.h>

#include <vector>

#include "compression/autocompress/search.h"
#include "compression/model/hybrid_lm.h"
#include "gtest/gtest.h"

namespace tailor::autocompress {
namespace {

using model::HybridConfig;
using model::LayerSpec;

TEST(BudgetLossTest, CeilingsAndFloor) {
  CostPrediction c;
  c.latency_ms = torch::tensor(105.0, torch::kDouble);
  c.memory_mib = torch::tensor(90.0, torch::kDouble);
  c.throughput = torch::tensor(80.0, torch::kDouble);
  Budgets b;
  b.latency_ms = 100.0;  // rho 1.05 -> 0.05
  b.memory_mib = 100.0;  // rho 0.9 -> 0.08 (unused capacity)
  b.throughput = 100.0;  // rho 100/80 = 1.25 -> 0.25
  absl::StatusOr<at::Tensor> l = BudgetLoss(c, b, 0.02);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_NEAR(l->item<double>(), 0.05 + 0.08 + 0.25, 1e-12);
  c.throughput = at::Tensor();
  EXPECT_FALSE(BudgetLoss(c, b, 0.02).ok());
  EXPECT_EQ(BudgetLoss(CostPrediction{}, Budgets{}, 0.02)->item<double>(), 0.0);
}

TEST(ForwardKlTest, ZeroForEqualLogitsPositiveOtherwise) {
  at::Tensor a = torch::randn({2, 3, 7}, torch::kDouble);
  EXPECT_NEAR(ForwardKl(a, a).item<double>(), 0.0, 1e-12);
  EXPECT_GT(ForwardKl(a, a * 2).item<double>(), 0.0);
}

HybridConfig TinyConfig() {
  HybridConfig c;
  c.vocab = 20;
  c.hidden = 16;
  c.max_seq = 16;
  c.layers = {LayerSpec::Mlp(32), LayerSpec::Attention(4, 2, 8)};
  return c;
}

// Expected hidden width under per-axis probabilities (axis 0 is the hidden axis).
double ExpectedHidden(const SearchSpace& s, const at::Tensor& p) {
  at::Tensor w = torch::tensor(s.axes[0].widths, torch::kDouble);
  return (p.to(torch::kDouble) * w).sum().item<double>();
}

TEST(SearchLoopTest, PenaltyPushesTowardTinyBudget) {
  const HybridConfig c = TinyConfig();
  absl::StatusOr<model::HybridLM> parent = model::CreateHybridLM(c, 1);
  absl::StatusOr<model::HybridLM> supernet = model::CreateHybridLM(c, 1);
  ASSERT_TRUE(parent.ok() && supernet.ok());
  absl::StatusOr<SearchSpace> space = BuildSearchSpace(c);
  ASSERT_TRUE(space.ok());
  ASSERT_EQ(space->axes[0].widths, (std::vector<int64_t>{4, 8, 12, 16}));
  SearchOptions o;
  o.schedule.steps = 6;
  o.samples = 2;
  o.alpha = 1.0;
  o.router.hidden = 32;
  o.router.learning_rate = 0.05;  // few steps: a larger rate makes the drift visible
  o.supernet_lr = 1e-3;
  o.stop_when_converged = false;
  ArchRouter router(*space, o.router);
  const double start = ExpectedHidden(*space, router->Probabilities()[0].detach());
  EXPECT_DOUBLE_EQ(start, 10.0);  // uniform

  // Memory "MiB" = expected hidden width of the sample; budget 4 = the narrowest choice.
  const std::vector<int64_t> widths = space->axes[0].widths;
  CostPredictor cost =
      [widths](const std::vector<at::Tensor>& y) -> absl::StatusOr<CostPrediction> {
    CostPrediction p;
    p.memory_mib = (y[0] * torch::tensor(widths, torch::kFloat)).sum();
    return p;
  };
  Budgets budgets;
  budgets.memory_mib = 4.0;
  torch::manual_seed(3);
  at::Tensor data = torch::randint(0, c.vocab, {6, 4, 8}, torch::kLong);
  BatchSource batches = [&](int64_t step) -> absl::StatusOr<at::Tensor> { return data[step]; };
  std::vector<int64_t> seen;
  ProgressCallback progress = [&](const StepReport& r) {
    seen.push_back(r.step);
    EXPECT_GE(r.kd_loss, 0.0);
    EXPECT_GE(r.penalty, 0.0);  // 0 once a sample lands in the dead zone at width 4
    return true;
  };
  absl::StatusOr<SearchResult> r =
      RunSearch(*parent, *supernet, *space, router, batches, cost, budgets, o, progress);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps_run, 6);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(r->probabilities.size(), space->axes.size());
  EXPECT_LT(ExpectedHidden(*space, r->probabilities[0]), start);
  EXPECT_GT(r->probabilities[0][0].item<float>(), 0.25f);
  // The frozen parent was not touched; the supernet was trained.
  EXPECT_TRUE(torch::equal((*parent)->StateDict().at("embed"),
                           model::CreateHybridLM(c, 1).value()->StateDict().at("embed")));

  // A progress callback returning false stops after that step.
  ArchRouter router2(*space, o.router);
  r = RunSearch(*parent, *supernet, *space, router2, batches, cost, budgets, o,
                [](const StepReport&) { return false; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->steps_run, 1);
}

}  // namespace
}  // namespace tailor::autocompress
