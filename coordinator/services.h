#ifndef TAILOR_COORDINATOR_SERVICES_H_
#define TAILOR_COORDINATOR_SERVICES_H_

#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/parse_errors.h"
#include "coordinator/token_auth.h"
#include "tailor/v1/admin.grpc.pb.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "tailor/v1/campaign.grpc.pb.h"

namespace tailor::coordinator {

// Thin gRPC adapters (callback API): translate, call one Coordinator method, map the status.
// Long-polls and streams are reactors that never block a gRPC thread while waiting.
//
// A request that does not parse is INVALID_ARGUMENT ("request: not a valid <type> (<why>)"),
// answered before anything else (coordinator/parse_errors.h): each constructor lists its
// unary and server-streaming methods with ParseChecked::CheckParse.
//
// Every call is authorized first, from its "authorization: Bearer <token>" metadata:
// UNAUTHENTICATED for a missing, unknown or revoked token, PERMISSION_DENIED for a role that
// may not call the method. Submitters use the campaign API for their own team (another team's
// campaign is NOT_FOUND, worded as for a missing id); agents the agent API and cost tables;
// admins everything. Admin verbs are recorded in the audit log.
//
// Lease-bearing calls (Heartbeat, AcquireJob, ReportProgress, CompleteJob, UploadArtifact,
// PutCostTable, GetAssignment) also check that the caller is the lease's holder
// (Coordinator::CheckLeaseHolder); a foreign call is PERMISSION_DENIED, never applied, and
// recorded in the audit log as "ForeignLease". Submitters never see lease ids.

// What the services authorize with. A null authenticator means authentication is off (every
// caller is an anonymous admin); a null registry means nothing is audited and the token API
// answers UNIMPLEMENTED.
struct ServiceAuth {
  Authenticator* authenticator = nullptr;
  TokenRegistry* registry = nullptr;
  // The id of the agent token the launchers hand their ranks (data_dir/launcher.token): the
  // only token that may use a "launcher:<name>" lease. Empty without token auth or launcher.
  std::string launcher_token_id;
};

class CampaignServiceImpl final : public ParseChecked<v1::CampaignService> {
 public:
  explicit CampaignServiceImpl(Coordinator* core, ServiceAuth auth = {});

  grpc::ServerUnaryReactor* SubmitCampaign(grpc::CallbackServerContext* ctx,
                                           const v1::SubmitCampaignRequest* req,
                                           v1::SubmitCampaignResponse* resp) override;
  grpc::ServerUnaryReactor* GetCampaign(grpc::CallbackServerContext* ctx,
                                        const v1::GetCampaignRequest* req,
                                        v1::Campaign* resp) override;
  grpc::ServerUnaryReactor* ListCampaigns(grpc::CallbackServerContext* ctx,
                                          const v1::ListCampaignsRequest* req,
                                          v1::ListCampaignsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelCampaign(grpc::CallbackServerContext* ctx,
                                           const v1::CancelCampaignRequest* req,
                                           v1::Campaign* resp) override;
  grpc::ServerWriteReactor<v1::Event>* WatchCampaign(
      grpc::CallbackServerContext* ctx, const v1::WatchCampaignRequest* req) override;
  grpc::ServerUnaryReactor* GetReport(grpc::CallbackServerContext* ctx,
                                      const v1::GetReportRequest* req,
                                      v1::CampaignReport* resp) override;
  grpc::ServerUnaryReactor* ListArtifacts(grpc::CallbackServerContext* ctx,
                                          const v1::ListArtifactsRequest* req,
                                          v1::ListArtifactsResponse* resp) override;
  grpc::ServerUnaryReactor* ListCostTables(grpc::CallbackServerContext* ctx,
                                           const v1::ListCostTablesRequest* req,
                                           v1::ListCostTablesResponse* resp) override;
  grpc::ServerUnaryReactor* GetCostTable(grpc::CallbackServerContext* ctx,
                                         const v1::GetCostTableRequest* req,
                                         v1::CostTable* resp) override;
  grpc::ServerWriteReactor<v1::LogChunk>* GetJobLog(grpc::CallbackServerContext* ctx,
                                                    const v1::GetJobLogRequest* req) override;

 private:
  Coordinator* core_;
  ServiceAuth auth_;
};

class AgentServiceImpl final : public ParseChecked<v1::AgentService> {
 public:
  explicit AgentServiceImpl(Coordinator* core, ServiceAuth auth = {});

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterAgentRequest* req,
                                     v1::RegisterAgentResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* AcquireJob(grpc::CallbackServerContext* ctx,
                                       const v1::AcquireJobRequest* req,
                                       v1::AcquireJobResponse* resp) override;
  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* ctx,
                                           const v1::ReportProgressRequest* req,
                                           v1::ReportProgressResponse* resp) override;
  grpc::ServerUnaryReactor* CompleteJob(grpc::CallbackServerContext* ctx,
                                        const v1::CompleteJobRequest* req,
                                        v1::CompleteJobResponse* resp) override;
  grpc::ServerReadReactor<v1::UploadArtifactRequest>* UploadArtifact(
      grpc::CallbackServerContext* ctx, v1::Artifact* resp) override;
  grpc::ServerWriteReactor<v1::ArtifactChunk>* DownloadArtifact(
      grpc::CallbackServerContext* ctx, const v1::DownloadArtifactRequest* req) override;
  grpc::ServerUnaryReactor* PutCostTable(grpc::CallbackServerContext* ctx,
                                         const v1::PutCostTableRequest* req,
                                         v1::CostTable* resp) override;
  grpc::ServerUnaryReactor* GetAssignment(grpc::CallbackServerContext* ctx,
                                          const v1::GetAssignmentRequest* req,
                                          v1::AcquireJobResponse* resp) override;

 private:
  Coordinator* core_;
  ServiceAuth auth_;
};

class AdminServiceImpl final : public ParseChecked<v1::AdminService> {
 public:
  explicit AdminServiceImpl(Coordinator* core, ServiceAuth auth = {});

  grpc::ServerUnaryReactor* ListQueue(grpc::CallbackServerContext* ctx,
                                      const v1::ListQueueRequest* req,
                                      v1::ListQueueResponse* resp) override;
  grpc::ServerUnaryReactor* ListAgents(grpc::CallbackServerContext* ctx,
                                       const v1::ListAgentsRequest* req,
                                       v1::ListAgentsResponse* resp) override;
  grpc::ServerUnaryReactor* DrainAgent(grpc::CallbackServerContext* ctx,
                                       const v1::DrainAgentRequest* req,
                                       v1::Agent* resp) override;
  grpc::ServerUnaryReactor* Recompress(grpc::CallbackServerContext* ctx,
                                       const v1::RecompressRequest* req,
                                       v1::RecompressResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteCampaign(grpc::CallbackServerContext* ctx,
                                           const v1::DeleteCampaignRequest* req,
                                           v1::DeleteCampaignResponse* resp) override;

 private:
  Coordinator* core_;
  ServiceAuth auth_;
};

// Token management and the audit log; admin only.
class TokenServiceImpl final : public ParseChecked<v1::TokenService> {
 public:
  explicit TokenServiceImpl(ServiceAuth auth);

  grpc::ServerUnaryReactor* CreateToken(grpc::CallbackServerContext* ctx,
                                        const v1::CreateTokenRequest* req,
                                        v1::CreateTokenResponse* resp) override;
  grpc::ServerUnaryReactor* ListTokens(grpc::CallbackServerContext* ctx,
                                       const v1::ListTokensRequest* req,
                                       v1::ListTokensResponse* resp) override;
  grpc::ServerUnaryReactor* RevokeToken(grpc::CallbackServerContext* ctx,
                                        const v1::RevokeTokenRequest* req,
                                        v1::ApiToken* resp) override;
  grpc::ServerUnaryReactor* ListAuditEvents(grpc::CallbackServerContext* ctx,
                                            const v1::ListAuditEventsRequest* req,
                                            v1::ListAuditEventsResponse* resp) override;

 private:
  ServiceAuth auth_;
};

// The proto view of a stored token (never its hash).
v1::ApiToken TokenToProto(const storage::TokenRow& row);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_SERVICES_H_
