#include "methods/api/report_parts.h"

#include <optional>

#include "common/job_output.h"

namespace tailor::methods {
namespace {

v1::QualityResult Quality(const std::string& model, const v1::ModelQuality& q) {
  v1::QualityResult r;
  r.set_model(model);
  r.set_task_accuracy(q.task_accuracy());
  r.set_parameters(q.parameters());
  if (q.has_perplexity()) r.set_served_perplexity(q.perplexity());
  for (const auto& [task, accuracy] : q.per_task()) (*r.mutable_per_task())[task] = accuracy;
  return r;
}

v1::QualityResult& Row(const std::string& model, v1::CampaignReport& report) {
  for (v1::QualityResult& q : *report.mutable_quality()) {
    if (q.model() == model) return q;
  }
  v1::QualityResult* q = report.add_quality();
  q->set_model(model);
  return *q;
}

}  // namespace

void AddEvalQuality(const v1::JobOutput* distill, const std::string& model, bool with_parent,
                    v1::CampaignReport& report) {
  if (distill == nullptr) return;
  const std::optional<v1::DistillResult> d = DetailOf<v1::DistillResult>(*distill);
  if (!d.has_value() || !d->has_eval()) return;
  const v1::EvalQuality& e = d->eval();
  if (with_parent) {
    v1::QualityResult& parent = Row("parent", report);
    parent.set_perplexity(e.teacher_perplexity());
    if (e.has_teacher_exact_match()) parent.set_exact_match(e.teacher_exact_match());
  }
  v1::QualityResult& row = Row(model, report);
  row.set_perplexity(e.student_perplexity());
  if (e.has_student_exact_match()) row.set_exact_match(e.student_exact_match());
  if (row.parameters() == 0) row.set_parameters(distill->parameters());
}

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
