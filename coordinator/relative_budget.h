#ifndef TAILOR_COORDINATOR_RELATIVE_BUDGET_H_
#define TAILOR_COORDINATOR_RELATIVE_BUDGET_H_

// Budgets relative to the parent (Budget.latency_vs_parent_max, throughput_vs_parent_min,
// memory_vs_parent_max): "at most 70% of the parent's latency on this target". The profile
// job measures the parent's architecture in the target engine (ProfileResult.parent_measured,
// stored with the cost table); from then on every job of the campaign is handed the contract
// with the absolute budgets filled in (factor x the parent's figure) beside the factors. The
// search and the settle hold candidates to those figures; a verify judges a timed budget
// against the parent it serves alongside the model (JobOutput.parent_beside), since the
// host's speed minutes after the profile is not the profile's. Resolved in the coordinator,
// from the stored measurement, so a retried or resumed job is held to the same figure.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/relative_budget.h"
#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::coordinator {

using ::tailor::HasRelativeBudget;
using ::tailor::ResolveRelativeBudgets;

// `contract` with its budget resolved against `profile`'s parent measurement; unchanged when
// it has no relative budget, or `profile` is null or cannot resolve it (nothing after the
// profile job runs then: Coordinator::CompleteJob fails such a profile job).
v1::DeploymentContract ResolvedContract(const v1::DeploymentContract& contract,
                                        const v1::ProfileResult* profile);

// Why a profile job's `output` cannot resolve `contract`'s budgets relative to the parent
// ("" when it can, or there are none): such a result is refused, so no later job is handed
// a contract without the budgets it was written with.
std::string UnresolvableProfile(const v1::DeploymentContract& contract,
                                const v1::JobOutput& output);

// One row per relative budget of `b`, resolved against `profile` where it can be.
std::vector<v1::RelativeBudget> DescribeRelativeBudgets(const v1::Budget& b,
                                                        const v1::ProfileResult* profile);

// The ProfileResult a skipped profile job carries when it reuses `table`.
v1::ProfileResult ProfileOfTable(const v1::CostTable& table);

// The profile result among a campaign's jobs (the first profile job's), when one finished.
std::optional<v1::ProfileResult> CampaignProfile(const std::vector<const v1::Job*>& jobs);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_RELATIVE_BUDGET_H_
