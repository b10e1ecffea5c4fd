#include "common/relative_budget.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/latency_percentile.h"
#include "common/status_macros.h"

namespace tailor {
namespace {

bool UsableFigure(bool has, double v) { return has && std::isfinite(v) && v > 0; }

absl::Status Missing(const std::string& budget, const std::string& figure) {
  return absl::FailedPreconditionError(absl::StrCat(
      "budget.", budget, ": the parent's measurement in the target engine has no ", figure,
      " (a cost table profiled before tailor measured the parent, or a bad agent result)"));
}

}  // namespace

absl::StatusOr<double> ParentLatency(v1::LatencyPercentile percentile,
                                     const v1::ModelCosts& parent, const std::string& budget) {
  const int p = static_cast<int>(PercentileOf(percentile));
  const int needed = RepetitionsFor(percentile);
  if (parent.repetitions() < needed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "budget.", budget, ": the parent was measured over ", parent.repetitions(),
        " requests, too few for its p", p, " (needs ", needed, ")"));
  }
  const bool has = p == 99 ? parent.has_request_p99_ms()
                 : p == 90 ? parent.has_request_p90_ms()
                           : parent.has_request_p50_ms();
  const double v = p == 99 ? parent.request_p99_ms()
                 : p == 90 ? parent.request_p90_ms()
                           : parent.request_p50_ms();
  if (!UsableFigure(has, v)) return Missing(budget, absl::StrCat("p", p, " request latency"));
  return v;
}

absl::StatusOr<double> ParentThroughput(v1::LatencyPercentile percentile,
                                        const v1::ModelCosts& parent) {
  if (!UsableFigure(parent.has_throughput_tokens_per_s(), parent.throughput_tokens_per_s()) ||
      !UsableFigure(parent.has_latency_ms(), parent.latency_ms())) {
    return Missing("throughput_vs_parent_min", "throughput");
  }
  TAILOR_ASSIGN_OR_RETURN(double latency,
                          ParentLatency(percentile, parent, "throughput_vs_parent_min"));
  return parent.throughput_tokens_per_s() * parent.latency_ms() / latency;
}

absl::StatusOr<double> ParentMemory(const v1::ModelCosts& parent) {
  if (!UsableFigure(parent.has_memory_mib(), parent.memory_mib())) {
    return Missing("memory_vs_parent_max", "memory");
  }
  return parent.memory_mib();
}

bool HasRelativeBudget(const v1::Budget& b) {
  return HasTimedRelativeBudget(b) || b.has_memory_vs_parent_max();
}

bool HasTimedRelativeBudget(const v1::Budget& b) {
  return b.has_latency_vs_parent_max() || b.has_throughput_vs_parent_min();
}

absl::StatusOr<v1::Budget> ResolveRelativeBudgets(const v1::Budget& b,
                                                  const v1::ModelCosts& parent) {
  v1::Budget out = b;
  if (b.has_latency_vs_parent_max()) {
    TAILOR_ASSIGN_OR_RETURN(double v, ParentLatency(b.latency_percentile(), parent));
    out.set_latency_ms_max(b.latency_vs_parent_max() * v);
  }
  if (b.has_throughput_vs_parent_min()) {
    TAILOR_ASSIGN_OR_RETURN(double v, ParentThroughput(b.latency_percentile(), parent));
    out.set_throughput_tokens_per_s_min(b.throughput_vs_parent_min() * v);
  }
  if (b.has_memory_vs_parent_max()) {
    TAILOR_ASSIGN_OR_RETURN(double v, ParentMemory(parent));
    out.set_memory_mib_max(b.memory_vs_parent_max() * v);
  }
  return out;
}

}  // namespace tailor
