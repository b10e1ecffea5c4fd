// The uniform baseline (uniform.h): the grid of one width level per axis kind, budget
// filtering against a brute-force count, errors that name the unreachable budget and its
// best predicted value, KD scoring of the largest candidates on a real (tiny) model, and the
// greedy budget repair with and without importance scores.

#include "compression/autocompress/uniform.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compression/autocompress/extract.h"
#include "compression/autocompress/search.h"
#include "compression/autocompress/space.h"
#include "compression/costmodel/cost_model.h"
#include "compression/costmodel/search_space.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"
#include "gtest/gtest.h"
#include "tests/unit/compression/synthetic_cost_table.h"

namespace tailor::autocompress {
namespace {

using costmodel::CostTableData;
using model::HybridConfig;
using model::LayerKind;
using model::LayerSpec;

using test_support::SyntheticTable;

// hidden 4 levels, attention heads per group 2, experts 3 (>= top_k), expert/shared/MLP
// FFN 4 each: 4 * 2 * 3 * 4 * 4 * 4 = 1536 distinct uniform architectures.
HybridConfig Parent() {
  HybridConfig c;
  c.vocab = 20;
  c.hidden = 16;
  c.max_seq = 16;
  c.layers = {LayerSpec::Attention(4, 2, 8), LayerSpec::Mlp(32), LayerSpec::Moe(4, 2, 16, 16),
              LayerSpec::Attention(4, 2, 8)};
  return c;
}

struct Fixture {
  HybridConfig parent = Parent();
  SearchSpace space;
  std::optional<costmodel::CostModel> model;
  UniformGrid all;  // no budgets: every uniform architecture

  Fixture() {
    space = *BuildSearchSpace(parent);
    model.emplace(*costmodel::CostModel::FromData(SyntheticTable(parent)));
    all = *UniformCandidates(parent, space, *model, Budgets{});
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(UniformTest, GridHasOneLevelPerKindAndTheParentFirst) {
  Fixture f;
  EXPECT_EQ(f.all.grid_size, 1536);
  ASSERT_EQ(f.all.fitting.size(), 1536u);
  // The parent (every axis at its widest) is the largest.
  std::vector<int> widest;
  for (const ChoiceAxis& a : f.space.axes) widest.push_back(a.widths.size() - 1);
  EXPECT_EQ(f.all.fitting.front().indices, widest);
  EXPECT_EQ(f.all.fitting.front().parameters, f.parent.ParameterCount());
  for (size_t i = 1; i < f.all.fitting.size(); ++i) {
    EXPECT_GE(f.all.fitting[i - 1].parameters, f.all.fitting[i].parameters);
  }
  // Uniform: both attention layers always take the same width, and nothing is removed.
  for (const UniformCandidate& c : f.all.fitting) {
    EXPECT_EQ(c.config.layers[0], c.config.layers[3]);
    for (const LayerSpec& l : c.config.layers) EXPECT_TRUE(l.present());
  }
  // The narrowest level of each kind: hidden 4, one head per group, 2 experts (top_k), 4.
  const UniformCandidate& smallest = f.all.fitting.back();
  EXPECT_EQ(smallest.config.hidden, 4);
  EXPECT_EQ(smallest.config.layers[0].attention.heads, 2);
  EXPECT_EQ(smallest.config.layers[1].mlp.ffn, 8);
  EXPECT_EQ(smallest.config.layers[2].moe.experts, 2);
  EXPECT_EQ(smallest.config.layers[2].moe.expert_ffn, 4);
  EXPECT_EQ(smallest.config.layers[2].moe.shared_ffn, 4);
  EXPECT_NE(smallest.levels.find("hidden=1/4"), std::string::npos) << smallest.levels;
}

TEST(UniformTest, BudgetKeepsExactlyTheFittingCandidatesLargestFirst) {
  Fixture f;
  std::vector<double> memory;
  for (const UniformCandidate& c : f.all.fitting) memory.push_back(c.predicted.memory_mib);
  const double budget = Median(memory);
  int64_t expected = 0, best_params = 0;
  for (const UniformCandidate& c : f.all.fitting) {
    if (c.predicted.memory_mib <= budget) {
      ++expected;
      best_params = std::max(best_params, c.parameters);
    }
  }
  Budgets b;
  b.memory_mib = budget;
  absl::StatusOr<UniformGrid> g = UniformCandidates(f.parent, f.space, *f.model, b);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->grid_size, 1536);
  EXPECT_EQ(static_cast<int64_t>(g->fitting.size()), expected);
  EXPECT_LT(expected, 1536);
  EXPECT_EQ(g->fitting.front().parameters, best_params);
  for (const UniformCandidate& c : g->fitting) EXPECT_LE(c.predicted.memory_mib, budget);
}

TEST(UniformTest, ErrorsExactlyWhenNothingFitsAndNamesTheBudget) {
  Fixture f;
  double min_memory = 1e30, min_latency = 1e30, max_throughput = 0;
  for (const UniformCandidate& c : f.all.fitting) {
    min_memory = std::min(min_memory, c.predicted.memory_mib);
    min_latency = std::min(min_latency, c.predicted.latency_ms);
    max_throughput = std::max(max_throughput, c.predicted.throughput_tokens_per_s);
  }
  Budgets b;
  b.memory_mib = min_memory;  // exactly the smallest: one candidate fits
  absl::StatusOr<UniformGrid> g = UniformCandidates(f.parent, f.space, *f.model, b);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->fitting.size(), 1u);
  EXPECT_EQ(g->fitting[0].indices, f.all.fitting.back().indices);

  b.memory_mib = min_memory * (1 - 1e-9);
  g = UniformCandidates(f.parent, f.space, *f.model, b);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(g.status().message().find("memory_mib_max"), std::string::npos) << g.status();
  EXPECT_NE(g.status().message().find(absl::StrFormat("smallest predicted %.6g", min_memory)),
            std::string::npos)
      << g.status();
  EXPECT_EQ(g.status().message().find("latency"), std::string::npos) << g.status();

  Budgets t;
  t.throughput = max_throughput * 1.01;
  g = UniformCandidates(f.parent, f.space, *f.model, t);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(g.status().message().find("throughput_tokens_per_s_min"), std::string::npos);
  EXPECT_NE(g.status().message().find(absl::StrFormat("largest predicted %.6g", max_throughput)),
            std::string::npos)
      << g.status();
  t.throughput = max_throughput;
  EXPECT_TRUE(UniformCandidates(f.parent, f.space, *f.model, t).ok());

  // The whole space: the cheapest architecture removes layers, so it is cheaper still.
  Budgets tight;
  tight.memory_mib = min_memory;
  EXPECT_TRUE(CheckBudgetsReachable(f.parent, f.space, *f.model, tight).ok());
  absl::StatusOr<costmodel::Prediction> cheapest =
      f.model->Predict(*ChildConfig(f.parent, f.space, std::vector<int>(f.space.axes.size(), 0)));
  ASSERT_TRUE(cheapest.ok());
  EXPECT_LT(cheapest->memory_mib, min_memory);
  tight.memory_mib = cheapest->memory_mib * 0.999;
  absl::Status st = CheckBudgetsReachable(f.parent, f.space, *f.model, tight);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("memory_mib_max"), std::string::npos) << st;
}

TEST(UniformTest, SelectScoresTheLargestFittingByKdLoss) {
  Fixture f;
  torch::manual_seed(0);
  absl::StatusOr<model::HybridLM> parent = model::CreateHybridLM(f.parent, 3);
  ASSERT_TRUE(parent.ok());
  std::vector<at::Tensor> eval = {torch::randint(0, 20, {3, 8}, torch::kLong),
                                  torch::randint(0, 20, {3, 8}, torch::kLong)};
  std::vector<double> memory;
  for (const UniformCandidate& c : f.all.fitting) memory.push_back(c.predicted.memory_mib);
  Budgets b;
  b.memory_mib = Median(memory);
  absl::StatusOr<UniformGrid> g = UniformCandidates(f.parent, f.space, *f.model, b);
  ASSERT_TRUE(g.ok());
  absl::StatusOr<UniformResult> r = SelectUniform(*parent, f.space, *f.model, b, eval);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->scored.size(), 3u);
  EXPECT_EQ(r->fitting, static_cast<int64_t>(g->fitting.size()));
  EXPECT_EQ(r->eval_tokens, 3 * 2 * 3 * 8);
  double best = 1e30;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r->scored[i].indices, g->fitting[i].indices);  // the three largest, in order
    // The score is the KD loss of the sliced student, recomputed here.
    torch::NoGradGuard no_grad;
    absl::StatusOr<Student> s = ExtractStudent(*parent, f.space, r->scored[i].indices);
    ASSERT_TRUE(s.ok());
    double kd = 0;
    for (const at::Tensor& t : eval) {
      kd += ForwardKl((*parent)->Forward(t)->logits, s->model->Forward(t)->logits).item<double>();
    }
    EXPECT_NEAR(r->scored[i].kd_loss, kd / 2, 1e-6);
    EXPECT_GT(r->scored[i].kd_loss, 0.0);
    best = std::min(best, r->scored[i].kd_loss);
  }
  EXPECT_EQ(r->best.kd_loss, best);
  EXPECT_LE(r->best.predicted.memory_mib, *b.memory_mib);

  UniformOptions one;
  one.keep = 1;
  r = SelectUniform(*parent, f.space, *f.model, b, eval, one);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scored.size(), 1u);
  EXPECT_EQ(r->best.indices, g->fitting[0].indices);
}

std::vector<int> Widest(const Fixture& f) {
  std::vector<int> widest;
  for (const ChoiceAxis& a : f.space.axes) widest.push_back(a.widths.size() - 1);
  return widest;
}

// What keeping only the first quarter of every layer axis costs (full hidden width).
Budgets QuarterOfEveryLayerAxis(const Fixture& f) {
  std::vector<int> quarter(f.space.axes.size(), 1);
  quarter[0] = Widest(f)[0];
  Budgets b;
  b.memory_mib = f.model->Predict(*ChildConfig(f.parent, f.space, quarter))->memory_mib;
  return b;
}

TEST(UniformTest, RepairShrinksUntilTheBudgetIsMetSparingImportantUnits) {
  Fixture f;
  const std::vector<int> widest = Widest(f);
  // The budget is what keeping only the important quarter of every layer axis costs:
  // reachable without ever touching an important unit.
  const Budgets b = QuarterOfEveryLayerAxis(f);

  // Everything fits already: nothing changes.
  Budgets loose;
  loose.memory_mib = 1e9;
  absl::StatusOr<RepairResult> r = RepairToBudgets(f.parent, f.space, *f.model, loose, widest);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->repaired);
  EXPECT_EQ(r->indices, widest);

  // Hidden channels all matter; every layer axis has a negligible tail past its first quarter.
  Importance imp;
  imp.hidden.assign(16, 1.0);
  imp.layers.resize(4);
  auto tail = [](int64_t n) {
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = i < n / 4 ? 1.0 : 1e-9;
    return v;
  };
  for (int l : {0, 3}) imp.layers[l].attention_heads = {1.0, 1e-9, 1.0, 1e-9};
  imp.layers[1].mlp_ffn = tail(32);
  imp.layers[2].experts = tail(4);
  imp.layers[2].expert_ffn.assign(4, tail(16));
  imp.layers[2].shared_ffn = tail(16);
  r = RepairToBudgets(f.parent, f.space, *f.model, b, widest, &imp);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->repaired);
  ASSERT_FALSE(r->changes.empty());
  EXPECT_LE(r->predicted.memory_mib, *b.memory_mib);
  absl::StatusOr<costmodel::Prediction> check =
      f.model->Predict(*ChildConfig(f.parent, f.space, r->indices));
  EXPECT_NEAR(check->memory_mib, r->predicted.memory_mib, 1e-12);
  // Neither hidden channels nor whole layers (a layer's important units) were given up.
  for (const std::string& c : r->changes) EXPECT_EQ(c.rfind("hidden", 0), std::string::npos) << c;
  EXPECT_EQ(r->indices[0], widest[0]);
  for (size_t a = 1; a < r->indices.size(); ++a) EXPECT_GE(r->indices[a], 1) << a;
  // Maximal: growing any shrunk axis by one more step would break the budget.
  int shrunk = 0;
  for (size_t a = 0; a < widest.size(); ++a) {
    if (r->indices[a] == widest[a]) continue;
    ++shrunk;
    std::vector<int> grown = r->indices;
    ++grown[a];
    EXPECT_GT(f.model->Predict(*ChildConfig(f.parent, f.space, grown))->memory_mib, *b.memory_mib)
        << f.space.axes[a].name;
  }
  EXPECT_GT(shrunk, 0);

  // Unreachable: the repair gives up with FAILED_PRECONDITION.
  Budgets impossible;
  impossible.memory_mib = 1e-9;
  EXPECT_EQ(RepairToBudgets(f.parent, f.space, *f.model, impossible, widest).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Each narrower choice of each axis scored alone from the parent: the KD loss of exactly that
// slice (recomputed here with HeldOutKd), the parent's own width 0; nothing measured when the
// space has more narrower choices than allowed.
TEST(UniformTest, MeasureAxisKdScoresEveryNarrowerChoiceAlone) {
  Fixture f;
  torch::manual_seed(0);
  absl::StatusOr<model::HybridLM> parent = model::CreateHybridLM(f.parent, 3);
  ASSERT_TRUE(parent.ok());
  std::vector<at::Tensor> batches = {torch::randint(0, 20, {3, 8}, torch::kLong)};
  std::vector<int> widest;
  int narrower = 0;
  for (const ChoiceAxis& a : f.space.axes) {
    widest.push_back(static_cast<int>(a.widths.size()) - 1);
    narrower += widest.back();
  }
  Importance imp;
  AxisKdLimits limits;
  limits.max_evaluations = narrower - 1;
  ASSERT_TRUE(MeasureAxisKd(*parent, f.space, batches, imp, limits).ok());
  EXPECT_TRUE(imp.axis_kd.empty());
  EXPECT_EQ(imp.axis_kd_skipped, absl::StrCat(narrower, " axis steps, over the ", narrower - 1,
                                               " measured at most"));
  limits.max_evaluations = narrower;
  ASSERT_TRUE(MeasureAxisKd(*parent, f.space, batches, imp, limits).ok());
  EXPECT_EQ(imp.axis_kd_skipped, "");
  ASSERT_EQ(imp.axis_kd.size(), f.space.axes.size());
  for (size_t a = 0; a < f.space.axes.size(); ++a) {
    ASSERT_EQ(imp.axis_kd[a].size(), f.space.axes[a].widths.size()) << a;
    EXPECT_EQ(imp.axis_kd[a].back(), 0.0) << a;
    std::vector<int> narrowest = widest;
    narrowest[a] = 0;
    absl::StatusOr<std::vector<double>> kd = HeldOutKd(*parent, f.space, {narrowest}, batches);
    ASSERT_TRUE(kd.ok()) << kd.status();
    EXPECT_NEAR(imp.axis_kd[a][0], kd->front(), 1e-9) << f.space.axes[a].name;
    EXPECT_GT(imp.axis_kd[a][0], 0.0) << f.space.axes[a].name;
  }
}

// The steps are priced at the parent's own forward before any is taken: on a clock that
// moves 2 s per reading (the parent's forward: 2 s), N steps project to 2N s, which a
// budget of 2N - 1 s refuses (nothing measured, the reason kept) and one of 2N s allows.
TEST(UniformTest, MeasureAxisKdIsSkippedWhenItsProjectedTimeIsOverTheLimit) {
  Fixture f;
  torch::manual_seed(0);
  absl::StatusOr<model::HybridLM> parent = model::CreateHybridLM(f.parent, 3);
  ASSERT_TRUE(parent.ok());
  const std::vector<at::Tensor> batches = {torch::randint(0, 20, {3, 8}, torch::kLong)};
  int narrower = 0;
  for (const ChoiceAxis& a : f.space.axes) narrower += static_cast<int>(a.widths.size()) - 1;
  absl::Time t = absl::UnixEpoch();
  AxisKdLimits limits;
  limits.now = [&t] { return t += absl::Seconds(2); };
  limits.max_time = absl::Seconds(2 * narrower - 1);
  Importance imp;
  ASSERT_TRUE(MeasureAxisKd(*parent, f.space, batches, imp, limits).ok());
  EXPECT_TRUE(imp.axis_kd.empty());
  EXPECT_EQ(imp.axis_kd_skipped,
            absl::StrCat(narrower, " axis steps projected at ",
                         absl::FormatDuration(absl::Seconds(2 * narrower)),
                         " (2s each, the parent's own forward), over the ",
                         absl::FormatDuration(absl::Seconds(2 * narrower - 1)), " allowed"));
  limits.max_time = absl::Seconds(2 * narrower);
  ASSERT_TRUE(MeasureAxisKd(*parent, f.space, batches, imp, limits).ok());
  EXPECT_EQ(imp.axis_kd.size(), f.space.axes.size());
  EXPECT_EQ(imp.axis_kd_skipped, "");
}

// With measured KD per axis step, the repair prices a step by it: the same unit scores that
// spare every hidden channel above, but hidden steps measured nearly free and every layer
// axis's steps dear, and the repair's first shrink is the hidden width.
TEST(UniformTest, RepairPricesStepsByMeasuredKdWhenGiven) {
  Fixture f;
  const std::vector<int> widest = Widest(f);
  const Budgets b = QuarterOfEveryLayerAxis(f);
  Importance imp;
  imp.hidden.assign(16, 1.0);
  imp.layers.resize(4);
  for (int l : {0, 3}) imp.layers[l].attention_heads = {1.0, 1e-9, 1.0, 1e-9};
  for (size_t a = 0; a < widest.size(); ++a) {
    const double per_step = f.space.axes[a].name == "hidden" ? 1e-6 : 10.0;
    std::vector<double> kd;
    for (int i = 0; i <= widest[a]; ++i) kd.push_back(per_step * (widest[a] - i));
    imp.axis_kd.push_back(kd);
  }
  absl::StatusOr<RepairResult> r = RepairToBudgets(f.parent, f.space, *f.model, b, widest, &imp);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->changes.empty());
  EXPECT_EQ(r->changes.front().rfind("hidden 16 -> 12", 0), 0u) << r->changes.front();
  EXPECT_LE(r->predicted.memory_mib, *b.memory_mib);
}

// The settle's growth ladder: from a narrow architecture toward a ceiling, each rung is the
// one before plus one axis step, predicted as CostModel::Predict prices it, growing in cost,
// never past the ceiling, and maximal (no single step more fits).
TEST(UniformTest, GrowthLadderStepsOneAxisAtATimeUpToTheCeiling) {
  Fixture f;
  std::vector<int> widest, narrow;
  for (const ChoiceAxis& a : f.space.axes) {
    widest.push_back(static_cast<int>(a.widths.size()) - 1);
    narrow.push_back(1);
  }
  narrow[0] = widest[0];
  Budgets ceiling;
  ceiling.memory_mib =
      0.95 * f.model->Predict(*ChildConfig(f.parent, f.space, widest))->memory_mib;
  absl::StatusOr<std::vector<LadderRung>> ladder =
      GrowthLadder(f.parent, f.space, *f.model, ceiling, narrow);
  ASSERT_TRUE(ladder.ok()) << ladder.status();
  ASSERT_GE(ladder->size(), 3u);
  EXPECT_EQ(ladder->front().indices, narrow);
  EXPECT_EQ(ladder->front().change, "");
  for (size_t i = 1; i < ladder->size(); ++i) {
    const LadderRung& r = (*ladder)[i];
    int steps = 0;
    for (size_t a = 0; a < narrow.size(); ++a) steps += r.indices[a] - (*ladder)[i - 1].indices[a];
    EXPECT_EQ(steps, 1) << "rung " << i;
    EXPECT_NE(r.change.find(" -> "), std::string::npos) << r.change;
    EXPECT_EQ(r.change.find("grown back"), std::string::npos) << r.change;
    EXPECT_LE(r.predicted.memory_mib, *ceiling.memory_mib);
    EXPECT_NEAR(f.model->Predict(*ChildConfig(f.parent, f.space, r.indices))->memory_mib,
                r.predicted.memory_mib, 1e-12);
  }
  const std::vector<int>& top = ladder->back().indices;
  for (size_t a = 0; a < widest.size(); ++a) {
    if (top[a] == widest[a]) continue;
    std::vector<int> grown = top;
    ++grown[a];
    absl::StatusOr<model::HybridConfig> child = ChildConfig(f.parent, f.space, grown);
    if (!child.ok()) continue;
    EXPECT_GT(f.model->Predict(*child)->memory_mib, *ceiling.memory_mib) << f.space.axes[a].name;
  }
  // A start already over the ceiling is a ladder of one rung.
  absl::StatusOr<std::vector<LadderRung>> over =
      GrowthLadder(f.parent, f.space, *f.model, ceiling, widest);
  ASSERT_TRUE(over.ok());
  EXPECT_EQ(over->size(), 1u);
}

// The descent below the search's choice: the repair's shrinks, no grow-back, until the
// target holds; bottom first, each rung one axis step below the next, the choice itself last
// with the change that grows back to it.
TEST(UniformTest, DescentLadderShrinksToTheTargetAndEndsAtTheChoice) {
  Fixture f;
  std::vector<int> widest;
  for (const ChoiceAxis& a : f.space.axes) widest.push_back(static_cast<int>(a.widths.size()) - 1);
  const double mib = f.model->Predict(*ChildConfig(f.parent, f.space, widest))->memory_mib;
  Budgets target, overshoot;
  target.memory_mib = 0.97 * mib;
  overshoot.memory_mib = 0.92 * mib;
  absl::StatusOr<std::vector<LadderRung>> descent =
      DescentLadder(f.parent, f.space, *f.model, target, overshoot, widest);
  ASSERT_TRUE(descent.ok()) << descent.status();
  ASSERT_GE(descent->size(), 2u);
  EXPECT_EQ(descent->back().indices, widest);
  EXPECT_EQ(descent->front().change, "");
  EXPECT_LE(descent->front().predicted.memory_mib, *target.memory_mib);
  for (size_t i = 1; i < descent->size(); ++i) {
    const LadderRung& r = (*descent)[i];
    int steps = 0;
    for (size_t a = 0; a < widest.size(); ++a) steps += r.indices[a] - (*descent)[i - 1].indices[a];
    EXPECT_EQ(steps, 1) << "rung " << i;
    // Every rung above the bottom is still over the target: the descent stops at the first
    // that meets it.
    EXPECT_GT(r.predicted.memory_mib, *target.memory_mib) << "rung " << i;
    EXPECT_NE(r.change.find(" -> "), std::string::npos) << r.change;
  }
  // The bottom is grown back under the target: no single step toward the choice still fits.
  const std::vector<int>& bottom = descent->front().indices;
  int grown_back_checks = 0;
  for (size_t a = 0; a < widest.size(); ++a) {
    if (bottom[a] >= widest[a]) continue;
    std::vector<int> up = bottom;
    ++up[a];
    EXPECT_GT(f.model->Predict(*ChildConfig(f.parent, f.space, up))->memory_mib,
              *target.memory_mib)
        << f.space.axes[a].name;
    ++grown_back_checks;
  }
  EXPECT_GE(grown_back_checks, 1);
  // Not past the overshoot floor: the per-layer steps get there, the hidden one (a quarter of
  // this parent's memory) would land far below it.
  EXPECT_GT(descent->front().predicted.memory_mib, *overshoot.memory_mib);
  EXPECT_EQ(bottom[0], widest[0]) << "hidden shrunk";
  // With no floor to respect, the cheapest shrink per importance may take the big step; the
  // bottom then still fits the target.
  overshoot.memory_mib = 0;
  absl::StatusOr<std::vector<LadderRung>> coarse =
      DescentLadder(f.parent, f.space, *f.model, target, overshoot, widest);
  ASSERT_TRUE(coarse.ok()) << coarse.status();
  EXPECT_LE(coarse->front().predicted.memory_mib, *target.memory_mib);
  EXPECT_EQ(coarse->back().indices, widest);
  // Already within the target: the choice alone.
  target.memory_mib = 2 * mib;
  descent = DescentLadder(f.parent, f.space, *f.model, target, overshoot, widest);
  ASSERT_TRUE(descent.ok());
  ASSERT_EQ(descent->size(), 1u);
  EXPECT_EQ(descent->front().change, "");
}

// A branch takes the global step the ladder could not: from hidden 8 with everything else at
// full width under a ceiling 5% above it, hidden 8 -> 12 is out of reach one step at a time;
// the branch holds hidden at 12, repairs the per-layer axes down under the floor and grows
// back toward the ceiling, one axis step per rung.
TEST(UniformTest, BranchLadderTakesTheBlockedGlobalStepAndPaysElsewhere) {
  Fixture f;
  ASSERT_EQ(f.space.axes[0].name, "hidden");
  ASSERT_EQ(f.space.axes[0].widths, (std::vector<int64_t>{4, 8, 12, 16}));
  std::vector<int> start;
  for (const ChoiceAxis& a : f.space.axes) start.push_back(static_cast<int>(a.widths.size()) - 1);
  start[0] = 1;  // hidden 8
  const double mib = f.model->Predict(*ChildConfig(f.parent, f.space, start))->memory_mib;
  Budgets floor, ceiling;
  // Embeddings dominate this tiny parent: at hidden 12 the narrowest per-layer widths still
  // cost 96% of hidden 8 at full width, so the floor sits 2% below.
  floor.memory_mib = 0.98 * mib;
  ceiling.memory_mib = 1.05 * mib;
  ASSERT_EQ(GrowthLadder(f.parent, f.space, *f.model, ceiling, start)->size(), 1u);

  absl::StatusOr<std::vector<Branch>> branches =
      BranchLadders(f.parent, f.space, *f.model, floor, ceiling, start, 2);
  ASSERT_TRUE(branches.ok()) << branches.status();
  ASSERT_EQ(branches->size(), 1u);  // hidden is the space's only global axis
  const Branch& b = branches->front();
  EXPECT_EQ(b.axis, 0);
  ASSERT_GE(b.ladder.size(), 2u);
  EXPECT_EQ(b.ladder.front().change.rfind("hidden 8 -> 12, ", 0), 0u) << b.ladder.front().change;
  EXPECT_LE(b.ladder.front().predicted.memory_mib, *floor.memory_mib);
  for (size_t i = 0; i < b.ladder.size(); ++i) {
    const LadderRung& r = b.ladder[i];
    EXPECT_GE(r.indices[0], 2) << "rung " << i;
    EXPECT_LE(r.predicted.memory_mib, *ceiling.memory_mib) << "rung " << i;
    if (i == 0) continue;
    int steps = 0;
    for (size_t a = 0; a < start.size(); ++a) steps += r.indices[a] - b.ladder[i - 1].indices[a];
    EXPECT_EQ(steps, 1) << "rung " << i;
  }
  EXPECT_GT(b.ladder.back().predicted.memory_mib, *floor.memory_mib);
  // No branch when none may be taken, or when the stepped axis is already at its widest.
  EXPECT_TRUE(BranchLadders(f.parent, f.space, *f.model, floor, ceiling, start, 0)->empty());
  start[0] = 3;
  EXPECT_TRUE(BranchLadders(f.parent, f.space, *f.model, floor, ceiling, start, 2)->empty());
}

// A ladder that takes a global step only past the budget: hidden 8 -> 12 is its top rung,
// over the budget. The branch starts from the largest rung within the budgets (hidden 8), so
// it steps hidden 8 -> 12 and pays with the per-layer axes; from the top it could only have
// stepped 12 -> 16.
TEST(UniformTest, BranchesStartFromTheLargestRungWithinTheBudgets) {
  Fixture f;
  std::vector<int> widest;
  for (const ChoiceAxis& a : f.space.axes) widest.push_back(static_cast<int>(a.widths.size()) - 1);
  std::vector<LadderRung> ladder(3);
  ladder[0].indices = widest;
  ladder[0].indices[0] = 0;  // hidden 4
  ladder[1].indices = widest;
  ladder[1].indices[0] = 1;  // hidden 8
  ladder[2].indices = widest;
  ladder[2].indices[0] = 2;  // hidden 12
  for (LadderRung& r : ladder) {
    r.predicted = *f.model->Predict(*ChildConfig(f.parent, f.space, r.indices));
  }
  const double at8 = ladder[1].predicted.memory_mib;
  Budgets budgets;
  budgets.memory_mib = 1.01 * at8;
  ASSERT_GT(ladder[2].predicted.memory_mib, *budgets.memory_mib);
  EXPECT_EQ(BranchStart(ladder, budgets), 1);
  budgets.memory_mib = 2 * ladder[2].predicted.memory_mib;
  EXPECT_EQ(BranchStart(ladder, budgets), 2);
  budgets.memory_mib = 0.5 * ladder[0].predicted.memory_mib;  // nothing fits: the first
  EXPECT_EQ(BranchStart(ladder, budgets), 0);

  Budgets floor, ceiling;
  floor.memory_mib = 0.98 * at8;
  ceiling.memory_mib = 1.05 * at8;
  budgets.memory_mib = 1.01 * at8;
  const int start = BranchStart(ladder, budgets);
  absl::StatusOr<std::vector<Branch>> branches =
      BranchLadders(f.parent, f.space, *f.model, floor, ceiling, ladder[start].indices, 1);
  ASSERT_TRUE(branches.ok()) << branches.status();
  ASSERT_EQ(branches->size(), 1u);
  EXPECT_EQ(branches->front().ladder.front().change.rfind("hidden 8 -> 12, ", 0), 0u)
      << branches->front().ladder.front().change;
}

// The settle's fine space: every hidden and FFN step of the search space split in four, head
// and expert counts and removal (0 -> the first width) as they were; every choice of the
// search space has one there that builds the same child.
TEST(UniformTest, FineSpaceSplitsWidthStepsAndKeepsEveryChoice) {
  Fixture f;
  const SearchSpace fine = RefineSpace(f.space, 4);
  ASSERT_EQ(fine.axes.size(), f.space.axes.size());
  std::vector<int64_t> hidden, mlp = {0};
  for (int64_t w = 4; w <= 16; ++w) hidden.push_back(w);
  for (int64_t w = 8; w <= 32; w += 2) mlp.push_back(w);
  for (size_t a = 0; a < fine.axes.size(); ++a) {
    const ChoiceAxis& axis = fine.axes[a];
    if (axis.kind == AxisKind::kHidden) {
      EXPECT_EQ(axis.widths, hidden);
    } else if (axis.kind == AxisKind::kMlpFfn) {
      EXPECT_EQ(axis.widths, mlp);
    } else if (axis.kind == AxisKind::kExpertFfn || axis.kind == AxisKind::kSharedFfn) {
      EXPECT_EQ(axis.widths, (std::vector<int64_t>{0, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                                   16}))
          << axis.name;
    } else {
      EXPECT_EQ(axis.widths, f.space.axes[a].widths) << axis.name;  // heads, experts
    }
    EXPECT_EQ(RefineSpace(f.space, 1).axes[a].widths, f.space.axes[a].widths);
  }
  for (const UniformCandidate& c : f.all.fitting) {
    absl::StatusOr<std::vector<int>> refined = RefineIndices(f.space, fine, c.indices);
    ASSERT_TRUE(refined.ok()) << refined.status();
    EXPECT_TRUE(*ChildConfig(f.parent, fine, *refined) == c.config) << c.levels;
  }
  EXPECT_EQ(RefineIndices(f.space, fine, {0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<int> bad(f.space.axes.size(), 0);
  bad[0] = 4;  // hidden has 4 choices
  absl::Status out_of_range = RefineIndices(f.space, fine, bad).status();
  EXPECT_EQ(out_of_range.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.message().find("hidden: choice 4"), std::string::npos) << out_of_range;
}

// The steps' measured KD carried to the fine widths by interpolation in width; unit scores
// as they are; a mismatched axis_kd refused.
TEST(UniformTest, FineImportanceInterpolatesTheMeasuredKd) {
  Fixture f;
  const SearchSpace fine = RefineSpace(f.space, 4);
  Importance imp;
  imp.hidden = {1, 2, 3};
  imp.axis_kd.assign(f.space.axes.size(), {});
  imp.axis_kd[0] = {0.9, 0.5, 0.2, 0.0};  // hidden 4, 8, 12, 16
  absl::StatusOr<Importance> refined = RefineImportance(imp, f.space, fine);
  ASSERT_TRUE(refined.ok()) << refined.status();
  ASSERT_EQ(refined->axis_kd[0].size(), 13u);  // hidden 4..16
  EXPECT_DOUBLE_EQ(refined->axis_kd[0][0], 0.9);
  EXPECT_DOUBLE_EQ(refined->axis_kd[0][1], 0.8);   // hidden 5
  EXPECT_DOUBLE_EQ(refined->axis_kd[0][2], 0.7);   // hidden 6
  EXPECT_DOUBLE_EQ(refined->axis_kd[0][4], 0.5);   // hidden 8, measured
  EXPECT_DOUBLE_EQ(refined->axis_kd[0][10], 0.1);  // hidden 14
  EXPECT_TRUE(refined->axis_kd[1].empty());
  EXPECT_EQ(refined->hidden, imp.hidden);
  imp.axis_kd[0] = {0.9, 0.5};
  EXPECT_EQ(RefineImportance(imp, f.space, fine).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(RefineImportance(Importance{}, f.space, fine)->axis_kd.empty());
}

// A ladder grown in the fine space climbs at least as close to the ceiling as the search
// space's, by steps that are each one fine step of one axis.
TEST(UniformTest, AFineLadderGetsCloserToTheCeiling) {
  Fixture f;
  const SearchSpace fine = RefineSpace(f.space, 4);
  std::vector<int> widest, narrow;
  for (const ChoiceAxis& a : f.space.axes) {
    widest.push_back(static_cast<int>(a.widths.size()) - 1);
    narrow.push_back(1);
  }
  Budgets ceiling;
  ceiling.memory_mib =
      0.93 * f.model->Predict(*ChildConfig(f.parent, f.space, widest))->memory_mib;
  const std::vector<LadderRung> coarse = *GrowthLadder(f.parent, f.space, *f.model, ceiling,
                                                       narrow);
  const std::vector<LadderRung> ladder =
      *GrowthLadder(f.parent, fine, *f.model, ceiling, *RefineIndices(f.space, fine, narrow));
  EXPECT_GT(ladder.size(), coarse.size());
  EXPECT_GE(ladder.back().predicted.memory_mib, coarse.back().predicted.memory_mib);
  EXPECT_LE(ladder.back().predicted.memory_mib, *ceiling.memory_mib);
  for (size_t i = 1; i < ladder.size(); ++i) {
    int steps = 0;
    for (size_t a = 0; a < narrow.size(); ++a) {
      steps += ladder[i].indices[a] - ladder[i - 1].indices[a];
    }
    EXPECT_EQ(steps, 1) << "rung " << i;
  }
}

// Thinned to 8 of 20 rungs: the first, the last and the kept rung stay, the rest spread on
// either side in proportion, and no change is lost.
TEST(UniformTest, ThinLadderKeepsTheEndsAndTheChoiceAndJoinsTheChanges) {
  std::vector<LadderRung> ladder(20);
  for (int i = 0; i < 20; ++i) {
    ladder[i].indices = {i};
    if (i > 0) ladder[i].change = absl::StrCat("c", i);
  }
  std::vector<LadderRung> thin = ladder;
  EXPECT_EQ(ThinLadder(thin, 5, 8), 2);
  std::vector<int> kept;
  for (const LadderRung& r : thin) kept.push_back(r.indices[0]);
  EXPECT_EQ(kept, (std::vector<int>{0, 3, 5, 8, 11, 13, 16, 19}));
  EXPECT_EQ(thin[1].change, "c1, c2, c3");
  EXPECT_EQ(thin[2].change, "c4, c5");
  EXPECT_EQ(thin[7].change, "c17, c18, c19");
  thin = ladder;  // the choice at the bottom: every slot above it
  EXPECT_EQ(ThinLadder(thin, 0, 4), 0);
  kept.clear();
  for (const LadderRung& r : thin) kept.push_back(r.indices[0]);
  EXPECT_EQ(kept, (std::vector<int>{0, 6, 13, 19}));
  thin = ladder;  // short enough: unchanged
  EXPECT_EQ(ThinLadder(thin, 7, 20), 7);
  EXPECT_EQ(thin.size(), 20u);
}

TEST(UniformTest, DescriptionsNameEveryLayer) {
  HybridConfig c = Parent();
  c.layers[1].mlp.ffn = 0;
  EXPECT_EQ(DescribeArchitecture(c),
            "hidden=16 | L0 attention heads=4,kv=2,head_dim=8 | L1 mlp removed | L2 moe "
            "experts=4,top_k=2,expert_ffn=16,shared_ffn=16 | L3 attention heads=4,kv=2,head_dim=8");
  EXPECT_EQ(DescribeLayers(c).size(), 4u);
  EXPECT_EQ(DescribeLayers(c)[1], "mlp removed");
}

// Experts with routing groups are ranked inside their group, so shrinking the axis gives up
// the tail of EVERY group: 8 experts in 2 groups whose last 2 of each are worthless shrink to
// 4 (experts {0, 1, 4, 5}) before anything that matters.
TEST(UniformTest, RepairCountsGroupedExpertImportancePerGroup) {
  HybridConfig parent = Parent();
  parent.layers[2] = LayerSpec::Moe(8, 2, 16, 16);
  parent.layers[2].moe.groups = 2;
  const SearchSpace space = *BuildSearchSpace(parent);
  const costmodel::CostModel model = *costmodel::CostModel::FromData(SyntheticTable(parent));
  std::vector<int> widest, four;
  int experts_axis = -1;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    widest.push_back(static_cast<int>(space.axes[a].widths.size()) - 1);
    if (space.axes[a].kind == AxisKind::kExperts) experts_axis = static_cast<int>(a);
  }
  ASSERT_GE(experts_axis, 0);
  ASSERT_EQ(space.axes[experts_axis].widths, (std::vector<int64_t>{0, 4, 6, 8}));
  four = widest;
  four[experts_axis] = 1;
  Budgets b;
  b.memory_mib = model.Predict(*ChildConfig(parent, space, four))->memory_mib;
  Importance imp;
  imp.hidden.assign(16, 1.0);
  imp.layers.resize(4);
  for (int l : {0, 3}) imp.layers[l].attention_heads.assign(4, 1.0);
  imp.layers[1].mlp_ffn.assign(32, 1.0);
  imp.layers[2].experts = {1, 1, 0, 0, 1, 1, 0, 0};
  imp.layers[2].expert_ffn.assign(8, std::vector<double>(16, 1.0));
  imp.layers[2].shared_ffn.assign(16, 1.0);
  absl::StatusOr<RepairResult> r = RepairToBudgets(parent, space, model, b, widest, &imp);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->indices, four);
  EXPECT_EQ(r->changes,
            (std::vector<std::string>{"layers[2].experts 8 -> 6", "layers[2].experts 6 -> 4"}));
}

}  // namespace
}  // namespace tailor::autocompress
