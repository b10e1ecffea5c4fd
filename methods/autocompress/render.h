#ifndef TAILOR_METHODS_AUTOCOMPRESS_RENDER_H_
#define TAILOR_METHODS_AUTOCOMPRESS_RENDER_H_

#include <string>

#include "cli/render_options.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::methods {

// The measured settle's section of an AUTOCOMPRESS report (the settle job's output, when the
// campaign had one): every measured rung predicted against measured, which fit, which was
// taken and why. Empty without a settle.
std::string RenderSettle(const v1::CampaignReport& report, const cli::RenderOptions& options);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_AUTOCOMPRESS_RENDER_H_
