#ifndef TAILOR_COMPRESSION_BLOCKREMOVAL_QUBO_H_
#define TAILOR_COMPRESSION_BLOCKREMOVAL_QUBO_H_

// Block removal as a cardinality-constrained QUBO (spec §2, CBO): x_i = 1 removes block i,
// E(x) = xᵀ H x subject to sum_i x_i = M. H is symmetric positive semi-definite (a Fisher /
// Gauss-Newton matrix of the loss in the block gates), N x N, row-major.
//
// Every solver returns the k lowest distinct states it found, ascending by energy (ties by
// the removed index list), and never a state with a cardinality other than M: the exact
// solver enumerates M-subsets only, the heuristics start from an M-subset and only swap a
// removed block for a kept one.
//
// No LibTorch here: solving needs only H, so re-solving with another M takes no model run.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::blockremoval {

struct Qubo {
  int n = 0;
  std::vector<double> h;  // n * n, row-major, symmetric
  double at(int i, int j) const { return h[static_cast<size_t>(i) * n + j]; }
};

// OK when h has n*n finite entries and is symmetric (to 1e-9 relative).
absl::Status ValidateQubo(const Qubo& q);

struct State {
  std::vector<int> removed;  // ascending block (variable) indices, size M
  double energy = 0;
};

// xᵀ H x for the indicator vector of `removed`.
double Energy(const Qubo& q, const std::vector<int>& removed);

// C(n, m) as a double (exact below 2^53; large values only need to be compared).
double Binomial(int n, int m);

// Largest C(N, M) the exact solver takes (kAuto picks it up to here). Each leaf of the
// enumeration is one add and one compare (the field of the first M-1 choices is updated
// incrementally), about 1-2 ns, so 2e8 states take well under a second on 4 threads.
inline constexpr double kMaxExactStates = 2e8;

enum class SolverKind { kAuto, kExact, kAnnealing, kTabu };
absl::string_view SolverName(SolverKind kind);  // "auto", "exact", "annealing", "tabu"

struct SolveOptions {
  int m = 1;           // blocks removed; 0 <= m <= n
  int k = 8;           // lowest distinct states returned (fewer when C(N, M) < k)
  uint64_t seed = 1;   // heuristics only
  int threads = 0;     // exact only; 0 = hardware concurrency (capped at 16)
  int restarts = 0;    // heuristics: independent runs from random M-subsets; 0 = automatic
  int64_t iterations = 0;  // heuristics: moves (SA) / steps (tabu) per restart; 0 = automatic
};

class QuboSolver {
 public:
  virtual ~QuboSolver() = default;
  virtual absl::string_view name() const = 0;
  virtual absl::StatusOr<std::vector<State>> Solve(const Qubo& q,
                                                   const SolveOptions& options) const = 0;
};

// kAuto: exact when C(N, M) <= kMaxExactStates, else tabu.
std::unique_ptr<QuboSolver> MakeSolver(SolverKind kind, const Qubo& q, int m);

// Exact enumeration of every M-subset (FAILED_PRECONDITION above kMaxExactStates).
std::unique_ptr<QuboSolver> ExactSolver();
// Simulated annealing with swap moves (Metropolis, geometric cooling).
std::unique_ptr<QuboSolver> AnnealingSolver();
// Tabu search with swap moves: best non-tabu swap each step, aspiration on a new best.
std::unique_ptr<QuboSolver> TabuSolver();

}  // namespace tailor::blockremoval

#endif  // TAILOR_COMPRESSION_BLOCKREMOVAL_QUBO_H_
