#include "coordinator/relative_budget.h"

#include <cmath>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/job_output.h"
#include "common/relative_budget.h"
#include "common/status_macros.h"
#include "methods/api/job_kinds.h"

namespace tailor::coordinator {

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
