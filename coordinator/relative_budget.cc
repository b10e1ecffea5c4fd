#include "coordinator/relative_budget.h"

#include <cmath>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/job_output.h"
#include "common/latency_percentile.h"
#include "common/status_macros.h"
#include "methods/api/job_kinds.h"

namespace tailor::coordinator {
namespace {

bool UsableFigure(bool has, double v) { return has && std::isfinite(v) && v > 0; }

absl::Status Missing(const std::string& budget, const std::string& figure) {
  return absl::FailedPreconditionError(absl::StrCat(
      "budget.", budget, ": the parent's measurement in the target engine has no ", figure,
      " (a cost table profiled before tailor measured the parent, or a bad agent result)"));
}

// The parent's whole-request latency at the contract's percentile, for `budget`.
absl::StatusOr<double> ParentLatency(v1::LatencyPercentile percentile,
                                     const v1::ModelCosts& parent,
                                     const std::string& budget = "latency_vs_parent_max") {
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

// Tokens per request are fixed by the workload, so the throughput at the contract's
// percentile is the measured one scaled by the two latencies.
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

}  // namespace

bool HasRelativeBudget(const v1::Budget& b) {
  return b.has_latency_vs_parent_max() || b.has_throughput_vs_parent_min() ||
         b.has_memory_vs_parent_max();
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

v1::DeploymentContract ResolvedContract(const v1::DeploymentContract& contract,
                                        const v1::ProfileResult* profile) {
  if (!HasRelativeBudget(contract.budget()) || profile == nullptr ||
      !profile->has_parent_measured()) {
    return contract;
  }
  absl::StatusOr<v1::Budget> b =
      ResolveRelativeBudgets(contract.budget(), profile->parent_measured());
  if (!b.ok()) return contract;
  v1::DeploymentContract resolved = contract;
  *resolved.mutable_budget() = *std::move(b);
  return resolved;
}

std::string UnresolvableProfile(const v1::DeploymentContract& contract,
                                const v1::JobOutput& output) {
  if (!HasRelativeBudget(contract.budget())) return "";
  const std::optional<v1::ProfileResult> profile = DetailOf<v1::ProfileResult>(output);
  if (!profile.has_value() || !profile->has_parent_measured()) {
    return "profile result holds no measurement of the parent, which the contract's budgets "
           "relative to the parent need (an agent older than those budgets?)";
  }
  absl::StatusOr<v1::Budget> b =
      ResolveRelativeBudgets(contract.budget(), profile->parent_measured());
  return b.ok() ? "" : absl::StrCat("profile result: ", b.status().message());
}

std::vector<v1::RelativeBudget> DescribeRelativeBudgets(const v1::Budget& b,
                                                        const v1::ProfileResult* profile) {
  const v1::ModelCosts* parent =
      profile != nullptr && profile->has_parent_measured() ? &profile->parent_measured()
                                                           : nullptr;
  std::vector<v1::RelativeBudget> rows;
  // The statistic says which requests a latency or throughput figure is of; memory is
  // what the engine allocated, whatever the requests.
  auto add = [&](const char* resource, double factor, bool timed,
                 const std::function<absl::StatusOr<double>(const v1::ModelCosts&)>& figure) {
    v1::RelativeBudget& r = rows.emplace_back();
    r.set_resource(resource);
    r.set_factor(factor);
    if (parent == nullptr) return;
    absl::StatusOr<double> v = figure(*parent);
    if (!v.ok()) return;
    r.set_resolved(true);
    r.set_parent(*v);
    r.set_budget(factor * *v);
    if (timed) r.set_parent_statistic(parent->latency_statistic());
    r.set_cost_table_id(profile->cost_table_id());
  };
  const v1::LatencyPercentile p = b.latency_percentile();
  if (b.has_latency_vs_parent_max()) {
    add("latency_ms", b.latency_vs_parent_max(), true,
        [p](const v1::ModelCosts& m) { return ParentLatency(p, m); });
  }
  if (b.has_throughput_vs_parent_min()) {
    add("throughput_tokens_per_s", b.throughput_vs_parent_min(), true,
        [p](const v1::ModelCosts& m) { return ParentThroughput(p, m); });
  }
  if (b.has_memory_vs_parent_max()) {
    add("memory_mib", b.memory_vs_parent_max(), false,
        [](const v1::ModelCosts& m) { return ParentMemory(m); });
  }
  return rows;
}

v1::ProfileResult ProfileOfTable(const v1::CostTable& table) {
  v1::ProfileResult p;
  p.set_cost_table_id(table.id());
  p.set_entries(table.entries_size());
  p.set_t0_ms(table.t0_ms());
  p.set_latency_mape(table.latency_mape());
  p.set_latency_max_error(table.latency_max_error());
  p.set_memory_mape(table.memory_mape());
  p.set_validated_architectures(table.validated_architectures());
  if (table.has_parent_measured()) *p.mutable_parent_measured() = table.parent_measured();
  return p;
}

std::optional<v1::ProfileResult> CampaignProfile(const std::vector<const v1::Job*>& jobs) {
  for (const v1::Job* job : jobs) {
    if (job->kind() != methods::jobs::kProfile) continue;
    if (job->state() != v1::JOB_SUCCEEDED && job->state() != v1::JOB_SKIPPED) continue;
    if (auto p = DetailOf<v1::ProfileResult>(job->output())) return p;
  }
  return std::nullopt;
}

}  // namespace tailor::coordinator
