#include "compression/entropy/autotune.h"

#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/compression/entropy_test_util.h"

namespace tailor::entropy {
namespace {

// Exhaustive search over every combination.
double BruteForce(const std::vector<std::vector<Option>>& items, int64_t budget) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> idx(items.size(), 0);
  while (true) {
    int64_t b = 0;
    double l = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      b += items[i][idx[i]].bytes;
      l += items[i][idx[i]].latency;
    }
    if (b <= budget) best = std::min(best, l);
    size_t i = 0;
    while (i < items.size() && ++idx[i] == static_cast<int>(items[i].size())) idx[i++] = 0;
    if (i == items.size()) break;
  }
  return best;
}

TEST(EntropySelectTest, ExactSelectionMatchesBruteForce) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + rng() % 5;
    std::vector<std::vector<Option>> items(n);
    int64_t min_total = 0, max_total = 0;
    for (auto& opts : items) {
      const int m = 1 + rng() % 4;
      int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
      for (int j = 0; j < m; ++j) {
        opts.push_back({static_cast<int64_t>(10 + rng() % 90), 1.0 + rng() % 50});
        lo = std::min(lo, opts.back().bytes);
        hi = std::max(hi, opts.back().bytes);
      }
      min_total += lo;
      max_total += hi;
    }
    const int64_t budget = min_total + rng() % (max_total - min_total + 1);
    auto sel = SelectUnderBudget(items, budget);
    ASSERT_TRUE(sel.ok());
    EXPECT_TRUE(sel->exact);
    EXPECT_LE(sel->total_bytes, budget);
    EXPECT_DOUBLE_EQ(sel->total_latency, BruteForce(items, budget)) << trial;

    // The Lagrangian fallback also respects the budget and is never better than optimal.
    auto approx = SelectUnderBudget(items, budget, {.max_states = 0});
    ASSERT_TRUE(approx.ok());
    EXPECT_LE(approx->total_bytes, budget);
    EXPECT_GE(approx->total_latency, sel->total_latency - 1e-9);
  }
}

TEST(EntropySelectTest, KnownCase) {
  // Dense (100 B, 10 us) vs coded (60 B, 12 us) for two tensors; 170 B fits one dense.
  const std::vector<std::vector<Option>> items = {{{100, 10}, {60, 12}}, {{100, 10}, {60, 15}}};
  auto sel = SelectUnderBudget(items, 170);
  ASSERT_TRUE(sel.ok());
  EXPECT_EQ(sel->choice, (std::vector<int>{1, 0}));
  EXPECT_EQ(sel->total_bytes, 160);
  EXPECT_EQ(sel->total_latency, 22);
  EXPECT_FALSE(SelectUnderBudget(items, 119).ok());  // below the smallest encoding
  auto all_dense = SelectUnderBudget(items, 1000);
  EXPECT_EQ(all_dense->choice, (std::vector<int>{0, 0}));
}

TEST(EntropySelectTest, ParetoFrontierDropsDominatedAndPruned) {
  std::vector<ConfigPoint> pts(5);
  pts[0].bytes = 100, pts[0].latency_us = 10;
  pts[1].bytes = 60, pts[1].latency_us = 12;
  pts[2].bytes = 70, pts[2].latency_us = 13;  // dominated by 60/12
  pts[3].bytes = 50, pts[3].latency_us = 20;
  pts[4].bytes = 40, pts[4].latency_us = 1, pts[4].pruned = true;
  const auto f = ParetoFrontier(pts);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].bytes, 50);
  EXPECT_EQ(f[1].bytes, 60);
  EXPECT_EQ(f[2].bytes, 100);
}

TEST(EntropyAutotuneTest, EnumeratesPrunesAndMeasures) {
  const std::vector<uint8_t> dense =
      testing::MakeTensor(DType::kInt8, 64, 512, testing::Dist::kGaussian, 2);
  TuneSpace space;
  space.symbols_per_codeword = {1, 2, 3};  // 3 is invalid for byte planes: skipped
  space.table_log = {10, 12};
  space.chunk_width = {1024, 4096};
  auto f = AutotuneTensor("w", {DType::kInt8, 64, 512, dense}, space, {.threads = 1, .reps = 2});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->candidates.size(), 1u + 2 * 2 * 2);
  EXPECT_TRUE(f->candidates[0].dense);
  EXPECT_EQ(f->dense_bytes, 64 * 512);
  for (const ConfigPoint& p : f->candidates) {
    if (p.dense || p.pruned) continue;
    EXPECT_GT(p.latency_us, 0);
    EXPECT_NEAR(p.predicted_bytes, p.bytes, 0.02 * p.bytes + 64);
    EXPECT_LT(p.bytes, f->dense_bytes);  // Gaussian int8 codes to ~5 bits
  }
  ASSERT_FALSE(f->frontier.empty());
  for (size_t i = 1; i < f->frontier.size(); ++i) {
    EXPECT_GT(f->frontier[i].bytes, f->frontier[i - 1].bytes);
    EXPECT_LT(f->frontier[i].latency_us, f->frontier[i - 1].latency_us);
  }
}

}  // namespace
}  // namespace tailor::entropy
