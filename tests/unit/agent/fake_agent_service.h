#ifndef TAILOR_TESTS_UNIT_AGENT_FAKE_AGENT_SERVICE_H_
#define TAILOR_TESTS_UNIT_AGENT_FAKE_AGENT_SERVICE_H_

// An in-process AgentService that hands out scripted jobs and records every call, so agent
// runtime tests check the protocol from the coordinator's side without the real coordinator.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sha256.h"
#include "grpcpp/grpcpp.h"
#include "tailor/v1/agent.grpc.pb.h"

namespace tailor::testing {

struct RecordedUpload {
  v1::ArtifactHeader header;
  std::string data;
  std::vector<size_t> chunk_sizes;
};

struct RecordedComplete {
  v1::CompleteJobRequest request;
  bool accepted = false;
};

class FakeAgentService final : public v1::AgentService::Service {
 public:
  using HeartbeatHook = std::function<grpc::Status(const v1::HeartbeatRequest&,
                                                   v1::HeartbeatResponse*)>;
  using ProgressHook = std::function<grpc::Status(const v1::ReportProgressRequest&,
                                                  v1::ReportProgressResponse*)>;

  // Queues a job handed out by the next AcquireJob.
  void AddJob(v1::AcquireJobResponse job) {
    absl::MutexLock lock(&mu_);
    job.set_assigned(true);
    if (job.lease().ttl_ms() == 0) job.mutable_lease()->set_ttl_ms(5000);
    leases_[job.lease().id()] = "leased";
    queue_.push_back(std::move(job));
  }
  // A launcher-started job: GetAssignment serves it to the ranks that name its lease.
  void AddAssignment(v1::AcquireJobResponse job) {
    absl::MutexLock lock(&mu_);
    job.set_assigned(true);
    if (job.lease().ttl_ms() == 0) job.mutable_lease()->set_ttl_ms(5000);
    leases_[job.lease().id()] = "leased";
    assignments_[job.lease().id()] = std::move(job);
  }
  // Makes a lease known without handing out a job (a coordinator restarted with its leases).
  void AddLease(const std::string& lease_id) {
    absl::MutexLock lock(&mu_);
    leases_[lease_id] = "leased";
  }
  void SetHeartbeatHook(HeartbeatHook hook) {
    absl::MutexLock lock(&mu_);
    heartbeat_hook_ = std::move(hook);
  }
  void SetProgressHook(ProgressHook hook) {
    absl::MutexLock lock(&mu_);
    progress_hook_ = std::move(hook);
  }
  void FailNextCompletes(int n, grpc::StatusCode code) {
    absl::MutexLock lock(&mu_);
    fail_completes_ = n;
    fail_complete_code_ = code;
  }
  void FailNextDownloadsAfterFirstChunk(int n) {
    absl::MutexLock lock(&mu_);
    fail_downloads_ = n;
  }
  void SetIdlePoll(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    idle_poll_ = d;
  }
  void PutBlob(const std::string& digest, std::string data) {
    absl::MutexLock lock(&mu_);
    blobs_[digest] = std::move(data);
  }

  // Polls `pred` (under the lock) until it holds or `timeout` passes.
  bool WaitUntil(const std::function<bool(const FakeAgentService&)>& pred,
                 absl::Duration timeout = absl::Seconds(10)) const {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      {
        absl::MutexLock lock(&mu_);
        if (pred(*this)) return true;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    absl::MutexLock lock(&mu_);
    return pred(*this);
  }

  // Snapshots (copies, taken under the lock).
  std::vector<std::string> calls() const { return Get(&FakeAgentService::calls_); }
  std::vector<v1::RegisterAgentRequest> registers() const {
    return Get(&FakeAgentService::registers_);
  }
  std::vector<v1::HeartbeatRequest> heartbeats() const {
    return Get(&FakeAgentService::heartbeats_);
  }
  std::vector<v1::ReportProgressRequest> progress() const {
    return Get(&FakeAgentService::progress_);
  }
  std::vector<RecordedComplete> completes() const { return Get(&FakeAgentService::completes_); }
  std::vector<RecordedUpload> uploads() const { return Get(&FakeAgentService::uploads_); }
  std::vector<v1::DownloadArtifactRequest> downloads() const {
    return Get(&FakeAgentService::downloads_);
  }
  int acquires() const {
    absl::MutexLock lock(&mu_);
    return acquires_;
  }

  // Unlocked accessors for WaitUntil predicates (which run under the lock). The predicates
  // are lambdas called through std::function, where the analysis does not see the lock, so
  // each asserts it.
  int accepted_completes_locked() const {
    mu_.AssertHeld();
    int n = 0;
    for (const auto& c : completes_) n += c.accepted ? 1 : 0;
    return n;
  }
  size_t completes_locked() const { return SizeLocked(&FakeAgentService::completes_); }
  size_t registers_locked() const { return SizeLocked(&FakeAgentService::registers_); }
  size_t progress_locked() const { return SizeLocked(&FakeAgentService::progress_); }
  size_t heartbeats_locked() const { return SizeLocked(&FakeAgentService::heartbeats_); }
  size_t uploads_locked() const { return SizeLocked(&FakeAgentService::uploads_); }
  bool queue_empty_locked() const { return SizeLocked(&FakeAgentService::queue_) == 0; }

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterAgentRequest* request,
                        v1::RegisterAgentResponse* response) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back("Register");
    registers_.push_back(*request);
    response->set_agent_id(absl::StrCat("agent-", request->info().name()));
    response->set_heartbeat_interval_ms(50);
    response->set_lease_ttl_ms(5000);
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    HeartbeatHook hook;
    {
      absl::MutexLock lock(&mu_);
      calls_.push_back("Heartbeat");
      heartbeats_.push_back(*request);
      hook = heartbeat_hook_;
    }
    if (hook) return hook(*request, response);
    return grpc::Status::OK;
  }

  grpc::Status AcquireJob(grpc::ServerContext* context, const v1::AcquireJobRequest* request,
                          v1::AcquireJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back("AcquireJob");
    ++acquires_;
    // Honour the long-poll (up to idle_poll_) but notice a cancelled client promptly.
    const absl::Time deadline =
        absl::Now() + std::min(idle_poll_, absl::Milliseconds(request->wait_ms()));
    while (queue_.empty() && absl::Now() < deadline && !context->IsCancelled()) {
      mu_.AwaitWithTimeout(absl::Condition(this, &FakeAgentService::HasJob),
                           absl::Milliseconds(10));
    }
    if (!queue_.empty()) {
      *response = queue_.front();
      queue_.erase(queue_.begin());
    }
    return grpc::Status::OK;
  }

  grpc::Status GetAssignment(grpc::ServerContext*, const v1::GetAssignmentRequest* request,
                             v1::AcquireJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back("GetAssignment");
    auto it = assignments_.find(request->lease_id());
    if (it == assignments_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such lease");
    }
    *response = it->second;
    return grpc::Status::OK;
  }

  grpc::Status ReportProgress(grpc::ServerContext*, const v1::ReportProgressRequest* request,
                              v1::ReportProgressResponse* response) override {
    ProgressHook hook;
    {
      absl::MutexLock lock(&mu_);
      calls_.push_back("ReportProgress");
      progress_.push_back(*request);
      hook = progress_hook_;
    }
    if (hook) return hook(*request, response);
    return grpc::Status::OK;
  }

  grpc::Status CompleteJob(grpc::ServerContext*, const v1::CompleteJobRequest* request,
                           v1::CompleteJobResponse*) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back("CompleteJob");
    completes_.push_back({*request, false});
    if (fail_completes_ > 0) {
      --fail_completes_;
      return grpc::Status(fail_complete_code_, "scripted failure");
    }
    auto it = leases_.find(request->lease_id());
    if (it == leases_.end() || it->second != "leased") {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "lease is not active");
    }
    it->second = "completed";
    completes_.back().accepted = true;
    return grpc::Status::OK;
  }

  grpc::Status UploadArtifact(grpc::ServerContext*,
                              grpc::ServerReader<v1::UploadArtifactRequest>* reader,
                              v1::Artifact* response) override {
    RecordedUpload upload;
    v1::UploadArtifactRequest msg;
    if (!reader->Read(&msg) || !msg.has_header()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "first message must be a header");
    }
    upload.header = msg.header();
    while (reader->Read(&msg)) {
      upload.chunk_sizes.push_back(msg.data().size());
      upload.data += msg.data();
    }
    const std::string digest = Sha256::Hex(upload.data);
    absl::MutexLock lock(&mu_);
    calls_.push_back("UploadArtifact");
    uploads_.push_back(upload);
    if (digest != upload.header.sha256()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sha256 mismatch");
    }
    blobs_[digest] = upload.data;
    response->set_digest(digest);
    response->set_size_bytes(static_cast<int64_t>(upload.data.size()));
    response->set_kind(upload.header.kind());
    response->set_name(upload.header.name());
    return grpc::Status::OK;
  }

  grpc::Status DownloadArtifact(grpc::ServerContext*, const v1::DownloadArtifactRequest* request,
                                grpc::ServerWriter<v1::ArtifactChunk>* writer) override {
    std::string data;
    bool fail_after_first = false;
    {
      absl::MutexLock lock(&mu_);
      calls_.push_back("DownloadArtifact");
      downloads_.push_back(*request);
      auto it = blobs_.find(request->digest());
      if (it == blobs_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such blob");
      data = it->second;
      if (fail_downloads_ > 0) {
        --fail_downloads_;
        fail_after_first = true;
      }
    }
    constexpr size_t kChunk = 64 * 1024;
    for (size_t off = request->offset(); off < data.size(); off += kChunk) {
      v1::ArtifactChunk chunk;
      chunk.set_offset(static_cast<int64_t>(off));
      chunk.set_total_size(static_cast<int64_t>(data.size()));
      chunk.set_data(data.substr(off, kChunk));
      if (!writer->Write(chunk)) break;
      if (fail_after_first) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "scripted cut");
    }
    return grpc::Status::OK;
  }

  grpc::Status PutCostTable(grpc::ServerContext*, const v1::PutCostTableRequest* request,
                            v1::CostTable* response) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back("PutCostTable");
    *response = request->table();
    response->set_id("table-1");
    return grpc::Status::OK;
  }

 private:
  template <typename T>
  T Get(T FakeAgentService::*member) const {
    absl::MutexLock lock(&mu_);
    return this->*member;
  }
  template <typename T>
  size_t SizeLocked(std::vector<T> FakeAgentService::*member) const {
    mu_.AssertHeld();
    return (this->*member).size();
  }
  // An absl::Condition for Acquire's wait, evaluated with mu_ held.
  bool HasJob() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); }

  mutable absl::Mutex mu_;
  std::vector<v1::AcquireJobResponse> queue_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> leases_ ABSL_GUARDED_BY(mu_);  // id -> leased|completed
  std::map<std::string, v1::AcquireJobResponse> assignments_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> blobs_ ABSL_GUARDED_BY(mu_);
  HeartbeatHook heartbeat_hook_ ABSL_GUARDED_BY(mu_);
  ProgressHook progress_hook_ ABSL_GUARDED_BY(mu_);
  int fail_completes_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::StatusCode fail_complete_code_ ABSL_GUARDED_BY(mu_) = grpc::StatusCode::UNAVAILABLE;
  int fail_downloads_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration idle_poll_ ABSL_GUARDED_BY(mu_) = absl::Milliseconds(20);
  int acquires_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RegisterAgentRequest> registers_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::HeartbeatRequest> heartbeats_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ReportProgressRequest> progress_ ABSL_GUARDED_BY(mu_);
  std::vector<RecordedComplete> completes_ ABSL_GUARDED_BY(mu_);
  std::vector<RecordedUpload> uploads_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::DownloadArtifactRequest> downloads_ ABSL_GUARDED_BY(mu_);
};

// The fake served on 127.0.0.1 (port 0 = any free port).
class FakeCoordinator {
 public:
  explicit FakeCoordinator(int port = 0) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeCoordinator() { Shutdown(); }
  void Shutdown() {
    if (server_ == nullptr) return;
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Milliseconds(200)));
    server_->Wait();
    server_.reset();
  }
  bool ok() const { return server_ != nullptr && port_ > 0; }
  int port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  FakeAgentService& service() { return service_; }

 private:
  FakeAgentService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace tailor::testing

#endif  // TAILOR_TESTS_UNIT_AGENT_FAKE_AGENT_SERVICE_H_
