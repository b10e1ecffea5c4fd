#ifndef TAILOR_COORDINATOR_REPORT_H_
#define TAILOR_COORDINATOR_REPORT_H_

#include <vector>

#include "tailor/v1/campaign.pb.h"

namespace tailor::coordinator {

// Assembles a campaign's report from its contract and its jobs' results. Conventions for job
// results (documented in docs/architecture.md):
// - search / baseline_uniform / solve: "predicted" {latency_ms, throughput_tokens_per_s,
//   memory_mib}, "architecture" {...}, "search_tokens".
// - distill: "recovery_tokens".
// - verify (key verify / verify_baseline): "measured" {same keys as predicted}, "quality"
//   {kd_loss, task_accuracy, per_task{...}, parameters}, "model" (student|baseline) and
//   optionally "parent_quality".
// Every job's result is also copied into details[job key].
v1::CampaignReport BuildReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                               const std::vector<v1::Artifact>& artifacts);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_REPORT_H_
