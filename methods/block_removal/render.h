#ifndef TAILOR_METHODS_BLOCK_REMOVAL_RENDER_H_
#define TAILOR_METHODS_BLOCK_REMOVAL_RENDER_H_

#include <string>

#include "cli/render_options.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::methods {

// The block-removal section of `tailor report` from details["block_removal"]
// (methods/block_removal/report.h): how M was chosen, the kept states by energy with
// their real evaluation loss and the chosen one, then CBO against Block Influence. Empty
// when the report has no such details.
std::string RenderBlockRemoval(const v1::CampaignReport& report, const cli::RenderOptions& options);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_BLOCK_REMOVAL_RENDER_H_
