#include "coordinator/http/http_server.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "coordinator/access_rules.h"
#include "common/proto_json.h"
#include "common/status_macros.h"
#include "coordinator/http/pages.h"
#include "google/protobuf/util/json_util.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace tailor::coordinator::http {
namespace {

constexpr char kCookie[] = "tailor_token";
constexpr char kHtml[] = "text/html; charset=utf-8";
constexpr char kJson[] = "application/json";
// Campaign ids are generated ("c-..."); the pattern keeps path segments from reaching the
// core unchecked.
constexpr char kIdPattern[] = "([A-Za-z0-9._:-]{1,128})";

// The same JSON as `tailor ... --json` prints, so scripts can use either.
std::string ToJson(const google::protobuf::Message& message) {
  return ProtoJson(message, /*add_whitespace=*/false);
}

int HttpCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kInvalidArgument: return 400;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

std::string PercentEncode(absl::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(absl::string_view s, bool plus_is_space) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

// application/x-www-form-urlencoded (the login form).
std::map<std::string, std::string> ParseForm(absl::string_view body) {
  std::map<std::string, std::string> form;
  for (absl::string_view pair : absl::StrSplit(body, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    form[PercentDecode(kv.first, true)] = PercentDecode(kv.second, true);
  }
  return form;
}

// The bearer token of a request: the Authorization header first, then the login cookie.
std::string TokenOf(const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  if (absl::StartsWithIgnoreCase(auth, "Bearer ")) {
    return std::string(absl::StripAsciiWhitespace(absl::string_view(auth).substr(7)));
  }
  const std::string cookies = req.get_header_value("Cookie");
  for (absl::string_view c : absl::StrSplit(cookies, ';', absl::SkipEmpty())) {
    c = absl::StripAsciiWhitespace(c);
    if (absl::ConsumePrefix(&c, absl::StrCat(kCookie, "="))) return PercentDecode(c, false);
  }
  return "";
}

// Where the login form may send the browser back to: a path on this server only.
std::string SafeNext(absl::string_view next) {
  if (next.empty() || next[0] != '/' || absl::StartsWith(next, "//") ||
      next.find_first_of("\\\r\n") != absl::string_view::npos) {
    return "/";
  }
  return std::string(next);
}

std::string Describe(const Principal& p, bool auth_enabled) {
  if (!auth_enabled) return "";
  if (p.is_admin()) return absl::StrCat("admin (", p.token_id, ")");
  return absl::StrCat("team ", p.team, " (submitter ", p.token_id, ")");
}

void Reply(httplib::Response& res, int code, const std::string& body, const char* type) {
  res.status = code;
  res.set_content(body, type);
}

void ReplyJsonError(httplib::Response& res, const absl::Status& s) {
  nlohmann::json j = {{"error", std::string(s.message())},
                      {"code", absl::StatusCodeToString(s.code())}};
  Reply(res, HttpCode(s), j.dump(), kJson);
}

// The cost table and learning curves of a campaign page, for its charts.
nlohmann::json ChartsJson(const CampaignPageData& d) {
  nlohmann::json j;
  j["cost_table"] = nullptr;
  if (d.cost_table.has_value()) {
    nlohmann::json entries = nlohmann::json::array();
    for (const v1::CostEntry& e : d.cost_table->entries()) {
      entries.push_back({{"layer_kind", e.layer_kind()},
                         {"config", e.config()},
                         {"phase", e.phase()},
                         {"time_ms", e.time_ms()},
                         {"memory_mib", e.memory_mib()}});
    }
    j["cost_table"] = {{"id", d.cost_table->id()},
                       {"device_kind", d.cost_table->device_kind()},
                       {"t0_ms", d.cost_table->t0_ms()},
                       {"entries", std::move(entries)}};
  }
  j["curves"] = nlohmann::json::array();
  for (const Curve& curve : d.curves) {
    nlohmann::json points = nlohmann::json::array();
    for (const CurvePoint& pt : curve.points) {
      points.push_back({{"step", pt.step}, {"metrics", pt.metrics}});
    }
    j["curves"].push_back(
        {{"job_key", curve.job_key}, {"job_kind", curve.job_kind}, {"points", points}});
  }
  return j;
}

// The bundle under /static/ is a mount point, not a route; its rule has this key.
constexpr char kStaticKey[] = "GET /static/{file}";

}  // namespace

HttpServer::HttpServer(Coordinator* core, Authenticator* auth, CoordinatorMetrics* metrics,
                       HttpServerOptions options)
    : core_(core), auth_(auth), metrics_(metrics), options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

const std::vector<HttpServer::Route>& HttpServer::Routes() {
  static const std::vector<Route> routes = {
      {"GET /healthz", &HttpServer::Healthz, false},
      {"GET /readyz", &HttpServer::Readyz, false},
      {"GET /metrics", &HttpServer::Metrics, false},
      {"GET /login", &HttpServer::LoginForm, true},
      {"POST /login", &HttpServer::Login, true},
      {"POST /logout", &HttpServer::Logout, true},
      {"GET /", &HttpServer::OverviewPage, true},
      {"GET /campaigns/{id}", &HttpServer::CampaignPage, true},
      {"GET /api/queue", &HttpServer::ApiQueue, false},
      {"GET /api/agents", &HttpServer::ApiAgents, false},
      {"GET /api/campaigns", &HttpServer::ApiCampaigns, false},
      {"GET /api/campaigns/{id}", &HttpServer::ApiCampaign, false},
      {"GET /api/campaigns/{id}/report", &HttpServer::ApiReport, false},
      {"GET /api/campaigns/{id}/charts", &HttpServer::ApiCharts, false},
  };
  return routes;
}

std::vector<std::string> HttpServer::RouteKeys() {
  std::vector<std::string> keys = {kStaticKey};
  for (const Route& route : Routes()) keys.emplace_back(route.key);
  return keys;
}

std::optional<Principal> HttpServer::Authorize(const httplib::Request& req, httplib::Response& res,
                                               absl::string_view call, bool html) {
  absl::StatusOr<Principal> p = auth_->Authenticate(TokenOf(req));
  if (!p.ok()) {
    const absl::Status s = absl::UnauthenticatedError(
        auth_->enabled() ? "a valid API token is required (log in, or send Authorization: "
                           "Bearer TOKEN)"
                         : std::string(p.status().message()));
    if (html) {
      Reply(res, 401, LoginPage(req.path, TokenOf(req).empty() ? "" : "unknown or revoked token"),
            kHtml);
    } else {
      ReplyJsonError(res, s);
    }
    return std::nullopt;
  }
  if (absl::Status s = CheckCall(call, *p); !s.ok()) {
    if (html) {
      PageContext ctx;
      ctx.now = core_->clock()->Now();
      Reply(res, HttpCode(s), ErrorPage(HttpCode(s), s.message(), ctx), kHtml);
    } else {
      ReplyJsonError(res, s);
    }
    return std::nullopt;
  }
  return *p;
}

absl::StatusOr<int> HttpServer::Start() {
  if (options_.tls_cert.empty()) {
    server_ = std::make_unique<httplib::Server>();
  } else {
    server_ =
        std::make_unique<httplib::SSLServer>(options_.tls_cert.c_str(), options_.tls_key.c_str());
    if (!server_->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("HTTPS: cannot load certificate '",
                                                     options_.tls_cert, "' and key '",
                                                     options_.tls_key, "'"));
    }
  }
  Register();
  int port = options_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(options_.host);
    if (port <= 0) port = -1;
  } else if (!server_->bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options_.host, ":",
                                               options_.port, " (address in use or invalid)"));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() before the loop runs would be lost; wait for it to start.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return port;
}

void HttpServer::Stop() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpServer::Register() {
  SetDefaults();
  for (const Route& route : Routes()) Add(route);
}

// Headers, limits and the static bundle: what every answer of this server shares.
void HttpServer::SetDefaults() {
  httplib::Server& s = *server_;
  s.set_default_headers({
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"X-Frame-Options", "DENY"},
      // Scripts and styles from this server only: the pages never inline any, so an escaped
      // campaign name can never become code even if escaping had a gap.
      {"Content-Security-Policy",
       "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "frame-ancestors 'none'; form-action 'self'"},
      {"Cache-Control", "no-store"},
  });
  s.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("http {} {}: {}", req.method, req.path, what);
        Reply(res, 500, "internal error\n", "text/plain");
      });
  s.set_payload_max_length(64 * 1024);  // the login form is the only body we read

  if (!options_.web_dir.empty() && std::filesystem::is_directory(options_.web_dir)) {
    s.set_mount_point("/static", options_.web_dir, {{"Cache-Control", "no-cache"}});
  } else {
    spdlog::warn("dashboard: no web assets in '{}' (pages are plain tables without charts)",
                 options_.web_dir);
  }
}

// Serves `route` behind its access rule: rows open to anonymous callers are served without
// a token, every other request is authorized first. A route without a row is not served.
void HttpServer::Add(const Route& route) {
  const AccessRule* rule = FindAccessRule(route.key);
  if (rule == nullptr) {
    spdlog::error("http route '{}' has no access rule; not serving it", route.key);
    return;
  }
  const std::pair<absl::string_view, absl::string_view> method_path =
      absl::StrSplit(route.key, absl::MaxSplits(' ', 1));
  const std::string pattern = absl::StrReplaceAll(method_path.second, {{"{id}", kIdPattern}});
  httplib::Server::Handler handler;
  if (Admits(*rule, kCallerAnonymous)) {
    handler = [this, route](const httplib::Request& req, httplib::Response& res) {
      (this->*route.handler)(req, res, nullptr);
    };
  } else {
    handler = [this, route](const httplib::Request& req, httplib::Response& res) {
      std::optional<Principal> p = Authorize(req, res, route.key, route.html);
      if (p) (this->*route.handler)(req, res, &*p);
    };
  }
  if (method_path.first == "POST") {
    server_->Post(pattern, std::move(handler));
  } else {
    server_->Get(pattern, std::move(handler));
  }
}

// --- no token ---

void HttpServer::Healthz(const httplib::Request&, httplib::Response& res, const Principal*) {
  Reply(res, 200, "ok\n", "text/plain");
}

void HttpServer::Readyz(const httplib::Request&, httplib::Response& res, const Principal*) {
  const absl::Status st = options_.ready ? options_.ready() : absl::OkStatus();
  if (st.ok()) {
    Reply(res, 200, "ready\n", "text/plain");
  } else {
    Reply(res, 503, absl::StrCat("not ready: ", st.message(), "\n"), "text/plain");
  }
}

void HttpServer::Metrics(const httplib::Request&, httplib::Response& res, const Principal*) {
  if (metrics_ == nullptr) return Reply(res, 404, "metrics are off\n", "text/plain");
  MetricsSnapshot snap;
  v1::ListQueueRequest qreq;
  qreq.set_limit(1);  // the summary covers every job; entries are not needed
  absl::StatusOr<v1::ListQueueResponse> q = core_->ListQueue(qreq);
  if (q.ok()) snap.queue = *std::move(q);
  v1::ListAgentsRequest areq;
  areq.set_include_offline(true);
  absl::StatusOr<v1::ListAgentsResponse> a = core_->ListAgents(areq);
  if (a.ok()) snap.agents = *std::move(a);
  if (options_.slurm_calls) snap.slurm = options_.slurm_calls();
  Reply(res, 200, metrics_->Render(snap), "text/plain; version=0.0.4; charset=utf-8");
}

// The login form: a plain form POST, so it works without JavaScript.
void HttpServer::LoginForm(const httplib::Request& req, httplib::Response& res, const Principal*) {
  if (!auth_->enabled()) return res.set_redirect("/", 303);
  Reply(res, 200, LoginPage(SafeNext(req.get_param_value("next")), ""), kHtml);
}

void HttpServer::Login(const httplib::Request& req, httplib::Response& res, const Principal*) {
  std::map<std::string, std::string> form = ParseForm(req.body);
  const std::string next = SafeNext(form["next"]);
  const std::string token(absl::StripAsciiWhitespace(form["token"]));
  absl::StatusOr<Principal> p = auth_->Authenticate(token);
  if (!p.ok() || token.empty()) {
    return Reply(res, 401, LoginPage(next, "unknown or revoked token"), kHtml);
  }
  // A cookie the overview would refuse is no login.
  if (!CheckCall("GET /", *p).ok()) {
    return Reply(
        res, 403,
        LoginPage(next, absl::StrCat(RoleName(p->role), " tokens cannot use the dashboard")),
        kHtml);
  }
  // HttpOnly: page scripts never see the token. SameSite=Strict: other sites cannot make
  // the browser send it (the dashboard only reads, but the token also works on gRPC).
  res.set_header("Set-Cookie", absl::StrCat(kCookie, "=", PercentEncode(token),
                                            "; Path=/; HttpOnly; SameSite=Strict",
                                            options_.tls_cert.empty() ? "" : "; Secure"));
  res.set_redirect(next, 303);
}

void HttpServer::Logout(const httplib::Request&, httplib::Response& res, const Principal*) {
  res.set_header("Set-Cookie",
                 absl::StrCat(kCookie, "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"));
  res.set_redirect("/login", 303);
}

// --- data ---

PageContext HttpServer::ContextFor(const Principal& p) const {
  PageContext ctx;
  ctx.now = core_->clock()->Now();
  ctx.auth_enabled = auth_->enabled();
  ctx.who = Describe(p, ctx.auth_enabled);
  ctx.refresh_ms = options_.refresh_ms;
  return ctx;
}

absl::StatusOr<v1::ListQueueResponse> HttpServer::QueueFor(const Principal& p) {
  v1::ListQueueRequest req;
  req.set_limit(200);
  absl::StatusOr<v1::ListQueueResponse> q = core_->ListQueue(req);
  if (!q.ok()) return q;
  return ScopeQueue(p, *std::move(q));
}

absl::StatusOr<v1::ListAgentsResponse> HttpServer::AgentsFor(const Principal& p,
                                                             const v1::ListQueueResponse& queue) {
  v1::ListAgentsRequest req;
  req.set_include_offline(true);
  absl::StatusOr<v1::ListAgentsResponse> a = core_->ListAgents(req);
  if (a.ok()) ScopeAgents(p, queue, &*a);
  return a;
}

absl::StatusOr<v1::ListCampaignsResponse> HttpServer::CampaignsFor(const Principal& p) {
  v1::ListCampaignsRequest req;
  req.set_page_size(50);
  std::optional<v1::ListCampaignsRequest> scoped = ScopeCampaignListing(p, std::move(req));
  if (!scoped.has_value()) return v1::ListCampaignsResponse();
  absl::StatusOr<v1::ListCampaignsResponse> r = core_->ListCampaigns(*scoped);
  if (r.ok()) {
    for (v1::Campaign& c : *r->mutable_campaigns()) HideLeaseIds(p, &c);
  }
  return r;
}

absl::StatusOr<v1::Campaign> HttpServer::CampaignFor(const Principal& p, const std::string& id) {
  absl::StatusOr<v1::Campaign> c = core_->GetCampaign(id);
  // Another team's campaign looks exactly like a missing one.
  if (absl::IsNotFound(c.status())) return HiddenCampaign(id);
  if (!c.ok()) return c;
  TAILOR_RETURN_IF_ERROR(CheckCampaignVisible(p, id, c->team()));
  HideLeaseIds(p, &*c);
  return c;
}

CampaignPageData HttpServer::PageDataFor(v1::Campaign campaign) {
  CampaignPageData d;
  absl::StatusOr<v1::CampaignReport> report = core_->GetReport(campaign.id());
  if (report.ok()) d.report = *std::move(report);
  if (!campaign.fingerprint().empty()) {
    v1::GetCostTableRequest req;
    req.set_fingerprint(campaign.fingerprint());
    absl::StatusOr<v1::CostTable> t = core_->GetCostTable(req);
    if (t.ok()) d.cost_table = *std::move(t);
  }
  std::vector<v1::Event> events;
  int64_t after = 0;
  bool final = false;
  // Bounded: a page never reads more than 50k events (a search reports a few per step).
  for (int page = 0; page < 50; ++page) {
    absl::StatusOr<std::vector<v1::Event>> batch =
        core_->ReadEvents(campaign.id(), after, 1000, &final);
    if (!batch.ok() || batch->empty()) break;
    after = batch->back().seq();
    for (auto& e : *batch) events.push_back(std::move(e));
  }
  d.curves = CurvesFromEvents(campaign, events);
  d.campaign = std::move(campaign);
  return d;
}

// --- pages ---

void HttpServer::OverviewPage(const httplib::Request& req, httplib::Response& res,
                              const Principal* caller) {
  const PageContext ctx = ContextFor(*caller);
  OverviewData d;
  absl::StatusOr<v1::ListQueueResponse> q = QueueFor(*caller);
  absl::StatusOr<v1::ListAgentsResponse> a =
      q.ok() ? AgentsFor(*caller, *q) : absl::StatusOr<v1::ListAgentsResponse>(q.status());
  absl::StatusOr<v1::ListCampaignsResponse> c = CampaignsFor(*caller);
  for (const absl::Status& st : {q.status(), a.status(), c.status()}) {
    if (!st.ok())
      return Reply(res, HttpCode(st), ErrorPage(HttpCode(st), st.message(), ctx), kHtml);
  }
  d.queue = *std::move(q);
  d.agents = *std::move(a);
  d.campaigns = *std::move(c);
  const std::string live = OverviewLive(d, ctx);
  Reply(res, 200, req.has_param("partial") ? live : Page("Overview", live, "", ctx), kHtml);
}

void HttpServer::CampaignPage(const httplib::Request& req, httplib::Response& res,
                              const Principal* caller) {
  const PageContext ctx = ContextFor(*caller);
  absl::StatusOr<v1::Campaign> c = CampaignFor(*caller, req.matches[1]);
  if (!c.ok()) {
    return Reply(res, HttpCode(c.status()),
                 ErrorPage(HttpCode(c.status()), c.status().message(), ctx), kHtml);
  }
  const std::string name = c->name();
  const std::string charts = CampaignCharts(*c);
  const std::string live = CampaignLive(PageDataFor(*std::move(c)), ctx);
  Reply(res, 200, req.has_param("partial") ? live : Page(name, live, charts, ctx), kHtml);
}

// --- JSON API ---

void HttpServer::ApiQueue(const httplib::Request&, httplib::Response& res,
                          const Principal* caller) {
  absl::StatusOr<v1::ListQueueResponse> q = QueueFor(*caller);
  if (!q.ok()) return ReplyJsonError(res, q.status());
  Reply(res, 200, ToJson(*q), kJson);
}

void HttpServer::ApiAgents(const httplib::Request&, httplib::Response& res,
                           const Principal* caller) {
  absl::StatusOr<v1::ListQueueResponse> q = QueueFor(*caller);
  if (!q.ok()) return ReplyJsonError(res, q.status());
  absl::StatusOr<v1::ListAgentsResponse> a = AgentsFor(*caller, *q);
  if (!a.ok()) return ReplyJsonError(res, a.status());
  Reply(res, 200, ToJson(*a), kJson);
}

void HttpServer::ApiCampaigns(const httplib::Request&, httplib::Response& res,
                              const Principal* caller) {
  absl::StatusOr<v1::ListCampaignsResponse> c = CampaignsFor(*caller);
  if (!c.ok()) return ReplyJsonError(res, c.status());
  Reply(res, 200, ToJson(*c), kJson);
}

void HttpServer::ApiCampaign(const httplib::Request& req, httplib::Response& res,
                             const Principal* caller) {
  absl::StatusOr<v1::Campaign> c = CampaignFor(*caller, req.matches[1]);
  if (!c.ok()) return ReplyJsonError(res, c.status());
  Reply(res, 200, ToJson(*c), kJson);
}

void HttpServer::ApiReport(const httplib::Request& req, httplib::Response& res,
                           const Principal* caller) {
  absl::StatusOr<v1::Campaign> c = CampaignFor(*caller, req.matches[1]);
  if (!c.ok()) return ReplyJsonError(res, c.status());
  absl::StatusOr<v1::CampaignReport> r = core_->GetReport(c->id());
  if (!r.ok()) return ReplyJsonError(res, r.status());
  Reply(res, 200, ToJson(*r), kJson);
}

void HttpServer::ApiCharts(const httplib::Request& req, httplib::Response& res,
                           const Principal* caller) {
  absl::StatusOr<v1::Campaign> c = CampaignFor(*caller, req.matches[1]);
  if (!c.ok()) return ReplyJsonError(res, c.status());
  Reply(res, 200, ChartsJson(PageDataFor(*std::move(c))).dump(), kJson);
}

}  // namespace tailor::coordinator::http
