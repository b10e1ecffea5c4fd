#include "compression/blockremoval/qubo.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <set>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tailor::blockremoval {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// SplitMix64: identical on every platform, unlike std distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

// The k lowest distinct states offered so far. Offer() first compares against the current
// k-th energy, so the (rare) insertions are the only place a state vector is built.
class TopK {
 public:
  explicit TopK(int k) : k_(std::max(1, k)) {}
  double threshold() const {
    return static_cast<int>(by_energy_.size()) < k_ ? kInf : by_energy_.rbegin()->first;
  }
  void Offer(double energy, std::vector<int> removed) {
    if (energy >= threshold()) return;
    std::sort(removed.begin(), removed.end());
    if (members_.count(removed) > 0) return;
    members_.insert(removed);
    by_energy_.emplace(energy, std::move(removed));
    if (static_cast<int>(by_energy_.size()) > k_) {
      auto worst = std::prev(by_energy_.end());
      members_.erase(worst->second);
      by_energy_.erase(worst);
    }
  }
  void Merge(const TopK& other) {
    for (const auto& [e, r] : other.by_energy_) Offer(e, r);
  }
  // Energies recomputed from scratch (incremental updates drift by rounding), re-sorted.
  std::vector<State> Finish(const Qubo& q) const {
    std::vector<State> out;
    for (const auto& [e, r] : by_energy_) out.push_back({r, Energy(q, r)});
    std::sort(out.begin(), out.end(), [](const State& a, const State& b) {
      return a.energy != b.energy ? a.energy < b.energy : a.removed < b.removed;
    });
    return out;
  }

 private:
  int k_;
  std::set<std::pair<double, std::vector<int>>> by_energy_;
  std::set<std::vector<int>> members_;
};

absl::Status CheckOptions(const Qubo& q, const SolveOptions& o) {
  if (auto st = ValidateQubo(q); !st.ok()) return st;
  if (o.m < 0 || o.m > q.n) {
    return absl::InvalidArgumentError(
        absl::StrCat("m: want 0 <= m <= n (", q.n, "), got ", o.m));
  }
  if (o.k < 1) return absl::InvalidArgumentError(absl::StrCat("k: want >= 1, got ", o.k));
  return absl::OkStatus();
}

// m = 0 or m = n: the only state.
bool Trivial(const Qubo& q, int m, std::vector<State>& out) {
  if (m != 0 && m != q.n) return false;
  std::vector<int> removed;
  for (int i = 0; i < m; ++i) removed.push_back(i);
  out = {{removed, Energy(q, removed)}};
  return true;
}

// ---------------------------------------------------------------------------------------
// Exact enumeration. Choosing indices in increasing order, adding j to S raises the energy
// by H_jj + 2 f_j with f_j = sum_{s in S} H_sj; the field f is updated once per internal
// node (O(N)), so each leaf costs one add and one compare.

class Exact final : public QuboSolver {
 public:
  absl::string_view name() const override { return "exact"; }

  absl::StatusOr<std::vector<State>> Solve(const Qubo& q, const SolveOptions& o) const override {
    if (auto st = CheckOptions(q, o); !st.ok()) return st;
    std::vector<State> trivial;
    if (Trivial(q, o.m, trivial)) return trivial;
    const double states = Binomial(q.n, o.m);
    if (states > kMaxExactStates) {
      return absl::FailedPreconditionError(absl::StrCat(
          "exact solver: C(", q.n, ", ", o.m, ") = ", states, " states exceeds the limit of ",
          kMaxExactStates, "; use annealing or tabu"));
    }
    // Work items: every valid prefix of the first min(m-1, 2) choices, handed out
    // dynamically so threads stay busy although prefixes differ in subtree size.
    const int p = std::min(o.m - 1, 2);
    std::vector<std::vector<int>> prefixes;
    std::vector<int> cur;
    auto gen = [&](auto&& self, int start) -> void {
      if (static_cast<int>(cur.size()) == p) {
        prefixes.push_back(cur);
        return;
      }
      for (int j = start; j <= q.n - (o.m - static_cast<int>(cur.size())); ++j) {
        cur.push_back(j);
        self(self, j + 1);
        cur.pop_back();
      }
    };
    gen(gen, 0);
    int threads = o.threads > 0 ? o.threads
                                : std::min(16, static_cast<int>(std::thread::hardware_concurrency()));
    threads = std::max(1, std::min<int>(threads, static_cast<int>(prefixes.size())));
    if (states < 1e5) threads = 1;  // thread start-up would dominate

    std::atomic<size_t> next{0};
    std::vector<TopK> tops(threads, TopK(o.k));
    auto worker = [&](int t) {
      TopK& top = tops[t];
      // field[d] = f after d choices; only entries after the last choice are read.
      std::vector<std::vector<double>> field(o.m, std::vector<double>(q.n, 0.0));
      std::vector<int> chosen(o.m);
      double worst = top.threshold();
      auto rec = [&](auto&& self, int depth, int start, double e) -> void {
        const std::vector<double>& f = field[depth];
        if (depth == o.m - 1) {
          for (int j = start; j < q.n; ++j) {
            const double ej = e + q.at(j, j) + 2 * f[j];
            if (ej < worst) {
              chosen[depth] = j;
              top.Offer(ej, chosen);
              worst = top.threshold();
            }
          }
          return;
        }
        std::vector<double>& g = field[depth + 1];
        for (int j = start; j <= q.n - (o.m - depth); ++j) {
          chosen[depth] = j;
          const double* row = &q.h[static_cast<size_t>(j) * q.n];
          for (int a = j + 1; a < q.n; ++a) g[a] = f[a] + row[a];
          self(self, depth + 1, j + 1, e + q.at(j, j) + 2 * f[j]);
        }
      };
      for (size_t item = next++; item < prefixes.size(); item = next++) {
        const std::vector<int>& pre = prefixes[item];
        std::fill(field[0].begin(), field[0].end(), 0.0);
        double e = 0;
        for (int d = 0; d < p; ++d) {
          const int j = pre[d];
          chosen[d] = j;
          e += q.at(j, j) + 2 * field[d][j];
          for (int a = 0; a < q.n; ++a) field[d + 1][a] = field[d][a] + q.at(j, a);
        }
        rec(rec, p, p == 0 ? 0 : pre[p - 1] + 1, e);
      }
    };
    if (threads == 1) {
      worker(0);
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
      for (auto& th : pool) th.join();
    }
    for (int t = 1; t < threads; ++t) tops[0].Merge(tops[t]);
    return tops[0].Finish(q);
  }
};

// ---------------------------------------------------------------------------------------
// Swap-move machinery shared by the heuristics. `in[i]` says whether block i is removed;
// `pos[i]` is its slot in `removed` or `kept`; f_a = sum_{s removed} H_sa. Swapping removed
// i for kept j changes the energy by H_ii + H_jj - 2 f_i + 2 f_j - 2 H_ij.

struct SwapState {
  const Qubo* q;
  std::vector<int> removed, kept, pos;
  std::vector<char> in;
  std::vector<double> f;
  double energy = 0;

  SwapState(const Qubo& qubo, int m, Rng& rng) : q(&qubo) {
    std::vector<int> perm(q->n);
    for (int i = 0; i < q->n; ++i) perm[i] = i;
    for (int i = q->n - 1; i > 0; --i) std::swap(perm[i], perm[rng.Below(i + 1)]);
    in.assign(q->n, 0);
    pos.assign(q->n, 0);
    f.assign(q->n, 0.0);
    for (int t = 0; t < q->n; ++t) {
      const int i = perm[t];
      if (t < m) {
        in[i] = 1;
        pos[i] = static_cast<int>(removed.size());
        removed.push_back(i);
        for (int a = 0; a < q->n; ++a) f[a] += q->at(i, a);
      } else {
        pos[i] = static_cast<int>(kept.size());
        kept.push_back(i);
      }
    }
    energy = 0;
    for (int i : removed) energy += f[i];
  }
  double Delta(int i, int j) const {
    return q->at(i, i) + q->at(j, j) - 2 * f[i] + 2 * f[j] - 2 * q->at(i, j);
  }
  // The removed set after swapping i out and j in (for TopK offers).
  std::vector<int> Swapped(int i, int j) const {
    std::vector<int> r = removed;
    r[pos[i]] = j;
    return r;
  }
  void Apply(int i, int j, double delta) {
    const int pi = pos[i], pj = pos[j];
    removed[pi] = j;
    kept[pj] = i;
    pos[j] = pi;
    pos[i] = pj;
    in[i] = 0;
    in[j] = 1;
    for (int a = 0; a < q->n; ++a) f[a] += q->at(j, a) - q->at(i, a);
    energy += delta;
  }
};

int DefaultRestarts(const SolveOptions& o, int fallback) {
  return o.restarts > 0 ? o.restarts : fallback;
}

class Annealing final : public QuboSolver {
 public:
  absl::string_view name() const override { return "annealing"; }

  absl::StatusOr<std::vector<State>> Solve(const Qubo& q, const SolveOptions& o) const override {
    if (auto st = CheckOptions(q, o); !st.ok()) return st;
    std::vector<State> trivial;
    if (Trivial(q, o.m, trivial)) return trivial;
    const int restarts = DefaultRestarts(o, 8);
    const int64_t moves = o.iterations > 0 ? o.iterations : std::max<int64_t>(20000, 2000LL * q.n);
    Rng rng(o.seed);
    TopK top(o.k);
    for (int r = 0; r < restarts; ++r) {
      SwapState s(q, o.m, rng);
      top.Offer(s.energy, s.removed);
      // Temperatures relative to the typical uphill move of this instance, so the schedule
      // needs no tuning per scale of H: from accepting most moves to accepting almost none.
      double mean_up = 0;
      int ups = 0;
      for (int t = 0; t < 200; ++t) {
        const double d = s.Delta(s.removed[rng.Below(o.m)], s.kept[rng.Below(q.n - o.m)]);
        if (d > 0) {
          mean_up += d;
          ++ups;
        }
      }
      mean_up = ups > 0 ? mean_up / ups : 1.0;
      if (mean_up <= 0) mean_up = 1.0;
      const double t0 = 2.0 * mean_up, t1 = 1e-4 * mean_up;
      const double cool = std::pow(t1 / t0, 1.0 / static_cast<double>(moves));
      double temp = t0;
      for (int64_t step = 0; step < moves; ++step, temp *= cool) {
        const int i = s.removed[rng.Below(o.m)];
        const int j = s.kept[rng.Below(q.n - o.m)];
        const double d = s.Delta(i, j);
        if (s.energy + d < top.threshold()) top.Offer(s.energy + d, s.Swapped(i, j));
        if (d <= 0 || rng.Uniform() < std::exp(-d / temp)) s.Apply(i, j, d);
      }
    }
    return top.Finish(q);
  }
};

class Tabu final : public QuboSolver {
 public:
  absl::string_view name() const override { return "tabu"; }

  absl::StatusOr<std::vector<State>> Solve(const Qubo& q, const SolveOptions& o) const override {
    if (auto st = CheckOptions(q, o); !st.ok()) return st;
    std::vector<State> trivial;
    if (Trivial(q, o.m, trivial)) return trivial;
    const int restarts = DefaultRestarts(o, 6);
    const int64_t steps = o.iterations > 0 ? o.iterations : std::max<int64_t>(200, 20LL * q.n);
    const int kept_n = q.n - o.m;
    // A moved block stays put this many steps (plus jitter), long enough to leave a local
    // minimum, short enough that small instances are not frozen.
    const int tenure = std::max(1, std::min(o.m, kept_n) / 3);
    Rng rng(o.seed);
    TopK top(o.k);
    double best = kInf;
    for (int r = 0; r < restarts; ++r) {
      SwapState s(q, o.m, rng);
      top.Offer(s.energy, s.removed);
      best = std::min(best, s.energy);
      std::vector<int64_t> tabu_until(q.n, 0);
      for (int64_t step = 1; step <= steps; ++step) {
        int bi = -1, bj = -1;
        double bd = kInf;
        for (int i : s.removed) {
          for (int j : s.kept) {
            const double d = s.Delta(i, j);
            const double e = s.energy + d;
            // Every evaluated neighbour is a candidate excited state.
            if (e < top.threshold()) top.Offer(e, s.Swapped(i, j));
            const bool tabu = tabu_until[i] >= step || tabu_until[j] >= step;
            if ((tabu && e >= best - 1e-12) || d >= bd) continue;
            bd = d;
            bi = i;
            bj = j;
          }
        }
        if (bi < 0) continue;  // every move tabu: wait for tenures to expire
        s.Apply(bi, bj, bd);
        tabu_until[bi] = step + tenure + rng.Below(tenure + 1);
        tabu_until[bj] = step + tenure + rng.Below(tenure + 1);
        best = std::min(best, s.energy);
      }
    }
    return top.Finish(q);
  }
};

}  // namespace

absl::Status ValidateQubo(const Qubo& q) {
  if (q.n < 1) return absl::InvalidArgumentError(absl::StrCat("qubo: n must be >= 1, got ", q.n));
  if (q.h.size() != static_cast<size_t>(q.n) * q.n) {
    return absl::InvalidArgumentError(
        absl::StrCat("qubo: want ", q.n * q.n, " entries, got ", q.h.size()));
  }
  for (int i = 0; i < q.n; ++i) {
    for (int j = 0; j < q.n; ++j) {
      const double a = q.at(i, j), b = q.at(j, i);
      if (!std::isfinite(a)) {
        return absl::InvalidArgumentError(absl::StrCat("qubo: H[", i, "][", j, "] not finite"));
      }
      if (std::abs(a - b) > 1e-9 * std::max({1.0, std::abs(a), std::abs(b)})) {
        return absl::InvalidArgumentError(
            absl::StrCat("qubo: H not symmetric at [", i, "][", j, "]: ", a, " vs ", b));
      }
    }
  }
  return absl::OkStatus();
}

double Energy(const Qubo& q, const std::vector<int>& removed) {
  double e = 0;
  for (int i : removed) {
    for (int j : removed) e += q.at(i, j);
  }
  return e;
}

double Binomial(int n, int m) {
  if (m < 0 || m > n) return 0;
  m = std::min(m, n - m);
  double c = 1;
  for (int i = 1; i <= m; ++i) c = c * (n - m + i) / i;
  return std::round(c);
}

absl::string_view SolverName(SolverKind kind) {
  switch (kind) {
    case SolverKind::kAuto:
      return "auto";
    case SolverKind::kExact:
      return "exact";
    case SolverKind::kAnnealing:
      return "annealing";
    case SolverKind::kTabu:
      return "tabu";
  }
  return "unknown";
}

std::unique_ptr<QuboSolver> ExactSolver() { return std::make_unique<Exact>(); }
std::unique_ptr<QuboSolver> AnnealingSolver() { return std::make_unique<Annealing>(); }
std::unique_ptr<QuboSolver> TabuSolver() { return std::make_unique<Tabu>(); }

std::unique_ptr<QuboSolver> MakeSolver(SolverKind kind, const Qubo& q, int m) {
  switch (kind) {
    case SolverKind::kExact:
      return ExactSolver();
    case SolverKind::kAnnealing:
      return AnnealingSolver();
    case SolverKind::kTabu:
      return TabuSolver();
    case SolverKind::kAuto:
      break;
  }
  return Binomial(q.n, m) <= kMaxExactStates ? ExactSolver() : TabuSolver();
}

}  // namespace tailor::blockremoval
