// Engine drift: what a recompression's drift check decides (docs/costmodel.md, "Engine
// drift"). The drift check re-measured the source campaign's cost table and its student in
// the new engine version; here the coordinator carries the table over when it still holds and
// keeps the student when it still meets every budget, so only what changed is redone.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/ids.h"
#include "common/job_output.h"
#include "common/proto_time.h"
#include "coordinator/coordinator.h"
#include "coordinator/relative_budget.h"
#include "coordinator/unit_of_work.h"
#include "methods/api/job_kinds.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {

namespace {

// The source campaign's job of `key`, or null.
const v1::Job* JobOfKey(const v1::Campaign& campaign, const std::string& key) {
  for (const v1::Job& job : campaign.jobs()) {
    if (job.key() == key) return &job;
  }
  return nullptr;
}

std::string TableDecision(const v1::DriftCheckResult& d, const std::string& version) {
  if (d.cost_table_id().empty()) return "the source campaign had no cost table";
  return absl::StrFormat(
      "cost table %s %s in %s: %d architectures re-measured, latency MAPE %.1f%% (worst "
      "%.1f%%) against its validated %.1f%%",
      d.cost_table_id(), d.table_holds() ? "still holds" : "drifted", version,
      d.architectures_size(), 100 * d.latency_mape(), 100 * d.latency_max_error(),
      100 * d.bound());
}

}  // namespace

void Coordinator::AddDriftCheckInputsLocked(const v1::Campaign& campaign,
                                            v1::AcquireJobResponse& resp) {
  absl::StatusOr<v1::Campaign> source =
      CampaignWithJobsLocked(campaign.recompress().source_campaign_id());
  if (!source.ok()) {
    spdlog::warn("campaign={} drift check: source campaign unreadable: {}", campaign.id(),
                 source.status().ToString());
    return;
  }
  // The student: the output of the job the source's verify measured (the one dependency
  // that produced a model), under "source_<key>".
  if (const v1::Job* verify = JobOfKey(*source, methods::jobs::kVerify)) {
    for (const std::string& dep : verify->depends_on()) {
      const v1::Job* producer = JobOfKey(*source, dep);
      if (producer != nullptr && !producer->output().model_digest().empty()) {
        (*resp.mutable_inputs())[absl::StrCat("source_", dep)] = producer->output();
      }
    }
  }
  for (const v1::Job& job : source->jobs()) {
    if (job.kind() != methods::jobs::kProfile) continue;
    const auto profile = DetailOf<v1::ProfileResult>(job.output());
    if (!profile.has_value() || profile->cost_table_id().empty()) continue;
    absl::StatusOr<v1::CostTable> table = store_->GetCostTable(profile->cost_table_id());
    if (table.ok()) *resp.mutable_source_cost_table() = *std::move(table);
  }
}

void Coordinator::ApplyDriftCheckLocked(UnitOfWork& uow, const v1::Job& drift_check) {
  const std::string& campaign_id = drift_check.campaign_id();
  const auto result = DetailOf<v1::DriftCheckResult>(drift_check.output());
  if (!result.has_value()) return;  // nothing decided: the campaign recompresses in full
  v1::DriftCheckResult d = *result;
  // The agent's verdict on the budgets, held to its own rows: every budget measured and met.
  bool all_met = drift_check.output().budgets_size() > 0;
  for (const v1::BudgetCheck& b : drift_check.output().budgets()) all_met &= b.met();
  d.set_budgets_hold(d.budgets_hold() && all_met);
  v1::Campaign& campaign = uow.Campaign(campaign_id);
  const v1::Target& target = campaign.contract().target();
  const std::string version = absl::StrCat(target.engine(), " ", target.engine_version());
  v1::RecompressOrigin& origin = *campaign.mutable_recompress();
  origin.set_decided(true);
  // The table: carried over under the new version (the profile job skipped), or profiled.
  std::string carried;
  for (const std::string& id : uow.JobIds(campaign_id)) {
    const v1::Job& view = uow.JobView(id);
    if (view.kind() != methods::jobs::kProfile || view.state() != v1::JOB_PENDING) continue;
    if (!d.table_holds()) {
      origin.set_table_reprofiled(true);
      continue;
    }
    absl::StatusOr<v1::CostTable> source = store_->GetCostTable(d.cost_table_id());
    if (!source.ok()) {
      origin.set_table_reprofiled(true);
      continue;
    }
    v1::CostTable table = *std::move(source);
    table.set_carried_from(table.id());
    table.set_id(NewId("ct", uow.now()));
    table.set_fingerprint(campaign.fingerprint());
    table.set_engine_version(target.engine_version());
    table.set_campaign_id(campaign_id);
    table.set_job_id(drift_check.id());
    *table.mutable_created_at() = ToProto(uow.now());
    table.clear_stale();
    uow.InsertCostTable(table);
    carried = table.id();
    v1::Job& job = uow.Job(id);
    job.set_state(v1::JOB_SKIPPED);
    job.set_skipped_reason(absl::StrCat("cost table ", d.cost_table_id(), " still holds in ",
                                        version, ": carried over as ", carried));
    SetDetail(*job.mutable_output(), ProfileOfTable(table));
    job.mutable_progress()->set_fraction(1.0);
    *job.mutable_updated_at() = ToProto(uow.now());
    uow.Emit(campaign_id, id, "job_skipped", job.skipped_reason());
  }
  origin.set_carried_cost_table_id(carried);
  // The student: kept when it still meets every budget. A drifted table is still profiled
  // again (the next campaign on this target needs it), nothing else runs.
  origin.set_recompressed(!d.budgets_hold());
  if (d.budgets_hold()) {
    for (const std::string& id : uow.JobIds(campaign_id)) {
      const v1::Job& view = uow.JobView(id);
      if (view.state() != v1::JOB_PENDING || view.kind() == methods::jobs::kProfile) continue;
      v1::Job& job = uow.Job(id);
      job.set_state(v1::JOB_SKIPPED);
      job.set_skipped_reason(absl::StrCat("the student of campaign ", origin.source_campaign_id(),
                                          " still meets every budget in ", version));
      *job.mutable_updated_at() = ToProto(uow.now());
      uow.Emit(campaign_id, id, "job_skipped", job.skipped_reason());
    }
  }
  origin.set_reason(absl::StrCat(
      TableDecision(d, version), "; ",
      d.budgets_hold()
          ? absl::StrCat("the student of ", origin.source_campaign_id(),
                         " still meets every budget: not recompressed")
          : absl::StrCat("the student of ", origin.source_campaign_id(),
                         " misses a budget: recompressed")));
  uow.Emit(campaign_id, drift_check.id(), "drift_checked", origin.reason());
}

}  // namespace tailor::coordinator
