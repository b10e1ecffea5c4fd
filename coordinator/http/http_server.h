#ifndef TAILOR_COORDINATOR_HTTP_HTTP_SERVER_H_
#define TAILOR_COORDINATOR_HTTP_HTTP_SERVER_H_

// The coordinator's one HTTP port: the dashboard (server-rendered pages, a JSON API under
// /api/ and the bundled script and styles under /static/), /metrics, /healthz and /readyz.
//
// Access: coordinator/access_rules.h has a row for every route, the same table the gRPC
// services ask. /metrics, /healthz, /readyz, /login and /static/ need no token (scrapers and
// load balancers carry none; the static files are the public bundle). Everything else asks the
// Authenticator, with the token from an "Authorization: Bearer" header or the cookie that the
// login form sets: no or a bad token is 401 (pages answer with the login form), a token whose
// role the row does not admit (agents) is 403, and a submitter sees only its team's campaigns
// (another team's campaign is 404, as if it did not exist).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tailor::coordinator::http {

struct PageContext;       // pages.h
struct CampaignPageData;  // pages.h

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 picks a free port (tests)
  // The bundled dashboard.js and dashboard.css (served under /static/); when missing, pages
  // still work as plain tables.
  std::string web_dir;
  int refresh_ms = 2000;
  // HTTPS with these PEM files (the gRPC port's certificate) when set.
  std::string tls_cert;
  std::string tls_key;
  // /readyz: OK when the coordinator serves; the server's shutdown makes it fail first.
  std::function<absl::Status()> ready;
  // Calls made to the Slurm controller (/metrics); unset or nullopt without Slurm.
  std::function<std::optional<MetricsSnapshot::SlurmCalls>()> slurm_calls;
};

class HttpServer {
 public:
  // `core` and `auth` must outlive the server; `metrics` may be null (then /metrics is 404).
  HttpServer(Coordinator* core, Authenticator* auth, CoordinatorMetrics* metrics,
             HttpServerOptions options);
  ~HttpServer();

  // Binds and starts serving on a thread; returns the bound port.
  absl::StatusOr<int> Start();
  void Stop();

  // The access-rule key ("GET /api/queue", see coordinator/access_rules.h) of every route
  // this server serves, so that a test can check that each has exactly one row.
  static std::vector<std::string> RouteKeys();

 private:
  // A route's handler: `caller` is null on routes the access rules open to anonymous callers.
  using Handler = void (HttpServer::*)(const httplib::Request& req, httplib::Response& res,
                                       const Principal* caller);
  struct Route {
    const char* key;  // the access rule's key; its path, with {id} for a campaign id
    Handler handler;
    bool html;  // how to refuse: the login form or an error page, else JSON
  };
  static const std::vector<Route>& Routes();

  // The caller of a request, once the access rule for `call` admits it; nullopt after
  // answering 401 (pages: the login form) or 403.
  std::optional<Principal> Authorize(const httplib::Request& req, httplib::Response& res,
                                     absl::string_view call, bool html);
  void Register();
  void SetDefaults();
  void Add(const Route& route);

  // --- no token: probes, scrapers, the login form ---
  void Healthz(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void Readyz(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void Metrics(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void LoginForm(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void Login(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void Logout(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  // --- pages ---
  void OverviewPage(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void CampaignPage(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  // --- the JSON API: what the pages show, for the script and for other tools ---
  void ApiQueue(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void ApiAgents(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void ApiCampaigns(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void ApiCampaign(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void ApiReport(const httplib::Request& req, httplib::Response& res, const Principal* caller);
  void ApiCharts(const httplib::Request& req, httplib::Response& res, const Principal* caller);

  // --- data, shared by the pages and the JSON API, scoped to what `p` may see ---
  PageContext ContextFor(const Principal& p) const;
  absl::StatusOr<v1::ListQueueResponse> QueueFor(const Principal& p);
  absl::StatusOr<v1::ListAgentsResponse> AgentsFor(const Principal& p,
                                                   const v1::ListQueueResponse& queue);
  absl::StatusOr<v1::ListCampaignsResponse> CampaignsFor(const Principal& p);
  absl::StatusOr<v1::Campaign> CampaignFor(const Principal& p, const std::string& id);
  CampaignPageData PageDataFor(v1::Campaign campaign);

  Coordinator* const core_;
  Authenticator* const auth_;
  CoordinatorMetrics* const metrics_;
  const HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace tailor::coordinator::http

#endif  // TAILOR_COORDINATOR_HTTP_HTTP_SERVER_H_
