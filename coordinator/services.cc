#include "coordinator/services.h"

#include <atomic>
#include <deque>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/ids.h"
#include "common/sha256.h"
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

absl::Status ValidateHeader(const v1::ArtifactHeader& h, int64_t max_bytes) {
  if (h.lease_id().empty()) return absl::InvalidArgumentError("header.lease_id: required");
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
  UploadReactor(Coordinator* core, v1::Artifact* resp) : core_(core), resp_(resp) {
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
      absl::Status st = ValidateHeader(header_, max);
      if (!st.ok()) return st;
      auto lease = core_->CheckLease(header_.lease_id());
      if (!lease.ok()) return lease.status();
      lease_ = *lease;
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
class LogReactor final : public grpc::ServerWriteReactor<v1::LogChunk> {
 public:
  LogReactor(Coordinator* core, const v1::GetJobLogRequest& req) : offset_(req.offset()) {
    auto job = core->GetJob(req.job_id());
    if (!job.ok()) {
      Finish(ToGrpcStatus(job.status()));
      return;
    }
    path_ = absl::StrCat(core->options().data_dir, "/logs/", job->id(), "/attempt-",
                         job->attempt(), ".log");
    in_.open(path_, std::ios::binary);
    if (!in_) {
      Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job ", job->id(), " has no log yet (attempt ",
                                       job->attempt(), ")")));
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
  void OnDone() override { delete this; }

 private:
  void Next() {
    std::string buf(kChunkBytes, '\0');
    in_.read(buf.data(), kChunkBytes);
    buf.resize(static_cast<size_t>(in_.gcount()));
    if (buf.empty()) {
      Finish(grpc::Status::OK);
      return;
    }
    chunk_.set_offset(offset_);
    offset_ += static_cast<int64_t>(buf.size());
    chunk_.set_data(std::move(buf));
    StartWrite(&chunk_);
  }

  int64_t offset_;
  std::string path_;
  std::ifstream in_;
  v1::LogChunk chunk_;
};

}  // namespace

// --- CampaignService ---

grpc::ServerUnaryReactor* CampaignServiceImpl::SubmitCampaign(
    grpc::CallbackServerContext* ctx, const v1::SubmitCampaignRequest* req,
    v1::SubmitCampaignResponse* resp) {
  return Respond(ctx, resp, [&]() -> absl::StatusOr<v1::SubmitCampaignResponse> {
    auto r = core_->Submit(req->contract(), req->request_id());
    if (!r.ok()) return r.status();
    v1::SubmitCampaignResponse out;
    *out.mutable_campaign() = std::move(r->first);
    out.set_created(r->second);
    return out;
  });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::GetCampaign(grpc::CallbackServerContext* ctx,
                                                           const v1::GetCampaignRequest* req,
                                                           v1::Campaign* resp) {
  return Respond(ctx, resp, [&] { return core_->GetCampaign(req->campaign_id()); });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::ListCampaigns(
    grpc::CallbackServerContext* ctx, const v1::ListCampaignsRequest* req,
    v1::ListCampaignsResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->ListCampaigns(*req); });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::CancelCampaign(
    grpc::CallbackServerContext* ctx, const v1::CancelCampaignRequest* req, v1::Campaign* resp) {
  return Respond(ctx, resp, [&] { return core_->Cancel(req->campaign_id(), req->reason()); });
}

grpc::ServerWriteReactor<v1::Event>* CampaignServiceImpl::WatchCampaign(
    grpc::CallbackServerContext* ctx, const v1::WatchCampaignRequest* req) {
  return new WatchReactor(core_, req->campaign_id(), req->from_seq());
}

grpc::ServerUnaryReactor* CampaignServiceImpl::GetReport(grpc::CallbackServerContext* ctx,
                                                         const v1::GetReportRequest* req,
                                                         v1::CampaignReport* resp) {
  return Respond(ctx, resp, [&] { return core_->GetReport(req->campaign_id()); });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::ListArtifacts(
    grpc::CallbackServerContext* ctx, const v1::ListArtifactsRequest* req,
    v1::ListArtifactsResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->ListArtifacts(req->campaign_id()); });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::ListCostTables(
    grpc::CallbackServerContext* ctx, const v1::ListCostTablesRequest* req,
    v1::ListCostTablesResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->ListCostTables(req->device_kind()); });
}

grpc::ServerUnaryReactor* CampaignServiceImpl::GetCostTable(grpc::CallbackServerContext* ctx,
                                                            const v1::GetCostTableRequest* req,
                                                            v1::CostTable* resp) {
  return Respond(ctx, resp, [&] { return core_->GetCostTable(*req); });
}

grpc::ServerWriteReactor<v1::LogChunk>* CampaignServiceImpl::GetJobLog(
    grpc::CallbackServerContext* ctx, const v1::GetJobLogRequest* req) {
  return new LogReactor(core_, *req);
}

// --- AgentService ---

grpc::ServerUnaryReactor* AgentServiceImpl::Register(grpc::CallbackServerContext* ctx,
                                                     const v1::RegisterAgentRequest* req,
                                                     v1::RegisterAgentResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->Register(req->info()); });
}

grpc::ServerUnaryReactor* AgentServiceImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                      const v1::HeartbeatRequest* req,
                                                      v1::HeartbeatResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->Heartbeat(*req); });
}

grpc::ServerUnaryReactor* AgentServiceImpl::AcquireJob(grpc::CallbackServerContext* ctx,
                                                       const v1::AcquireJobRequest* req,
                                                       v1::AcquireJobResponse* resp) {
  return new AcquireReactor(core_, *req, resp);
}

grpc::ServerUnaryReactor* AgentServiceImpl::ReportProgress(
    grpc::CallbackServerContext* ctx, const v1::ReportProgressRequest* req,
    v1::ReportProgressResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->ReportProgress(*req); });
}

grpc::ServerUnaryReactor* AgentServiceImpl::CompleteJob(grpc::CallbackServerContext* ctx,
                                                        const v1::CompleteJobRequest* req,
                                                        v1::CompleteJobResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->CompleteJob(*req); });
}

grpc::ServerReadReactor<v1::UploadArtifactRequest>* AgentServiceImpl::UploadArtifact(
    grpc::CallbackServerContext* ctx, v1::Artifact* resp) {
  return new UploadReactor(core_, resp);
}

grpc::ServerWriteReactor<v1::ArtifactChunk>* AgentServiceImpl::DownloadArtifact(
    grpc::CallbackServerContext* ctx, const v1::DownloadArtifactRequest* req) {
  return new DownloadReactor(core_, *req);
}

grpc::ServerUnaryReactor* AgentServiceImpl::PutCostTable(grpc::CallbackServerContext* ctx,
                                                         const v1::PutCostTableRequest* req,
                                                         v1::CostTable* resp) {
  return Respond(ctx, resp, [&] { return core_->PutCostTable(*req); });
}

grpc::ServerUnaryReactor* AgentServiceImpl::GetAssignment(grpc::CallbackServerContext* ctx,
                                                          const v1::GetAssignmentRequest* req,
                                                          v1::AcquireJobResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->GetAssignment(req->lease_id()); });
}

// --- AdminService ---

grpc::ServerUnaryReactor* AdminServiceImpl::ListQueue(grpc::CallbackServerContext* ctx,
                                                      const v1::ListQueueRequest* req,
                                                      v1::ListQueueResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->ListQueue(*req); });
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListAgents(grpc::CallbackServerContext* ctx,
                                                       const v1::ListAgentsRequest* req,
                                                       v1::ListAgentsResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->ListAgents(*req); });
}

grpc::ServerUnaryReactor* AdminServiceImpl::DrainAgent(grpc::CallbackServerContext* ctx,
                                                       const v1::DrainAgentRequest* req,
                                                       v1::Agent* resp) {
  return Respond(ctx, resp, [&] { return core_->DrainAgent(*req); });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Recompress(grpc::CallbackServerContext* ctx,
                                                       const v1::RecompressRequest* req,
                                                       v1::RecompressResponse* resp) {
  return Respond(ctx, resp, [&] { return core_->Recompress(*req); });
}

}  // namespace tailor::coordinator
