#ifndef TAILOR_METHODS_BLOCK_REMOVAL_REPORT_H_
#define TAILOR_METHODS_BLOCK_REMOVAL_REPORT_H_

// The BLOCK_REMOVAL part of a campaign report (docs/blockremoval.md, "Report"): one summary
// in CampaignReport.details["block_removal"] assembled from the solve and
// evaluate_candidates results, so clients need not join the two jobs' raw results:
//
//   blocks, blocks_to_remove, removed_fraction, m_source ("contract" | "budget"),
//   m_search[] (budget-driven: every M tried), solver, solve_seconds, states_total,
//   ground_state{energy, removed_layers, loss?}, parent_loss?, held_out_samples?,
//   spectrum[] sorted by energy: {rank, level, removed_layers, energy, gap_to_ground, loss?,
//                                 chosen, predicted?},
//   chosen{rank, level, removed_layers, energy, gap_to_ground, loss},
//   baseline{method, removed_layers, energy, gap_to_ground, loss?, same_as_chosen},
//   comparison{cbo_loss, baseline_loss, loss_difference (baseline - CBO), beats_baseline}
//
// Fields marked ? (and chosen/comparison) appear once evaluate_candidates has run.

#include <vector>

#include "tailor/v1/campaign.pb.h"

namespace tailor::methods {

// Adds details["block_removal"] when `jobs` hold a solve result (else leaves `report` as is),
// and the chosen student's architecture when no other job supplied one.
void AddBlockRemovalReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                           v1::CampaignReport& report);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_BLOCK_REMOVAL_REPORT_H_
