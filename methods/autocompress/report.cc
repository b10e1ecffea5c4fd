#include "methods/autocompress/report.h"

#include <cmath>
#include <string>

#include "google/protobuf/descriptor.h"
#include "methods/api/job_kinds.h"
#include "methods/api/report_parts.h"
#include "methods/autocompress/job_kinds.h"

namespace tailor::methods {
namespace {

// The predicted cost named by a budget's resource (latency_ms, throughput_tokens_per_s,
// memory_mib, weight_memory_mib: the ModelCosts field names); NaN when the selection did not
// predict it or the resource names no cost.
double PredictedCost(const v1::ModelCosts& costs, const std::string& resource) {
  const google::protobuf::FieldDescriptor* field =
      v1::ModelCosts::descriptor()->FindFieldByName(resource);
  if (field == nullptr || field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE ||
      !costs.GetReflection()->HasField(costs, field)) {
    return NAN;
  }
  return costs.GetReflection()->GetDouble(costs, field);
}

// One judged budget of the baseline's verify job, with the selection's prediction beside it.
v1::BudgetResult BaselineBudget(const v1::BudgetCheck& judged, const v1::JobOutput* selection) {
  v1::BudgetResult b;
  b.set_resource(judged.resource());
  b.set_budget(judged.budget());
  b.set_measured(judged.measured());
  // Verify measures every budget it judges.
  b.set_has_measured(true);
  b.set_met(judged.met());
  b.set_predicted(selection != nullptr && selection->has_predicted()
                      ? PredictedCost(selection->predicted(), b.resource())
                      : NAN);
  return b;
}

}  // namespace

void AddUniformBaselineReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                              v1::CampaignReport& report) {
  const v1::JobOutput* selection = OutputOfJob(jobs, jobs::kBaselineUniform);
  const v1::JobOutput* verify = OutputOfJob(jobs, jobs::kVerifyBaseline);
  // Rows in the order of the shared ones: after the student's (and the parent's).
  AddVerifiedQuality(verify, OutputOfJob(jobs, jobs::kDistillBaseline), "baseline",
                     /*with_parent=*/false, report);
  AddEvalQuality(OutputOfJob(jobs, jobs::kDistillBaseline), "baseline", /*with_parent=*/false,
                 report);
  if (verify != nullptr) {
    for (const v1::BudgetCheck& judged : verify->budgets()) {
      *report.add_baseline_budgets() = BaselineBudget(judged, selection);
    }
  }
  if (selection != nullptr && selection->has_feasible() && !selection->feasible()) {
    report.set_baseline_unavailable(selection->reason().empty() ? "no model meets the budget"
                                                                : selection->reason());
  }
}

}  // namespace tailor::methods
