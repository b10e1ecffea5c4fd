#include "coordinator/report.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "common/struct_values.h"
#include "coordinator/report_block_removal.h"
#include "coordinator/report_entropy.h"

namespace tailor::coordinator {
namespace {

using struct_values::NumberAt;

using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? nullptr : &it->second;
}

const Struct* SubStruct(const Struct& s, const std::string& key) {
  const Value* v = Field(s, key);
  return v != nullptr && v->has_struct_value() ? &v->struct_value() : nullptr;
}

v1::QualityResult Quality(const std::string& model, const Struct& q) {
  v1::QualityResult r;
  r.set_model(model);
  r.set_kd_loss(NumberAt(&q, "kd_loss").value_or(0));
  r.set_task_accuracy(NumberAt(&q, "task_accuracy").value_or(0));
  r.set_parameters(static_cast<int64_t>(NumberAt(&q, "parameters").value_or(0)));
  if (const Struct* per = SubStruct(q, "per_task")) {
    for (const auto& [k, v] : per->fields()) {
      if (v.kind_case() == Value::kNumberValue) (*r.mutable_per_task())[k] = v.number_value();
    }
  }
  return r;
}

}  // namespace

v1::CampaignReport BuildReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                               const std::vector<v1::Artifact>& artifacts) {
  v1::CampaignReport report;
  report.set_campaign_id(campaign.id());
  report.set_state(campaign.state());
  std::map<std::string, const v1::Job*> by_key;
  for (const v1::Job& j : jobs) {
    by_key[j.key()] = &j;
    if (j.has_result() && j.result().fields_size() > 0) {
      (*report.mutable_details()->mutable_fields())[j.key()].mutable_struct_value()->CopyFrom(
          j.result());
    }
  }
  auto result_of = [&](const std::string& key) -> const Struct* {
    auto it = by_key.find(key);
    return it == by_key.end() ? nullptr : &it->second->result();
  };

  // The student's predicted cost comes from whichever job chose it.
  const Struct* chooser = result_of("search");
  if (chooser == nullptr) chooser = result_of("solve");
  if (chooser == nullptr) chooser = result_of("entropy_select");
  if (chooser == nullptr) chooser = result_of("select");
  const Struct* predicted = chooser ? SubStruct(*chooser, "predicted") : nullptr;
  const Struct* verify = result_of("verify");
  const Struct* measured = verify ? SubStruct(*verify, "measured") : nullptr;

  const v1::Budget& b = campaign.contract().budget();
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
  if (b.has_latency_ms_max()) add_budget("latency_ms", b.latency_ms_max(), false);
  if (b.has_throughput_tokens_per_s_min()) {
    add_budget("throughput_tokens_per_s", b.throughput_tokens_per_s_min(), true);
  }
  if (b.has_memory_mib_max()) add_budget("memory_mib", b.memory_mib_max(), false);
  // With the entropy tail the weight budget is the delivered package's: AddEntropyReport adds
  // that row, and the plain student before packaging is not held to it.
  const bool packaged = campaign.contract().package().entropy_code() &&
                        campaign.contract().method() != v1::ENTROPY_CODE;
  if (b.has_weight_memory_mib_max() && !packaged) {
    add_budget("weight_memory_mib", b.weight_memory_mib_max(), false);
  }

  // Quality: task accuracy from the verify jobs (measured on the target), KD loss from the
  // distillation that produced each model (it holds the teacher; verify does not).
  struct QualitySource {
    const char* verify;
    const char* distill;
    const char* model;
  };
  for (const QualitySource& src : {QualitySource{"verify", "distill", "student"},
                                   QualitySource{"verify_baseline", "distill_baseline",
                                                 "baseline"}}) {
    const Struct* r = result_of(src.verify);
    if (r == nullptr) continue;
    if (const Struct* parent = SubStruct(*r, "parent_quality");
        parent != nullptr && std::string(src.verify) == "verify") {
      *report.add_quality() = Quality("parent", *parent);
    }
    if (const Struct* q = SubStruct(*r, "quality")) {
      v1::QualityResult quality = Quality(src.model, *q);
      if (!NumberAt(q, "kd_loss").has_value()) {
        quality.set_kd_loss(NumberAt(result_of(src.distill), "kd_loss").value_or(0));
      }
      *report.add_quality() = std::move(quality);
    }
  }
  if (chooser != nullptr) {
    if (const Struct* arch = SubStruct(*chooser, "architecture")) {
      *report.mutable_architecture() = *arch;
    } else if (const Value* line = Field(*chooser, "architecture");
               line != nullptr && line->has_string_value()) {
      // Search jobs report a one-line description plus one string per layer.
      auto& f = *report.mutable_architecture()->mutable_fields();
      f["description"] = *line;
      if (const Value* layers = Field(*chooser, "layers")) f["layers"] = *layers;
      if (const Value* params = Field(*chooser, "parameters")) f["parameters"] = *params;
    }
    report.set_search_tokens(
        static_cast<int64_t>(NumberAt(chooser, "search_tokens").value_or(0)));
  }
  report.set_recovery_tokens(
      static_cast<int64_t>(NumberAt(result_of("distill"), "recovery_tokens").value_or(0)));
  for (const v1::Artifact& a : artifacts) *report.add_artifacts() = a;
  if (campaign.contract().method() == v1::BLOCK_REMOVAL) {
    AddBlockRemovalReport(campaign, jobs, report);
  }
  AddEntropyReport(campaign, jobs, report);
  return report;
}

}  // namespace tailor::coordinator
