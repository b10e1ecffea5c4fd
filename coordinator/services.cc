#include "coordinator/services.h"

#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/ids.h"
#include "common/proto_time.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "coordinator/access_rules.h"
#include "grpcpp/alarm.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {
namespace {

constexpr int64_t kChunkBytes = 1 << 20;
constexpr int64_t kMaxUploadChunkBytes = 4 << 20;

// Runs `f` (returning StatusOr<T>) and finishes the call with its value or error.
template <typename T, typename F>
grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* ctx, T* resp, F&& f) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<T> result = f();
  if (result.ok()) *resp = *std::move(result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

// --- authorization: coordinator/access_rules.h decides, keyed by the full method name ---

template <typename Service>
std::string Rpc(absl::string_view method) {
  return absl::StrCat("/", Service::service_full_name(), "/", method);
}

// Authenticates the call's bearer token, then asks the access rules whether its caller may
// make `call` at all; campaign visibility is checked by the method, which knows the campaign.
absl::StatusOr<Principal> Authorize(const ServiceAuth& auth, grpc::CallbackServerContext* ctx,
                                    absl::string_view call) {
  // A request that did not parse is refused before anything else (parse_errors.h); every RPC
  // calls Authorize first.
  TAILOR_RETURN_IF_ERROR(PendingParseError());
  Principal p;  // authentication off: an anonymous admin
  if (auth.authenticator != nullptr) {
    std::string bearer;
    const auto& md = ctx->client_metadata();
    if (auto it = md.find("authorization"); it != md.end()) {
      bearer = BearerFromHeader(absl::string_view(it->second.data(), it->second.size()));
    }
    TAILOR_ASSIGN_OR_RETURN(p, auth.authenticator->Authenticate(bearer));
  }
  TAILOR_RETURN_IF_ERROR(CheckCall(call, p));
  return p;
}

// The access rules' CheckCampaignVisible for a campaign known by id only: its team comes from
// the registry's database connection, so no coordinator lock is taken.
absl::Status CheckStoredCampaignVisible(const ServiceAuth& auth, const Principal& p,
                                        const std::string& campaign_id) {
  if (p.role != Role::kSubmitter) return absl::OkStatus();
  if (auth.registry == nullptr) return HiddenCampaign(campaign_id);
  TAILOR_ASSIGN_OR_RETURN(std::string team, auth.registry->CampaignTeam(campaign_id));
  return CheckCampaignVisible(p, campaign_id, team);
}

// Submitters download only artifacts recorded by their team's campaigns; anything else is
// NOT_FOUND with the blob store's words for a missing blob.
absl::Status CheckArtifactVisible(const ServiceAuth& auth, const Principal& p,
                                  const std::string& digest) {
  if (p.role != Role::kSubmitter) return absl::OkStatus();
  const absl::Status hidden = absl::NotFoundError(absl::StrCat("blob ", digest, " not found"));
  if (auth.registry == nullptr) return hidden;
  TAILOR_ASSIGN_OR_RETURN(std::vector<std::string> teams,
                          auth.registry->TeamsOfArtifact(digest));
  for (const std::string& team : teams) {
    if (p.CanSee(team)) return absl::OkStatus();
  }
  return hidden;
}

void Audit(const ServiceAuth& auth, const Principal& p, absl::string_view verb,
           absl::string_view target, absl::string_view detail = "") {
  if (auth.registry == nullptr) return;
  if (absl::Status st = auth.registry->Audit(p, verb, target, detail); !st.ok()) {
    spdlog::error("audit event {} {} by {} not recorded: {}", std::string(verb),
                  std::string(target), p.token_id, st.ToString());
  }
}

// Who a lease-bearing call comes from. Under token auth an agent token's identity is the token
// itself (a token is not bound to an agent name; it becomes bound to the agents it registers),
// so its id goes along; auth off and admin tokens are trusted to name the agent id.
LeaseCaller LeaseCallerOf(const ServiceAuth& auth, const Principal& p, std::string agent_id) {
  LeaseCaller caller;
  caller.agent_id = std::move(agent_id);
  if (p.role == Role::kAgent && !p.token_id.empty()) {
    caller.token_id = p.token_id;
    caller.launcher_token = p.token_id == auth.launcher_token_id;
  }
  return caller;
}

// A refused foreign call is recorded: a token using another agent's lease is either
// misconfigured or hostile, and an admin should learn about both.
absl::Status AuditRefusal(const ServiceAuth& auth, const Principal& p, absl::string_view verb,
                          absl::string_view target, absl::string_view rpc,
                          const LeaseCaller& caller, absl::Status st) {
  if (!absl::IsPermissionDenied(st)) return st;
  const std::string detail = absl::StrCat(rpc, " by ", caller.agent_id, ": ", st.message());
  spdlog::warn("refused {} {}: {}", std::string(verb), std::string(target), detail);
  Audit(auth, p, verb, target, detail);
  return st;
}

// OK when the caller holds `lease_id` (Coordinator::CheckLeaseHolder).
absl::Status CheckHolder(Coordinator* core, const ServiceAuth& auth, const Principal& p,
                         absl::string_view rpc, const std::string& lease_id,
                         const std::string& agent_id, absl::string_view field = "agent_id") {
  const LeaseCaller caller = LeaseCallerOf(auth, p, agent_id);
  return AuditRefusal(auth, p, "ForeignLease", lease_id, rpc, caller,
                      core->CheckLeaseHolder(lease_id, caller, field));
}

// OK when the caller may act as `agent_id` (Coordinator::CheckAgentCaller).
absl::Status CheckAgent(Coordinator* core, const ServiceAuth& auth, const Principal& p,
                        absl::string_view rpc, const std::string& agent_id) {
  const LeaseCaller caller = LeaseCallerOf(auth, p, agent_id);
  return AuditRefusal(auth, p, "ForeignAgent", agent_id, rpc, caller,
                      core->CheckAgentCaller(caller));
}

// Runs `f` after authorizing; finishes with the authorization error otherwise.
template <typename T, typename F>
grpc::ServerUnaryReactor* AuthorizedRespond(const ServiceAuth& auth,
                                            grpc::CallbackServerContext* ctx,
                                            absl::string_view call, T* resp, F&& f) {
  return Respond(ctx, resp, [&]() -> absl::StatusOr<T> {
    TAILOR_ASSIGN_OR_RETURN(Principal p, Authorize(auth, ctx, call));
    return f(p);
  });
}

// Streams that fail before they start (authorization).
template <typename T>
class FailedWriteReactor final : public grpc::ServerWriteReactor<T> {
 public:
  explicit FailedWriteReactor(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

template <typename T>
class FailedReadReactor final : public grpc::ServerReadReactor<T> {
 public:
  explicit FailedReadReactor(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

// Streams a campaign's events: replays from the requested sequence number, then follows new
// ones as the coordinator commits them, and ends once the campaign is final and every event
// was sent. gRPC calls (StartWrite/Finish) are made without holding mu_.
class WatchReactor final : public grpc::ServerWriteReactor<v1::Event> {
 public:
  WatchReactor(Coordinator* core, std::string campaign_id, int64_t from_seq)
      : core_(core), campaign_id_(std::move(campaign_id)), read_seq_(from_seq),
        alive_(std::make_shared<Alive>()) {
    alive_->reactor = this;
    token_ = core_->Subscribe(campaign_id_, [alive = alive_] {
      absl::MutexLock lock(&alive->mu);
      if (alive->reactor != nullptr) alive->reactor->Pump();
    });
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {
        failed_ = true;
      } else {
        buffer_.pop_front();
      }
    }
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    Pump();
  }

  void OnCancel() override { FinishOnce(grpc::Status::CANCELLED); }

  void OnDone() override {
    core_->Unsubscribe(token_);
    {
      absl::MutexLock lock(&alive_->mu);
      alive_->reactor = nullptr;
    }
    delete this;
  }

 private:
  struct Alive {
    absl::Mutex mu;
    WatchReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  };

  void Pump() {
    const v1::Event* to_write = nullptr;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || writing_ || failed_) return;
      if (buffer_.empty()) {
        bool final = false;
        auto events = core_->ReadEvents(campaign_id_, read_seq_, 256, &final);
        if (!events.ok()) {
          finish = ToGrpcStatus(events.status());
        } else {
          for (auto& e : *events) buffer_.push_back(std::move(e));
          if (!buffer_.empty()) read_seq_ = buffer_.back().seq();
          final_ = final;
        }
      }
      if (!finish.has_value()) {
        if (!buffer_.empty()) {
          writing_ = true;
          to_write = &buffer_.front();  // stays put until OnWriteDone pops it
        } else if (final_) {
          finish = grpc::Status::OK;
        }
      }
    }
    if (to_write != nullptr) {
      StartWrite(to_write);
    } else if (finish.has_value()) {
      FinishOnce(*finish);
    }
  }

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  Coordinator* const core_;
  const std::string campaign_id_;
  uint64_t token_ = 0;
  absl::Mutex mu_;
  int64_t read_seq_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::Event> buffer_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool final_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<Alive> alive_;
};

// Long-poll: parked in the coordinator until a job fits, the wait runs out, or the client
// goes away. Exactly one Finish: either the coordinator's callback or OnCancel wins.
class AcquireReactor final : public grpc::ServerUnaryReactor {
 public:
  AcquireReactor(Coordinator* core, const v1::AcquireJobRequest& req,
                 v1::AcquireJobResponse* resp)
      : core_(core) {
    waiter_ = core_->AcquireJob(req, [this, resp](absl::StatusOr<v1::AcquireJobResponse> r) {
      if (r.ok()) *resp = *std::move(r);
      Finish(ToGrpcStatus(r.status()));
    });
  }
  void OnCancel() override {
    const uint64_t id = waiter_.load();
    if (id != 0 && core_->CancelAcquire(id)) Finish(grpc::Status::CANCELLED);
  }
  void OnDone() override { delete this; }

 private:
  Coordinator* const core_;
  std::atomic<uint64_t> waiter_{0};
};

absl::Status ValidateHeader(const v1::ArtifactHeader& h, int64_t max_bytes, bool admin) {
  if (h.lease_id().empty() && !admin) {
    return absl::InvalidArgumentError(
        "header.lease_id: required for agent uploads (empty only for admin uploads)");
  }
  if (!IsSafeToken(h.kind(), 32)) {
    return absl::InvalidArgumentError("header.kind: must be 1..32 characters of [A-Za-z0-9._:-]");
  }
  if (h.name().empty() || h.name().size() > 256 || h.name().find("..") != std::string::npos) {
    return absl::InvalidArgumentError("header.name: must be 1..256 characters without '..'");
  }
  if (h.size_bytes() < 0 || h.size_bytes() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("header.size_bytes: must be in 0..",
                                                   max_bytes, ", got ", h.size_bytes()));
  }
  if (!IsSha256Hex(h.sha256())) {
    return absl::InvalidArgumentError("header.sha256: must be 64 lowercase hex characters");
  }
  return absl::OkStatus();
}

// Client stream: a header, then data chunks. The blob store verifies size and sha256 before
// the blob becomes visible; any error drops the temp file, so nothing partial remains.
class UploadReactor final : public grpc::ServerReadReactor<v1::UploadArtifactRequest> {
 public:
  UploadReactor(Coordinator* core, const ServiceAuth& auth, Principal principal,
                v1::Artifact* resp)
      : core_(core), auth_(auth), principal_(std::move(principal)), resp_(resp) {
    StartRead(&req_);
  }
  void OnReadDone(bool ok) override {
    absl::Status st = ok ? Consume() : Commit();
    if (!st.ok()) {
      writer_.reset();
      spdlog::warn("upload rejected: {}", st.ToString());
      Finish(ToGrpcStatus(st));
    } else if (ok) {
      StartRead(&req_);
    } else {
      Finish(grpc::Status::OK);
    }
  }
  void OnDone() override { delete this; }

 private:
  absl::Status Consume() {
    if (writer_ == nullptr) {
      if (!req_.has_header()) {
        return absl::InvalidArgumentError("the first upload message must be the header");
      }
      header_ = req_.header();
      const int64_t max = core_->options().max_upload_bytes;
      TAILOR_RETURN_IF_ERROR(ValidateHeader(header_, max, principal_.is_admin()));
      // An admin upload (no lease) leaves lease_ empty: RecordArtifact then files it under no
      // campaign.
      if (!header_.lease_id().empty()) {
        TAILOR_RETURN_IF_ERROR(CheckHolder(core_, auth_, principal_, "UploadArtifact",
                                           header_.lease_id(), header_.agent_id(),
                                           "header.agent_id"));
        TAILOR_ASSIGN_OR_RETURN(lease_, core_->CheckLease(header_.lease_id()));
      }
      auto writer = core_->blobs()->NewWriter(header_.size_bytes());
      if (!writer.ok()) return writer.status();
      writer_ = *std::move(writer);
      return absl::OkStatus();
    }
    if (req_.has_header()) return absl::InvalidArgumentError("a second header was sent");
    if (static_cast<int64_t>(req_.data().size()) > kMaxUploadChunkBytes) {
      return absl::InvalidArgumentError(absl::StrCat("data chunk of ", req_.data().size(),
                                                     " bytes exceeds ", kMaxUploadChunkBytes));
    }
    return writer_->Append(req_.data());
  }

  absl::Status Commit() {
    if (writer_ == nullptr) return absl::InvalidArgumentError("upload had no header");
    auto blob = writer_->Commit(header_.sha256(), header_.size_bytes());
    writer_.reset();
    if (!blob.ok()) return blob.status();
    auto artifact = core_->RecordArtifact(lease_, header_.kind(), header_.name(), *blob);
    if (!artifact.ok()) return artifact.status();
    *resp_ = *artifact;
    return absl::OkStatus();
  }

  Coordinator* const core_;
  const ServiceAuth auth_;
  const Principal principal_;
  v1::Artifact* const resp_;
  v1::UploadArtifactRequest req_;
  v1::ArtifactHeader header_;
  LeaseInfo lease_;
  std::unique_ptr<storage::BlobStore::Writer> writer_;
};

// Server stream of 1 MiB chunks from the blob store.
class DownloadReactor final : public grpc::ServerWriteReactor<v1::ArtifactChunk> {
 public:
  DownloadReactor(Coordinator* core, const v1::DownloadArtifactRequest& req)
      : core_(core), digest_(req.digest()), offset_(req.offset()) {
    auto size = core_->blobs()->Size(digest_);
    if (!size.ok()) {
      Finish(ToGrpcStatus(size.status()));
      return;
    }
    size_ = *size;
    if (offset_ < 0 || offset_ > size_) {
      Finish(grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                          absl::StrCat("offset ", offset_, " outside 0..", size_)));
      return;
    }
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (offset_ >= size_ && sent_any_) {
      Finish(grpc::Status::OK);
      return;
    }
    auto data = core_->blobs()->ReadChunk(digest_, offset_, kChunkBytes);
    if (!data.ok()) {
      Finish(ToGrpcStatus(data.status()));
      return;
    }
    chunk_.set_offset(offset_);
    chunk_.set_total_size(size_);
    offset_ += static_cast<int64_t>(data->size());
    chunk_.set_data(*std::move(data));
    sent_any_ = true;
    StartWrite(&chunk_);
  }

  Coordinator* const core_;
  const std::string digest_;
  int64_t offset_;
  int64_t size_ = 0;
  bool sent_any_ = false;
  v1::ArtifactChunk chunk_;
};

// The newest attempt's log file of a job (written by launchers under data_dir/logs), sent in
// chunks. Following a growing log is served by polling clients (`tailor logs --follow`).
// Streams a job's log from an offset; with follow, keeps looking for appended bytes (every
// kFollowPoll, on a grpc::Alarm so no callback thread sleeps) until the job is final or a new
// attempt replaced the one being read.
class LogReactor final : public grpc::ServerWriteReactor<v1::LogChunk> {
 public:
  LogReactor(Coordinator* core, const v1::GetJobLogRequest& req)
      : core_(core), job_id_(req.job_id()), follow_(req.follow()), offset_(req.offset()) {
    auto job = core->GetJob(req.job_id());
    if (!job.ok()) {
      Finish(ToGrpcStatus(job.status()));
      return;
    }
    attempt_ = job->attempt();
    path_ = absl::StrCat(core->options().data_dir, "/logs/", job->id(), "/attempt-",
                         job->attempt(), ".log");
    in_.open(path_, std::ios::binary);
    if (!in_) {
      Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job ", job->id(), " has no log yet (attempt ",
                                       job->attempt(), ")")));
      return;
    }
    std::error_code ec;
    const auto size = std::filesystem::file_size(path_, ec);
    if (offset_ < 0) {
      // As DownloadArtifact answers; an offset past the end stays valid (the log may grow).
      Finish(grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                          absl::StrCat("offset ", offset_, " outside 0..", ec ? 0 : size)));
      return;
    }
    in_.seekg(offset_);
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::CANCELLED);
      return;
    }
    Next();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (waiting_) alarm_.Cancel();  // its callback then finishes the stream
  }
  void OnDone() override { delete this; }

 private:
  static constexpr absl::Duration kFollowPoll = absl::Milliseconds(250);

  // Whether the log is complete: the job is final or has moved on to another attempt.
  bool LogComplete() const {
    auto job = core_->GetJob(job_id_);
    return !job.ok() || IsFinal(job->state()) || job->attempt() != attempt_;
  }

  void Next() {
    // Decided before reading, so the bytes written before the job ended are all sent.
    const bool complete = !follow_ || LogComplete();
    in_.clear();  // past an earlier end of file: the file may have grown
    in_.seekg(offset_);
    std::string buf(kChunkBytes, '\0');
    in_.read(buf.data(), kChunkBytes);
    buf.resize(static_cast<size_t>(in_.gcount()));
    if (!buf.empty()) {
      chunk_.set_offset(offset_);
      offset_ += static_cast<int64_t>(buf.size());
      chunk_.set_data(std::move(buf));
      StartWrite(&chunk_);
      return;
    }
    if (complete) {
      Finish(grpc::Status::OK);
      return;
    }
    absl::MutexLock lock(&mu_);
    if (cancelled_) {
      Finish(grpc::Status::CANCELLED);
      return;
    }
    waiting_ = true;
    alarm_.Set(absl::ToChronoTime(absl::Now() + kFollowPoll), [this](bool fired) {
      {
        absl::MutexLock lock(&mu_);
        waiting_ = false;
        if (!fired || cancelled_) {
          Finish(grpc::Status::CANCELLED);
          return;
        }
      }
      Next();
    });
  }

  Coordinator* const core_;
  const std::string job_id_;
  const bool follow_;
  int attempt_ = 0;
  int64_t offset_;
  std::string path_;
  std::ifstream in_;
  v1::LogChunk chunk_;
  grpc::Alarm alarm_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace


// --- CampaignService ---

CampaignServiceImpl::CampaignServiceImpl(Coordinator* core, ServiceAuth auth)
    : core_(core), auth_(auth) {
  CheckParse("SubmitCampaign", &CampaignServiceImpl::SubmitCampaign);
  CheckParse("GetCampaign", &CampaignServiceImpl::GetCampaign);
  CheckParse("ListCampaigns", &CampaignServiceImpl::ListCampaigns);
  CheckParse("CancelCampaign", &CampaignServiceImpl::CancelCampaign);
  CheckParse("WatchCampaign", &CampaignServiceImpl::WatchCampaign);
  CheckParse("GetReport", &CampaignServiceImpl::GetReport);
  CheckParse("ListArtifacts", &CampaignServiceImpl::ListArtifacts);
  CheckParse("ListCostTables", &CampaignServiceImpl::ListCostTables);
  CheckParse("GetCostTable", &CampaignServiceImpl::GetCostTable);
  CheckParse("GetJobLog", &CampaignServiceImpl::GetJobLog);
}

grpc::ServerUnaryReactor* CampaignServiceImpl::SubmitCampaign(
    grpc::CallbackServerContext* ctx, const v1::SubmitCampaignRequest* req,
    v1::SubmitCampaignResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<Principal> p = Authorize(auth_, ctx, Rpc<v1::CampaignService>("SubmitCampaign"));
  v1::DeploymentContract contract = req->contract();
  absl::Status st = p.status();
  if (st.ok()) st = ScopeSubmission(*p, &contract);
  if (!st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  // Answered when the campaign is durable, usually from the coordinator's completion thread:
  // gRPC has only a few callback threads, and one blocked on its commit could not hand the
  // next submissions to the group committer (docs/architecture.md "Group commit").
  core_->SubmitAsync(contract, req->request_id(),
                     [reactor, resp, principal = *std::move(p)](
                         absl::StatusOr<std::pair<v1::Campaign, bool>> r) {
                       if (r.ok()) {
                         // A repeated submission returns the running campaign.
                         HideLeaseIds(principal, &r->first);
                         *resp->mutable_campaign() = std::move(r->first);
                         resp->set_created(r->second);
                       }
                       reactor->Finish(ToGrpcStatus(r.status()));
                     });
  return reactor;
}

grpc::ServerUnaryReactor* CampaignServiceImpl::GetCampaign(grpc::CallbackServerContext* ctx,
                                                           const v1::GetCampaignRequest* req,
                                                           v1::Campaign* resp) {
  return AuthorizedRespond(
      auth_, ctx, Rpc<v1::CampaignService>("GetCampaign"), resp,
      [&](const Principal& p) -> absl::StatusOr<v1::Campaign> {
        TAILOR_RETURN_IF_ERROR(CheckStoredCampaignVisible(auth_, p, req->campaign_id()));
        TAILOR_ASSIGN_OR_RETURN(v1::Campaign c, core_->GetCampaign(req->campaign_id()));
        HideLeaseIds(p, &c);
        return c;
      });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::ListCampaigns(
    grpc::CallbackServerContext* ctx, const v1::ListCampaignsRequest* req,
    v1::ListCampaignsResponse* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::CampaignService>("ListCampaigns"), resp,
                           [&](const Principal& p) -> absl::StatusOr<v1::ListCampaignsResponse> {
                             std::optional<v1::ListCampaignsRequest> scoped =
                                 ScopeCampaignListing(p, *req);
                             if (!scoped.has_value()) return v1::ListCampaignsResponse();
                             TAILOR_ASSIGN_OR_RETURN(v1::ListCampaignsResponse r,
                                                     core_->ListCampaigns(*scoped));
                             for (v1::Campaign& c : *r.mutable_campaigns()) HideLeaseIds(p, &c);
                             return r;
                           });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::CancelCampaign(
    grpc::CallbackServerContext* ctx, const v1::CancelCampaignRequest* req, v1::Campaign* resp) {
  return AuthorizedRespond(
      auth_, ctx, Rpc<v1::CampaignService>("CancelCampaign"), resp,
      [&](const Principal& p) -> absl::StatusOr<v1::Campaign> {
        TAILOR_RETURN_IF_ERROR(CheckStoredCampaignVisible(auth_, p, req->campaign_id()));
        absl::StatusOr<v1::Campaign> c = core_->Cancel(req->campaign_id(), req->reason());
        // Admins cancel any team's campaign: that is an admin verb.
        if (c.ok() && p.is_admin()) {
          Audit(auth_, p, "CancelCampaign", req->campaign_id(),
                absl::StrCat("team=", c->team(), " reason=", req->reason()));
        }
        if (c.ok()) HideLeaseIds(p, &*c);
        return c;
      });
}

grpc::ServerWriteReactor<v1::Event>* CampaignServiceImpl::WatchCampaign(
    grpc::CallbackServerContext* ctx, const v1::WatchCampaignRequest* req) {
  absl::StatusOr<Principal> p = Authorize(auth_, ctx, Rpc<v1::CampaignService>("WatchCampaign"));
  absl::Status st = p.status();
  if (st.ok()) st = CheckStoredCampaignVisible(auth_, *p, req->campaign_id());
  if (!st.ok()) return new FailedWriteReactor<v1::Event>(st);
  return new WatchReactor(core_, req->campaign_id(), req->from_seq());
}

grpc::ServerUnaryReactor* CampaignServiceImpl::GetReport(grpc::CallbackServerContext* ctx,
                                                         const v1::GetReportRequest* req,
                                                         v1::CampaignReport* resp) {
  return AuthorizedRespond(
      auth_, ctx, Rpc<v1::CampaignService>("GetReport"), resp,
      [&](const Principal& p) -> absl::StatusOr<v1::CampaignReport> {
        TAILOR_RETURN_IF_ERROR(CheckStoredCampaignVisible(auth_, p, req->campaign_id()));
        return core_->GetReport(req->campaign_id());
      });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::ListArtifacts(
    grpc::CallbackServerContext* ctx, const v1::ListArtifactsRequest* req,
    v1::ListArtifactsResponse* resp) {
  return AuthorizedRespond(
      auth_, ctx, Rpc<v1::CampaignService>("ListArtifacts"), resp,
      [&](const Principal& p) -> absl::StatusOr<v1::ListArtifactsResponse> {
        TAILOR_RETURN_IF_ERROR(CheckStoredCampaignVisible(auth_, p, req->campaign_id()));
        return core_->ListArtifacts(req->campaign_id());
      });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::ListCostTables(
    grpc::CallbackServerContext* ctx, const v1::ListCostTablesRequest* req,
    v1::ListCostTablesResponse* resp) {
  return AuthorizedRespond(
      auth_, ctx, Rpc<v1::CampaignService>("ListCostTables"), resp,
      [&](const Principal&) { return core_->ListCostTables(req->device_kind()); });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::GetCostTable(grpc::CallbackServerContext* ctx,
                                                            const v1::GetCostTableRequest* req,
                                                            v1::CostTable* resp) {
  // Workers read cost tables with their agent token.
  return AuthorizedRespond(auth_, ctx, Rpc<v1::CampaignService>("GetCostTable"), resp,
                           [&](const Principal&) { return core_->GetCostTable(*req); });
}

grpc::ServerWriteReactor<v1::LogChunk>* CampaignServiceImpl::GetJobLog(
    grpc::CallbackServerContext* ctx, const v1::GetJobLogRequest* req) {
  absl::StatusOr<Principal> p = Authorize(auth_, ctx, Rpc<v1::CampaignService>("GetJobLog"));
  absl::Status st = p.status();
  if (st.ok() && !p->is_admin()) {
    absl::StatusOr<v1::Job> job = core_->GetJob(req->job_id());
    st = job.status();
    if (st.ok() && !CheckStoredCampaignVisible(auth_, *p, job->campaign_id()).ok()) {
      st = absl::NotFoundError(absl::StrCat("job '", req->job_id(), "' not found"));
    }
  }
  if (!st.ok()) return new FailedWriteReactor<v1::LogChunk>(st);
  return new LogReactor(core_, *req);
}

// --- AgentService ---

AgentServiceImpl::AgentServiceImpl(Coordinator* core, ServiceAuth auth)
    : core_(core), auth_(auth) {
  CheckParse("Register", &AgentServiceImpl::Register);
  CheckParse("Heartbeat", &AgentServiceImpl::Heartbeat);
  CheckParse("AcquireJob", &AgentServiceImpl::AcquireJob);
  CheckParse("ReportProgress", &AgentServiceImpl::ReportProgress);
  CheckParse("CompleteJob", &AgentServiceImpl::CompleteJob);
  // Not UploadArtifact: it is client streaming, and UploadReactor reads its chunks itself. A
  // chunk that does not parse ends its reads (OnReadDone(false)), so the upload is committed
  // only if the chunks before it already verify against the header's size and sha256.
  CheckParse("DownloadArtifact", &AgentServiceImpl::DownloadArtifact);
  CheckParse("PutCostTable", &AgentServiceImpl::PutCostTable);
  CheckParse("GetAssignment", &AgentServiceImpl::GetAssignment);
}

grpc::ServerUnaryReactor* AgentServiceImpl::Register(grpc::CallbackServerContext* ctx,
                                                     const v1::RegisterAgentRequest* req,
                                                     v1::RegisterAgentResponse* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::AgentService>("Register"), resp,
                           [&](const Principal& p) {
                             // Only agent tokens bind: admins may name any agent anyway.
                             return core_->Register(req->info(),
                                                    p.role == Role::kAgent ? p.token_id : "",
                                                    req->registration_secret());
                           });
}

grpc::ServerUnaryReactor* AgentServiceImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                      const v1::HeartbeatRequest* req,
                                                      v1::HeartbeatResponse* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::AgentService>("Heartbeat"), resp,
                           [&](const Principal& p) -> absl::StatusOr<v1::HeartbeatResponse> {
                             TAILOR_RETURN_IF_ERROR(
                                 CheckAgent(core_, auth_, p, "Heartbeat", req->agent_id()));
                             return core_->Heartbeat(*req);
                           });
}

grpc::ServerUnaryReactor* AgentServiceImpl::AcquireJob(grpc::CallbackServerContext* ctx,
                                                       const v1::AcquireJobRequest* req,
                                                       v1::AcquireJobResponse* resp) {
  absl::StatusOr<Principal> p = Authorize(auth_, ctx, Rpc<v1::AgentService>("AcquireJob"));
  absl::Status st = p.status();
  if (st.ok()) st = CheckAgent(core_, auth_, *p, "AcquireJob", req->agent_id());
  if (!st.ok()) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  return new AcquireReactor(core_, *req, resp);
}

grpc::ServerUnaryReactor* AgentServiceImpl::ReportProgress(
    grpc::CallbackServerContext* ctx, const v1::ReportProgressRequest* req,
    v1::ReportProgressResponse* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::AgentService>("ReportProgress"), resp,
                           [&](const Principal& p) -> absl::StatusOr<v1::ReportProgressResponse> {
                             TAILOR_RETURN_IF_ERROR(CheckHolder(core_, auth_, p, "ReportProgress",
                                                                req->lease_id(), req->agent_id()));
                             return core_->ReportProgress(*req);
                           });
}

grpc::ServerUnaryReactor* AgentServiceImpl::CompleteJob(grpc::CallbackServerContext* ctx,
                                                        const v1::CompleteJobRequest* req,
                                                        v1::CompleteJobResponse* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::AgentService>("CompleteJob"), resp,
                           [&](const Principal& p) -> absl::StatusOr<v1::CompleteJobResponse> {
                             TAILOR_RETURN_IF_ERROR(CheckHolder(core_, auth_, p, "CompleteJob",
                                                                req->lease_id(), req->agent_id()));
                             return core_->CompleteJob(*req);
                           });
}

grpc::ServerReadReactor<v1::UploadArtifactRequest>* AgentServiceImpl::UploadArtifact(
    grpc::CallbackServerContext* ctx, v1::Artifact* resp) {
  absl::StatusOr<Principal> p = Authorize(auth_, ctx, Rpc<v1::AgentService>("UploadArtifact"));
  if (!p.ok()) return new FailedReadReactor<v1::UploadArtifactRequest>(p.status());
  return new UploadReactor(core_, auth_, *std::move(p), resp);
}

grpc::ServerWriteReactor<v1::ArtifactChunk>* AgentServiceImpl::DownloadArtifact(
    grpc::CallbackServerContext* ctx, const v1::DownloadArtifactRequest* req) {
  // `tailor artifacts get` downloads with a submitter token: its own team's artifacts only.
  absl::StatusOr<Principal> p = Authorize(auth_, ctx, Rpc<v1::AgentService>("DownloadArtifact"));
  absl::Status st = p.status();
  if (st.ok()) st = CheckArtifactVisible(auth_, *p, req->digest());
  if (!st.ok()) return new FailedWriteReactor<v1::ArtifactChunk>(st);
  return new DownloadReactor(core_, *req);
}

grpc::ServerUnaryReactor* AgentServiceImpl::PutCostTable(grpc::CallbackServerContext* ctx,
                                                         const v1::PutCostTableRequest* req,
                                                         v1::CostTable* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::AgentService>("PutCostTable"), resp,
                           [&](const Principal& p) -> absl::StatusOr<v1::CostTable> {
                             TAILOR_RETURN_IF_ERROR(CheckHolder(core_, auth_, p, "PutCostTable",
                                                                req->lease_id(), req->agent_id()));
                             return core_->PutCostTable(*req);
                           });
}

grpc::ServerUnaryReactor* AgentServiceImpl::GetAssignment(grpc::CallbackServerContext* ctx,
                                                          const v1::GetAssignmentRequest* req,
                                                          v1::AcquireJobResponse* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::AgentService>("GetAssignment"), resp,
                           [&](const Principal& p) -> absl::StatusOr<v1::AcquireJobResponse> {
                             TAILOR_RETURN_IF_ERROR(CheckHolder(core_, auth_, p, "GetAssignment",
                                                                req->lease_id(), req->agent_id()));
                             return core_->GetAssignment(req->lease_id());
                           });
}

// --- AdminService ---

AdminServiceImpl::AdminServiceImpl(Coordinator* core, ServiceAuth auth)
    : core_(core), auth_(auth) {
  CheckParse("ListQueue", &AdminServiceImpl::ListQueue);
  CheckParse("ListAgents", &AdminServiceImpl::ListAgents);
  CheckParse("DrainAgent", &AdminServiceImpl::DrainAgent);
  CheckParse("Recompress", &AdminServiceImpl::Recompress);
  CheckParse("DeleteCampaign", &AdminServiceImpl::DeleteCampaign);
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListQueue(grpc::CallbackServerContext* ctx,
                                                      const v1::ListQueueRequest* req,
                                                      v1::ListQueueResponse* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::AdminService>("ListQueue"), resp,
                           [&](const Principal& p) -> absl::StatusOr<v1::ListQueueResponse> {
                             TAILOR_ASSIGN_OR_RETURN(v1::ListQueueResponse q,
                                                     core_->ListQueue(*req));
                             return ScopeQueue(p, std::move(q));
                           });
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListAgents(grpc::CallbackServerContext* ctx,
                                                       const v1::ListAgentsRequest* req,
                                                       v1::ListAgentsResponse* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::AdminService>("ListAgents"), resp,
                           [&](const Principal&) { return core_->ListAgents(*req); });
}

grpc::ServerUnaryReactor* AdminServiceImpl::DrainAgent(grpc::CallbackServerContext* ctx,
                                                       const v1::DrainAgentRequest* req,
                                                       v1::Agent* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::AdminService>("DrainAgent"), resp,
                           [&](const Principal& p) -> absl::StatusOr<v1::Agent> {
                             absl::StatusOr<v1::Agent> a = core_->DrainAgent(*req);
                             if (a.ok()) {
                               Audit(auth_, p, req->undrain() ? "UndrainAgent" : "DrainAgent",
                                     req->agent_id());
                             }
                             return a;
                           });
}

grpc::ServerUnaryReactor* AdminServiceImpl::DeleteCampaign(grpc::CallbackServerContext* ctx,
                                                           const v1::DeleteCampaignRequest* req,
                                                           v1::DeleteCampaignResponse* resp) {
  return AuthorizedRespond(
      auth_, ctx, Rpc<v1::AdminService>("DeleteCampaign"), resp,
      [&](const Principal& p) -> absl::StatusOr<v1::DeleteCampaignResponse> {
        absl::StatusOr<v1::DeleteCampaignResponse> d = core_->DeleteCampaign(req->campaign_id());
        if (d.ok()) {
          Audit(auth_, p, "DeleteCampaign", req->campaign_id(),
                absl::StrCat(d->jobs(), " jobs, ", d->events(), " events, ", d->artifacts(),
                             " artifact rows"));
        }
        return d;
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Recompress(grpc::CallbackServerContext* ctx,
                                                       const v1::RecompressRequest* req,
                                                       v1::RecompressResponse* resp) {
  return AuthorizedRespond(
      auth_, ctx, Rpc<v1::AdminService>("Recompress"), resp,
      [&](const Principal& p) -> absl::StatusOr<v1::RecompressResponse> {
        absl::StatusOr<v1::RecompressResponse> r = core_->Recompress(*req);
        if (r.ok() && !req->dry_run()) {
          Audit(auth_, p, "Recompress", req->engine_version(),
                absl::StrCat("engine=", req->engine().empty() ? "*" : req->engine(),
                             " entries=", r->entries_size()));
        }
        return r;
      });
}

// --- TokenService ---

v1::ApiToken TokenToProto(const storage::TokenRow& row) {
  v1::ApiToken t;
  t.set_id(row.id);
  t.set_team(row.team);
  absl::StatusOr<Role> role = ParseRole(row.role);
  if (role.ok()) {
    switch (*role) {
      case Role::kSubmitter:
        t.set_role(v1::TOKEN_ROLE_SUBMITTER);
        break;
      case Role::kAdmin:
        t.set_role(v1::TOKEN_ROLE_ADMIN);
        break;
      case Role::kAgent:
        t.set_role(v1::TOKEN_ROLE_AGENT);
        break;
    }
  }
  t.set_description(row.description);
  *t.mutable_created_at() = ToProto(row.created_at);
  if (row.revoked_at.has_value()) *t.mutable_revoked_at() = ToProto(*row.revoked_at);
  if (row.expires_at.has_value()) *t.mutable_expires_at() = ToProto(*row.expires_at);
  return t;
}

namespace {

absl::StatusOr<Role> RoleFromProto(v1::TokenRole role) {
  switch (role) {
    case v1::TOKEN_ROLE_SUBMITTER:
      return Role::kSubmitter;
    case v1::TOKEN_ROLE_ADMIN:
      return Role::kAdmin;
    case v1::TOKEN_ROLE_AGENT:
      return Role::kAgent;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("role: must be SUBMITTER, ADMIN or AGENT, got ", static_cast<int>(role)));
  }
}

absl::Status NoRegistry() {
  return absl::UnimplementedError("this coordinator was started without a token registry");
}

}  // namespace

TokenServiceImpl::TokenServiceImpl(ServiceAuth auth) : auth_(auth) {
  CheckParse("CreateToken", &TokenServiceImpl::CreateToken);
  CheckParse("ListTokens", &TokenServiceImpl::ListTokens);
  CheckParse("RevokeToken", &TokenServiceImpl::RevokeToken);
  CheckParse("ListAuditEvents", &TokenServiceImpl::ListAuditEvents);
}

grpc::ServerUnaryReactor* TokenServiceImpl::CreateToken(grpc::CallbackServerContext* ctx,
                                                        const v1::CreateTokenRequest* req,
                                                        v1::CreateTokenResponse* resp) {
  return AuthorizedRespond(
      auth_, ctx, Rpc<v1::TokenService>("CreateToken"), resp,
      [&](const Principal& p) -> absl::StatusOr<v1::CreateTokenResponse> {
        if (auth_.registry == nullptr) return NoRegistry();
        TAILOR_ASSIGN_OR_RETURN(Role role, RoleFromProto(req->role()));
        std::optional<absl::Duration> expires_in;
        if (req->has_expires_in_seconds()) expires_in = absl::Seconds(req->expires_in_seconds());
        TAILOR_ASSIGN_OR_RETURN(
            IssuedToken issued,
            auth_.registry->Create(role, req->team(), req->description(), expires_in));
        Audit(auth_, p, "CreateToken", issued.row.id, CreateTokenAuditDetail(issued.row));
        v1::CreateTokenResponse out;
        *out.mutable_token() = TokenToProto(issued.row);
        out.set_secret(std::move(issued.secret));
        return out;
      });
}

grpc::ServerUnaryReactor* TokenServiceImpl::ListTokens(grpc::CallbackServerContext* ctx,
                                                       const v1::ListTokensRequest* req,
                                                       v1::ListTokensResponse* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::TokenService>("ListTokens"), resp,
                           [&](const Principal&) -> absl::StatusOr<v1::ListTokensResponse> {
                             if (auth_.registry == nullptr) return NoRegistry();
                             TAILOR_ASSIGN_OR_RETURN(
                                 std::vector<storage::TokenRow> rows,
                                 auth_.registry->List(req->include_revoked()));
                             v1::ListTokensResponse out;
                             for (const auto& row : rows) *out.add_tokens() = TokenToProto(row);
                             return out;
                           });
}

grpc::ServerUnaryReactor* TokenServiceImpl::RevokeToken(grpc::CallbackServerContext* ctx,
                                                        const v1::RevokeTokenRequest* req,
                                                        v1::ApiToken* resp) {
  return AuthorizedRespond(auth_, ctx, Rpc<v1::TokenService>("RevokeToken"), resp,
                           [&](const Principal& p) -> absl::StatusOr<v1::ApiToken> {
                             if (auth_.registry == nullptr) return NoRegistry();
                             TAILOR_ASSIGN_OR_RETURN(storage::TokenRow row,
                                                     auth_.registry->Revoke(req->id()));
                             Audit(auth_, p, "RevokeToken", row.id);
                             return TokenToProto(row);
                           });
}

grpc::ServerUnaryReactor* TokenServiceImpl::ListAuditEvents(
    grpc::CallbackServerContext* ctx, const v1::ListAuditEventsRequest* req,
    v1::ListAuditEventsResponse* resp) {
  return AuthorizedRespond(
      auth_, ctx, Rpc<v1::TokenService>("ListAuditEvents"), resp,
      [&](const Principal&) -> absl::StatusOr<v1::ListAuditEventsResponse> {
        if (auth_.registry == nullptr) return NoRegistry();
        if (req->limit() < 0 || req->limit() > 10000) {
          return absl::InvalidArgumentError(
              absl::StrCat("limit: must be in 0..10000, got ", req->limit()));
        }
        TAILOR_ASSIGN_OR_RETURN(std::vector<storage::AuditRow> rows,
                                auth_.registry->ListAudit(req->limit() == 0 ? 100 : req->limit()));
        v1::ListAuditEventsResponse out;
        for (const auto& row : rows) {
          v1::AuditEvent* e = out.add_events();
          e->set_id(row.id);
          e->set_token_id(row.token_id);
          e->set_verb(row.verb);
          e->set_target(row.target);
          e->set_detail(row.detail);
          *e->mutable_time() = ToProto(row.time);
        }
        return out;
      });
}

}  // namespace tailor::coordinator
