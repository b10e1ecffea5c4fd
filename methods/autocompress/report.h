#ifndef TAILOR_METHODS_AUTOCOMPRESS_REPORT_H_
#define TAILOR_METHODS_AUTOCOMPRESS_REPORT_H_

#include <vector>

#include "tailor/v1/campaign.pb.h"

namespace tailor::methods {

// The uniform baseline's rows of an AUTOCOMPRESS report: its quality row ("baseline"), and
// CampaignReport.baseline_budgets from
// verify_baseline's judged budgets and baseline_uniform's prediction, or
// baseline_unavailable when baseline_uniform found no uniform model that meets the budgets.
// A no-op without those jobs' outputs.
void AddUniformBaselineReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                              v1::CampaignReport& report);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_AUTOCOMPRESS_REPORT_H_
