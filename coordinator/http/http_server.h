#ifndef TAILOR_COORDINATOR_HTTP_HTTP_SERVER_H_
#define TAILOR_COORDINATOR_HTTP_HTTP_SERVER_H_

// The coordinator's one HTTP port: the dashboard (server-rendered pages, a JSON API under
// /api/ and the bundled script and styles under /static/), /metrics, /healthz and /readyz.
//
// Access: /metrics, /healthz, /readyz, /login and /static/ need no token (scrapers and load
// balancers carry none; the static files are the public bundle). Everything else asks the
// Authenticator, with the token from an "Authorization: Bearer" header or the cookie that the
// login form sets: no or a bad token is 401 (pages answer with the login form), an agent token
// is 403, and a submitter sees only its team's campaigns (another team's campaign is 404, as
// if it did not exist).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tailor::coordinator::http {

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

 private:
  // The caller of a request, or nullopt after answering 401/403 (pages: the login form).
  std::optional<Principal> Authorize(const httplib::Request& req, httplib::Response& res,
                                     bool html);
  void Register();

  Coordinator* const core_;
  Authenticator* const auth_;
  CoordinatorMetrics* const metrics_;
  const HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace tailor::coordinator::http

#endif  // TAILOR_COORDINATOR_HTTP_HTTP_SERVER_H_
