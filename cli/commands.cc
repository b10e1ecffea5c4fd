// The unary verbs: fetch, then print a human view or JSON.
#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "cli/errors.h"
#include "cli/format.h"
#include "cli/render.h"
#include "cli/watch.h"
#include "common/contract_io.h"
#include "common/grpc_util.h"
#include "common/ids.h"

namespace tailor::cli {
namespace {

constexpr char kCampaignNotFound[] = "check the id; `tailor list` shows campaigns";
constexpr int kListPageSize = 200;
// Enough for any interactive listing; stops a runaway loop if a server repeats a token.
constexpr int kMaxListPages = 50;

template <typename Stub, typename Req, typename Resp>
absl::Status Call(const CliEnv& env, Stub* stub,
                  grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                  const Req& request, Resp* response) {
  auto ctx = env.CallContext();
  return FromGrpcStatus((stub->*method)(ctx.get(), request, response));
}

int Fail(const CliEnv& env, absl::string_view what, const absl::Status& status,
         absl::string_view request_hint = "") {
  return ReportError(*env.err, what, status, env.address, request_hint);
}

}  // namespace

absl::StatusOr<v1::Campaign> FetchCampaign(const CliEnv& env, const std::string& id) {
  v1::GetCampaignRequest request;
  request.set_campaign_id(id);
  v1::Campaign campaign;
  absl::Status status = Call(env, env.campaigns, &v1::CampaignService::StubInterface::GetCampaign,
                             request, &campaign);
  if (!status.ok()) return status;
  return campaign;
}

int RunSubmit(const Invocation& inv, const CliEnv& env) {
  // Nothing is sent unless the whole file parses: errors carry file:line:col.
  absl::StatusOr<v1::DeploymentContract> contract = LoadContractFile(inv.target);
  if (!contract.ok()) {
    const bool unreadable = contract.status().code() != absl::StatusCode::kInvalidArgument;
    *env.err << "tailor: " << (unreadable ? "cannot read contract" : "invalid contract") << ": "
             << contract.status().message() << "\n  hint: "
             << (unreadable ? "check the path" : "fix the contract and submit again")
             << "; nothing was submitted\n";
    return kExitFailure;
  }
  v1::SubmitCampaignRequest request;
  *request.mutable_contract() = *std::move(contract);
  request.set_request_id(inv.request_id.empty() ? NewId("req", env.clock->Now())
                                                : inv.request_id);
  v1::SubmitCampaignResponse response;
  absl::Status status = Call(env, env.campaigns,
                             &v1::CampaignService::StubInterface::SubmitCampaign, request,
                             &response);
  if (!status.ok()) {
    return Fail(env, absl::StrCat("submit ", inv.target, " failed"), status,
                absl::StrCat("fix the contract and submit again; resubmitting with --request-id ",
                             request.request_id(), " can never create a second campaign"));
  }
  const v1::Campaign& campaign = response.campaign();
  if (inv.json && inv.wait) {
    const int code = RunWatch(env, campaign.id(), WatchOptions{0, /*quiet=*/true});
    absl::StatusOr<v1::Campaign> final_campaign = FetchCampaign(env, campaign.id());
    if (!final_campaign.ok()) {
      return Fail(env, absl::StrCat("cannot get campaign ", campaign.id()),
                  final_campaign.status());
    }
    PrintJson(*env.out, *final_campaign);
    return code;
  }
  if (inv.json) {
    PrintJson(*env.out, campaign);
  } else {
    *env.out << "campaign " << campaign.id() << (response.created() ? "" : " already")
             << " submitted (request id " << request.request_id() << ")\n"
             << std::flush;
  }
  if (!inv.wait) return kExitOk;
  return RunWatch(env, campaign.id(), WatchOptions{});
}

int RunStatus(const Invocation& inv, const CliEnv& env) {
  absl::StatusOr<v1::Campaign> campaign = FetchCampaign(env, inv.target);
  if (!campaign.ok()) {
    return Fail(env, absl::StrCat("cannot get campaign ", inv.target), campaign.status(),
                kCampaignNotFound);
  }
  if (inv.json) {
    PrintJson(*env.out, *campaign);
  } else {
    *env.out << RenderCampaign(*campaign, env.Render());
  }
  return kExitOk;
}

int RunList(const Invocation& inv, const CliEnv& env) {
  v1::ListCampaignsResponse all;
  v1::ListCampaignsRequest request;
  request.set_page_size(kListPageSize);
  request.set_team(inv.team);
  for (int page = 0; page < kMaxListPages; ++page) {
    v1::ListCampaignsResponse response;
    absl::Status status = Call(env, env.campaigns,
                               &v1::CampaignService::StubInterface::ListCampaigns, request,
                               &response);
    if (!status.ok()) return Fail(env, "cannot list campaigns", status);
    for (v1::Campaign& c : *response.mutable_campaigns()) *all.add_campaigns() = std::move(c);
    if (response.next_page_token().empty() ||
        response.next_page_token() == request.page_token()) {
      break;
    }
    request.set_page_token(response.next_page_token());
  }
  if (inv.json) {
    PrintJson(*env.out, all);
  } else {
    *env.out << RenderCampaignList({all.campaigns().begin(), all.campaigns().end()},
                                   env.Render());
  }
  return kExitOk;
}

int RunQueue(const Invocation& inv, const CliEnv& env) {
  v1::ListQueueRequest request;
  v1::ListQueueResponse response;
  absl::Status status =
      Call(env, env.admin, &v1::AdminService::StubInterface::ListQueue, request, &response);
  if (!status.ok()) return Fail(env, "cannot list the queue", status);
  if (inv.json) {
    PrintJson(*env.out, response);
  } else {
    *env.out << RenderQueue(response, env.Render());
  }
  return kExitOk;
}

int RunAgents(const Invocation& inv, const CliEnv& env) {
  v1::ListAgentsRequest request;
  request.set_include_offline(inv.all);
  v1::ListAgentsResponse response;
  absl::Status status =
      Call(env, env.admin, &v1::AdminService::StubInterface::ListAgents, request, &response);
  if (!status.ok()) return Fail(env, "cannot list agents", status);
  if (inv.json) {
    PrintJson(*env.out, response);
  } else {
    *env.out << RenderAgents(response, env.Render());
  }
  return kExitOk;
}

int RunDrain(const Invocation& inv, const CliEnv& env) {
  v1::DrainAgentRequest request;
  request.set_agent_id(inv.target);
  request.set_undrain(inv.undo);
  v1::Agent agent;
  absl::Status status =
      Call(env, env.admin, &v1::AdminService::StubInterface::DrainAgent, request, &agent);
  if (!status.ok()) {
    return Fail(env, absl::StrCat("cannot ", inv.undo ? "undrain" : "drain", " agent ", inv.target),
                status, "check the agent id; `tailor agents --all` lists agents");
  }
  if (inv.undo) {
    *env.out << "agent " << agent.id() << " takes work again (" << AgentStateName(agent.state())
             << ")\n";
  } else {
    *env.out << "agent " << agent.id() << " drained: it finishes its "
             << agent.current_job_ids_size() << " current job(s) and takes no new work\n";
  }
  return kExitOk;
}

int RunCancel(const Invocation& inv, const CliEnv& env) {
  v1::CancelCampaignRequest request;
  request.set_campaign_id(inv.target);
  request.set_reason(inv.reason);
  v1::Campaign campaign;
  absl::Status status = Call(env, env.campaigns,
                             &v1::CampaignService::StubInterface::CancelCampaign, request,
                             &campaign);
  if (!status.ok()) {
    return Fail(env, absl::StrCat("cannot cancel campaign ", inv.target), status,
                kCampaignNotFound);
  }
  if (campaign.state() == v1::CAMPAIGN_CANCELLED) {
    *env.out << "campaign " << campaign.id() << " cancelled\n";
  } else {
    *env.out << "campaign " << campaign.id() << " already ended "
             << CampaignStateName(campaign.state()) << "; nothing to cancel\n";
  }
  return kExitOk;
}

int RunDelete(const Invocation& inv, const CliEnv& env) {
  v1::DeleteCampaignRequest request;
  request.set_campaign_id(inv.target);
  v1::DeleteCampaignResponse deleted;
  absl::Status status = Call(env, env.admin, &v1::AdminService::StubInterface::DeleteCampaign,
                             request, &deleted);
  if (!status.ok()) {
    return Fail(env, absl::StrCat("cannot delete campaign ", inv.target), status,
                kCampaignNotFound);
  }
  if (inv.json) {
    PrintJson(*env.out, deleted);
    return kExitOk;
  }
  *env.out << "campaign " << deleted.campaign_id() << " deleted: " << deleted.jobs()
           << " job(s), " << deleted.events() << " event(s), " << deleted.artifacts()
           << " artifact row(s); their blobs are kept\n";
  return kExitOk;
}

int RunArtifactsList(const Invocation& inv, const CliEnv& env) {
  v1::ListArtifactsRequest request;
  request.set_campaign_id(inv.target);
  v1::ListArtifactsResponse response;
  absl::Status status = Call(env, env.campaigns,
                             &v1::CampaignService::StubInterface::ListArtifacts, request,
                             &response);
  if (!status.ok()) {
    return Fail(env, absl::StrCat("cannot list artifacts of campaign ", inv.target), status,
                kCampaignNotFound);
  }
  if (inv.json) {
    PrintJson(*env.out, response);
  } else {
    *env.out << RenderArtifacts({response.artifacts().begin(), response.artifacts().end()},
                                env.Render());
  }
  return kExitOk;
}

int RunCostsList(const Invocation& inv, const CliEnv& env) {
  v1::ListCostTablesRequest request;
  request.set_device_kind(inv.device_kind);
  v1::ListCostTablesResponse response;
  absl::Status status = Call(env, env.campaigns,
                             &v1::CampaignService::StubInterface::ListCostTables, request,
                             &response);
  if (!status.ok()) return Fail(env, "cannot list cost tables", status);
  if (inv.json) {
    PrintJson(*env.out, response);
  } else {
    *env.out << RenderCostTables(response, env.Render());
  }
  return kExitOk;
}

int RunCostsShow(const Invocation& inv, const CliEnv& env) {
  v1::GetCostTableRequest request;
  request.set_fingerprint(inv.target);
  v1::CostTable table;
  absl::Status status = Call(env, env.campaigns,
                             &v1::CampaignService::StubInterface::GetCostTable, request, &table);
  if (!status.ok()) {
    return Fail(env, absl::StrCat("cannot get cost table ", inv.target), status,
                "check the fingerprint (the full hex); `tailor costs list` shows them");
  }
  if (inv.json) {
    PrintJson(*env.out, table);
  } else {
    *env.out << RenderCostTable(table, env.Render());
  }
  return kExitOk;
}

int RunReport(const Invocation& inv, const CliEnv& env) {
  v1::GetReportRequest request;
  request.set_campaign_id(inv.target);
  v1::CampaignReport report;
  absl::Status status = Call(env, env.campaigns, &v1::CampaignService::StubInterface::GetReport,
                             request, &report);
  if (!status.ok()) {
    return Fail(env, absl::StrCat("cannot get the report of campaign ", inv.target), status,
                kCampaignNotFound);
  }
  if (inv.json) {
    PrintJson(*env.out, report);
  } else {
    *env.out << RenderReport(report, env.Render());
  }
  return kExitOk;
}

int RunRecompress(const Invocation& inv, const CliEnv& env) {
  v1::RecompressRequest request;
  request.set_engine_version(inv.engine_version);
  request.set_engine(inv.engine);
  request.set_dry_run(inv.dry_run);
  v1::RecompressResponse response;
  absl::Status status =
      Call(env, env.admin, &v1::AdminService::StubInterface::Recompress, request, &response);
  if (!status.ok()) return Fail(env, "recompress failed", status);
  if (inv.json) {
    PrintJson(*env.out, response);
  } else {
    *env.out << RenderRecompress(request, response);
  }
  return kExitOk;
}

int Execute(const Invocation& inv, const CliEnv& env) {
  switch (inv.verb) {
    case Verb::kSubmit:
      return RunSubmit(inv, env);
    case Verb::kStatus:
      return RunStatus(inv, env);
    case Verb::kWatch:
      return RunWatch(env, inv.target, WatchOptions{inv.from_seq, false});
    case Verb::kList:
      return RunList(inv, env);
    case Verb::kQueue:
      return RunQueue(inv, env);
    case Verb::kAgents:
      return RunAgents(inv, env);
    case Verb::kDrain:
      return RunDrain(inv, env);
    case Verb::kCancel:
      return RunCancel(inv, env);
    case Verb::kArtifactsList:
      return RunArtifactsList(inv, env);
    case Verb::kArtifactsGet:
      return RunArtifactsGet(inv, env);
    case Verb::kCostsList:
      return RunCostsList(inv, env);
    case Verb::kCostsShow:
      return RunCostsShow(inv, env);
    case Verb::kReport:
      return RunReport(inv, env);
    case Verb::kLogs:
      return RunLogs(inv, env);
    case Verb::kRecompress:
      return RunRecompress(inv, env);
    case Verb::kDelete:
      return RunDelete(inv, env);
    case Verb::kTokensCreate:
      return RunTokensCreate(inv, env);
    case Verb::kTokensList:
      return RunTokensList(inv, env);
    case Verb::kTokensRevoke:
      return RunTokensRevoke(inv, env);
    case Verb::kTokensAudit:
      return RunTokensAudit(inv, env);
    case Verb::kNone:
      break;
  }
  return ReportUsageError(*env.err, "no command given");
}

}  // namespace tailor::cli
