#include "methods/autocompress/report.h"

#include <cmath>
#include <string>

#include "common/struct_values.h"
#include "methods/api/job_kinds.h"
#include "methods/api/report_parts.h"
#include "methods/autocompress/job_kinds.h"

namespace tailor::methods {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct* s, const std::string& key) {
  return struct_values::ValueAt(s, key);
}

// One judged budget of the baseline's verify job, with the selection's prediction beside it.
v1::BudgetResult BaselineBudget(const Struct& judged, const Value* predicted) {
  const auto& f = judged.fields();
  v1::BudgetResult b;
  b.set_resource(f.contains("resource") ? f.at("resource").string_value() : "");
  b.set_budget(struct_values::NumberAt(&judged, "budget").value_or(0));
  b.set_measured(struct_values::NumberAt(&judged, "measured").value_or(0));
  b.set_has_measured(f.contains("measured"));
  b.set_met(f.contains("met") && f.at("met").bool_value());
  double p = NAN;
  if (predicted != nullptr && predicted->has_struct_value()) {
    p = struct_values::NumberAt(&predicted->struct_value(), b.resource()).value_or(NAN);
  }
  b.set_predicted(p);
  return b;
}

}  // namespace

void AddUniformBaselineReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                              v1::CampaignReport& report) {
  const Struct* selection = ResultOfJob(jobs, jobs::kBaselineUniform);
  const Struct* verify = ResultOfJob(jobs, jobs::kVerifyBaseline);
  // Rows in the order of the shared ones: after the student's (and the parent's).
  AddVerifiedQuality(verify, ResultOfJob(jobs, jobs::kDistillBaseline), "baseline",
                     /*with_parent=*/false, report);
  if (const Value* judged = Field(verify, "budgets");
      judged != nullptr && judged->has_list_value()) {
    const Value* predicted = Field(selection, "predicted");
    for (const Value& v : judged->list_value().values()) {
      if (v.has_struct_value()) {
        *report.add_baseline_budgets() = BaselineBudget(v.struct_value(), predicted);
      }
    }
  }
  if (const Value* feasible = Field(selection, "feasible");
      feasible != nullptr && feasible->has_bool_value() && !feasible->bool_value()) {
    const Value* reason = Field(selection, "reason");
    report.set_baseline_unavailable(reason != nullptr ? reason->string_value()
                                                      : "no model meets the budget");
  }
}

}  // namespace tailor::methods
