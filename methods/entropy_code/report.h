#ifndef TAILOR_METHODS_ENTROPY_CODE_REPORT_H_
#define TAILOR_METHODS_ENTROPY_CODE_REPORT_H_

#include <vector>

#include "tailor/v1/campaign.pb.h"

namespace tailor::methods {

// ENTROPY_CODE and the entropy tail (docs/entropy.md): adds details["entropy"] — per tensor
// bits/weight, empirical entropy, chosen configuration, batch-1 GEMV latency fused vs dense;
// totals; end-to-end latency of the package vs its dense twin; whether greedy outputs were
// identical — from the (entropy_)select and (entropy_)verify results, and for the tail a
// `weight_memory_mib (package)` budget row measured on the package. A no-op for campaigns
// without those jobs.
void AddEntropyReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                      v1::CampaignReport& report);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_ENTROPY_CODE_REPORT_H_
