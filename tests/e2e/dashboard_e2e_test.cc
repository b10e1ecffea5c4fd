// The dashboard end to end: a coordinator with --auth tokens, a CPU profiler agent and the
// local launcher run a short AUTOCOMPRESS campaign (cost table, search curves, report) beside
// a PROBE campaign stuck in the queue. /metrics is scraped and parsed while the campaign runs
// and after it; then tests/browser/dashboard.mjs (playwright-core driving Debian's headless
// Chromium) logs in with a submitter token and checks the pages against `tailor status
// --json` and `tailor report --json`, the chart canvases for drawn pixels, and saves
// screenshots under <build>/test-artifacts/e2e_dashboard.
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/e2e/cluster.h"

namespace tailor::e2e {
namespace {

using ::testing::HasSubstr;

std::string Trim(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

std::string Autocompress(const std::string& parent) {
  return absl::StrCat(
      "name: \"dash\"\nteam: \"ml\"\nmethod: AUTOCOMPRESS\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { latency_ms_max: 5000 memory_mib_max: 3.0 }\n",
      "ranking { calibration_samples: 32 }\n",
      "search { steps: 6 sampled_architectures: 4 batch_sequences: 8 sequence_length: 32 }\n",
      "recovery { tokens: 1536 batch_sequences: 8 sequence_length: 32 }\n",
      "resources { search { ranks_per_node: 2 } distill { ranks_per_node: 2 } }\n");
}

// A device kind no agent has: the campaign stays in the queue with a waiting reason.
constexpr char kNoSuchDevice[] = "gpu-none";

// The text format, checked line by line: "# HELP", "# TYPE" or "name{labels} value".
// Returns "name{labels}" -> value; a malformed line fails the test.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})?) ([-+0-9.eE]+|NaN|\+Inf|-Inf)$)");
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    std::smatch m;
    if (!std::regex_match(line, m, sample)) {
      ADD_FAILURE() << "not a Prometheus sample line: " << line;
      continue;
    }
    out[m[1]] = std::stod(m[5]);
  }
  return out;
}

double Sum(const std::map<std::string, double>& metrics, const std::string& prefix,
           const std::string& must_contain = "") {
  double sum = 0;
  for (const auto& [k, v] : metrics) {
    if (k.rfind(prefix, 0) == 0 && k.find(must_contain) != std::string::npos) sum += v;
  }
  return sum;
}

TEST(DashboardE2E, BrowserAndMetricsSeeWhatTheCliSees) {
  ASSERT_TRUE(std::filesystem::exists(TAILOR_NODE))
      << "node not found (" << TAILOR_NODE << "): run deploy/install-deps.sh";
  ASSERT_TRUE(std::filesystem::exists(TAILOR_CHROMIUM))
      << "chromium not found (" << TAILOR_CHROMIUM << "): run deploy/install-deps.sh";
  ASSERT_TRUE(std::filesystem::exists(std::string(TAILOR_BROWSER_DIR) +
                                      "/node_modules/playwright-core/package.json"))
      << "playwright-core not installed in " << TAILOR_BROWSER_DIR
      << " (the tailor_browser_tests build target runs npm ci there)";

  Cluster cluster("dashboard", {.coordinator_args = {"--auth", "tokens"}});
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  RunResult admin_run =
      e2e::Run({BinDir() + "/tailor-coordinator", "--data-dir", cluster.dir() + "/data",
           "--create-token", "--role", "admin", "--description", "dashboard e2e"},
          absl::Seconds(30));
  ASSERT_EQ(admin_run.exit_code, 0) << admin_run.err;
  const std::string admin = Trim(admin_run.out);
  ASSERT_TRUE(cluster.StartCoordinator());
  ASSERT_GT(cluster.http_port(), 0);
  const std::string url = absl::StrCat("http://127.0.0.1:", cluster.http_port());

  auto token = [&](const std::vector<std::string>& args) {
    std::vector<std::string> cli = {"--token", admin, "tokens", "create"};
    cli.insert(cli.end(), args.begin(), args.end());
    RunResult r = cluster.Cli(cli);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Trim(r.out);
  };
  const std::string submitter = token({"--role", "submitter", "--team", "ml"});
  const std::string agent = token({"--role", "agent"});
  ASSERT_FALSE(submitter.empty());
  const std::string agent_file = cluster.WriteFile("agent.token", agent + "\n");
  ::chmod(agent_file.c_str(), 0600);
  cluster.StartAgent("cpu0", {"--token-file", agent_file, "--profile-rounds", "3",
                              "--profile-validation", "8", "--verify-repetitions", "3",
                              "--verify-task-samples", "4"});
  cluster.set_cli_args({"--token", submitter});

  const std::string waiting = cluster.Submit(
      cluster.WriteFile("waiting.textproto",
                        absl::StrCat("name: \"waiting\"\nteam: \"ml\"\nmethod: PROBE\n",
                                     "target { device_kind: \"", kNoSuchDevice, "\" }\n")),
      "dash-waiting");
  ASSERT_FALSE(waiting.empty());
  const std::string id =
      cluster.Submit(cluster.WriteFile("dash.textproto", Autocompress(parent)), "dash-1");
  ASSERT_FALSE(id.empty());

  httplib::Client http("127.0.0.1", cluster.http_port());
  http.set_read_timeout(20, 0);
  std::string scraped;  // the last scrape's text, for failure messages
  auto scrape = [&] {
    auto r = http.Get("/metrics");  // no token: scrapers carry none
    EXPECT_TRUE(r);
    if (!r) return std::map<std::string, double>();
    EXPECT_EQ(r->status, 200);
    scraped = r->body;
    return ParseMetrics(r->body);
  };

  // --- /metrics during the campaign ---
  ASSERT_TRUE(cluster.WaitForState(id, "CAMPAIGN_RUNNING", absl::Minutes(2)))
      << cluster.Status(id).dump(2);
  std::map<std::string, double> running = scrape();
  EXPECT_EQ(running[absl::StrCat("tailor_queue_jobs{device_kind=\"", kNoSuchDevice,
                                 "\",state=\"runnable\"}")],
            1);
  // Something of the running campaign is always runnable or leased until it ends.
  EXPECT_GE(Sum(running, "tailor_queue_jobs{device_kind=\"cpu\"", "state=\"leased\"") +
                Sum(running, "tailor_queue_jobs{device_kind=\"cpu\"", "state=\"runnable\"") +
                Sum(running, "tailor_queue_jobs{device_kind=\"(launcher)\"", "state=\"leased\"") +
                Sum(running, "tailor_queue_jobs{device_kind=\"(launcher)\"", "state=\"runnable\"") +
                Sum(running, "tailor_queue_jobs{device_kind=\"cpu\"", "state=\"pending\"") +
                Sum(running, "tailor_queue_jobs{device_kind=\"(launcher)\"", "state=\"pending\""),
            1);
  EXPECT_EQ(running["tailor_grpc_requests_total{code=\"OK\",method=\"/tailor.v1.CampaignService/"
                    "SubmitCampaign\"}"],
            2);

  const bool done = cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Minutes(10));
  nlohmann::json campaign = cluster.Status(id);
  ASSERT_TRUE(done) << campaign.dump(2);

  // --- /metrics after it ---
  std::map<std::string, double> after = scrape();
  for (const char* kind : {"profile", "rank", "search", "distill", "verify"}) {
    EXPECT_GE(after[absl::StrCat("tailor_job_outcomes_total{kind=\"", kind,
                                 "\",outcome=\"succeeded\"}")],
              1)
        << kind;
  }
  EXPECT_EQ(Sum(after, "tailor_job_outcomes_total", "outcome=\"failed\""), 0);
  // (Not checked while running: the launcher's rank job may start the campaign before the
  // agent has registered.)
  EXPECT_EQ(after["tailor_agents{device_kind=\"cpu\",state=\"online\"}"], 1) << scraped;
  EXPECT_GE(Sum(after, "tailor_lease_wait_seconds_count"), campaign["jobs"].size());
  EXPECT_EQ(after[absl::StrCat("tailor_queue_jobs{device_kind=\"", kNoSuchDevice,
                               "\",state=\"runnable\"}")],
            1);
  EXPECT_EQ(Sum(after, "tailor_queue_jobs{device_kind=\"cpu\""), 0);
  EXPECT_GT(after["tailor_sqlite_commit_duration_seconds_count"], 10);
  EXPECT_GT(after["tailor_grpc_requests_total{code=\"OK\",method=\"/tailor.v1.AgentService/"
                  "CompleteJob\"}"],
            4);
  EXPECT_GT(Sum(after, "tailor_grpc_request_duration_seconds_count",
                "/tailor.v1.AgentService/Heartbeat"),
            0);
  EXPECT_EQ(after.count("tailor_slurm_calls_total{call=\"squeue\"}"), 0u);  // local launcher

  // --- access rules over HTTP ---
  auto get = [&](const std::string& path, const std::string& bearer) {
    httplib::Headers headers;
    if (!bearer.empty()) headers.emplace("Authorization", "Bearer " + bearer);
    auto r = http.Get(path, headers);
    return r ? r->status : -1;
  };
  EXPECT_EQ(get("/api/queue", ""), 401);
  EXPECT_EQ(get("/api/queue", agent), 403);
  EXPECT_EQ(get("/api/queue", submitter), 200);
  EXPECT_EQ(get("/api/campaigns/" + id, submitter), 200);
  EXPECT_EQ(get("/healthz", ""), 200);
  EXPECT_EQ(get("/readyz", ""), 200);
  EXPECT_EQ(get("/static/dashboard.js", ""), 200) << "the web bundle is missing (tailor_web)";

  // --- the browser ---
  RunResult report = cluster.Cli({"report", id, "--json"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  nlohmann::json expect = {{"campaign", campaign},
                           {"report", nlohmann::json::parse(report.out)},
                           {"waiting", cluster.Status(waiting)},
                           {"waiting_device_kind", kNoSuchDevice},
                           {"agent_name", "cpu0"}};
  const std::string expect_path = cluster.WriteFile("expect.json", expect.dump(2));
  const std::string out = std::string(TAILOR_ARTIFACT_DIR) + "/e2e_dashboard";
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  std::filesystem::copy_file(expect_path, out + "/expect.json");
  RunResult browser = e2e::Run({TAILOR_NODE, std::string(TAILOR_BROWSER_DIR) + "/dashboard.mjs",
                           "--url", url, "--token", submitter, "--out", out, "--expect-json",
                           expect_path, "--chromium", TAILOR_CHROMIUM},
                          absl::Minutes(3));
  EXPECT_EQ(browser.exit_code, 0) << browser.out << browser.err;
  EXPECT_THAT(browser.out, HasSubstr("checks passed"));
  for (const char* shot : {"overview.png", "campaign.png", "campaign-nojs.png"}) {
    const std::string path = out + "/" + shot;
    EXPECT_TRUE(std::filesystem::exists(path) && std::filesystem::file_size(path) > 10000)
        << path;
  }
  std::cout << browser.out << "screenshots: " << out << "\n";
}

}  // namespace
}  // namespace tailor::e2e
