#ifndef TAILOR_CLI_RENDER_H_
#define TAILOR_CLI_RENDER_H_

// Human views of the CLI: pure functions from protos to text, so every line is unit-tested
// and commands only fetch and print.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/render_options.h"
#include "cli/table.h"
#include "tailor/v1/admin.pb.h"
#include "tailor/v1/agent.pb.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::cli {


// Names jobs for people: the job's key (unique in the campaign, e.g. "verify_baseline"); for
// jobs without one, the kind made unique with "#2", "#3". Index-aligned with jobs().
std::vector<std::string> JobLabels(const v1::Campaign& campaign);

// Why a job is where it is: its error, why it waits or was skipped, launcher state, or its
// progress step and message.
std::string JobDetail(const v1::Job& job);

// "42%" when the job reported progress or finished; "-" otherwise.
std::string JobProgressCell(const v1::Job& job);

// `tailor status`: header fields and the job table.
std::string RenderCampaign(const v1::Campaign& campaign, const RenderOptions& options);
// `tailor list`.
std::string RenderCampaignList(const std::vector<v1::Campaign>& campaigns,
                               const RenderOptions& options);
// `tailor report`.
std::string RenderReport(const v1::CampaignReport& report, const RenderOptions& options);
// One plain `tailor watch` line (no newline): "HH:MM:SS seq job state message". `job_label`
// is "-" for campaign-level events.
std::string RenderEventLine(const v1::Event& event, absl::string_view job_label,
                            absl::TimeZone tz);
// The text of an event: its message, else its progress message, plus "(42%, step 3/10)".
std::string EventText(const v1::Event& event);

// Admin and catalogue views.
std::string RenderQueue(const v1::ListQueueResponse& queue, const RenderOptions& options);
std::string RenderAgents(const v1::ListAgentsResponse& agents, const RenderOptions& options);
std::string RenderArtifacts(const std::vector<v1::Artifact>& artifacts,
                            const RenderOptions& options);
std::string RenderCostTables(const v1::ListCostTablesResponse& tables,
                             const RenderOptions& options);
std::string RenderCostTable(const v1::CostTable& table, const RenderOptions& options);
std::string RenderRecompress(const v1::RecompressRequest& request,
                             const v1::RecompressResponse& response);

}  // namespace tailor::cli

#endif  // TAILOR_CLI_RENDER_H_
