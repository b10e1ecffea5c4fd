#ifndef TAILOR_CLI_RENDER_BLOCK_REMOVAL_H_
#define TAILOR_CLI_RENDER_BLOCK_REMOVAL_H_

#include <string>

#include "cli/render.h"

namespace tailor::cli {

// The block-removal section of `tailor report` from details["block_removal"]
// (coordinator/report_block_removal.h): how M was chosen, the kept states by energy with
// their real evaluation loss and the chosen one, then CBO against Block Influence. Empty
// when the report has no such details.
std::string RenderBlockRemoval(const v1::CampaignReport& report, const RenderOptions& options);

}  // namespace tailor::cli

#endif  // TAILOR_CLI_RENDER_BLOCK_REMOVAL_H_
