#include "compression/blockremoval/budget.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/blockremoval/gates.h"

namespace tailor::blockremoval {

bool MeetsBudget(const BudgetLimits& b, const costmodel::Prediction& p) {
  if (b.latency_ms_max && p.latency_ms > *b.latency_ms_max) return false;
  if (b.memory_mib_max && p.memory_mib > *b.memory_mib_max) return false;
  if (b.throughput_tokens_per_s_min && p.throughput_tokens_per_s < *b.throughput_tokens_per_s_min) {
    return false;
  }
  return true;
}

absl::StatusOr<BudgetedSolve> SolveForBudget(const Qubo& q, const std::vector<int>& layers,
                                             const model::HybridConfig& parent,
                                             const costmodel::CostModel& cost_model,
                                             const BudgetLimits& budget, SolverKind kind,
                                             SolveOptions options) {
  if (static_cast<int>(layers.size()) != q.n) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers has ", layers.size(), " entries for ", q.n, " variables"));
  }
  BudgetedSolve out;
  for (int m = 1; m < q.n; ++m) {
    options.m = m;
    const auto solver = MakeSolver(kind, q, m);
    out.solver = std::string(solver->name());
    const auto t0 = std::chrono::steady_clock::now();
    TAILOR_ASSIGN_OR_RETURN(std::vector<State> states, solver->Solve(q, options));
    out.solve_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MTrial trial{m, static_cast<int>(states.size()), 0, INFINITY, INFINITY};
    std::vector<State> fit;
    std::vector<costmodel::Prediction> fit_pred;
    for (const State& s : states) {
      std::vector<int> removed;
      for (int v : s.removed) removed.push_back(layers[v]);
      TAILOR_ASSIGN_OR_RETURN(model::HybridConfig child, RemoveBlocks(parent, removed));
      TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction p, cost_model.Predict(child));
      trial.min_latency_ms = std::min(trial.min_latency_ms, p.latency_ms);
      trial.min_memory_mib = std::min(trial.min_memory_mib, p.memory_mib);
      if (MeetsBudget(budget, p)) {
        fit.push_back(s);
        fit_pred.push_back(p);
      }
    }
    trial.fitting = static_cast<int>(fit.size());
    out.trials.push_back(trial);
    if (!fit.empty()) {
      out.m = m;
      out.ground = states.front();
      out.states = std::move(fit);
      out.predicted = std::move(fit_pred);
      return out;
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "budget: no removal of up to ", q.n - 1, " blocks meets the budget by the cost model"));
}

}  // namespace tailor::blockremoval
