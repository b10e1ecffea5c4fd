#include "coordinator/http/pages.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/proto_time.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::coordinator::http {
namespace {

std::string Esc(absl::string_view s) { return HtmlEscape(s); }

// Numbers shown to people; the exact value goes into data-value for scripts and tests.
std::string Num(double v) { return absl::StrFormat("%.4g", v); }
std::string NumCell(absl::string_view field, double v) {
  return absl::StrCat("<td class=\"num\" data-field=\"", field, "\" data-value=\"",
                      absl::StrFormat("%.17g", v), "\">", Num(v), "</td>");
}
std::string IntCell(absl::string_view field, int64_t v) {
  return absl::StrCat("<td class=\"num\" data-field=\"", field, "\" data-value=\"", v, "\">", v,
                      "</td>");
}

std::string Age(absl::Time now, const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "-";
  const int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(now - FromProto(ts)));
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 7200) return absl::StrCat(s / 60, "m ", s % 60, "s");
  if (s < 172800) return absl::StrCat(s / 3600, "h ", (s % 3600) / 60, "m");
  return absl::StrCat(s / 86400, "d ", (s % 86400) / 3600, "h");
}

std::string Time(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", FromProto(ts), absl::UTCTimeZone());
}

// The enum name as `tailor status --json` prints it, with a class for the colour.
std::string StateChip(absl::string_view name) {
  std::string cls(name);
  const size_t us = cls.find('_');
  if (us != std::string::npos) cls = cls.substr(us + 1);
  std::transform(cls.begin(), cls.end(), cls.begin(), ::tolower);
  return absl::StrCat("<span class=\"state state-", Esc(cls), "\">", Esc(name), "</span>");
}

std::string CampaignHref(const std::string& id) { return absl::StrCat("/campaigns/", Esc(id)); }

std::string Where(const v1::Job& job) {
  std::string where = job.agent_id();
  if (!job.external_id().empty()) {
    absl::StrAppend(&where, " (", job.launcher().empty() ? "job" : job.launcher(), " ",
                    job.external_id(), job.external_state().empty() ? "" : " ",
                    job.external_state(),
                    job.external_reason().empty() ? "" : absl::StrCat(": ", job.external_reason()),
                    ")");
  }
  return where;
}

std::string Why(const v1::Job& job) {
  if (job.state() == v1::JOB_RUNNABLE) return job.waiting_reason();
  if (job.state() == v1::JOB_SKIPPED) return job.skipped_reason();
  if (job.state() == v1::JOB_LEASED && !job.external_reason().empty()) {
    return absl::StrCat(job.external_state(), ": ", job.external_reason());
  }
  return job.error();
}

std::string ProgressCell(const v1::Job& job) {
  double f = job.progress().fraction();
  if (job.state() == v1::JOB_SUCCEEDED || job.state() == v1::JOB_SKIPPED) f = 1.0;
  return absl::StrCat("<td data-field=\"progress\" data-value=\"",
                      absl::StrFormat("%.17g", job.progress().fraction()), "\"><progress max=\"1\" value=\"",
                      absl::StrFormat("%.4f", f), "\"></progress> ",
                      absl::StrFormat("%.0f%%", 100 * f),
                      job.progress().message().empty()
                          ? ""
                          : absl::StrCat(" <span class=\"msg\">", Esc(job.progress().message()),
                                         "</span>"),
                      "</td>");
}

int DoneJobs(const v1::Campaign& c) {
  int done = 0;
  for (const v1::Job& j : c.jobs()) {
    done += j.state() == v1::JOB_SUCCEEDED || j.state() == v1::JOB_SKIPPED;
  }
  return done;
}

double CampaignFraction(const v1::Campaign& c) {
  if (c.jobs_size() == 0) return 0;
  double sum = 0;
  for (const v1::Job& j : c.jobs()) {
    sum += j.state() == v1::JOB_SUCCEEDED || j.state() == v1::JOB_SKIPPED
               ? 1.0
               : std::clamp(j.progress().fraction(), 0.0, 1.0);
  }
  return sum / c.jobs_size();
}

// The job graph in one line: keys in graph order with their state; each node's tooltip names
// the jobs it runs after.
std::string GraphLine(const v1::Campaign& c) {
  std::vector<std::string> parts;
  for (const v1::Job& j : c.jobs()) {
    std::string name = v1::JobState_Name(j.state());
    if (name.rfind("JOB_", 0) == 0) name = name.substr(4);
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    parts.push_back(absl::StrCat("<span class=\"node state-", name, "\" title=\"",
                                 Esc(j.depends_on_size() == 0
                                         ? std::string("no dependencies")
                                         : absl::StrCat("after ", absl::StrJoin(j.depends_on(), ", "))),
                                 "\">", Esc(j.key().empty() ? j.kind() : j.key()), "</span>"));
  }
  return absl::StrJoin(parts, " ");
}

std::string QueueSection(const v1::ListQueueResponse& q, const PageContext& ctx) {
  std::string h = "<section><h2>Queue</h2>";
  absl::StrAppend(&h,
                  "<table id=\"queue-summary\"><thead><tr><th>Device kind</th><th>Pending</th>"
                  "<th>Runnable</th><th>Leased</th></tr></thead><tbody>");
  if (q.summary_size() == 0) absl::StrAppend(&h, "<tr><td colspan=\"4\">no live jobs</td></tr>");
  for (const v1::QueueSummary& s : q.summary()) {
    absl::StrAppend(&h, "<tr data-device-kind=\"", Esc(s.device_kind()), "\"><td>",
                    Esc(s.device_kind()), "</td>", IntCell("pending", s.pending()),
                    IntCell("runnable", s.runnable()), IntCell("leased", s.leased()), "</tr>");
  }
  absl::StrAppend(&h,
                  "</tbody></table><table id=\"queue-entries\"><thead><tr><th>#</th><th>Job</th>"
                  "<th>Campaign</th><th>Team</th><th>Device kind</th><th>State</th>"
                  "<th>Priority</th><th>Age</th><th>Where</th><th>Why waiting</th></tr></thead>"
                  "<tbody>");
  if (q.entries_size() == 0) {
    absl::StrAppend(&h, "<tr><td colspan=\"10\">nothing runnable or leased</td></tr>");
  }
  for (const v1::QueueEntry& e : q.entries()) {
    const v1::Job& j = e.job();
    absl::StrAppend(
        &h, "<tr data-job-id=\"", Esc(j.id()), "\"><td>",
        e.position() > 0 ? absl::StrCat(e.position()) : std::string("-"), "</td><td>",
        Esc(j.key().empty() ? j.kind() : j.key()), " <small>", Esc(j.id()), "</small></td><td><a href=\"",
        CampaignHref(j.campaign_id()), "\">", Esc(e.campaign_name()), "</a></td><td>",
        Esc(e.team()), "</td><td>",
        Esc(j.resources().placement() == "launcher" ? "(launcher)" : j.resources().device_kind()),
        "</td><td data-field=\"state\">", StateChip(v1::JobState_Name(j.state())), "</td>",
        IntCell("priority", j.resources().priority()), "<td>", Age(ctx.now, j.created_at()),
        "</td><td>", Esc(Where(j)), "</td><td data-field=\"reason\">", Esc(Why(j)),
        "</td></tr>");
  }
  absl::StrAppend(&h, "</tbody></table></section>");
  return h;
}

std::string AgentsSection(const v1::ListAgentsResponse& agents, const PageContext& ctx) {
  std::string h =
      "<section><h2>Agents</h2><table id=\"agents\"><thead><tr><th>Name</th><th>Host</th>"
      "<th>Device kind</th><th>Engine</th><th>State</th><th>Last heartbeat</th>"
      "<th>Current jobs</th><th>Drained</th></tr></thead><tbody>";
  if (agents.agents_size() == 0) absl::StrAppend(&h, "<tr><td colspan=\"8\">no agents</td></tr>");
  for (const v1::Agent& a : agents.agents()) {
    absl::StrAppend(&h, "<tr data-agent-id=\"", Esc(a.id()), "\"><td data-field=\"name\">",
                    Esc(a.info().name()), "</td><td>", Esc(a.info().hostname()),
                    "</td><td data-field=\"device_kind\">", Esc(a.info().device_kind()),
                    "</td><td data-field=\"engine\">", Esc(a.info().engine()), " ",
                    Esc(a.info().engine_version()), "</td><td data-field=\"state\">",
                    StateChip(v1::AgentState_Name(a.state())), "</td><td title=\"",
                    Esc(Time(a.last_heartbeat())), "\">", Age(ctx.now, a.last_heartbeat()),
                    " ago</td><td data-field=\"current_jobs\">",
                    Esc(absl::StrJoin(a.current_job_ids(), ", ")), "</td><td data-field=\"drained\">",
                    a.state() == v1::AGENT_DRAINED ? "yes" : "no", "</td></tr>");
  }
  absl::StrAppend(&h, "</tbody></table></section>");
  return h;
}

std::string CampaignsSection(const v1::ListCampaignsResponse& list, const PageContext& ctx) {
  std::string h =
      "<section><h2>Campaigns</h2><table id=\"campaigns\"><thead><tr><th>Campaign</th>"
      "<th>Team</th><th>Method</th><th>State</th><th>Jobs done</th><th>Job graph</th>"
      "<th>Progress</th><th>Created</th></tr></thead><tbody>";
  if (list.campaigns_size() == 0) {
    absl::StrAppend(&h, "<tr><td colspan=\"8\">no campaigns</td></tr>");
  }
  for (const v1::Campaign& c : list.campaigns()) {
    const double f = CampaignFraction(c);
    absl::StrAppend(&h, "<tr data-campaign-id=\"", Esc(c.id()), "\"><td><a href=\"",
                    CampaignHref(c.id()), "\">", Esc(c.name()), "</a> <small>", Esc(c.id()),
                    "</small>",
                    c.stale_reason().empty()
                        ? ""
                        : absl::StrCat(" <strong title=\"", Esc(c.stale_reason()),
                                       "\">stale</strong>"),
                    "</td><td>", Esc(c.team()), "</td><td>",
                    Esc(v1::Method_Name(c.contract().method())), "</td><td data-field=\"state\">",
                    StateChip(v1::CampaignState_Name(c.state())), "</td><td class=\"num\" data-field=\"jobs_done\">",
                    DoneJobs(c), "/", c.jobs_size(), "</td><td class=\"graph\">", GraphLine(c),
                    "</td><td><progress max=\"1\" value=\"", absl::StrFormat("%.4f", f),
                    "\"></progress> ", absl::StrFormat("%.0f%%", 100 * f), "</td><td>",
                    Age(ctx.now, c.created_at()), " ago</td></tr>");
  }
  absl::StrAppend(&h, "</tbody></table></section>");
  return h;
}

// Budgets the contract states relative to the parent, with the parent's figure measured in
// the target engine and what they resolved to (the budgets table shows the latter).
std::string RelativeBudgetsList(const v1::CampaignReport& r) {
  if (r.relative_budgets_size() == 0) return "";
  std::string h = "<ul id=\"relative_budgets\">";
  for (const v1::RelativeBudget& b : r.relative_budgets()) {
    const bool floor = b.resource().find("throughput") != std::string::npos;
    absl::StrAppend(&h, "<li data-resource=\"", Esc(b.resource()), "\">", Esc(b.resource()),
                    floor ? " &ge; " : " &le; ", Num(b.factor()), " &times; the parent's");
    if (b.resolved()) {
      absl::StrAppend(&h, " ", Num(b.parent()), " = <span data-field=\"budget\">",
                      Num(b.budget()), "</span> (measured in the target engine, cost table ",
                      Esc(b.cost_table_id()), ")");
    } else {
      absl::StrAppend(&h, " (resolved once the profile job has measured the parent)");
    }
    if (b.has_verify_budget()) {
      absl::StrAppend(&h, "; verified against the parent served alongside the student: ",
                      Num(b.verify_parent()), " = <span data-field=\"verify_budget\">",
                      Num(b.verify_budget()), "</span>");
    }
    absl::StrAppend(&h, "</li>");
  }
  return h + "</ul>";
}

std::string ReportSection(const v1::CampaignReport& r) {
  std::string h = "<section id=\"report\"><h2>Report</h2>";
  absl::StrAppend(&h,
                  "<h3>Budgets: predicted vs measured</h3><table id=\"budgets\"><thead><tr>"
                  "<th>Resource</th><th>Budget</th><th>Predicted</th><th>Measured</th>"
                  "<th>Met</th></tr></thead><tbody>");
  if (r.budgets_size() == 0) absl::StrAppend(&h, "<tr><td colspan=\"5\">no budgets</td></tr>");
  for (const v1::BudgetResult& b : r.budgets()) {
    absl::StrAppend(&h, "<tr data-resource=\"", Esc(b.resource()), "\"><td>", Esc(b.resource()),
                    "</td>", NumCell("budget", b.budget()), NumCell("predicted", b.predicted()),
                    b.has_measured() ? NumCell("measured", b.measured())
                                     : std::string("<td data-field=\"measured\">-</td>"),
                    "<td data-field=\"met\">",
                    b.has_measured() ? (b.met() ? "yes" : "<strong>no</strong>") : "not measured",
                    "</td></tr>");
  }
  absl::StrAppend(&h, "</tbody></table>", RelativeBudgetsList(r));
  absl::StrAppend(&h,
                  "<h3>Quality vs baseline</h3><table id=\"quality\"><thead><tr>"
                  "<th>Model</th><th>KD loss</th><th>Task accuracy</th><th>Parameters</th>"
                  "</tr></thead><tbody>");
  if (r.quality_size() == 0) absl::StrAppend(&h, "<tr><td colspan=\"4\">not measured yet</td></tr>");
  for (const v1::QualityResult& q : r.quality()) {
    absl::StrAppend(&h, "<tr data-model=\"", Esc(q.model()), "\"><td>", Esc(q.model()), "</td>",
                    NumCell("kd_loss", q.kd_loss()), NumCell("task_accuracy", q.task_accuracy()),
                    IntCell("parameters", q.parameters()), "</tr>");
  }
  absl::StrAppend(&h, "</tbody></table><p>Search tokens <span data-field=\"search_tokens\">",
                  r.search_tokens(), "</span>, recovery tokens <span data-field=\"recovery_tokens\">",
                  r.recovery_tokens(), "</span>.</p></section>");
  return h;
}

std::string CostTableSection(const v1::CostTable& t) {
  std::string h = absl::StrCat(
      "<section id=\"cost-table\"><h2>Per-layer cost table</h2><p>", Esc(t.device_kind()), ", ",
      Esc(t.engine()), " ", Esc(t.engine_version()), ", ", t.entries_size(),
      " entries, fixed cost ", Num(t.t0_ms()), " ms; held-out latency MAPE ",
      Num(100 * t.latency_mape()), "% over ", t.validated_architectures(),
      " architectures", t.stale() ? " <strong>(stale: measured with another engine version)</strong>" : "",
      ". <small>", Esc(t.id()), "</small></p>",
      // Hundreds of rows: folded by default (native HTML, no script needed to open it).
      "<details id=\"cost-details\"><summary>Show the ", t.entries_size(),
      " entries</summary><table id=\"cost-entries\"><thead><tr><th>Layer</th><th>Config</th><th>Phase</th>"
      "<th>Time (ms)</th><th>Memory (MiB)</th></tr></thead><tbody>");
  for (const v1::CostEntry& e : t.entries()) {
    absl::StrAppend(&h, "<tr><td>", Esc(e.layer_kind()), "</td><td>", Esc(e.config()),
                    "</td><td>", Esc(e.phase()), "</td>", NumCell("time_ms", e.time_ms()),
                    NumCell("memory_mib", e.memory_mib()), "</tr>");
  }
  absl::StrAppend(&h, "</tbody></table></details></section>");
  return h;
}

std::string CurvesSection(const std::vector<Curve>& curves) {
  std::string h = "<section id=\"curves\"><h2>Training curves</h2>";
  constexpr size_t kRows = 20;  // the newest steps; the chart has them all
  for (const Curve& c : curves) {
    std::set<std::string> keys;
    for (const CurvePoint& p : c.points) {
      for (const auto& [k, v] : p.metrics) keys.insert(k);
    }
    absl::StrAppend(&h, "<h3>", Esc(c.job_key), " (", c.points.size(),
                    " steps reported)</h3><table class=\"curve\" data-job-key=\"", Esc(c.job_key),
                    "\"><thead><tr><th>Step</th>");
    for (const std::string& k : keys) absl::StrAppend(&h, "<th>", Esc(k), "</th>");
    absl::StrAppend(&h, "</tr></thead><tbody>");
    const size_t from = c.points.size() > kRows ? c.points.size() - kRows : 0;
    for (size_t i = from; i < c.points.size(); ++i) {
      absl::StrAppend(&h, "<tr>", IntCell("step", c.points[i].step));
      for (const std::string& k : keys) {
        auto it = c.points[i].metrics.find(k);
        absl::StrAppend(&h, it == c.points[i].metrics.end() ? "<td>-</td>" : NumCell(k, it->second));
      }
      absl::StrAppend(&h, "</tr>");
    }
    absl::StrAppend(&h, "</tbody></table>");
  }
  if (curves.empty()) absl::StrAppend(&h, "<p>No job has reported per-step metrics yet.</p>");
  absl::StrAppend(&h, "</section>");
  return h;
}

}  // namespace

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<Curve> CurvesFromEvents(const v1::Campaign& campaign,
                                    const std::vector<v1::Event>& events) {
  std::map<std::string, const v1::Job*> jobs;
  for (const v1::Job& j : campaign.jobs()) jobs[j.id()] = &j;
  std::map<std::string, std::map<int64_t, std::map<std::string, double>>> by_job;
  for (const v1::Event& e : events) {
    if (e.type() != "job_progress" || e.progress().step() <= 0 ||
        e.progress().metrics().empty()) {
      continue;
    }
    auto& point = by_job[e.job_id()][e.progress().step()];
    point.clear();  // a resumed job re-reports a step: the later report wins
    for (const auto& [k, v] : e.progress().metrics()) point[k] = v;
  }
  std::vector<Curve> curves;
  for (const v1::Job& j : campaign.jobs()) {  // graph order
    auto it = by_job.find(j.id());
    if (it == by_job.end()) continue;
    Curve c;
    c.job_key = j.key().empty() ? j.kind() : j.key();
    c.job_kind = j.kind();
    for (auto& [step, metrics] : it->second) c.points.push_back({step, std::move(metrics)});
    curves.push_back(std::move(c));
  }
  return curves;
}

std::string OverviewLive(const OverviewData& data, const PageContext& ctx) {
  return absl::StrCat(QueueSection(data.queue, ctx), AgentsSection(data.agents, ctx),
                      CampaignsSection(data.campaigns, ctx));
}

std::string CampaignLive(const CampaignPageData& data, const PageContext& ctx) {
  const v1::Campaign& c = data.campaign;
  std::string h = absl::StrCat(
      "<section><h2>Campaign <span data-field=\"name\">", Esc(c.name()),
      "</span></h2><dl id=\"campaign-summary\"><dt>Id</dt><dd data-field=\"id\">", Esc(c.id()),
      "</dd><dt>Team</dt><dd data-field=\"team\">", Esc(c.team()),
      "</dd><dt>Method</dt><dd data-field=\"method\">", Esc(v1::Method_Name(c.contract().method())),
      "</dd><dt>State</dt><dd data-field=\"state\">", StateChip(v1::CampaignState_Name(c.state())),
      "</dd><dt>Jobs done</dt><dd data-field=\"jobs_done\">", DoneJobs(c), "/", c.jobs_size(),
      "</dd><dt>Created</dt><dd>", Esc(Time(c.created_at())), " (", Age(ctx.now, c.created_at()),
      " ago)</dd><dt>Target fingerprint</dt><dd><small>", Esc(c.fingerprint()), "</small></dd>");
  if (!c.error().empty()) {
    absl::StrAppend(&h, "<dt>Error</dt><dd data-field=\"error\">", Esc(c.error()), "</dd>");
  }
  if (!c.stale_reason().empty()) {
    absl::StrAppend(&h, "<dt>Stale</dt><dd>", Esc(c.stale_reason()), "</dd>");
  }
  absl::StrAppend(&h,
                  "</dl></section><section><h2>Job graph</h2><table id=\"jobs\"><thead><tr>"
                  "<th>Job</th><th>Kind</th><th>State</th><th>After</th><th>Attempt</th>"
                  "<th>Progress</th><th>Where</th><th>Why waiting / error</th></tr></thead><tbody>");
  for (const v1::Job& j : c.jobs()) {
    absl::StrAppend(&h, "<tr data-job-key=\"", Esc(j.key()), "\" data-job-id=\"", Esc(j.id()),
                    "\"><td>", Esc(j.key()), " <small>", Esc(j.id()), "</small></td><td>",
                    Esc(j.kind()), "</td><td data-field=\"state\">",
                    StateChip(v1::JobState_Name(j.state())), "</td><td>",
                    Esc(absl::StrJoin(j.depends_on(), ", ")), "</td>",
                    IntCell("attempt", j.attempt()), ProgressCell(j), "<td>", Esc(Where(j)),
                    "</td><td data-field=\"why\">", Esc(Why(j)), "</td></tr>");
  }
  absl::StrAppend(&h, "</tbody></table></section>");
  if (data.report.has_value()) absl::StrAppend(&h, ReportSection(*data.report));
  if (data.cost_table.has_value()) {
    absl::StrAppend(&h, CostTableSection(*data.cost_table));
  } else {
    absl::StrAppend(&h,
                    "<section id=\"cost-table\"><h2>Per-layer cost table</h2><p>No cost table "
                    "for this target yet.</p></section>");
  }
  absl::StrAppend(&h, CurvesSection(data.curves));
  return h;
}

std::string CampaignCharts(const v1::Campaign& campaign) {
  return absl::StrCat(
      "<section id=\"charts\" hidden data-src=\"/api/campaigns/", Esc(campaign.id()),
      "/charts\"><h2>Charts</h2>"
      "<figure><figcaption>Per-layer cost: prefill and decode time (ms) per layer "
      "config</figcaption><canvas id=\"chart-costs\" width=\"960\" height=\"320\"></canvas>"
      "</figure><figure><figcaption>Search loss by step</figcaption>"
      "<canvas id=\"chart-loss\" width=\"960\" height=\"280\"></canvas></figure>"
      "<figure><figcaption>Search cost by step: predicted vs budget</figcaption>"
      "<canvas id=\"chart-cost-curve\" width=\"960\" height=\"280\"></canvas></figure>"
      "</section>");
}

std::string Page(absl::string_view title, absl::string_view live_html,
                 absl::string_view after_live_html, const PageContext& ctx) {
  std::string h = absl::StrCat(
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>",
      Esc(title),
      " - tailor</title><link rel=\"stylesheet\" href=\"/static/dashboard.css\"></head>"
      "<body data-refresh-ms=\"",
      ctx.refresh_ms, "\"><header><nav><a href=\"/\">tailor</a> <a href=\"/\">Queue, agents &amp; campaigns</a>");
  if (ctx.auth_enabled) {
    absl::StrAppend(&h, " <span class=\"who\">", Esc(ctx.who),
                    "</span> <form class=\"logout\" method=\"post\" action=\"/logout\">"
                    "<button type=\"submit\">Log out</button></form>");
  }
  absl::StrAppend(&h, "</nav></header><main><div id=\"live\">", live_html, "</div>",
                  after_live_html,
                  "</main><footer>Tables refresh every ", ctx.refresh_ms / 1000.0,
                  " s with JavaScript; reload the page without it.</footer>"
                  "<script src=\"/static/dashboard.js\" defer></script></body></html>");
  return h;
}

std::string LoginPage(absl::string_view next, absl::string_view error) {
  return absl::StrCat(
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Log in - tailor"
      "</title><link rel=\"stylesheet\" href=\"/static/dashboard.css\"></head><body><main>"
      "<h1>tailor dashboard</h1>",
      error.empty() ? "" : absl::StrCat("<p class=\"error\">", Esc(error), "</p>"),
      "<form id=\"login\" method=\"post\" action=\"/login\"><label>API token "
      "<input type=\"password\" name=\"token\" autocomplete=\"current-password\" required>"
      "</label><input type=\"hidden\" name=\"next\" value=\"",
      Esc(next),
      "\"><button type=\"submit\">Log in</button></form><p>Use a submitter or admin token "
      "(<code>tailor token create</code>); it is kept in a cookie for this browser session."
      "</p></main></body></html>");
}

std::string ErrorPage(int code, absl::string_view message, const PageContext& ctx) {
  return Page(absl::StrCat(code), "",
              absl::StrCat("<section><h2>", code, "</h2><p class=\"error\">", Esc(message),
                           "</p><p><a href=\"/\">Back to the overview</a></p></section>"),
              ctx);
}

}  // namespace tailor::coordinator::http
