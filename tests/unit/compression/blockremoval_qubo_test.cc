#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "compression/blockremoval/qubo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tailor::blockremoval {
namespace {

using ::testing::ElementsAre;

// Deterministic Gaussian via Box-Muller on SplitMix64.
class Gauss {
 public:
  explicit Gauss(uint64_t seed) : s_(seed) {}
  double Next() {
    const double u1 = (static_cast<double>(Bits() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(Bits() >> 11) * 0x1.0p-53;
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  }

 private:
  uint64_t Bits() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t s_;
};

// SolveOptions without C++20 designated initializers.
SolveOptions Opt(int m, int k, uint64_t seed = 1, int threads = 0, int64_t iterations = 0) {
  SolveOptions o;
  o.m = m;
  o.k = k;
  o.seed = seed;
  o.threads = threads;
  o.iterations = iterations;
  return o;
}

// H = AᵀA/m for a Gaussian A (m = n + 4): PSD like a real Fisher matrix, with couplings
// of both signs.
Qubo RandomPsd(int n, uint64_t seed) {
  const int m = n + 4;
  Gauss g(seed);
  std::vector<double> a(static_cast<size_t>(m) * n);
  for (double& v : a) v = g.Next();
  Qubo q;
  q.n = n;
  q.h.assign(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int r = 0; r < m; ++r) s += a[r * n + i] * a[r * n + j];
      q.h[i * n + j] = s / m;
    }
  }
  return q;
}

// Every M-subset by bitmask, sorted like the solvers sort (energy, then indices).
std::vector<State> BruteForce(const Qubo& q, int m, int k) {
  std::vector<State> all;
  for (uint32_t mask = 0; mask < (1u << q.n); ++mask) {
    if (__builtin_popcount(mask) != m) continue;
    State s;
    for (int i = 0; i < q.n; ++i) {
      if (mask & (1u << i)) s.removed.push_back(i);
    }
    s.energy = Energy(q, s.removed);
    all.push_back(s);
  }
  std::sort(all.begin(), all.end(), [](const State& a, const State& b) {
    return a.energy != b.energy ? a.energy < b.energy : a.removed < b.removed;
  });
  if (static_cast<int>(all.size()) > k) all.resize(k);
  return all;
}

void ExpectSameStates(const std::vector<State>& got, const std::vector<State>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].removed, want[i].removed) << "state " << i;
    EXPECT_NEAR(got[i].energy, want[i].energy, 1e-9 * std::max(1.0, std::abs(want[i].energy)));
  }
}

TEST(QuboTest, EnergyAndBinomialExactValues) {
  Qubo q{3, {2, 1, 0, 1, 3, -1, 0, -1, 5}};
  EXPECT_EQ(Energy(q, {0, 1}), 7.0);   // 2 + 3 + 2*1
  EXPECT_EQ(Energy(q, {1, 2}), 6.0);   // 3 + 5 - 2
  EXPECT_EQ(Energy(q, {}), 0.0);
  EXPECT_EQ(Binomial(24, 12), 2704156.0);
  EXPECT_EQ(Binomial(128, 2), 8128.0);
  EXPECT_EQ(Binomial(5, 6), 0.0);
}

TEST(QuboTest, ValidateRejectsAsymmetricAndWrongSize) {
  EXPECT_FALSE(ValidateQubo(Qubo{2, {1, 2, 3, 4}}).ok());
  EXPECT_FALSE(ValidateQubo(Qubo{2, {1, 2, 2}}).ok());
  EXPECT_TRUE(ValidateQubo(Qubo{2, {1, 2, 2, 4}}).ok());
}

TEST(QuboTest, ExactSmallInstanceByHand) {
  Qubo q{3, {2, 1, 0, 1, 3, -1, 0, -1, 5}};
  auto s = ExactSolver()->Solve(q, Opt(2, 3));
  ASSERT_TRUE(s.ok()) << s.status();
  // {0,1}: 7, {0,2}: 7, {1,2}: 6.
  ASSERT_EQ(s->size(), 3u);
  EXPECT_THAT((*s)[0].removed, ElementsAre(1, 2));
  EXPECT_EQ((*s)[0].energy, 6.0);
  EXPECT_THAT((*s)[1].removed, ElementsAre(0, 1));
  EXPECT_THAT((*s)[2].removed, ElementsAre(0, 2));
}

TEST(QuboTest, ExactMatchesBruteForce) {
  for (int n : {1, 2, 5, 9, 12, 16}) {
    for (int m = 0; m <= n; m += std::max(1, n / 4)) {
      const Qubo q = RandomPsd(n, 100 + n * 31 + m);
      for (int threads : {1, 4}) {
        auto got = ExactSolver()->Solve(q, Opt(m, 10, 1, threads));
        ASSERT_TRUE(got.ok()) << got.status();
        SCOPED_TRACE(testing::Message() << "n=" << n << " m=" << m << " threads=" << threads);
        ExpectSameStates(*got, BruteForce(q, m, 10));
      }
    }
  }
}

TEST(QuboTest, ExactRefusesAboveThreshold) {
  const Qubo q = RandomPsd(64, 1);
  auto s = ExactSolver()->Solve(q, Opt(32, 1));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MakeSolver(SolverKind::kAuto, q, 32)->name(), "tabu");
  EXPECT_EQ(MakeSolver(SolverKind::kAuto, q, 3)->name(), "exact");  // C(64,3) = 41664
}

// Spec: heuristics reach the exact ground state on random N = 24 instances in >= 95% of
// seeded runs, and return exactly the exact solver's lowest-k set.
TEST(QuboTest, HeuristicsFindExactLowestKAtN24) {
  constexpr int kRuns = 20;
  constexpr int kK = 8;
  for (auto make : {AnnealingSolver, TabuSolver}) {
    const auto solver = make();
    int ground = 0, full_set = 0, total = 0;
    for (int m : {6, 12}) {
      for (int run = 0; run < kRuns; ++run) {
        const Qubo q = RandomPsd(24, 7000 + run * 13 + m);
        auto exact = ExactSolver()->Solve(q, Opt(m, kK));
        auto heur = solver->Solve(q, Opt(m, kK, static_cast<uint64_t>(run + 1)));
        ASSERT_TRUE(exact.ok() && heur.ok());
        ++total;
        ground += (*heur)[0].removed == (*exact)[0].removed;
        bool same = heur->size() == exact->size();
        for (size_t i = 0; same && i < exact->size(); ++i) {
          same = (*heur)[i].removed == (*exact)[i].removed;
        }
        full_set += same;
      }
    }
    EXPECT_GE(ground, total * 95 / 100) << solver->name();
    EXPECT_GE(full_set, total * 95 / 100) << solver->name();
  }
}

TEST(QuboTest, CardinalityNeverViolated) {
  for (auto make : {ExactSolver, AnnealingSolver, TabuSolver}) {
    const auto solver = make();
    for (int n : {1, 3, 10, 20}) {
      for (int m = 0; m <= n; ++m) {
        const Qubo q = RandomPsd(n, 50 + n + m);
        auto s = solver->Solve(q, Opt(m, 5, 3, 0, 300));
        ASSERT_TRUE(s.ok()) << s.status();
        ASSERT_FALSE(s->empty());
        EXPECT_EQ(s->size(), static_cast<size_t>(std::min(5.0, Binomial(n, m))))
            << solver->name() << " n=" << n << " m=" << m;
        for (size_t i = 0; i < s->size(); ++i) {
          const State& st = (*s)[i];
          ASSERT_EQ(st.removed.size(), static_cast<size_t>(m)) << solver->name();
          EXPECT_TRUE(std::is_sorted(st.removed.begin(), st.removed.end()));
          EXPECT_EQ(std::adjacent_find(st.removed.begin(), st.removed.end()), st.removed.end());
          if (m > 0) {
            EXPECT_LT(st.removed.back(), n);
          }
          EXPECT_DOUBLE_EQ(st.energy, Energy(q, st.removed));
          if (i > 0) {
            EXPECT_LE((*s)[i - 1].energy, st.energy);
            EXPECT_NE((*s)[i - 1].removed, st.removed);
          }
        }
      }
    }
  }
}

TEST(QuboTest, RejectsBadOptions) {
  const Qubo q = RandomPsd(4, 1);
  EXPECT_EQ(TabuSolver()->Solve(q, Opt(5, 8)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExactSolver()->Solve(q, Opt(1, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tailor::blockremoval
