#ifndef TAILOR_CLI_RENDER_ENTROPY_H_
#define TAILOR_CLI_RENDER_ENTROPY_H_

#include <string>

#include "cli/render.h"

namespace tailor::cli {

// The entropy-coding section of `tailor report` from details["entropy"]
// (coordinator/report_entropy.h): per tensor bits/weight against the empirical entropy, the
// chosen configuration and batch-1 GEMV latency (package vs dense), then totals, batch-1
// request latency against the dense twin and whether greedy outputs were identical. Empty
// when the report has no such details.
std::string RenderEntropy(const v1::CampaignReport& report, const RenderOptions& options);

}  // namespace tailor::cli

#endif  // TAILOR_CLI_RENDER_ENTROPY_H_
