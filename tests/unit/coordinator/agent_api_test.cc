// The agent API over the real gRPC services. Leases are proof of ownership (docs/operations.md
// "Leases are bound to their holder"): a second agent calling the lease-bearing RPCs with the first agent's
// lease is refused with PERMISSION_DENIED, nothing is applied, the refusal is audited, and the
// real holder then completes the job normally. Under token auth the caller's token must be the
// one its agent registered with; submitters never see lease ids. Then the server-side input
// checks (docs/operations.md "Input limits"), each with its exact code and message.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/sha256.h"
#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "tailor/v1/campaign.grpc.pb.h"

namespace tailor::coordinator {
namespace {

using ::testing::HasSubstr;

class AgentApiTest : public ::testing::Test {
 protected:
  void StartServer(bool auth_tokens) {
    std::string tmpl = ::testing::TempDir() + "/tailor_agent_api_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ServerOptions options;
    options.data_dir = dir_;
    options.listen = "127.0.0.1:0";
    options.launcher = "none";
    options.auth_tokens = auth_tokens;
    auto server = CoordinatorServer::Create(options, Clock::Real());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(*port),
                                       grpc::InsecureChannelCredentials());
    agents_ = v1::AgentService::NewStub(channel);
    campaigns_ = v1::CampaignService::NewStub(channel);
    tokens_ = v1::TokenService::NewStub(channel);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Milliseconds(100));
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string NewToken(Role role, const std::string& team = "") {
    auto issued = server_->tokens()->Create(role, team, "test");
    EXPECT_TRUE(issued.ok()) << issued.status();
    return issued.ok() ? issued->secret : "";
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }

  std::string Register(const std::string& name, const std::string& token = "") {
    v1::RegisterAgentRequest req;
    req.mutable_info()->set_name(name);
    req.mutable_info()->set_device_kind("cpu");
    req.mutable_info()->add_job_kinds("probe");
    v1::RegisterAgentResponse resp;
    const grpc::Status st = agents_->Register(Ctx(token).get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.agent_id();
  }

  std::string SubmitProbe(const std::string& token = "", const std::string& team = "") {
    v1::SubmitCampaignRequest req;
    req.set_request_id("r-" + std::to_string(++submissions_));
    req.mutable_contract()->set_name("probe");
    if (!team.empty()) req.mutable_contract()->set_team(team);
    req.mutable_contract()->set_method(v1::PROBE);
    req.mutable_contract()->mutable_target()->set_device_kind("cpu");
    v1::SubmitCampaignResponse resp;
    const grpc::Status st = campaigns_->SubmitCampaign(Ctx(token).get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.campaign().id();
  }

  v1::AcquireJobResponse Acquire(const std::string& agent_id, const std::string& token = "") {
    v1::AcquireJobRequest req;
    req.set_agent_id(agent_id);
    v1::AcquireJobResponse resp;
    const grpc::Status st = agents_->AcquireJob(Ctx(token).get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_TRUE(resp.assigned());
    return resp;
  }

  // Writes `content` as the first attempt's log of `job_id`, where GetJobLog reads it.
  std::filesystem::path WriteJobLog(const std::string& job_id, const std::string& content) {
    const std::filesystem::path log =
        std::filesystem::path(dir_) / "logs" / job_id / "attempt-1.log";
    std::filesystem::create_directories(log.parent_path());
    std::ofstream(log) << content;
    return log;
  }

  v1::Campaign GetCampaign(const std::string& id, const std::string& token = "") {
    v1::GetCampaignRequest req;
    req.set_campaign_id(id);
    v1::Campaign c;
    const grpc::Status st = campaigns_->GetCampaign(Ctx(token).get(), req, &c);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return c;
  }

  grpc::Status Complete(const std::string& lease, const std::string& agent_id,
                        const std::string& token = "") {
    v1::CompleteJobRequest req;
    req.set_lease_id(lease);
    req.set_agent_id(agent_id);
    req.set_success(true);
    req.mutable_output()->set_reason("forged");
    v1::CompleteJobResponse resp;
    return agents_->CompleteJob(Ctx(token).get(), req, &resp);
  }

  grpc::Status Progress(const std::string& lease, const std::string& agent_id, double fraction,
                        const std::string& token = "") {
    v1::ReportProgressRequest req;
    req.set_lease_id(lease);
    req.set_agent_id(agent_id);
    req.mutable_progress()->set_fraction(fraction);
    req.mutable_progress()->set_message("forged");
    v1::ReportProgressResponse resp;
    return agents_->ReportProgress(Ctx(token).get(), req, &resp);
  }

  grpc::Status Upload(const std::string& lease, const std::string& agent_id,
                      const std::string& token = "", v1::Artifact* out = nullptr) {
    auto ctx = Ctx(token);
    v1::Artifact artifact;
    auto stream = agents_->UploadArtifact(ctx.get(), out != nullptr ? out : &artifact);
    const std::string data = "weights";
    v1::UploadArtifactRequest req;
    v1::ArtifactHeader* h = req.mutable_header();
    h->set_lease_id(lease);
    h->set_agent_id(agent_id);
    h->set_kind("model");
    h->set_name("model.bin");
    h->set_size_bytes(static_cast<int64_t>(data.size()));
    h->set_sha256(Sha256::Hex(data));
    stream->Write(req);
    req.Clear();
    req.set_data(data);
    stream->Write(req);
    stream->WritesDone();
    return stream->Finish();
  }

  grpc::Status Assignment(const std::string& lease, const std::string& agent_id,
                          const std::string& token = "") {
    v1::GetAssignmentRequest req;
    req.set_lease_id(lease);
    req.set_agent_id(agent_id);
    v1::AcquireJobResponse resp;
    return agents_->GetAssignment(Ctx(token).get(), req, &resp);
  }

  grpc::Status Heartbeat(const std::string& agent_id, const std::string& token) {
    v1::HeartbeatRequest req;
    req.set_agent_id(agent_id);
    v1::HeartbeatResponse resp;
    return agents_->Heartbeat(Ctx(token).get(), req, &resp);
  }

  // Every lease-bearing call with `lease`, made as `agent_id` with `token`, is refused with
  // PERMISSION_DENIED and a message containing `why`.
  void ExpectAllRefused(const std::string& lease, const std::string& agent_id,
                        const std::string& token, const std::string& why) {
    for (const grpc::Status& st :
         {Complete(lease, agent_id, token), Progress(lease, agent_id, 0.5, token),
          Upload(lease, agent_id, token), Assignment(lease, agent_id, token)}) {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
      EXPECT_THAT(st.error_message(), HasSubstr(why));
    }
  }

  int CountAudited(const std::string& verb, const std::string& target) {
    v1::ListAuditEventsRequest req;
    v1::ListAuditEventsResponse resp;
    const grpc::Status st = tokens_->ListAuditEvents(Ctx(admin_).get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    int n = 0;
    for (const auto& e : resp.events()) n += e.verb() == verb && e.target() == target;
    return n;
  }

  // Nothing the refused calls sent reached the job: still leased, no progress, no artifact.
  void ExpectUntouched(const std::string& campaign_id) {
    const v1::Campaign c = GetCampaign(campaign_id, admin_);
    ASSERT_EQ(c.jobs_size(), 1);
    EXPECT_EQ(c.jobs(0).state(), v1::JOB_LEASED);
    EXPECT_EQ(c.jobs(0).progress().message(), "");
    EXPECT_EQ(c.state(), v1::CAMPAIGN_RUNNING);
    v1::ListArtifactsRequest req;
    req.set_campaign_id(campaign_id);
    v1::ListArtifactsResponse artifacts;
    ASSERT_TRUE(campaigns_->ListArtifacts(Ctx(admin_).get(), req, &artifacts).ok());
    EXPECT_EQ(artifacts.artifacts_size(), 0);
  }

  std::string dir_;
  std::string admin_;  // empty with auth off: every caller is an admin
  int submissions_ = 0;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<v1::AgentService::Stub> agents_;
  std::unique_ptr<v1::CampaignService::Stub> campaigns_;
  std::unique_ptr<v1::TokenService::Stub> tokens_;
};

TEST_F(AgentApiTest, AnotherAgentCannotUseALeaseAndTheHolderStillCompletes) {
  StartServer(/*auth_tokens=*/false);
  const std::string campaign = SubmitProbe();
  const std::string holder = Register("box-1");
  const std::string other = Register("box-2");
  const v1::AcquireJobResponse a = Acquire(holder);
  const std::string lease = a.lease().id();

  ExpectAllRefused(lease, other, "", "lease '" + lease + "' was not granted to " + other);
  ExpectUntouched(campaign);
  EXPECT_EQ(CountAudited("ForeignLease", lease), 4);

  // A caller that names no agent is told which field is missing.
  const grpc::Status anonymous = Complete(lease, "");
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(anonymous.error_message(),
            "agent_id: required: the agent id (or launcher:<name>) the lease was granted to");
  // A lease that never existed is answered as before, whoever asks.
  EXPECT_EQ(Complete("l-nope", "").error_code(), grpc::StatusCode::NOT_FOUND);
  const grpc::Status headerless = Upload(lease, "");
  EXPECT_EQ(headerless.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(headerless.error_message(), HasSubstr("header.agent_id: required"));
  ExpectUntouched(campaign);

  // The holder's own calls go through.
  EXPECT_TRUE(Assignment(lease, holder).ok());
  EXPECT_TRUE(Progress(lease, holder, 0.5).ok());
  EXPECT_TRUE(Upload(lease, holder).ok());
  const grpc::Status done = Complete(lease, holder);
  ASSERT_TRUE(done.ok()) << done.error_message();
  EXPECT_EQ(GetCampaign(campaign).state(), v1::CAMPAIGN_SUCCEEDED);
  // How an ended attempt ended is the holder's business too.
  const grpc::Status late = Complete(lease, other);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::PERMISSION_DENIED) << late.error_message();
}

TEST_F(AgentApiTest, UnderTokenAuthTheTokenMustBeTheOneTheHolderRegisteredWith) {
  StartServer(/*auth_tokens=*/true);
  admin_ = NewToken(Role::kAdmin);
  const std::string token_1 = NewToken(Role::kAgent);
  const std::string token_2 = NewToken(Role::kAgent);
  const std::string campaign = SubmitProbe(admin_, "vision");
  const std::string holder = Register("box-1", token_1);
  const std::string other = Register("box-2", token_2);
  const std::string lease = Acquire(holder, token_1).lease().id();

  // Naming the holder's id is not enough: the token is the identity.
  ExpectAllRefused(lease, holder, token_2, "it answers only to the token its agent registered");
  ExpectAllRefused(lease, other, token_2, "was not granted to " + other);
  ExpectAllRefused(lease, "launcher:local", token_2, "was not granted to launcher:local");
  ExpectUntouched(campaign);
  EXPECT_EQ(CountAudited("ForeignLease", lease), 12);

  // Nor may another token heartbeat or acquire as the holder.
  const grpc::Status hb = Heartbeat(holder, token_2);
  EXPECT_EQ(hb.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(hb.error_message(), HasSubstr("registered with another token"));
  const grpc::Status launcher = Heartbeat("launcher:local", token_2);
  EXPECT_EQ(launcher.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(launcher.error_message(), HasSubstr("reserved for the coordinator's launcher"));
  EXPECT_EQ(CountAudited("ForeignAgent", holder), 1);

  // Submitters never see the lease id; admins do.
  const std::string submitter = NewToken(Role::kSubmitter, "vision");
  EXPECT_EQ(GetCampaign(campaign, submitter).jobs(0).lease_id(), "");
  EXPECT_EQ(GetCampaign(campaign, admin_).jobs(0).lease_id(), lease);
  v1::ListCampaignsRequest list;
  v1::ListCampaignsResponse listed;
  ASSERT_TRUE(campaigns_->ListCampaigns(Ctx(submitter).get(), list, &listed).ok());
  ASSERT_EQ(listed.campaigns_size(), 1);
  EXPECT_EQ(listed.campaigns(0).jobs(0).lease_id(), "");

  // An admin registering the agent's name leaves the binding with the agent's token.
  EXPECT_EQ(Register("box-1", admin_), holder);
  EXPECT_TRUE(Heartbeat(holder, token_1).ok());
  ASSERT_TRUE(Complete(lease, holder, token_1).ok());
  EXPECT_EQ(GetCampaign(campaign, admin_).state(), v1::CAMPAIGN_SUCCEEDED);
}

TEST_F(AgentApiTest, AdminUploadsNeedNoLeaseButAgentUploadsDo) {
  StartServer(/*auth_tokens=*/true);
  admin_ = NewToken(Role::kAdmin);
  const std::string agent = NewToken(Role::kAgent);
  v1::Artifact stored;
  const grpc::Status admin_upload = Upload("", "", admin_, &stored);
  ASSERT_TRUE(admin_upload.ok()) << admin_upload.error_message();
  EXPECT_EQ(stored.digest(), Sha256::Hex("weights"));
  EXPECT_EQ(stored.campaign_id(), "");
  const grpc::Status agent_upload = Upload("", "", agent);
  EXPECT_EQ(agent_upload.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(agent_upload.error_message(),
            "header.lease_id: required for agent uploads (empty only for admin uploads)");
}

// --- server-side input checks ---

TEST_F(AgentApiTest, ProgressFractionsOutsideZeroToOneAreRefused) {
  StartServer(/*auth_tokens=*/false);
  const std::string campaign = SubmitProbe();
  const std::string holder = Register("box-1");
  const std::string lease = Acquire(holder).lease().id();
  const struct {
    double fraction;
    const char* message;
  } cases[] = {{std::nan(""), "progress.fraction: must be in 0..1, got nan"},
               {-0.25, "progress.fraction: must be in 0..1, got -0.25"},
               {1.5, "progress.fraction: must be in 0..1, got 1.5"},
               {1e300, "progress.fraction: must be in 0..1, got 1e+300"}};
  for (const auto& c : cases) {
    const grpc::Status st = Progress(lease, holder, c.fraction);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message(), c.message);
  }
  ExpectUntouched(campaign);
  EXPECT_TRUE(Progress(lease, holder, 0).ok());
  EXPECT_TRUE(Progress(lease, holder, 1).ok());
}

TEST_F(AgentApiTest, RegistrationsOutsideTheLimitsAreRefused) {
  StartServer(/*auth_tokens=*/false);
  auto refused = [&](const std::function<void(v1::AgentInfo*)>& edit) {
    v1::RegisterAgentRequest req;
    req.mutable_info()->set_name("box");
    req.mutable_info()->set_device_kind("NVIDIA H200");
    req.mutable_info()->add_job_kinds("probe");
    edit(req.mutable_info());
    v1::RegisterAgentResponse resp;
    const grpc::Status st = agents_->Register(Ctx("").get(), req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    return st.error_message();
  };
  EXPECT_EQ(refused([](v1::AgentInfo* i) { i->set_memory_mib(-1); }),
            "info.memory_mib: must be >= 0, got -1");
  EXPECT_EQ(refused([](v1::AgentInfo* i) { i->set_gpus(-2); }), "info.gpus: must be >= 0, got -2");
  EXPECT_EQ(refused([](v1::AgentInfo* i) { i->add_job_kinds(std::string(65, 'k')); }),
            "info.job_kinds[1]: must be 1..64 characters of [A-Za-z0-9._:-], got \"" +
                std::string(64, 'k') + "\" (65 characters)");
  EXPECT_EQ(refused([](v1::AgentInfo* i) { i->add_job_kinds("pro be"); }),
            "info.job_kinds[1]: must be 1..64 characters of [A-Za-z0-9._:-], got \"pro be\" "
            "(6 characters)");
  EXPECT_EQ(refused([](v1::AgentInfo* i) {
              for (int k = 0; k < 64; ++k) i->add_job_kinds("kind" + std::to_string(k));
            }),
            "info.job_kinds: must list 1..64 job kinds, got 65");
  EXPECT_EQ(refused([](v1::AgentInfo* i) { i->set_device_kind("cpu\n\x1b[31m"); }),
            "info.device_kind: must not contain control characters, got \"cpu\\n\\x1b[31m\"");
  EXPECT_EQ(refused([](v1::AgentInfo* i) { i->set_device_kind(std::string(129, 'd')); }),
            "info.device_kind: must be at most 128 characters, got 129");
  EXPECT_EQ(refused([](v1::AgentInfo* i) { i->set_name("box\t1"); }),
            "info.name: must be 1..200 characters of [A-Za-z0-9._:-], got \"box\\t1\"");
  EXPECT_EQ(refused([](v1::AgentInfo* i) { i->set_hostname("host\r"); }),
            "info.hostname: must not contain control characters, got \"host\\r\"");
  // At the limits it registers.
  v1::RegisterAgentRequest ok;
  ok.mutable_info()->set_name("box");
  ok.mutable_info()->set_device_kind(std::string(128, 'd'));
  for (int k = 0; k < 64; ++k) ok.mutable_info()->add_job_kinds(std::string(64, 'a' + k % 26));
  v1::RegisterAgentResponse resp;
  const grpc::Status st = agents_->Register(Ctx("").get(), ok, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST_F(AgentApiTest, ListingsRefuseUnknownStatesAndMalformedPageTokens) {
  StartServer(/*auth_tokens=*/false);
  SubmitProbe();
  auto list = [&](const std::function<void(v1::ListCampaignsRequest*)>& edit) {
    v1::ListCampaignsRequest req;
    edit(&req);
    v1::ListCampaignsResponse resp;
    return campaigns_->ListCampaigns(Ctx("").get(), req, &resp);
  };
  grpc::Status st = list([](v1::ListCampaignsRequest* r) {
    r->add_states(v1::CAMPAIGN_RUNNING);
    r->add_states(static_cast<v1::CampaignState>(9));
  });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(),
            "states[1]: must be QUEUED, RUNNING, SUCCEEDED, FAILED or CANCELLED, got 9");
  st = list([](v1::ListCampaignsRequest* r) { r->add_states(v1::CAMPAIGN_STATE_UNSPECIFIED); });
  EXPECT_EQ(st.error_message(),
            "states[0]: must be QUEUED, RUNNING, SUCCEEDED, FAILED or CANCELLED, got 0");
  st = list([](v1::ListCampaignsRequest* r) { r->set_page_token("zz'; --"); });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(),
            "page_token: must be a next_page_token of an earlier listing, got \"zz\\'; --\"");
  EXPECT_TRUE(list([](v1::ListCampaignsRequest* r) {
                r->set_page_token("c-0123456789abcdef012345");
                r->add_states(v1::CAMPAIGN_QUEUED);
              }).ok());
}

TEST_F(AgentApiTest, JobLogWithANegativeOffsetIsOutOfRange) {
  StartServer(/*auth_tokens=*/false);
  SubmitProbe();
  const v1::AcquireJobResponse a = Acquire(Register("box-1"));
  WriteJobLog(a.job().id(), "hello");
  auto read = [&](int64_t offset, std::string* data) {
    v1::GetJobLogRequest req;
    req.set_job_id(a.job().id());
    req.set_offset(offset);
    auto ctx = Ctx("");
    auto stream = campaigns_->GetJobLog(ctx.get(), req);
    v1::LogChunk chunk;
    while (stream->Read(&chunk)) *data += chunk.data();
    return stream->Finish();
  };
  std::string data;
  const grpc::Status negative = read(-1, &data);
  EXPECT_EQ(negative.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(negative.error_message(), "offset -1 outside 0..5");
  EXPECT_EQ(data, "");
  EXPECT_TRUE(read(2, &data).ok());
  EXPECT_EQ(data, "llo");
}

// With follow, the stream stays open and carries what is appended until the job is final;
// cancelling the call ends a follow that waits on a quiet log.
TEST_F(AgentApiTest, JobLogFollowStreamsAppendedBytesUntilTheJobEnds) {
  StartServer(/*auth_tokens=*/false);
  SubmitProbe();
  const std::string agent = Register("box-1");
  const v1::AcquireJobResponse a = Acquire(agent);
  const std::filesystem::path log = WriteJobLog(a.job().id(), "one\n");
  absl::Mutex mu;
  std::string received;
  grpc::Status status;
  bool ended = false;
  std::thread follower([&] {
    v1::GetJobLogRequest req;
    req.set_job_id(a.job().id());
    req.set_follow(true);
    auto ctx = Ctx("");
    auto stream = campaigns_->GetJobLog(ctx.get(), req);
    v1::LogChunk chunk;
    while (stream->Read(&chunk)) {
      absl::MutexLock lock(&mu);
      received += chunk.data();
    }
    const grpc::Status st = stream->Finish();
    absl::MutexLock lock(&mu);
    status = st;
    ended = true;
  });
  std::string want;
  auto received_all = [&]() { return received == want; };  // evaluated with mu held
  auto wait_for = [&](const std::string& expected) {
    absl::MutexLock lock(&mu);
    want = expected;
    return mu.AwaitWithTimeout(absl::Condition(&received_all), absl::Seconds(10));
  };
  ASSERT_TRUE(wait_for("one\n"));
  {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(ended) << "a follow must not end while the job runs";
  }
  std::ofstream(log, std::ios::app) << "two\n";
  ASSERT_TRUE(wait_for("one\ntwo\n"));
  ASSERT_TRUE(Complete(a.lease().id(), agent).ok());
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&ended), absl::Seconds(10)));
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(received, "one\ntwo\n");
  }
  follower.join();

  // A quiet follow of a running job ends when the client cancels it.
  SubmitProbe();
  const v1::AcquireJobResponse b = Acquire(agent);
  WriteJobLog(b.job().id(), "x");
  v1::GetJobLogRequest req;
  req.set_job_id(b.job().id());
  req.set_follow(true);
  auto ctx = Ctx("");
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  auto stream = campaigns_->GetJobLog(ctx.get(), req);
  v1::LogChunk chunk;
  std::string got;
  while (stream->Read(&chunk)) got += chunk.data();
  EXPECT_EQ(got, "x");
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

}  // namespace
}  // namespace tailor::coordinator
