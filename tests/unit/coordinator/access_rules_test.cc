// The access-rules table (coordinator/access_rules.h): every RPC of the protos and every HTTP
// route has exactly one row, and each row's verdict for no token, a submitter of the
// campaign's team, a submitter of another team, an agent and an admin is the one written
// down here (and in docs/operations.md). A new RPC or route without a row, or without an
// expectation here, fails. tests/unit/coordinator/http_server_test.cc walks the routes over
// HTTP, tests/e2e/auth_e2e_test.cc the RPCs over gRPC.
#include "coordinator/access_rules.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/http/http_server.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "tailor/v1/admin.grpc.pb.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "tailor/v1/campaign.grpc.pb.h"

namespace tailor::coordinator {
namespace {

using absl::StatusCode;
using ::testing::HasSubstr;

constexpr StatusCode OK = StatusCode::kOk;
constexpr StatusCode UNAUTH = StatusCode::kUnauthenticated;
constexpr StatusCode DENIED = StatusCode::kPermissionDenied;
constexpr StatusCode HIDDEN = StatusCode::kNotFound;

// The callers every row is walked through; the campaign in question is team a's.
const Principal kSubmitterA{"tok-a", "team-a", Role::kSubmitter};
const Principal kSubmitterB{"tok-b", "team-b", Role::kSubmitter};
const Principal kAgentToken{"tok-agent", "", Role::kAgent};
const Principal kAdminToken{"tok-admin", "", Role::kAdmin};

struct Expected {
  StatusCode anonymous, team_a, team_b, agent, admin;
};

// What each RPC answers each caller about team a's campaign (before the method's own checks:
// a missing campaign, a bad lease).
const std::map<std::string, Expected>& GrpcExpectations() {
  static const auto* expected = new std::map<std::string, Expected>{
      {"CampaignService/SubmitCampaign", {UNAUTH, OK, DENIED, DENIED, OK}},
      {"CampaignService/GetCampaign", {UNAUTH, OK, HIDDEN, DENIED, OK}},
      {"CampaignService/ListCampaigns", {UNAUTH, OK, OK, DENIED, OK}},
      {"CampaignService/CancelCampaign", {UNAUTH, OK, HIDDEN, DENIED, OK}},
      {"CampaignService/WatchCampaign", {UNAUTH, OK, HIDDEN, DENIED, OK}},
      {"CampaignService/GetReport", {UNAUTH, OK, HIDDEN, DENIED, OK}},
      {"CampaignService/ListArtifacts", {UNAUTH, OK, HIDDEN, DENIED, OK}},
      {"CampaignService/ListCostTables", {UNAUTH, OK, OK, OK, OK}},
      {"CampaignService/GetCostTable", {UNAUTH, OK, OK, OK, OK}},
      {"CampaignService/GetJobLog", {UNAUTH, OK, HIDDEN, DENIED, OK}},
      {"AgentService/Register", {UNAUTH, DENIED, DENIED, OK, OK}},
      {"AgentService/Heartbeat", {UNAUTH, DENIED, DENIED, OK, OK}},
      {"AgentService/AcquireJob", {UNAUTH, DENIED, DENIED, OK, OK}},
      {"AgentService/ReportProgress", {UNAUTH, DENIED, DENIED, OK, OK}},
      {"AgentService/CompleteJob", {UNAUTH, DENIED, DENIED, OK, OK}},
      {"AgentService/UploadArtifact", {UNAUTH, DENIED, DENIED, OK, OK}},
      // An artifact of team a's campaign.
      {"AgentService/DownloadArtifact", {UNAUTH, OK, HIDDEN, OK, OK}},
      {"AgentService/PutCostTable", {UNAUTH, DENIED, DENIED, OK, OK}},
      {"AgentService/GetAssignment", {UNAUTH, DENIED, DENIED, OK, OK}},
      // Submitters: their team's entries (see ScopeQueueKeepsTheOwnTeamsEntries).
      {"AdminService/ListQueue", {UNAUTH, OK, OK, DENIED, OK}},
      {"AdminService/ListAgents", {UNAUTH, DENIED, DENIED, DENIED, OK}},
      {"AdminService/DrainAgent", {UNAUTH, DENIED, DENIED, DENIED, OK}},
      {"AdminService/Recompress", {UNAUTH, DENIED, DENIED, DENIED, OK}},
      {"AdminService/DeleteCampaign", {UNAUTH, DENIED, DENIED, DENIED, OK}},
      {"TokenService/CreateToken", {UNAUTH, DENIED, DENIED, DENIED, OK}},
      {"TokenService/ListTokens", {UNAUTH, DENIED, DENIED, DENIED, OK}},
      {"TokenService/RevokeToken", {UNAUTH, DENIED, DENIED, DENIED, OK}},
      {"TokenService/ListAuditEvents", {UNAUTH, DENIED, DENIED, DENIED, OK}},
  };
  return *expected;
}

// Every method of every service in the tailor.v1 protos, by its full gRPC name.
std::vector<std::string> AllRpcs() {
  std::vector<std::string> rpcs;
  std::set<const google::protobuf::FileDescriptor*> files = {
      v1::ListQueueRequest::descriptor()->file(), v1::AcquireJobRequest::descriptor()->file(),
      v1::GetCampaignRequest::descriptor()->file(), v1::DeploymentContract::descriptor()->file()};
  for (const google::protobuf::FileDescriptor* file : files) {
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        rpcs.push_back(absl::StrCat("/", service->full_name(), "/", service->method(m)->name()));
      }
    }
  }
  return rpcs;
}

int RowsFor(absl::string_view call) {
  int n = 0;
  for (const AccessRule& rule : AccessRules()) n += rule.call == call ? 1 : 0;
  return n;
}

// The verdict the rules give `caller` (nullopt: no token) for `rule` about a campaign, job or
// artifact of team a.
StatusCode Verdict(const AccessRule& rule, const std::optional<Principal>& caller) {
  if (!caller.has_value()) return Admits(rule, kCallerAnonymous) ? OK : UNAUTH;
  absl::Status st = CheckCall(rule.call, *caller);
  if (!st.ok()) return st.code();
  switch (rule.visibility) {
    case Visibility::kOneCampaign:
      return CheckCampaignVisible(*caller, "c-a", "team-a").code();
    case Visibility::kOwnTeamSubmission: {
      v1::DeploymentContract contract;
      contract.set_team("team-a");
      return ScopeSubmission(*caller, &contract).code();
    }
    case Visibility::kTeamListing:
    case Visibility::kNoCampaigns:
      return OK;
  }
  return StatusCode::kInternal;
}

TEST(AccessRulesTest, EveryRpcHasExactlyOneRowAndOneExpectation) {
  const std::vector<std::string> rpcs = AllRpcs();
  ASSERT_EQ(rpcs.size(), GrpcExpectations().size());
  for (const std::string& rpc : rpcs) {
    EXPECT_EQ(RowsFor(rpc), 1) << rpc;
    EXPECT_EQ(GrpcExpectations().count(rpc.substr(std::string("/tailor.v1.").size())), 1u)
        << rpc << " has no expectation in this test";
  }
  // And no row names a method that does not exist.
  const std::set<std::string> known(rpcs.begin(), rpcs.end());
  for (const AccessRule& rule : AccessRules()) {
    if (absl::StartsWith(rule.call, "/")) {
      EXPECT_EQ(known.count(std::string(rule.call)), 1u) << rule.call;
    }
  }
}

TEST(AccessRulesTest, EveryHttpRouteHasExactlyOneRow) {
  const std::vector<std::string> routes = http::HttpServer::RouteKeys();
  const std::set<std::string> served(routes.begin(), routes.end());
  EXPECT_EQ(served.size(), routes.size()) << "a route is served twice";
  for (const std::string& route : routes) EXPECT_EQ(RowsFor(route), 1) << route;
  for (const AccessRule& rule : AccessRules()) {
    if (!absl::StartsWith(rule.call, "/")) {
      EXPECT_EQ(served.count(std::string(rule.call)), 1u) << rule.call << " is not served";
    }
  }
}

TEST(AccessRulesTest, EveryRpcThroughEveryRoleAndTeam) {
  for (const std::string& rpc : AllRpcs()) {
    const AccessRule* rule = FindAccessRule(rpc);
    ASSERT_NE(rule, nullptr) << rpc;
    auto it = GrpcExpectations().find(rpc.substr(std::string("/tailor.v1.").size()));
    ASSERT_NE(it, GrpcExpectations().end()) << rpc;
    const Expected& e = it->second;
    EXPECT_EQ(Verdict(*rule, std::nullopt), e.anonymous) << rpc << ": no token";
    EXPECT_EQ(Verdict(*rule, kSubmitterA), e.team_a) << rpc << ": team a's submitter";
    EXPECT_EQ(Verdict(*rule, kSubmitterB), e.team_b) << rpc << ": team b's submitter";
    EXPECT_EQ(Verdict(*rule, kAgentToken), e.agent) << rpc << ": agent";
    EXPECT_EQ(Verdict(*rule, kAdminToken), e.admin) << rpc << ": admin";
    // With --auth off every caller is an anonymous admin.
    EXPECT_EQ(Verdict(*rule, Principal{}), e.admin) << rpc << ": auth off";
  }
}

TEST(AccessRulesTest, RefusalsNameWhatTheCallNeeds) {
  absl::Status st = CheckCall("/tailor.v1.TokenService/ListTokens", kSubmitterA);
  EXPECT_EQ(st.code(), DENIED);
  EXPECT_EQ(st.message(), "ListTokens needs an admin token; this is submitter token tok-a");
  st = CheckCall("/tailor.v1.AgentService/Heartbeat", kSubmitterA);
  EXPECT_EQ(st.message(), "Heartbeat needs an agent or admin token; this is submitter token tok-a");
  st = CheckCall("GET /api/queue", kAgentToken);
  EXPECT_EQ(st.code(), DENIED);
  EXPECT_EQ(st.message(),
            "GET /api/queue needs a submitter or admin token; this is agent token tok-agent");
  // A call nobody wrote a rule for is refused, even for admins.
  st = CheckCall("/tailor.v1.AdminService/DropDatabase", kAdminToken);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_THAT(st.message(), HasSubstr("has no access rule"));
}

TEST(AccessRulesTest, HiddenCampaignsLookMissing) {
  absl::Status hidden = CheckCampaignVisible(kSubmitterB, "c-a", "team-a");
  EXPECT_EQ(hidden.code(), HIDDEN);
  EXPECT_EQ(hidden.message(), "campaign 'c-a' not found");
  EXPECT_EQ(hidden, HiddenCampaign("c-a"));
}

TEST(AccessRulesTest, SubmissionsAreForTheOwnTeam) {
  v1::DeploymentContract none;
  ASSERT_TRUE(ScopeSubmission(kSubmitterA, &none).ok());
  EXPECT_EQ(none.team(), "team-a");
  v1::DeploymentContract other;
  other.set_team("team-b");
  absl::Status st = ScopeSubmission(kSubmitterA, &other);
  EXPECT_EQ(st.code(), DENIED);
  EXPECT_THAT(st.message(), HasSubstr("team: token tok-a submits for team 'team-a' only"));
  EXPECT_TRUE(ScopeSubmission(kAdminToken, &other).ok());
  EXPECT_EQ(other.team(), "team-b");
}

TEST(AccessRulesTest, CampaignListingsAreTheOwnTeams) {
  v1::ListCampaignsRequest all;
  std::optional<v1::ListCampaignsRequest> a = ScopeCampaignListing(kSubmitterA, all);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->team(), "team-a");
  v1::ListCampaignsRequest of_b;
  of_b.set_team("team-b");
  EXPECT_FALSE(ScopeCampaignListing(kSubmitterA, of_b).has_value());
  // A submitter token without a team sees nothing rather than every team.
  EXPECT_FALSE(ScopeCampaignListing(Principal{"tok-x", "", Role::kSubmitter}, all).has_value());
  std::optional<v1::ListCampaignsRequest> admin = ScopeCampaignListing(kAdminToken, of_b);
  ASSERT_TRUE(admin.has_value());
  EXPECT_EQ(admin->team(), "team-b");
}

v1::ListQueueResponse TwoTeamQueue() {
  v1::ListQueueResponse q;
  for (const char* team : {"team-a", "team-b", "team-a"}) {
    v1::QueueEntry* e = q.add_entries();
    e->set_team(team);
    e->mutable_job()->set_id(absl::StrCat("j-", q.entries_size()));
  }
  q.add_summary()->set_device_kind("cpu");
  q.add_summary()->set_device_kind("gpu");
  return q;
}

TEST(AccessRulesTest, ScopeQueueKeepsTheOwnTeamsEntries) {
  v1::ListQueueResponse a = ScopeQueue(kSubmitterA, TwoTeamQueue());
  ASSERT_EQ(a.entries_size(), 2);
  EXPECT_EQ(a.entries(0).job().id(), "j-1");
  EXPECT_EQ(a.entries(1).job().id(), "j-3");
  EXPECT_EQ(a.summary_size(), 2) << "the counts stay cluster-wide";
  v1::ListQueueResponse b = ScopeQueue(kSubmitterB, TwoTeamQueue());
  ASSERT_EQ(b.entries_size(), 1);
  EXPECT_EQ(b.entries(0).team(), "team-b");
  EXPECT_EQ(ScopeQueue(kAdminToken, TwoTeamQueue()).entries_size(), 3);
}

TEST(AccessRulesTest, ScopeAgentsKeepsOnlyVisibleJobs) {
  v1::ListAgentsResponse agents;
  v1::Agent* agent = agents.add_agents();
  agent->add_current_job_ids("j-1");
  agent->add_current_job_ids("j-2");
  v1::ListAgentsResponse for_b = agents;
  ScopeAgents(kSubmitterB, ScopeQueue(kSubmitterB, TwoTeamQueue()), &for_b);
  ASSERT_EQ(for_b.agents_size(), 1);
  ASSERT_EQ(for_b.agents(0).current_job_ids_size(), 1);
  EXPECT_EQ(for_b.agents(0).current_job_ids(0), "j-2");
  v1::ListAgentsResponse for_admin = agents;
  ScopeAgents(kAdminToken, TwoTeamQueue(), &for_admin);
  EXPECT_EQ(for_admin.agents(0).current_job_ids_size(), 2);
}

}  // namespace
}  // namespace tailor::coordinator
