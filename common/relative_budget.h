#ifndef TAILOR_COMMON_RELATIVE_BUDGET_H_
#define TAILOR_COMMON_RELATIVE_BUDGET_H_

// Budgets relative to the parent (Budget.latency_vs_parent_max, throughput_vs_parent_min,
// memory_vs_parent_max) resolved against one measurement of the parent: the coordinator's
// against the profile job's (coordinator/relative_budget.h), a verify's against the parent
// it served alongside the model (profiler-agent/request_latency.h MeasureServesBesideParent).

#include <string>

#include "absl/status/statusor.h"
#include "tailor/v1/contract.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor {

bool HasRelativeBudget(const v1::Budget& b);

// Whether a budget on request time (latency or throughput) is relative to the parent: what
// a verify then serves the parent alongside the model for.
bool HasTimedRelativeBudget(const v1::Budget& b);

// The parent's figures a relative budget multiplies. FAILED_PRECONDITION naming `budget`
// (the field, e.g. "latency_vs_parent_max") when `parent` lacks the figure, or measured
// latency over fewer requests than the percentile needs (common/latency_percentile.h).
absl::StatusOr<double> ParentLatency(v1::LatencyPercentile percentile,
                                     const v1::ModelCosts& parent,
                                     const std::string& budget = "latency_vs_parent_max");
// Tokens per request are fixed by the workload: the measured throughput scaled by the
// latency at the percentile.
absl::StatusOr<double> ParentThroughput(v1::LatencyPercentile percentile,
                                        const v1::ModelCosts& parent);
absl::StatusOr<double> ParentMemory(const v1::ModelCosts& parent);

// `b` with each relative budget written into its absolute field: factor x the parent's figure
// in `parent` (latency at b's latency_percentile, throughput at that latency). Errors as above.
absl::StatusOr<v1::Budget> ResolveRelativeBudgets(const v1::Budget& b,
                                                  const v1::ModelCosts& parent);

}  // namespace tailor

#endif  // TAILOR_COMMON_RELATIVE_BUDGET_H_
