// The HTTP port with a fake Authenticator: who may see what (401 without a token, 403 for
// agents, 404 for another team's campaign), the login cookie, escaping of user strings, the
// unauthenticated /metrics, /healthz and /readyz; and a whole CoordinatorServer whose gRPC
// calls show up in /metrics.
#include "coordinator/http/http_server.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/clock.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "coordinator/access_rules.h"
#include "coordinator/http/pages.h"
#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tailor/v1/admin.grpc.pb.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator::http {
namespace {

using ::tailor::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;

class FakeAuthenticator : public Authenticator {
 public:
  absl::StatusOr<Principal> Authenticate(absl::string_view token) override {
    if (token == "admin-secret") return Principal{"tok-admin", "", Role::kAdmin};
    if (token == "ml-secret") return Principal{"tok-ml", "ml", Role::kSubmitter};
    if (token == "cv-secret") return Principal{"tok-cv", "cv", Role::kSubmitter};
    if (token == "agent-secret") return Principal{"tok-agent", "", Role::kAgent};
    return absl::UnauthenticatedError("unknown token");
  }
  bool enabled() const override { return true; }
};

v1::DeploymentContract Probe(const std::string& name, const std::string& team,
                             const std::string& device_kind = "cpu") {
  v1::DeploymentContract c;
  c.set_name(name);
  c.set_team(team);
  c.set_method(v1::PROBE);
  c.mutable_target()->set_device_kind(device_kind);
  return c;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("http-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = storage::CoordinatorStore::Open((dir_ / "tailor.db").string());
    ASSERT_THAT(store, IsOk());
    store_ = *std::move(store);
    auto blobs = storage::BlobStore::Open((dir_ / "blobs").string());
    ASSERT_THAT(blobs, IsOk());
    blobs_ = *std::move(blobs);
    core_ = std::make_unique<Coordinator>(store_.get(), blobs_.get(), &clock_,
                                          CoordinatorOptions());
    ASSERT_THAT(core_->Recover(), IsOk());
    core_->SetObserver(&metrics_);
    auto ml = core_->Submit(Probe("ml-probe", "ml"), "r-ml");
    ASSERT_THAT(ml, IsOk());
    ml_id_ = ml->first.id();
    auto cv = core_->Submit(Probe("cv-probe", "cv", "gpu"), "r-cv");
    ASSERT_THAT(cv, IsOk());
    cv_id_ = cv->first.id();

    HttpServerOptions options;
    options.port = 0;
    std::filesystem::create_directories(dir_ / "web");
    std::ofstream(dir_ / "web" / "dashboard.js") << "// the bundle\n";
    options.web_dir = (dir_ / "web").string();
    options.ready = [this] { return ready_ ? absl::OkStatus() : absl::UnavailableError("down"); };
    server_ = std::make_unique<HttpServer>(core_.get(), &auth_, &metrics_, options);
    auto port = server_->Start();
    ASSERT_THAT(port, IsOk());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
  }
  void TearDown() override {
    server_.reset();
    core_.reset();
    std::filesystem::remove_all(dir_);
  }

  httplib::Result Get(const std::string& path, const std::string& token = "") {
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    return client_->Get(path, headers);
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  FakeAuthenticator auth_;
  CoordinatorMetrics metrics_;
  std::unique_ptr<storage::CoordinatorStore> store_;
  std::unique_ptr<storage::BlobStore> blobs_;
  std::unique_ptr<Coordinator> core_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
  std::string ml_id_, cv_id_;
  bool ready_ = true;
};

TEST_F(HttpServerTest, NoTokenIs401AndPagesAnswerWithTheLoginForm) {
  auto api = Get("/api/queue");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 401);
  EXPECT_THAT(api->body, HasSubstr("UNAUTHENTICATED"));
  auto page = Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 401);
  EXPECT_THAT(page->body, HasSubstr("<form id=\"login\" method=\"post\" action=\"/login\">"));
  auto bad = Get("/api/campaigns", "wrong");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 401);
}

TEST_F(HttpServerTest, AgentTokensAre403) {
  for (const char* path : {"/", "/api/queue", "/api/campaigns"}) {
    auto r = Get(path, "agent-secret");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << path;
  }
}

TEST_F(HttpServerTest, SubmittersSeeOnlyTheirTeam) {
  auto other = Get("/api/campaigns/" + cv_id_, "ml-secret");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  auto other_page = Get("/campaigns/" + cv_id_, "ml-secret");
  ASSERT_TRUE(other_page);
  EXPECT_EQ(other_page->status, 404);
  auto missing = Get("/api/campaigns/c-does-not-exist", "ml-secret");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  auto own = Get("/api/campaigns/" + ml_id_, "ml-secret");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200);
  EXPECT_EQ(nlohmann::json::parse(own->body)["name"], "ml-probe");

  auto list = Get("/api/campaigns", "ml-secret");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200);
  auto campaigns = nlohmann::json::parse(list->body)["campaigns"];
  ASSERT_EQ(campaigns.size(), 1u);
  EXPECT_EQ(campaigns[0]["id"], ml_id_);

  // The queue's entries are the team's; its summary stays cluster-wide.
  auto queue = Get("/api/queue", "ml-secret");
  ASSERT_TRUE(queue);
  auto q = nlohmann::json::parse(queue->body);
  ASSERT_EQ(q["entries"].size(), 1u);
  EXPECT_EQ(q["entries"][0]["team"], "ml");
  EXPECT_EQ(q["summary"].size(), 2u);
  auto page = Get("/", "ml-secret");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->body, HasSubstr("ml-probe"));
  EXPECT_THAT(page->body, Not(HasSubstr("cv-probe")));

  auto admin = Get("/api/campaigns", "admin-secret");
  ASSERT_TRUE(admin);
  EXPECT_EQ(nlohmann::json::parse(admin->body)["campaigns"].size(), 2u);
  auto admin_page = Get("/campaigns/" + cv_id_, "admin-secret");
  ASSERT_TRUE(admin_page);
  EXPECT_EQ(admin_page->status, 200);
  EXPECT_THAT(admin_page->body, HasSubstr("no online agent with device kind &#39;gpu&#39;"));
}

// Every route through every caller: no token, team ml's submitter (the campaign's team),
// team cv's submitter, an agent and an admin, about team ml's campaign. The exact codes are
// the access rules' verdicts (coordinator/access_rules.h, docs/operations.md); a route
// without a line here fails.
TEST_F(HttpServerTest, EveryRouteThroughEveryRoleAndTeam) {
  struct Codes {
    int none, own_team, other_team, agent, admin;
  };
  const std::map<std::string, Codes> expected = {
      {"GET /healthz", {200, 200, 200, 200, 200}},
      {"GET /readyz", {200, 200, 200, 200, 200}},
      {"GET /metrics", {200, 200, 200, 200, 200}},
      {"GET /static/{file}", {200, 200, 200, 200, 200}},
      {"GET /login", {200, 200, 200, 200, 200}},
      // The form's token decides: an agent's is refused, a submitter's or an admin's logs in.
      {"POST /login", {401, 303, 303, 403, 303}},
      {"POST /logout", {303, 303, 303, 303, 303}},
      {"GET /", {401, 200, 200, 403, 200}},
      {"GET /campaigns/{id}", {401, 200, 404, 403, 200}},
      {"GET /api/queue", {401, 200, 200, 403, 200}},
      {"GET /api/agents", {401, 200, 200, 403, 200}},
      {"GET /api/campaigns", {401, 200, 200, 403, 200}},
      {"GET /api/campaigns/{id}", {401, 200, 404, 403, 200}},
      {"GET /api/campaigns/{id}/report", {401, 200, 404, 403, 200}},
      {"GET /api/campaigns/{id}/charts", {401, 200, 404, 403, 200}},
  };
  const std::vector<std::string> routes = HttpServer::RouteKeys();
  ASSERT_EQ(routes.size(), expected.size());
  for (const std::string& route : routes) {
    auto it = expected.find(route);
    ASSERT_NE(it, expected.end()) << route << " has no expected codes in this test";
    const std::pair<std::string, std::string> method_path =
        absl::StrSplit(route, absl::MaxSplits(' ', 1));
    const std::string path = absl::StrReplaceAll(
        method_path.second, {{"{id}", ml_id_}, {"{file}", "dashboard.js"}});
    const auto call = [&](const std::string& token) {
      httplib::Headers headers;
      if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
      httplib::Result r =
          method_path.first == "POST"
              ? client_->Post(path, headers, "token=" + token, "application/x-www-form-urlencoded")
              : client_->Get(path, headers);
      return r ? r->status : -1;
    };
    const Codes& want = it->second;
    EXPECT_EQ(call(""), want.none) << route << ": no token";
    EXPECT_EQ(call("ml-secret"), want.own_team) << route << ": the campaign's team";
    EXPECT_EQ(call("cv-secret"), want.other_team) << route << ": another team";
    EXPECT_EQ(call("agent-secret"), want.agent) << route << ": agent";
    EXPECT_EQ(call("admin-secret"), want.admin) << route << ": admin";
  }
}

// The same rule as gRPC ListQueue: each team's submitter sees its own entries only.
TEST_F(HttpServerTest, EachTeamSeesItsOwnQueueEntries) {
  for (const auto& [token, team] :
       std::vector<std::pair<std::string, std::string>>{{"ml-secret", "ml"}, {"cv-secret", "cv"}}) {
    auto queue = Get("/api/queue", token);
    ASSERT_TRUE(queue);
    ASSERT_EQ(queue->status, 200);
    auto q = nlohmann::json::parse(queue->body);
    ASSERT_EQ(q["entries"].size(), 1u) << team;
    EXPECT_EQ(q["entries"][0]["team"], team);
    EXPECT_EQ(q["summary"].size(), 2u) << team;
  }
}

TEST_F(HttpServerTest, LoginFormSetsACookieThatAuthorizes) {
  auto bad = client_->Post("/login", "token=wrong&next=%2F", "application/x-www-form-urlencoded");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 401);
  EXPECT_THAT(bad->body, HasSubstr("unknown or revoked token"));
  auto agent =
      client_->Post("/login", "token=agent-secret", "application/x-www-form-urlencoded");
  ASSERT_TRUE(agent);
  EXPECT_EQ(agent->status, 403);

  auto ok = client_->Post("/login", "token=ml-secret&next=%2Fcampaigns%2F" + ml_id_,
                          "application/x-www-form-urlencoded");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 303);
  EXPECT_EQ(ok->get_header_value("Location"), "/campaigns/" + ml_id_);
  const std::string cookie = ok->get_header_value("Set-Cookie");
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("SameSite=Strict"));
  const std::string pair = cookie.substr(0, cookie.find(';'));
  EXPECT_EQ(pair, "tailor_token=ml-secret");

  auto page = client_->Get("/campaigns/" + ml_id_, {{"Cookie", "other=1; " + pair}});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->body, HasSubstr("ml-probe"));
  EXPECT_THAT(page->body, HasSubstr("team ml"));

  // Only paths on this server are followed after the login.
  auto open = client_->Post("/login", "token=ml-secret&next=%2F%2Fevil.example%2F",
                            "application/x-www-form-urlencoded");
  ASSERT_TRUE(open);
  EXPECT_EQ(open->get_header_value("Location"), "/");
}

TEST_F(HttpServerTest, HealthReadinessAndMetricsNeedNoToken) {
  auto health = Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  ready_ = false;
  auto not_ready = Get("/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);

  auto metrics = Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->get_header_value("Content-Type"), HasSubstr("text/plain; version=0.0.4"));
  EXPECT_THAT(metrics->body, HasSubstr("tailor_queue_jobs{device_kind=\"cpu\",state=\"runnable\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("tailor_queue_jobs{device_kind=\"gpu\",state=\"runnable\"} 1"));
}

TEST_F(HttpServerTest, PartialRefreshIsTheLiveElementOnly) {
  auto full = Get("/", "admin-secret");
  auto partial = Get("/?partial=1", "admin-secret");
  ASSERT_TRUE(full);
  ASSERT_TRUE(partial);
  EXPECT_THAT(full->body, HasSubstr("<div id=\"live\">"));
  EXPECT_THAT(full->body, HasSubstr("<script src=\"/static/dashboard.js\" defer></script>"));
  EXPECT_THAT(partial->body, Not(HasSubstr("<html")));
  EXPECT_THAT(partial->body, HasSubstr("<table id=\"queue-summary\">"));
  EXPECT_THAT(full->get_header_value("Content-Security-Policy"), HasSubstr("script-src 'self'"));
}

TEST(PagesTest, EscapesUserStrings) {
  v1::Campaign c;
  c.set_id("c-1");
  c.set_name("<script>alert(1)</script>");
  c.set_team("a&b");
  c.set_error("\"quoted\" 'single'");
  v1::Job* j = c.add_jobs();
  j->set_key("probe");
  j->set_kind("probe");
  j->set_state(v1::JOB_FAILED);
  j->set_error("<img src=x onerror=alert(1)>");
  CampaignPageData d;
  d.campaign = c;
  const std::string html = CampaignLive(d, PageContext());
  EXPECT_THAT(html, Not(HasSubstr("<script>")));
  EXPECT_THAT(html, Not(HasSubstr("<img")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, HasSubstr("a&amp;b"));
  EXPECT_THAT(html, HasSubstr("&quot;quoted&quot; &#39;single&#39;"));
  EXPECT_EQ(HtmlEscape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST(PagesTest, ReportListsBudgetsRelativeToTheParent) {
  CampaignPageData d;
  d.campaign.set_id("c-1");
  v1::CampaignReport r;
  v1::RelativeBudget* latency = r.add_relative_budgets();
  latency->set_resource("latency_ms");
  latency->set_factor(0.8);
  latency->set_resolved(true);
  latency->set_parent(12.53);
  latency->set_budget(10.024);
  latency->set_cost_table_id("ct-<1>");
  r.add_relative_budgets()->set_resource("memory_mib");
  d.report = r;
  const std::string html = CampaignLive(d, PageContext());
  EXPECT_THAT(html, HasSubstr("<li data-resource=\"latency_ms\">latency_ms &le; 0.8 &times; "
                              "the parent's 12.53 = <span data-field=\"budget\">10.02</span> "
                              "(measured in the target engine, cost table ct-&lt;1&gt;)</li>"));
  EXPECT_THAT(html, HasSubstr("memory_mib &le; 0 &times; the parent's (resolved once the "
                              "profile job has measured the parent)"));
}

TEST(PagesTest, CurvesKeepTheLastReportOfEachStepInGraphOrder) {
  v1::Campaign c;
  v1::Job* search = c.add_jobs();
  search->set_id("j-search");
  search->set_key("search");
  search->set_kind("search");
  std::vector<v1::Event> events;
  auto progress = [&](int64_t step, double kd) {
    v1::Event e;
    e.set_type("job_progress");
    e.set_job_id("j-search");
    e.mutable_progress()->set_step(step);
    (*e.mutable_progress()->mutable_metrics())["kd_loss"] = kd;
    events.push_back(e);
  };
  progress(2, 0.5);
  progress(1, 0.9);
  progress(2, 0.4);  // resumed: the later report of step 2 wins
  v1::Event message_only;
  message_only.set_type("job_progress");
  message_only.set_job_id("j-search");
  events.push_back(message_only);
  const std::vector<Curve> curves = CurvesFromEvents(c, events);
  ASSERT_EQ(curves.size(), 1u);
  EXPECT_EQ(curves[0].job_key, "search");
  ASSERT_EQ(curves[0].points.size(), 2u);
  EXPECT_EQ(curves[0].points[0].step, 1);
  EXPECT_DOUBLE_EQ(curves[0].points[1].metrics.at("kd_loss"), 0.4);
}

// The composition root: one port for pages and /metrics, and the gRPC interceptor counts calls.
TEST(CoordinatorServerHttpTest, GrpcCallsAndCommitsShowUpInMetrics) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("http-server-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ServerOptions options;
  options.data_dir = dir.string();
  options.listen = "127.0.0.1:0";
  options.launcher = "none";
  options.http_port = 0;
  auto server = CoordinatorServer::Create(options, Clock::Real());
  ASSERT_THAT(server, IsOk());
  auto port = (*server)->Start();
  ASSERT_THAT(port, IsOk());
  ASSERT_GT((*server)->http_port(), 0);

  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port),
                                     grpc::InsecureChannelCredentials());
  auto admin = v1::AdminService::NewStub(channel);
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    v1::ListQueueResponse resp;
    ASSERT_TRUE(admin->ListQueue(&ctx, v1::ListQueueRequest(), &resp).ok());
  }
  EXPECT_THAT((*server)->core()->Submit(Probe("p", "ml"), "r-1"), IsOk());

  httplib::Client http("127.0.0.1", (*server)->http_port());
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body,
              HasSubstr("tailor_grpc_requests_total{code=\"OK\",method=\"/tailor.v1.AdminService/ListQueue\"} 3"));
  EXPECT_THAT(metrics->body, HasSubstr("tailor_queue_jobs{device_kind=\"cpu\",state=\"runnable\"} 1"));
  EXPECT_THAT(metrics->body, Not(HasSubstr("tailor_sqlite_commit_duration_seconds_count 0")));
  auto ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto page = http.Get("/");  // auth off: everyone is an admin
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->body, HasSubstr("<table id=\"campaigns\">"));
  (*server)->Shutdown();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tailor::coordinator::http
