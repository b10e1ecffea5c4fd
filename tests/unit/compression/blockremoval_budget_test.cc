// Budget-driven M (SolveForBudget): the smallest M with a low-energy state that the cost
// model predicts within the budget, on a synthetic cost table of the demo parent; the cost
// of a state is the parent with that state's blocks made absent.
#include "compression/blockremoval/budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "compression/blockremoval/gates.h"
#include "compression/tasks/training.h"
#include "tests/unit/compression/synthetic_cost_table.h"

namespace tailor::blockremoval {
namespace {

// Diagonal H: a state's energy is the sum of its blocks' entries, so the order of states is
// known; block v costs 8 - v.
Qubo DiagonalQubo(int n) {
  Qubo q;
  q.n = n;
  q.h.assign(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) q.h[static_cast<size_t>(i) * n + i] = n - i;
  return q;
}

class BudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    parent_ = tasks::DefaultParentConfig();
    absl::StatusOr<costmodel::CostModel> m =
        costmodel::CostModel::FromData(autocompress::test_support::SyntheticTable(parent_));
    ASSERT_TRUE(m.ok()) << m.status();
    model_.emplace(*std::move(m));
    layers_ = PresentLayers(parent_);
    ASSERT_EQ(layers_.size(), 8u);
  }
  costmodel::Prediction Cost(const std::vector<int>& removed) {
    absl::StatusOr<model::HybridConfig> child = RemoveBlocks(parent_, removed);
    EXPECT_TRUE(child.ok()) << child.status();
    absl::StatusOr<costmodel::Prediction> p = model_->Predict(*child);
    EXPECT_TRUE(p.ok()) << p.status();
    return *p;
  }
  model::HybridConfig parent_;
  std::optional<costmodel::CostModel> model_;
  std::vector<int> layers_;
};

TEST_F(BudgetTest, AbsentLayersCostNothing) {
  const costmodel::Prediction full = Cost({});
  for (int l = 0; l < 8; ++l) {
    const costmodel::Prediction p = Cost({l});
    EXPECT_LT(p.latency_ms, full.latency_ms) << l;
    EXPECT_LT(p.memory_mib, full.memory_mib) << l;
    // Removing a second block lowers the cost again.
    const costmodel::Prediction two = Cost({l, (l + 1) % 8});
    EXPECT_LT(two.latency_ms, p.latency_ms) << l;
  }
}

TEST_F(BudgetTest, SmallestMWithAFittingStateKeepsOnlyFittingStates) {
  // Just below the cheapest single removal: no M = 1 state fits, some M = 2 states do.
  double single_min = std::numeric_limits<double>::infinity(), single_mem = single_min;
  for (int l = 0; l < 8; ++l) {
    single_min = std::min(single_min, Cost({l}).latency_ms);
    single_mem = std::min(single_mem, Cost({l}).memory_mib);
  }
  BudgetLimits budget;
  budget.latency_ms_max = single_min - 1e-9;
  SolveOptions o;
  o.k = 28;  // every M = 2 state, so the expected set is the brute-force one
  const Qubo q = DiagonalQubo(8);
  absl::StatusOr<BudgetedSolve> s =
      SolveForBudget(q, layers_, parent_, *model_, budget, SolverKind::kExact, o);
  ASSERT_TRUE(s.ok()) << s.status();

  // Brute force: every pair within the budget, ascending by energy (ties by index list).
  std::vector<State> expected;
  for (int i = 0; i < 8; ++i) {
    for (int j = i + 1; j < 8; ++j) {
      if (Cost({i, j}).latency_ms <= *budget.latency_ms_max) {
        expected.push_back({{i, j}, Energy(q, {i, j})});
      }
    }
  }
  std::sort(expected.begin(), expected.end(), [](const State& a, const State& b) {
    return a.energy != b.energy ? a.energy < b.energy : a.removed < b.removed;
  });
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(s->m, 2);
  EXPECT_EQ(s->solver, "exact");
  ASSERT_EQ(s->states.size(), expected.size());
  ASSERT_EQ(s->predicted.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(s->states[i].removed, expected[i].removed) << i;
    EXPECT_EQ(s->states[i].energy, expected[i].energy) << i;
    EXPECT_EQ(s->predicted[i].latency_ms, Cost(expected[i].removed).latency_ms) << i;
  }
  // The ground state at M = 2 (the two blocks with the smallest diagonal) whatever it costs.
  EXPECT_EQ(s->ground.removed, (std::vector<int>{6, 7}));
  EXPECT_EQ(s->ground.energy, 3.0);

  ASSERT_EQ(s->trials.size(), 2u);
  EXPECT_EQ(s->trials[0].m, 1);
  EXPECT_EQ(s->trials[0].states, 8);
  EXPECT_EQ(s->trials[0].fitting, 0);
  EXPECT_EQ(s->trials[0].min_latency_ms, single_min);
  EXPECT_EQ(s->trials[0].min_memory_mib, single_mem);
  EXPECT_EQ(s->trials[1].m, 2);
  EXPECT_EQ(s->trials[1].states, 28);
  EXPECT_EQ(s->trials[1].fitting, static_cast<int>(expected.size()));
}

TEST_F(BudgetTest, AGenerousBudgetTakesOneBlock) {
  BudgetLimits budget;
  budget.memory_mib_max = Cost({}).memory_mib;  // the parent itself fits
  SolveOptions o;
  o.k = 3;
  absl::StatusOr<BudgetedSolve> s =
      SolveForBudget(DiagonalQubo(8), layers_, parent_, *model_, budget, SolverKind::kAuto, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->m, 1);
  ASSERT_EQ(s->states.size(), 3u);
  EXPECT_EQ(s->states[0].removed, (std::vector<int>{7}));
  EXPECT_EQ(s->states[1].removed, (std::vector<int>{6}));
  EXPECT_EQ(s->states[2].removed, (std::vector<int>{5}));
}

TEST_F(BudgetTest, NoMFitsIsAFailedPrecondition) {
  BudgetLimits budget;
  budget.latency_ms_max = 0;
  absl::StatusOr<BudgetedSolve> s = SolveForBudget(DiagonalQubo(8), layers_, parent_, *model_,
                                                   budget, SolverKind::kExact, SolveOptions{});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  // A layer map of the wrong size is the caller's error.
  EXPECT_EQ(SolveForBudget(DiagonalQubo(8), {0, 1}, parent_, *model_, budget,
                           SolverKind::kExact, SolveOptions{})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MeetsBudgetTest, CeilingsAndFloor) {
  costmodel::Prediction p;
  p.latency_ms = 10;
  p.memory_mib = 4;
  p.throughput_tokens_per_s = 100;
  EXPECT_TRUE(MeetsBudget({}, p));
  EXPECT_TRUE(MeetsBudget({10.0, 4.0, 100.0}, p));  // bounds are inclusive
  EXPECT_FALSE(MeetsBudget({9.5, std::nullopt, std::nullopt}, p));
  EXPECT_FALSE(MeetsBudget({std::nullopt, 3.5, std::nullopt}, p));
  EXPECT_FALSE(MeetsBudget({std::nullopt, std::nullopt, 101.0}, p));
}

}  // namespace
}  // namespace tailor::blockremoval
