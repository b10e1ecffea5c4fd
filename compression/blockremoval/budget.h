#ifndef TAILOR_COMPRESSION_BLOCKREMOVAL_BUDGET_H_
#define TAILOR_COMPRESSION_BLOCKREMOVAL_BUDGET_H_

// Budget-driven M (spec §2): without a fixed number of blocks to remove, M is the smallest
// count for which one of the k lowest-energy states meets every budget under the profiled
// cost model. Kept apart from the solve job so it is unit-tested without a coordinator.

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/blockremoval/qubo.h"
#include "compression/costmodel/cost_model.h"
#include "compression/model/config.h"

namespace tailor::blockremoval {

// The contract's budget, without the proto (this library is also built without protobuf).
struct BudgetLimits {
  std::optional<double> latency_ms_max;
  std::optional<double> memory_mib_max;
  std::optional<double> throughput_tokens_per_s_min;
};

bool MeetsBudget(const BudgetLimits& b, const costmodel::Prediction& p);

// One M that was tried: how many of its k lowest states meet the budget, and the best
// predicted latency / memory among the k (so a report can say how far each M was).
struct MTrial {
  int m = 0;
  int states = 0;
  int fitting = 0;
  double min_latency_ms = 0;
  double min_memory_mib = 0;
};

struct BudgetedSolve {
  int m = 0;
  std::vector<State> states;  // only the states that meet the budget, ascending energy
  State ground;               // the lowest state at m, whether it meets the budget or not
  std::vector<costmodel::Prediction> predicted;  // per state
  std::vector<MTrial> trials;                    // M = 1 .. m, in order
  double solve_seconds = 0;
  std::string solver;
};

// Tries M = 1, 2, ... N-1 with `kind` (MakeSolver) and `options` (its m is overwritten); a
// state's cost is cost_model.Predict of `parent` with the state's layers made absent
// (`layers` maps variable -> layer). FAILED_PRECONDITION when no M < N fits.
absl::StatusOr<BudgetedSolve> SolveForBudget(const Qubo& q, const std::vector<int>& layers,
                                             const model::HybridConfig& parent,
                                             const costmodel::CostModel& cost_model,
                                             const BudgetLimits& budget, SolverKind kind,
                                             SolveOptions options);

}  // namespace tailor::blockremoval

#endif  // TAILOR_COMPRESSION_BLOCKREMOVAL_BUDGET_H_
