#ifndef TAILOR_METHODS_ENTROPY_CODE_RENDER_H_
#define TAILOR_METHODS_ENTROPY_CODE_RENDER_H_

#include <string>

#include "cli/render_options.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::methods {

// The entropy-coding section of `tailor report` from details["entropy"]
// (methods/entropy_code/report.h): per tensor bits/weight against the empirical entropy, the
// chosen configuration and batch-1 GEMV latency (package vs dense), then totals, batch-1
// request latency against the dense twin and whether greedy outputs were identical. Empty
// when the report has no such details.
std::string RenderEntropy(const v1::CampaignReport& report, const cli::RenderOptions& options);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_ENTROPY_CODE_RENDER_H_
