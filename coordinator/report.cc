#include "coordinator/report.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "common/struct_values.h"
#include "methods/api/job_kinds.h"
#include "methods/api/report_parts.h"
#include "methods/registry.h"

namespace tailor::coordinator {
namespace {

using struct_values::NumberAt;

using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? nullptr : &it->second;
}

const Struct* SubStruct(const Struct* s, const std::string& key) {
  if (s == nullptr) return nullptr;
  const Value* v = Field(*s, key);
  return v != nullptr && v->has_struct_value() ? &v->struct_value() : nullptr;
}

// One row per budget of the contract: the chooser's prediction, the verify job's measurement
// and whether the measurement meets the budget.
void AddBudgets(const v1::Campaign& campaign, const methods::Method* method,
                const Struct* chooser, const Struct* verify, v1::CampaignReport& report) {
  const Struct* predicted = SubStruct(chooser, "predicted");
  const Struct* measured = SubStruct(verify, "measured");
  auto add_budget = [&](const std::string& resource, double budget, bool is_floor) {
    v1::BudgetResult* r = report.add_budgets();
    r->set_resource(resource);
    r->set_budget(budget);
    r->set_predicted(NumberAt(predicted, resource).value_or(NAN));
    std::optional<double> m = NumberAt(measured, resource);
    r->set_has_measured(m.has_value());
    r->set_measured(m.value_or(NAN));
    r->set_met(m.has_value() && (is_floor ? *m >= budget : *m <= budget));
  };
  const v1::Budget& b = campaign.contract().budget();
  if (b.has_latency_ms_max()) add_budget("latency_ms", b.latency_ms_max(), false);
  if (b.has_throughput_tokens_per_s_min()) {
    add_budget("throughput_tokens_per_s", b.throughput_tokens_per_s_min(), true);
  }
  if (b.has_memory_mib_max()) add_budget("memory_mib", b.memory_mib_max(), false);
  // With the entropy tail the weight budget is the delivered package's: the entropy report
  // adds that row, and the plain student before packaging is not held to it.
  const bool packaged = campaign.contract().package().entropy_code() && method != nullptr &&
                        method->traits().packageable;
  if (b.has_weight_memory_mib_max() && !packaged) {
    add_budget("weight_memory_mib", b.weight_memory_mib_max(), false);
  }
}

// The chosen student's architecture and the search tokens spent choosing it.
void AddChoice(const Struct& chooser, v1::CampaignReport& report) {
  if (const Struct* arch = SubStruct(&chooser, "architecture")) {
    *report.mutable_architecture() = *arch;
  } else if (const Value* line = Field(chooser, "architecture");
             line != nullptr && line->has_string_value()) {
    // Search jobs report a one-line description plus one string per layer.
    auto& f = *report.mutable_architecture()->mutable_fields();
    f["description"] = *line;
    if (const Value* layers = Field(chooser, "layers")) f["layers"] = *layers;
    if (const Value* params = Field(chooser, "parameters")) f["parameters"] = *params;
  }
  report.set_search_tokens(
      static_cast<int64_t>(NumberAt(&chooser, "search_tokens").value_or(0)));
}

}  // namespace

v1::CampaignReport BuildReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                               const std::vector<v1::Artifact>& artifacts) {
  v1::CampaignReport report;
  report.set_campaign_id(campaign.id());
  report.set_state(campaign.state());
  for (const v1::Job& j : jobs) {
    if (j.has_result() && j.result().fields_size() > 0) {
      (*report.mutable_details()->mutable_fields())[j.key()].mutable_struct_value()->CopyFrom(
          j.result());
    }
  }
  // The student's predicted cost comes from the job its method says chose it.
  const methods::Method* method = methods::BuiltinMethods().Find(campaign.contract().method());
  const Struct* chooser = nullptr;
  if (method != nullptr && !method->chooser_job().empty()) {
    chooser = methods::ResultOfJob(jobs, std::string(method->chooser_job()));
  }
  const Struct* verify = methods::ResultOfJob(jobs, methods::jobs::kVerify);
  const Struct* distill = methods::ResultOfJob(jobs, methods::jobs::kDistill);
  AddBudgets(campaign, method, chooser, verify, report);
  methods::AddVerifiedQuality(verify, distill, "student", /*with_parent=*/true, report);
  if (chooser != nullptr) AddChoice(*chooser, report);
  report.set_recovery_tokens(
      static_cast<int64_t>(NumberAt(distill, "recovery_tokens").value_or(0)));
  for (const v1::Artifact& a : artifacts) *report.add_artifacts() = a;
  if (method != nullptr) method->AddReport(campaign, jobs, report);
  return report;
}

}  // namespace tailor::coordinator
