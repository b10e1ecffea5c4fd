// Authentication, roles and TLS through real processes (issue #8):
//  * the auth matrix: every RPC of every service called with no token, a wrong token, a revoked
//    token, another team's token, and each role, with the exact status codes;
//  * TLS with the dev CA (deploy/dev-ca.sh), and plaintext refused against the TLS port;
//  * a non-loopback listen without TLS/--insecure refused;
//  * campaigns under --auth tokens through a profiler agent (--token-file) and the local
//    launcher's ranks (the coordinator's internal agent token), over TLS.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/contract_io.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tailor/v1/admin.grpc.pb.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "tailor/v1/campaign.grpc.pb.h"
#include "tests/e2e/cluster.h"

namespace tailor::e2e {
namespace {

using ::testing::HasSubstr;
using Code = grpc::StatusCode;

constexpr Code OK = grpc::StatusCode::OK;
constexpr Code UNAUTHENTICATED = grpc::StatusCode::UNAUTHENTICATED;
constexpr Code PERMISSION_DENIED = grpc::StatusCode::PERMISSION_DENIED;
constexpr Code NOT_FOUND = grpc::StatusCode::NOT_FOUND;
// What the agent API answers for a lease that does not exist.
constexpr Code FAILED_PRECONDITION = grpc::StatusCode::FAILED_PRECONDITION;

Cluster::Options WithArgs(std::vector<std::string> args) {
  Cluster::Options o;
  o.coordinator_args = std::move(args);
  return o;
}

std::string Trim(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

// The first admin, created offline in the cluster's database before the coordinator starts.
std::string BootstrapAdmin(Cluster& cluster) {
  RunResult r = Run({BinDir() + "/tailor-coordinator", "--data-dir", cluster.dir() + "/data",
                     "--create-token", "--role", "admin", "--team", "ops", "--description",
                     "e2e bootstrap"},
                    absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("shown once"));
  return Trim(r.out);
}

// `tailor tokens create` with the admin token; returns the secret.
std::string CreateToken(Cluster& cluster, const std::string& admin, const std::string& role,
                        const std::string& team = "") {
  std::vector<std::string> args = {"--token", admin, "tokens", "create", "--role", role};
  if (!team.empty()) {
    args.push_back("--team");
    args.push_back(team);
  }
  RunResult r = cluster.Cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return Trim(r.out);
}

// One client, plaintext, to the cluster's coordinator; each call carries the given token.
class Clients {
 public:
  explicit Clients(int port) {
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                       grpc::InsecureChannelCredentials());
    campaigns = v1::CampaignService::NewStub(channel);
    agents = v1::AgentService::NewStub(channel);
    admin = v1::AdminService::NewStub(channel);
    tokens = v1::TokenService::NewStub(channel);
  }
  std::unique_ptr<v1::CampaignService::Stub> campaigns;
  std::unique_ptr<v1::AgentService::Stub> agents;
  std::unique_ptr<v1::AdminService::Stub> admin;
  std::unique_ptr<v1::TokenService::Stub> tokens;
};

void Prepare(grpc::ClientContext* ctx, const std::string& token) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
}

template <typename Stub, typename Req, typename Resp>
Code Unary(Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
           const Req& req, const std::string& token, Resp* out = nullptr) {
  grpc::ClientContext ctx;
  Prepare(&ctx, token);
  Resp resp;
  grpc::Status st = (stub->*method)(&ctx, req, &resp);
  if (out != nullptr) *out = resp;
  return st.error_code();
}

// A server stream: OK as soon as one message arrives (the stream may be endless), else the
// status it ended with.
template <typename Msg, typename Open>
Code FirstMessage(Open open, const std::string& token) {
  grpc::ClientContext ctx;
  Prepare(&ctx, token);
  auto reader = open(&ctx);
  Msg msg;
  if (reader->Read(&msg)) {
    ctx.TryCancel();
    (void)reader->Finish();
    return OK;
  }
  return reader->Finish().error_code();
}

struct Row {
  std::string rpc;
  std::function<Code(const std::string& token)> call;
  // Expected codes, called in this order: team a's submitter (owner of the campaigns), team
  // b's submitter, an agent, an admin. No, wrong and revoked tokens are always
  // UNAUTHENTICATED.
  Code team_a, team_b, agent, admin;
};

TEST(AuthE2E, MatrixOfEveryRpc) {
  Cluster cluster("auth-matrix", WithArgs({"--auth", "tokens", "--launcher", "none"}));
  const std::string admin = BootstrapAdmin(cluster);
  ASSERT_FALSE(admin.empty());
  ASSERT_TRUE(cluster.StartCoordinator());
  const std::string sub_a = CreateToken(cluster, admin, "submitter", "team-a");
  const std::string sub_b = CreateToken(cluster, admin, "submitter", "team-b");
  const std::string agent = CreateToken(cluster, admin, "agent");
  const std::string wrong = "tailor_" + std::string(64, '0');
  Clients c(cluster.port());
  v1::CreateTokenResponse to_revoke;
  {
    v1::CreateTokenRequest r;
    r.set_role(v1::TOKEN_ROLE_SUBMITTER);
    r.set_team("team-a");
    ASSERT_EQ(Unary(c.tokens.get(), &v1::TokenService::Stub::CreateToken, r, admin, &to_revoke),
              OK);
  }
  const std::string revoked = to_revoke.secret();
  const std::string revoked_id = to_revoke.token().id();

  // A revoked token stops working at once (it worked a moment before).
  v1::ListCampaignsRequest list_req;
  ASSERT_EQ(Unary(c.campaigns.get(), &v1::CampaignService::Stub::ListCampaigns, list_req,
                  revoked),
            OK);
  v1::ListTokensResponse tokens;
  ASSERT_EQ(Unary(c.tokens.get(), &v1::TokenService::Stub::ListTokens, v1::ListTokensRequest(),
                  admin, &tokens),
            OK);
  ASSERT_EQ(tokens.tokens_size(), 5);  // the bootstrap admin and the four above
  {
    v1::RevokeTokenRequest r;
    r.set_id(revoked_id);
    v1::ApiToken t;
    ASSERT_EQ(Unary(c.tokens.get(), &v1::TokenService::Stub::RevokeToken, r, admin, &t), OK);
    EXPECT_TRUE(t.has_revoked_at());
  }
  ASSERT_EQ(Unary(c.campaigns.get(), &v1::CampaignService::Stub::ListCampaigns, list_req,
                  revoked),
            UNAUTHENTICATED);

  // Fixtures: two team-a campaigns (no agent can run them), a job log, a registered agent.
  absl::StatusOr<v1::DeploymentContract> contract =
      LoadContractFile(SourceDir() + "/examples/contracts/probe-cpu.textproto");
  ASSERT_TRUE(contract.ok()) << contract.status();
  contract->set_team("team-a");
  auto submit = [&](const std::string& token, const std::string& request_id) {
    v1::SubmitCampaignRequest req;
    *req.mutable_contract() = *contract;
    req.set_request_id(request_id);
    v1::SubmitCampaignResponse resp;
    EXPECT_EQ(Unary(c.campaigns.get(), &v1::CampaignService::Stub::SubmitCampaign, req, token,
                    &resp),
              OK);
    return resp.campaign();
  };
  const v1::Campaign campaign = submit(sub_a, "fixture-1");
  const std::string cid = campaign.id();
  const std::string cancel_id = submit(sub_a, "fixture-2").id();
  ASSERT_FALSE(cid.empty());
  ASSERT_EQ(campaign.team(), "team-a");
  ASSERT_GE(campaign.jobs_size(), 1);
  const v1::Job& job = campaign.jobs(0);
  const std::string log_dir = absl::StrCat(cluster.dir(), "/data/logs/", job.id());
  std::filesystem::create_directories(log_dir);
  std::ofstream(absl::StrCat(log_dir, "/attempt-", job.attempt(), ".log")) << "hello\n";

  v1::RegisterAgentRequest reg;
  reg.mutable_info()->set_name("matrix-agent");
  reg.mutable_info()->set_hostname("nowhere");
  reg.mutable_info()->set_device_kind("no-such-device");  // never gets the probe jobs
  reg.mutable_info()->set_device("cpu");
  reg.mutable_info()->add_job_kinds("probe");
  v1::RegisterAgentResponse registered;
  ASSERT_EQ(Unary(c.agents.get(), &v1::AgentService::Stub::Register, reg, agent, &registered),
            OK);
  const std::string agent_id = registered.agent_id();

  // Tokens for RevokeToken to revoke, one per caller, and the next one's index.
  std::vector<std::string> throwaway_ids;
  for (int i = 0; i < 8; ++i) {
    v1::CreateTokenRequest r;
    r.set_role(v1::TOKEN_ROLE_AGENT);
    r.set_description("throwaway");
    v1::CreateTokenResponse created;
    ASSERT_EQ(Unary(c.tokens.get(), &v1::TokenService::Stub::CreateToken, r, admin, &created),
              OK);
    throwaway_ids.push_back(created.token().id());
  }
  size_t next_throwaway = 0;
  int next_request = 0;
  const std::string bogus_lease = "lease-does-not-exist";
  const std::string bogus_digest(64, 'a');

  auto* cs = c.campaigns.get();
  auto* as = c.agents.get();
  auto* ad = c.admin.get();
  auto* ts = c.tokens.get();
  std::vector<Row> rows = {
      // --- CampaignService ---
      {"SubmitCampaign",
       [&](const std::string& t) {
         v1::SubmitCampaignRequest r;
         *r.mutable_contract() = *contract;  // team-a
         r.set_request_id(absl::StrCat("matrix-", next_request++));
         return Unary(cs, &v1::CampaignService::Stub::SubmitCampaign, r, t);
       },
       OK, PERMISSION_DENIED, PERMISSION_DENIED, OK},
      {"GetCampaign",
       [&](const std::string& t) {
         v1::GetCampaignRequest r;
         r.set_campaign_id(cid);
         return Unary(cs, &v1::CampaignService::Stub::GetCampaign, r, t);
       },
       OK, NOT_FOUND, PERMISSION_DENIED, OK},
      {"ListCampaigns",
       [&](const std::string& t) {
         return Unary(cs, &v1::CampaignService::Stub::ListCampaigns, v1::ListCampaignsRequest(),
                      t);
       },
       OK, OK, PERMISSION_DENIED, OK},
      {"CancelCampaign",
       [&](const std::string& t) {
         v1::CancelCampaignRequest r;
         r.set_campaign_id(cancel_id);
         r.set_reason("matrix");
         return Unary(cs, &v1::CampaignService::Stub::CancelCampaign, r, t);
       },
       OK, NOT_FOUND, PERMISSION_DENIED, OK},
      {"WatchCampaign",  // of the campaign cancelled above: final, so the stream ends
       [&](const std::string& t) {
         v1::WatchCampaignRequest r;
         r.set_campaign_id(cancel_id);
         return FirstMessage<v1::Event>(
             [&](grpc::ClientContext* ctx) { return cs->WatchCampaign(ctx, r); }, t);
       },
       OK, NOT_FOUND, PERMISSION_DENIED, OK},
      {"GetReport",
       [&](const std::string& t) {
         v1::GetReportRequest r;
         r.set_campaign_id(cid);
         return Unary(cs, &v1::CampaignService::Stub::GetReport, r, t);
       },
       OK, NOT_FOUND, PERMISSION_DENIED, OK},
      {"ListArtifacts",
       [&](const std::string& t) {
         v1::ListArtifactsRequest r;
         r.set_campaign_id(cid);
         return Unary(cs, &v1::CampaignService::Stub::ListArtifacts, r, t);
       },
       OK, NOT_FOUND, PERMISSION_DENIED, OK},
      {"ListCostTables",
       [&](const std::string& t) {
         return Unary(cs, &v1::CampaignService::Stub::ListCostTables,
                      v1::ListCostTablesRequest(), t);
       },
       OK, OK, OK, OK},
      {"GetCostTable",  // readable by every role; this fingerprint has none
       [&](const std::string& t) {
         v1::GetCostTableRequest r;
         r.set_fingerprint("0000");
         return Unary(cs, &v1::CampaignService::Stub::GetCostTable, r, t);
       },
       NOT_FOUND, NOT_FOUND, NOT_FOUND, NOT_FOUND},
      {"GetJobLog",
       [&](const std::string& t) {
         v1::GetJobLogRequest r;
         r.set_job_id(job.id());
         return FirstMessage<v1::LogChunk>(
             [&](grpc::ClientContext* ctx) { return cs->GetJobLog(ctx, r); }, t);
       },
       OK, NOT_FOUND, PERMISSION_DENIED, OK},
      // --- AgentService ---
      {"Register",
       [&](const std::string& t) { return Unary(as, &v1::AgentService::Stub::Register, reg, t); },
       PERMISSION_DENIED, PERMISSION_DENIED, OK, OK},
      {"Heartbeat",
       [&](const std::string& t) {
         v1::HeartbeatRequest r;
         r.set_agent_id(agent_id);
         return Unary(as, &v1::AgentService::Stub::Heartbeat, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, OK, OK},
      {"AcquireJob",
       [&](const std::string& t) {
         v1::AcquireJobRequest r;
         r.set_agent_id(agent_id);
         r.set_wait_ms(0);
         return Unary(as, &v1::AgentService::Stub::AcquireJob, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, OK, OK},
      {"ReportProgress",
       [&](const std::string& t) {
         v1::ReportProgressRequest r;
         r.set_lease_id(bogus_lease);
         return Unary(as, &v1::AgentService::Stub::ReportProgress, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, FAILED_PRECONDITION, FAILED_PRECONDITION},
      {"CompleteJob",
       [&](const std::string& t) {
         v1::CompleteJobRequest r;
         r.set_lease_id(bogus_lease);
         r.set_success(true);
         return Unary(as, &v1::AgentService::Stub::CompleteJob, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, NOT_FOUND, NOT_FOUND},
      {"UploadArtifact",
       [&](const std::string& t) {
         grpc::ClientContext ctx;
         Prepare(&ctx, t);
         v1::Artifact resp;
         auto writer = as->UploadArtifact(&ctx, &resp);
         v1::UploadArtifactRequest header;
         header.mutable_header()->set_lease_id(bogus_lease);
         header.mutable_header()->set_kind("probe");
         header.mutable_header()->set_name("x.json");
         header.mutable_header()->set_size_bytes(0);
         header.mutable_header()->set_sha256(Sha256::Hex(""));
         writer->Write(header);
         writer->WritesDone();
         return writer->Finish().error_code();
       },
       PERMISSION_DENIED, PERMISSION_DENIED, FAILED_PRECONDITION, FAILED_PRECONDITION},
      {"DownloadArtifact",  // submitters may download their team's artifacts: see below
       [&](const std::string& t) {
         v1::DownloadArtifactRequest r;
         r.set_digest(bogus_digest);
         return FirstMessage<v1::ArtifactChunk>(
             [&](grpc::ClientContext* ctx) { return as->DownloadArtifact(ctx, r); }, t);
       },
       NOT_FOUND, NOT_FOUND, NOT_FOUND, NOT_FOUND},
      {"PutCostTable",
       [&](const std::string& t) {
         v1::PutCostTableRequest r;
         r.set_lease_id(bogus_lease);
         return Unary(as, &v1::AgentService::Stub::PutCostTable, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, FAILED_PRECONDITION, FAILED_PRECONDITION},
      {"GetAssignment",
       [&](const std::string& t) {
         v1::GetAssignmentRequest r;
         r.set_lease_id(bogus_lease);
         return Unary(as, &v1::AgentService::Stub::GetAssignment, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, FAILED_PRECONDITION, FAILED_PRECONDITION},
      // --- AdminService ---
      {"ListQueue",  // submitters see their team's entries: see below
       [&](const std::string& t) {
         return Unary(ad, &v1::AdminService::Stub::ListQueue, v1::ListQueueRequest(), t);
       },
       OK, OK, PERMISSION_DENIED, OK},
      {"ListAgents",
       [&](const std::string& t) {
         return Unary(ad, &v1::AdminService::Stub::ListAgents, v1::ListAgentsRequest(), t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, PERMISSION_DENIED, OK},
      {"DrainAgent",
       [&](const std::string& t) {
         v1::DrainAgentRequest r;
         r.set_agent_id(agent_id);
         return Unary(ad, &v1::AdminService::Stub::DrainAgent, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, PERMISSION_DENIED, OK},
      {"Recompress",
       [&](const std::string& t) {
         v1::RecompressRequest r;
         r.set_engine_version("9.9.9");
         r.set_dry_run(true);
         return Unary(ad, &v1::AdminService::Stub::Recompress, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, PERMISSION_DENIED, OK},
      {"DeleteCampaign",
       [&](const std::string& t) {
         v1::DeleteCampaignRequest r;
         r.set_campaign_id("c-does-not-exist");
         return Unary(ad, &v1::AdminService::Stub::DeleteCampaign, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, PERMISSION_DENIED, NOT_FOUND},
      // --- TokenService ---
      {"CreateToken",
       [&](const std::string& t) {
         v1::CreateTokenRequest r;
         r.set_role(v1::TOKEN_ROLE_SUBMITTER);
         r.set_team("team-c");
         return Unary(ts, &v1::TokenService::Stub::CreateToken, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, PERMISSION_DENIED, OK},
      {"ListTokens",
       [&](const std::string& t) {
         return Unary(ts, &v1::TokenService::Stub::ListTokens, v1::ListTokensRequest(), t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, PERMISSION_DENIED, OK},
      {"RevokeToken",
       [&](const std::string& t) {
         v1::RevokeTokenRequest r;
         r.set_id(throwaway_ids.at(next_throwaway++));
         return Unary(ts, &v1::TokenService::Stub::RevokeToken, r, t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, PERMISSION_DENIED, OK},
      {"ListAuditEvents",
       [&](const std::string& t) {
         return Unary(ts, &v1::TokenService::Stub::ListAuditEvents,
                      v1::ListAuditEventsRequest(), t);
       },
       PERMISSION_DENIED, PERMISSION_DENIED, PERMISSION_DENIED, OK},
  };
  // Every method of every service has a row.
  int methods = 0;
  for (const char* service : {"tailor.v1.CampaignService", "tailor.v1.AgentService",
                              "tailor.v1.AdminService", "tailor.v1.TokenService"}) {
    const auto* d = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    ASSERT_NE(d, nullptr) << service;
    methods += d->method_count();
  }
  ASSERT_EQ(static_cast<int>(rows.size()), methods);

  for (Row& row : rows) {
    SCOPED_TRACE(row.rpc);
    EXPECT_EQ(row.call(""), UNAUTHENTICATED) << row.rpc << ": no token";
    EXPECT_EQ(row.call(wrong), UNAUTHENTICATED) << row.rpc << ": wrong token";
    EXPECT_EQ(row.call(revoked), UNAUTHENTICATED) << row.rpc << ": revoked token";
    EXPECT_EQ(row.call(sub_a), row.team_a) << row.rpc << ": team a's submitter";
    EXPECT_EQ(row.call(sub_b), row.team_b) << row.rpc << ": team b's submitter";
    EXPECT_EQ(row.call(agent), row.agent) << row.rpc << ": agent";
    EXPECT_EQ(row.call(admin), row.admin) << row.rpc << ": admin";
  }

  // Another team's campaign is NOT_FOUND with the same words as a missing id.
  {
    v1::GetCampaignRequest r;
    grpc::ClientContext ctx1, ctx2;
    Prepare(&ctx1, sub_b);
    Prepare(&ctx2, sub_b);
    v1::Campaign out;
    r.set_campaign_id(cid);
    const grpc::Status hidden = cs->GetCampaign(&ctx1, r, &out);
    const std::string missing_id = "cmp-00000000000000000000aa";
    r.set_campaign_id(missing_id);
    const grpc::Status missing = cs->GetCampaign(&ctx2, r, &out);
    EXPECT_EQ(hidden.error_code(), NOT_FOUND);
    EXPECT_EQ(missing.error_code(), NOT_FOUND);
    EXPECT_EQ(hidden.error_message(), absl::StrCat("campaign '", cid, "' not found"));
    EXPECT_EQ(missing.error_message(), absl::StrCat("campaign '", missing_id, "' not found"));
  }
  // Submitting for another team names the field.
  {
    v1::SubmitCampaignRequest r;
    *r.mutable_contract() = *contract;
    r.set_request_id("other-team");
    grpc::ClientContext ctx;
    Prepare(&ctx, sub_b);
    v1::SubmitCampaignResponse out;
    grpc::Status st = cs->SubmitCampaign(&ctx, r, &out);
    EXPECT_EQ(st.error_code(), PERMISSION_DENIED);
    EXPECT_THAT(st.error_message(), HasSubstr("team"));
  }
  // Listings are filtered to the caller's team.
  {
    v1::ListCampaignsResponse b, a, all;
    ASSERT_EQ(Unary(cs, &v1::CampaignService::Stub::ListCampaigns, v1::ListCampaignsRequest(),
                    sub_b, &b),
              OK);
    EXPECT_EQ(b.campaigns_size(), 0);
    v1::ListCampaignsRequest other;
    other.set_team("team-a");
    ASSERT_EQ(Unary(cs, &v1::CampaignService::Stub::ListCampaigns, other, sub_b, &b), OK);
    EXPECT_EQ(b.campaigns_size(), 0);
    ASSERT_EQ(Unary(cs, &v1::CampaignService::Stub::ListCampaigns, v1::ListCampaignsRequest(),
                    sub_a, &a),
              OK);
    EXPECT_GE(a.campaigns_size(), 3);
    for (const auto& camp : a.campaigns()) EXPECT_EQ(camp.team(), "team-a");
    // The queue too, as on the dashboard: the own team's entries, every device kind's counts.
    v1::ListQueueResponse qa, qb, qall;
    ASSERT_EQ(Unary(ad, &v1::AdminService::Stub::ListQueue, v1::ListQueueRequest(), sub_a, &qa),
              OK);
    ASSERT_EQ(Unary(ad, &v1::AdminService::Stub::ListQueue, v1::ListQueueRequest(), sub_b, &qb),
              OK);
    ASSERT_EQ(Unary(ad, &v1::AdminService::Stub::ListQueue, v1::ListQueueRequest(), admin, &qall),
              OK);
    for (const auto& e : qa.entries()) EXPECT_EQ(e.team(), "team-a");
    EXPECT_EQ(qb.entries_size(), 0);
    int team_a_entries = 0;
    for (const auto& e : qall.entries()) team_a_entries += e.team() == "team-a" ? 1 : 0;
    EXPECT_EQ(qa.entries_size(), team_a_entries);
    EXPECT_EQ(qb.summary_size(), qall.summary_size());
  }
  // Token listings never carry secrets or their hashes.
  {
    v1::ListTokensRequest r;
    r.set_include_revoked(true);
    v1::ListTokensResponse out;
    ASSERT_EQ(Unary(ts, &v1::TokenService::Stub::ListTokens, r, admin, &out), OK);
    const std::string bytes = out.SerializeAsString();
    for (const std::string& secret : {admin, sub_a, sub_b, agent, revoked}) {
      EXPECT_EQ(bytes.find(secret), std::string::npos);
      EXPECT_EQ(bytes.find(Sha256::Hex(secret)), std::string::npos);
    }
    RunResult cli = cluster.Cli({"--token", admin, "tokens", "list", "--all", "--json"});
    ASSERT_EQ(cli.exit_code, 0) << cli.err;
    EXPECT_THAT(cli.out, HasSubstr(revoked_id));
    EXPECT_EQ(cli.out.find(Sha256::Hex(admin)), std::string::npos);
    RunResult denied = cluster.Cli({"--token", sub_a, "tokens", "list"});
    EXPECT_EQ(denied.exit_code, 1);
    EXPECT_THAT(denied.err, HasSubstr("needs an admin token"));
  }
  // Admin verbs are in the audit log with the admin's token id.
  {
    v1::ListTokensResponse all;
    v1::ListTokensRequest r;
    r.set_include_revoked(true);
    ASSERT_EQ(Unary(ts, &v1::TokenService::Stub::ListTokens, r, admin, &all), OK);
    std::string admin_id;
    for (const auto& t : all.tokens()) {
      if (t.role() == v1::TOKEN_ROLE_ADMIN) admin_id = t.id();
    }
    v1::ListAuditEventsResponse audit;
    ASSERT_EQ(Unary(ts, &v1::TokenService::Stub::ListAuditEvents, v1::ListAuditEventsRequest(),
                    admin, &audit),
              OK);
    std::map<std::string, std::string> target_of_verb;
    for (const auto& e : audit.events()) {
      if (e.token_id() == admin_id) target_of_verb[e.verb()] = e.target();
    }
    EXPECT_EQ(target_of_verb["DrainAgent"], agent_id);
    EXPECT_EQ(target_of_verb["CancelCampaign"], cancel_id);
    EXPECT_EQ(target_of_verb.count("CreateToken"), 1u);
    EXPECT_EQ(target_of_verb.count("RevokeToken"), 1u);
    RunResult cli = cluster.Cli({"--token", admin, "tokens", "audit"});
    ASSERT_EQ(cli.exit_code, 0) << cli.err;
    EXPECT_THAT(cli.out, HasSubstr("DrainAgent"));
  }
}

// A token made with `tokens create --expires-in 2s` works, then is refused with a message that
// says it expired: the coordinator's 5 s token cache does not extend it. `tokens list` hides
// it afterwards unless --all, which marks it expired.
TEST(AuthE2E, ExpiringTokenIsRefusedOnceExpired) {
  Cluster cluster("auth-expiry", WithArgs({"--auth", "tokens", "--launcher", "none"}));
  const std::string admin = BootstrapAdmin(cluster);
  ASSERT_TRUE(cluster.StartCoordinator());

  RunResult created = cluster.Cli({"--token", admin, "tokens", "create", "--role", "submitter",
                                   "--team", "team-a", "--expires-in", "8s", "--json"});
  const absl::Time created_by = absl::Now();
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const nlohmann::json token = nlohmann::json::parse(created.out);
  const std::string secret = token["secret"];
  const std::string id = token["token"]["id"];
  // Protobuf JSON: "2026-11-30T10:00:02.123456Z"; messages print whole seconds.
  const std::string expires_at = token["token"]["expires_at"];
  ASSERT_GE(expires_at.size(), 19u) << created.out;

  RunResult used = cluster.Cli({"--token", secret, "list"});
  EXPECT_EQ(used.exit_code, 0) << used.err;
  EXPECT_THAT(used.out, HasSubstr("no campaigns"));
  RunResult listed = cluster.Cli({"--token", admin, "tokens", "list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("EXPIRES"));
  EXPECT_THAT(listed.out, HasSubstr(id));

  // 8 s leaves the two calls above time even on a loaded CI machine.
  absl::SleepFor(created_by + absl::Milliseconds(8200) - absl::Now());
  RunResult refused = cluster.Cli({"--token", secret, "list"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr(absl::StrCat("token ", id, " expired at ",
                                                  expires_at.substr(0, 19), "Z")));

  listed = cluster.Cli({"--token", admin, "tokens", "list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(listed.out.find(id), std::string::npos) << listed.out;
  listed = cluster.Cli({"--token", admin, "tokens", "list", "--all"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  std::string row;
  for (absl::string_view line : absl::StrSplit(listed.out, '\n')) {
    if (absl::StartsWith(line, id)) row = std::string(line);
  }
  EXPECT_THAT(row, HasSubstr("(expired)")) << listed.out;
}

// deploy/dev-ca.sh DIR; "" on failure.
std::string DevCa(const std::string& dir) {
  RunResult r = Run({SourceDir() + "/deploy/dev-ca.sh", dir}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return r.exit_code == 0 ? dir : "";
}

TEST(AuthE2E, TlsWithTheDevCaAndPlaintextRefused) {
  const std::string tls =
      DevCa(absl::StrCat(std::filesystem::temp_directory_path().string(), "/tailor-e2e-tls-",
                         getpid()));
  ASSERT_FALSE(tls.empty());
  const std::string other_ca =
      DevCa(absl::StrCat(std::filesystem::temp_directory_path().string(), "/tailor-e2e-tls2-",
                         getpid()));
  ASSERT_FALSE(other_ca.empty());
  Cluster cluster("auth-tls", WithArgs({"--tls-cert", tls + "/server.pem", "--tls-key",
                                        tls + "/server.key", "--launcher", "none"}));
  ASSERT_TRUE(cluster.StartCoordinator());

  RunResult ok = cluster.Cli({"--ca-cert", tls + "/ca.pem", "list"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("no campaigns"));
  RunResult plain = cluster.Cli({"--timeout", "5", "list"});
  EXPECT_EQ(plain.exit_code, 1);
  RunResult wrong_ca = cluster.Cli({"--timeout", "5", "--ca-cert", other_ca + "/ca.pem", "list"});
  EXPECT_EQ(wrong_ca.exit_code, 1);

  // The same with stubs: the TLS handshake reaches the service; plaintext never does.
  std::ifstream in(tls + "/ca.pem");
  std::stringstream pem;
  pem << in.rdbuf();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  const std::string address = absl::StrCat("127.0.0.1:", cluster.port());
  auto secure = v1::CampaignService::NewStub(
      grpc::CreateChannel(address, grpc::SslCredentials(ssl)));
  auto insecure = v1::CampaignService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  v1::GetCampaignRequest r;
  r.set_campaign_id("cmp-missing");
  EXPECT_EQ(Unary(secure.get(), &v1::CampaignService::Stub::GetCampaign, r, ""), NOT_FOUND);
  EXPECT_EQ(Unary(insecure.get(), &v1::CampaignService::Stub::GetCampaign, r, ""),
            grpc::StatusCode::UNAVAILABLE);
  std::filesystem::remove_all(tls);
  std::filesystem::remove_all(other_ca);
}

TEST(AuthE2E, NonLoopbackNeedsTlsAndTokensOrInsecure) {
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/tailor-e2e-listen-", getpid());
  std::filesystem::create_directories(dir);
  const std::string tls = DevCa(dir + "/tls");
  ASSERT_FALSE(tls.empty());
  const std::vector<std::string> base = {BinDir() + "/tailor-coordinator", "--data-dir",
                                         dir + "/data", "--listen", "0.0.0.0:0", "--http-port",
                                         "0", "--launcher", "none"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };

  RunResult plain = e2e::Run(base, absl::Seconds(20));
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_THAT(plain.err, HasSubstr("refusing plaintext gRPC on non-loopback address 0.0.0.0:0"));

  RunResult auth_off =
      e2e::Run(with({"--tls-cert", tls + "/server.pem", "--tls-key", tls + "/server.key"}),
          absl::Seconds(20));
  EXPECT_EQ(auth_off.exit_code, 2);
  EXPECT_THAT(auth_off.err, HasSubstr("refusing --auth off on non-loopback address"));

  // TLS and tokens: it serves.
  Process served(with({"--tls-cert", tls + "/server.pem", "--tls-key", tls + "/server.key",
                       "--auth", "tokens"}),
                 dir + "/served.log");
  EXPECT_TRUE(WaitFor([&] { return ReadFile(dir + "/served.log").find("listening on port") !=
                                   std::string::npos; },
                      absl::Seconds(20)))
      << ReadFile(dir + "/served.log");
  served.Kill();
  std::filesystem::remove_all(dir);
}

TEST(AuthE2E, ProbeCampaignWithTokensThroughAnAgent) {
  Cluster cluster("auth-probe", WithArgs({"--auth", "tokens", "--launcher", "none"}));
  const std::string admin = BootstrapAdmin(cluster);
  ASSERT_TRUE(cluster.StartCoordinator());
  const std::string sub_a = CreateToken(cluster, admin, "submitter", "team-a");
  const std::string sub_b = CreateToken(cluster, admin, "submitter", "team-b");
  const std::string agent_file =
      cluster.WriteFile("agent.token", CreateToken(cluster, admin, "agent") + "\n");
  ::chmod(agent_file.c_str(), 0600);
  cluster.StartAgent("cpu-auth", {"--token-file", agent_file});

  const std::string contract = cluster.WriteFile(
      "probe.textproto",
      ReadFile(SourceDir() + "/examples/contracts/probe-cpu.textproto") + "team: \"team-a\"\n");
  cluster.set_cli_args({"--token", sub_a});
  const std::string id = cluster.Submit(contract, "auth-probe-1");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Seconds(120)))
      << cluster.Status(id).dump() << ReadFile(cluster.dir() + "/agent-cpu-auth.log");

  // Team b sees nothing of it.
  auto as = [&](const std::string& token, std::vector<std::string> args) {
    cluster.set_cli_args({"--token", token});
    RunResult r = cluster.Cli(std::move(args));
    cluster.set_cli_args({"--token", sub_a});
    return r;
  };
  RunResult hidden = as(sub_b, {"status", id});
  EXPECT_EQ(hidden.exit_code, 1);
  EXPECT_THAT(hidden.err, HasSubstr("not found"));
  // Team a downloads its artifact; team b gets NOT_FOUND for the same digest.
  RunResult arts = cluster.Cli({"artifacts", "list", id, "--json"});
  ASSERT_EQ(arts.exit_code, 0) << arts.err;
  auto artifacts = nlohmann::json::parse(arts.out)["artifacts"];
  ASSERT_GE(artifacts.size(), 1u);
  const std::string digest = artifacts[0]["digest"];
  RunResult got = cluster.Cli({"artifacts", "get", digest, "-o", cluster.dir() + "/a.out"});
  EXPECT_EQ(got.exit_code, 0) << got.err;
  RunResult refused = as(sub_b, {"artifacts", "get", digest, "-o", cluster.dir() + "/b.out"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("not found"));
  // The agent's token is an agent's: it may not list campaigns.
  RunResult as_agent = as(Trim(ReadFile(agent_file)), {"list"});
  EXPECT_EQ(as_agent.exit_code, 1);
  EXPECT_THAT(as_agent.err, HasSubstr("needs a submitter or admin token"));
}

// The local launcher's ranks authenticate with the coordinator's internal agent token and
// verify it over TLS with TAILOR_CA_CERT.
TEST(AuthE2E, LauncherRanksUseTheInternalTokenOverTls) {
  if (!std::filesystem::exists(BinDir() + "/tailor-worker") ||
      !std::filesystem::exists(BinDir() + "/tailor-train-parent")) {
    GTEST_SKIP() << "tailor-worker / tailor-train-parent not built";
  }
  const std::string tls =
      DevCa(absl::StrCat(std::filesystem::temp_directory_path().string(), "/tailor-e2e-tls3-",
                         getpid()));
  ASSERT_FALSE(tls.empty());
  Cluster cluster("auth-worker", WithArgs({"--auth", "tokens", "--tls-cert",
                                           tls + "/server.pem", "--tls-key",
                                           tls + "/server.key"}));
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  const std::string admin = BootstrapAdmin(cluster);
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.set_cli_args({"--ca-cert", tls + "/ca.pem"});
  const std::string sub_a = CreateToken(cluster, admin, "submitter", "team-a");
  cluster.set_cli_args({"--ca-cert", tls + "/ca.pem", "--token", sub_a});
  const std::string contract = cluster.WriteFile(
      "rank.textproto",
      absl::StrCat("name: \"rank1\"\nteam: \"team-a\"\nmethod: AUTOCOMPRESS\nparent { path: \"",
                   parent, "\" }\ntarget { device_kind: \"cpu\" }\n",
                   "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 "
                   "cached_prefix_tokens: 0 }\n",
                   "budget { latency_ms_max: 40 }\nranking { calibration_samples: 32 }\n",
                   "resources { rank { ranks_per_node: 1 } }\n"));
  const std::string id = cluster.Submit(contract, "auth-rank-1");
  ASSERT_FALSE(id.empty());
  nlohmann::json job;
  WaitFor(
      [&] {
        nlohmann::json s = cluster.Status(id);
        job = JobOf(s, "rank");
        return !job.is_null() &&
               (job["state"] == "JOB_SUCCEEDED" || job["state"] == "JOB_FAILED");
      },
      absl::Seconds(240));
  ASSERT_FALSE(job.is_null());
  EXPECT_EQ(job["state"], "JOB_SUCCEEDED") << job.dump();
  // The internal token is kept, owner-only, for restarts.
  struct stat st {};
  ASSERT_EQ(::stat((cluster.dir() + "/data/launcher.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  cluster.Cli({"cancel", id});
  std::filesystem::remove_all(tls);
}

}  // namespace
}  // namespace tailor::e2e
