#ifndef TAILOR_COORDINATOR_HTTP_PAGES_H_
#define TAILOR_COORDINATOR_HTTP_PAGES_H_

// Server-side HTML of the dashboard. Every page is complete without JavaScript (plain tables);
// the bundled script (web/src/dashboard.js) only refreshes the element with id "live" in place
// and draws the charts. Pure functions over protos, so the markup is unit-tested without a
// server. Every user-supplied string (campaign names, teams, errors, messages) goes through
// HtmlEscape.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tailor/v1/admin.pb.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::coordinator::http {

std::string HtmlEscape(absl::string_view text);

// Per-step metrics a job reported with its progress (search: kd_loss, penalty, predicted
// latency and memory against the budget; distill: kd_loss), from the campaign's job_progress
// events. One point per step; a repeated step (resume) keeps the last report.
struct CurvePoint {
  int64_t step = 0;
  std::map<std::string, double> metrics;
};
struct Curve {
  std::string job_key;
  std::string job_kind;
  std::vector<CurvePoint> points;
};
std::vector<Curve> CurvesFromEvents(const v1::Campaign& campaign,
                                    const std::vector<v1::Event>& events);

struct PageContext {
  absl::Time now;
  bool auth_enabled = false;
  std::string who;  // "admin", "team ml (submitter)"; shown in the header when auth is on
  // Seconds between the script's refreshes (data-refresh-ms on <body>).
  int refresh_ms = 2000;
};

struct OverviewData {
  v1::ListQueueResponse queue;
  v1::ListAgentsResponse agents;
  v1::ListCampaignsResponse campaigns;
};

struct CampaignPageData {
  v1::Campaign campaign;
  std::optional<v1::CampaignReport> report;
  std::optional<v1::CostTable> cost_table;  // the target's table, when one is stored
  std::vector<Curve> curves;
};

// The inner HTML of <div id="live"> (what a refresh fetches with ?partial=1) and the whole
// page around it.
std::string OverviewLive(const OverviewData& data, const PageContext& ctx);
std::string CampaignLive(const CampaignPageData& data, const PageContext& ctx);
std::string Page(absl::string_view title, absl::string_view live_html,
                 absl::string_view after_live_html, const PageContext& ctx);
// Canvases for the campaign's charts (drawn by the script from /api/campaigns/ID/charts);
// hidden until the script runs.
std::string CampaignCharts(const v1::Campaign& campaign);

// The form that asks for the token (a plain POST to /login; no script needed).
std::string LoginPage(absl::string_view next, absl::string_view error);
// A page for errors (401, 403, 404, 500) with a message.
std::string ErrorPage(int code, absl::string_view message, const PageContext& ctx);

}  // namespace tailor::coordinator::http

#endif  // TAILOR_COORDINATOR_HTTP_PAGES_H_
