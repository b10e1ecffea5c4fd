#include "coordinator/report.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/job_output.h"
#include "coordinator/relative_budget.h"
#include "methods/api/job_kinds.h"
#include "methods/api/report_parts.h"
#include "methods/registry.h"

namespace tailor::coordinator {
namespace {

// The value of `resource` in `costs`, when it holds one.
std::optional<double> CostOf(const v1::ModelCosts& costs, const std::string& resource) {
  if (resource == "latency_ms" && costs.has_latency_ms()) return costs.latency_ms();
  if (resource == "throughput_tokens_per_s" && costs.has_throughput_tokens_per_s()) {
    return costs.throughput_tokens_per_s();
  }
  if (resource == "memory_mib" && costs.has_memory_mib()) return costs.memory_mib();
  if (resource == "weight_memory_mib" && costs.has_weight_memory_mib()) {
    return costs.weight_memory_mib();
  }
  return std::nullopt;
}

// The verify's check of `resource` when it judged it against the parent served alongside.
const v1::BudgetCheck* JudgedBesideParent(const v1::JobOutput* verify,
                                          const std::string& resource) {
  if (verify == nullptr || !verify->has_parent_beside()) return nullptr;
  for (const v1::BudgetCheck& b : verify->budgets()) {
    if (b.resource() == resource && b.has_parent()) return &b;
  }
  return nullptr;
}

// One row per budget of the contract: the chooser's prediction, the verify job's measurement
// and whether the measurement meets the budget (a timed budget relative to the parent: the
// one the verify resolved against the parent it served alongside).
void AddBudgets(const v1::Campaign& campaign, const methods::Method* method,
                const v1::JobOutput* chooser, const v1::JobOutput* verify,
                v1::CampaignReport& report) {
  auto add_budget = [&](const std::string& resource, double budget, bool is_floor) {
    if (const v1::BudgetCheck* beside = JudgedBesideParent(verify, resource)) {
      budget = beside->budget();
    }
    v1::BudgetResult* r = report.add_budgets();
    r->set_resource(resource);
    r->set_budget(budget);
    std::optional<double> p;
    if (chooser != nullptr) p = CostOf(chooser->predicted(), resource);
    r->set_predicted(p.value_or(NAN));
    std::optional<double> m;
    if (verify != nullptr) m = CostOf(verify->measured(), resource);
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
  // An engine tailor did not write gates its measurements on equivalence with tailor's own
  // forward pass: both figures are judged like budgets.
  if (verify != nullptr && verify->has_equivalence()) {
    const v1::EquivalenceCheck& e = verify->equivalence();
    auto add_gate = [&](const char* resource, double limit, double value, bool met) {
      v1::BudgetResult* r = report.add_budgets();
      r->set_resource(resource);
      r->set_budget(limit);
      r->set_predicted(NAN);
      r->set_has_measured(true);
      r->set_measured(value);
      r->set_met(met);
    };
    add_gate("equivalence_max_kl", e.max_kl_allowed(), e.max_kl(),
             e.max_kl() <= e.max_kl_allowed());
    add_gate("equivalence_argmax_agreement", e.min_argmax_agreement(), e.argmax_agreement(),
             e.argmax_agreement() >= e.min_argmax_agreement());
  }
}

// The chosen student's architecture: a one-line description plus one string per layer.
void AddChoice(const v1::JobOutput& chooser, int64_t search_tokens,
               v1::CampaignReport& report) {
  if (!chooser.architecture().empty()) {
    auto& f = *report.mutable_architecture()->mutable_fields();
    f["description"].set_string_value(chooser.architecture());
    if (chooser.layers_size() > 0) {
      auto* layers = f["layers"].mutable_list_value();
      for (const std::string& l : chooser.layers()) layers->add_values()->set_string_value(l);
    }
    if (chooser.parameters() != 0) {
      f["parameters"].set_number_value(static_cast<double>(chooser.parameters()));
    }
  }
  report.set_search_tokens(search_tokens);
}

// The datasets the campaign read (as stored) and its quality check, with the uniform
// baseline's perplexity when its distillation measured one (after the student's check).
void AddDataUse(const v1::Campaign& campaign, v1::CampaignReport& report) {
  const v1::DataParams& data = campaign.contract().data();
  auto add = [&](const char* role, bool has, const v1::DatasetRef& ref) {
    if (!has) return;
    v1::DatasetUse* use = report.add_datasets();
    use->set_role(role);
    use->set_path(ref.path());
    use->set_artifact_digest(ref.artifact_digest());
  };
  add("calibration", data.has_calibration(), data.calibration());
  add("train", data.has_train(), data.train());
  add("eval", data.has_eval(), data.eval());
  if (!campaign.has_quality_check()) return;
  v1::QualityCheck check = campaign.quality_check();
  for (const v1::QualityResult& q : report.quality()) {
    if (q.model() == "baseline" && q.has_perplexity()) {
      check.set_baseline_perplexity(q.perplexity());
    }
  }
  *report.mutable_quality_check() = std::move(check);
}

}  // namespace

v1::CampaignReport BuildReport(const v1::Campaign& stored, const std::vector<v1::Job>& jobs,
                               const std::vector<v1::Artifact>& artifacts) {
  v1::CampaignReport report;
  // Every section judges the budgets the jobs were held to: relative ones resolved against
  // the parent the profile job measured, and listed with that figure.
  std::optional<v1::Campaign> resolved;
  if (HasRelativeBudget(stored.contract().budget())) {
    std::vector<const v1::Job*> views;
    for (const v1::Job& j : jobs) views.push_back(&j);
    const std::optional<v1::ProfileResult> profile = CampaignProfile(views);
    const v1::ProfileResult* p = profile.has_value() ? &*profile : nullptr;
    for (v1::RelativeBudget& r : DescribeRelativeBudgets(stored.contract().budget(), p)) {
      *report.add_relative_budgets() = std::move(r);
    }
    resolved = stored;
    *resolved->mutable_contract() = ResolvedContract(stored.contract(), p);
  }
  const v1::Campaign& campaign = resolved.has_value() ? *resolved : stored;
  report.set_campaign_id(campaign.id());
  report.set_state(campaign.state());
  for (const v1::Job& j : jobs) {
    if (j.has_output()) (*report.mutable_outputs())[j.key()] = j.output();
  }
  // The student's predicted cost comes from the job its method says chose it.
  const methods::Method* method = methods::BuiltinMethods().Find(campaign.contract().method());
  const v1::JobOutput* chooser = nullptr;
  const absl::string_view chooser_key =
      method != nullptr ? method->chooser_job(campaign.contract()) : absl::string_view();
  if (!chooser_key.empty()) {
    chooser = methods::OutputOfJob(jobs, std::string(chooser_key));
  }
  const v1::JobOutput* verify = methods::OutputOfJob(jobs, methods::jobs::kVerify);
  // A recompression that kept its source's student measured it in its drift check.
  if (campaign.recompress().decided() && !campaign.recompress().recompressed()) {
    verify = methods::OutputOfJob(jobs, methods::jobs::kDriftCheck);
    chooser = nullptr;
  }
  if (campaign.has_recompress()) *report.mutable_recompress() = campaign.recompress();
  const v1::JobOutput* distill = methods::OutputOfJob(jobs, methods::jobs::kDistill);
  AddBudgets(campaign, method, chooser, verify, report);
  for (v1::RelativeBudget& r : *report.mutable_relative_budgets()) {
    if (const v1::BudgetCheck* beside = JudgedBesideParent(verify, r.resource())) {
      r.set_verify_parent(beside->parent());
      r.set_verify_budget(beside->budget());
    }
  }
  methods::AddVerifiedQuality(verify, distill, "student", /*with_parent=*/true, report);
  methods::AddEvalQuality(distill, "student", /*with_parent=*/true, report);
  if (chooser != nullptr) {
    AddChoice(*chooser, method->SearchTokens(*chooser), report);
  }
  if (distill != nullptr) {
    if (auto d = DetailOf<v1::DistillResult>(*distill)) {
      report.set_recovery_tokens(d->recovery_tokens());
    }
  }
  if (campaign.has_cost_table_check()) {
    *report.mutable_cost_table_check() = campaign.cost_table_check();
  }
  for (const v1::Artifact& a : artifacts) *report.add_artifacts() = a;
  if (method != nullptr) method->AddReport(campaign, jobs, report);
  AddDataUse(campaign, report);
  return report;
}

}  // namespace tailor::coordinator
