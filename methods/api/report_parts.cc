#include "methods/api/report_parts.h"

namespace tailor::methods {
namespace {

v1::QualityResult Quality(const std::string& model, const v1::ModelQuality& q) {
  v1::QualityResult r;
  r.set_model(model);
  r.set_task_accuracy(q.task_accuracy());
  r.set_parameters(q.parameters());
  for (const auto& [task, accuracy] : q.per_task()) (*r.mutable_per_task())[task] = accuracy;
  return r;
}

}  // namespace

const v1::JobOutput* OutputOfJob(const std::vector<v1::Job>& jobs, const std::string& key) {
  for (const v1::Job& j : jobs) {
    if (j.key() == key) return &j.output();
  }
  return nullptr;
}

void AddVerifiedQuality(const v1::JobOutput* verify, const v1::JobOutput* distill,
                        const std::string& model, bool with_parent, v1::CampaignReport& report) {
  if (verify == nullptr) return;
  if (verify->has_parent_quality() && with_parent) {
    *report.add_quality() = Quality("parent", verify->parent_quality());
  }
  if (verify->has_quality()) {
    v1::QualityResult quality = Quality(model, verify->quality());
    quality.set_kd_loss(distill != nullptr ? distill->kd_loss() : 0);
    *report.add_quality() = std::move(quality);
  }
}

}  // namespace tailor::methods
