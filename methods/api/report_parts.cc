#include "methods/api/report_parts.h"

#include "common/struct_values.h"

namespace tailor::methods {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using struct_values::NumberAt;

const Struct* SubStruct(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it != s.fields().end() && it->second.has_struct_value() ? &it->second.struct_value()
                                                                 : nullptr;
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

const Struct* ResultOfJob(const std::vector<v1::Job>& jobs, const std::string& key) {
  for (const v1::Job& j : jobs) {
    if (j.key() == key) return &j.result();
  }
  return nullptr;
}

void AddVerifiedQuality(const Struct* verify, const Struct* distill, const std::string& model,
                        bool with_parent, v1::CampaignReport& report) {
  if (verify == nullptr) return;
  if (const Struct* parent = SubStruct(*verify, "parent_quality");
      parent != nullptr && with_parent) {
    *report.add_quality() = Quality("parent", *parent);
  }
  if (const Struct* q = SubStruct(*verify, "quality")) {
    v1::QualityResult quality = Quality(model, *q);
    if (!NumberAt(q, "kd_loss").has_value()) {
      quality.set_kd_loss(NumberAt(distill, "kd_loss").value_or(0));
    }
    *report.add_quality() = std::move(quality);
  }
}

}  // namespace tailor::methods
