// JobContext: what a handler sees of its job (progress, cancellation, artifacts, cost tables).
// Declared in agent_runtime.h; split out to keep each file about one noun.
#include "common/agent_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace tailor {

namespace fs = std::filesystem;

namespace {

constexpr size_t kChunkBytes = 1 << 20;  // the coordinator's maximum data chunk
// Downloads have no size known up front; models can be many GiB, so allow hours rather than
// failing a slow but healthy transfer. Every call still has a deadline.
constexpr absl::Duration kDownloadTimeout = absl::Hours(2);

// Uploads are sized before they start: a minute of slack plus 4 MiB/s, the slowest link we
// expect between a target host and the coordinator.
absl::Duration UploadTimeout(int64_t size_bytes) {
  return absl::Seconds(60) + absl::Seconds(size_bytes / (4 << 20));
}

}  // namespace

namespace agent_internal {

// Uploads read their data twice (hash, then send) and again on retry, so sources rewind.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual absl::Status Rewind() = 0;
  // Reads up to n bytes into buf; 0 at the end.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
};

namespace {

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(absl::string_view data) : data_(data) {}
  absl::Status Rewind() override {
    pos_ = 0;
    return absl::OkStatus();
  }
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    const size_t k = std::min(n, data_.size() - pos_);
    std::memcpy(buf, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

class FileSource : public ByteSource {
 public:
  explicit FileSource(std::string path) : path_(std::move(path)) {}
  ~FileSource() override {
    if (file_ != nullptr) std::fclose(file_);
  }
  absl::Status Rewind() override {
    if (file_ == nullptr) {
      file_ = std::fopen(path_.c_str(), "rb");
      if (file_ == nullptr) {
        return absl::NotFoundError(
            absl::StrCat("cannot open artifact file ", path_, ": ", std::strerror(errno)));
      }
    }
    std::rewind(file_);
    return absl::OkStatus();
  }
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    const size_t k = std::fread(buf, 1, n, file_);
    if (k < n && std::ferror(file_)) {
      return absl::InternalError(absl::StrCat("reading ", path_, ": ", std::strerror(errno)));
    }
    return k;
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

absl::Status DigestSource(ByteSource& source, int64_t* size, std::string* sha256) {
  TAILOR_RETURN_IF_ERROR(source.Rewind());
  Sha256 hasher;
  std::string buf(kChunkBytes, '\0');
  *size = 0;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(size_t n, source.Read(buf.data(), buf.size()));
    if (n == 0) break;
    hasher.Update(absl::string_view(buf.data(), n));
    *size += static_cast<int64_t>(n);
  }
  *sha256 = hasher.HexDigest();
  return absl::OkStatus();
}

}  // namespace
}  // namespace agent_internal

// ---------------------------------------------------------------------------------------------
// JobContext

JobContext::JobContext(AgentRuntime* runtime, v1::AcquireJobResponse assignment,
                       std::string work_dir)
    : runtime_(runtime), assignment_(std::move(assignment)), work_dir_(std::move(work_dir)) {}

std::shared_ptr<grpc::Channel> JobContext::channel() const { return runtime_->channel(); }
const std::string& JobContext::token() const { return runtime_->options().token; }

bool JobContext::Cancelled() const {
  absl::MutexLock lock(&mu_);
  return stop_requested_;
}

JobStopReason JobContext::stop_reason() const {
  absl::MutexLock lock(&mu_);
  return stop_reason_;
}

bool JobContext::SleepUnlessCancelled(absl::Duration d) const {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stop_requested_), d);
  return !stop_requested_;
}

void JobContext::RequestStop(JobStopReason reason) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    if (reason != JobStopReason::kNone &&
        (stop_reason_ == JobStopReason::kNone ||
         (reason == JobStopReason::kLeaseLost && stop_reason_ != reason))) {
      stop_reason_ = reason;
      stop_requested_ = true;
      changed = true;
    }
  }
  if (changed) {
    spdlog::info("job {} (lease {}): stopping: {}", job().id(), lease_id(), JobStopReasonName(reason));
  }
}

v1::JobProgress JobContext::last_progress() const {
  absl::MutexLock lock(&mu_);
  return last_progress_;
}

absl::Status JobContext::ReportProgress(double fraction, absl::string_view message, int64_t step,
                                        int64_t total_steps,
                                        const std::map<std::string, double>& metrics,
                                        bool final) {
  v1::JobProgress progress;
  progress.set_fraction(std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0);
  progress.set_message(std::string(message));
  progress.set_step(step);
  progress.set_total_steps(total_steps);
  for (const auto& [k, v] : metrics) (*progress.mutable_metrics())[k] = v;
  {
    absl::MutexLock lock(&mu_);
    if (stop_requested_) {
      return absl::CancelledError(absl::StrCat("job stopped: ", JobStopReasonName(stop_reason_)));
    }
    last_progress_ = progress;
    const absl::Time now = runtime_->options().clock->Now();
    // Rate-limited because every report is a database write on the coordinator; the final
    // report always goes out so the last state is visible.
    if (!final && now - last_progress_sent_ < runtime_->options().progress_min_interval) {
      return absl::OkStatus();
    }
    last_progress_sent_ = now;
  }
  return SendProgress(progress);
}

absl::Status JobContext::SendProgress(const v1::JobProgress& progress) {
  v1::ReportProgressRequest request;
  request.set_lease_id(lease_id());
  request.set_agent_id(runtime_->agent_id());
  *request.mutable_progress() = progress;
  v1::ReportProgressResponse response;
  auto rpc = MakeContext(runtime_->options().rpc_timeout, token());
  const absl::Status status =
      FromGrpcStatus(runtime_->stub()->ReportProgress(rpc.get(), request, &response));
  if (!status.ok()) {
    if (IsLeaseLostError(status.code())) {
      RequestStop(JobStopReason::kLeaseLost);
      return absl::CancelledError(absl::StrCat("lease lost: ", status.message()));
    }
    // Heartbeats keep the lease; one lost progress update is not worth failing a job over.
    spdlog::debug("job {}: progress not delivered: {}", job().id(), status.ToString());
    return absl::OkStatus();
  }
  if (response.cancelled()) {
    RequestStop(JobStopReason::kCancelled);
    return absl::CancelledError("job cancelled by the coordinator");
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Artifact> JobContext::UploadArtifactFile(const std::string& kind,
                                                            const std::string& name,
                                                            const std::string& path) {
  agent_internal::FileSource source(path);
  return Upload(kind, name, source);
}

absl::StatusOr<v1::Artifact> JobContext::UploadArtifactBytes(const std::string& kind,
                                                             const std::string& name,
                                                             absl::string_view bytes) {
  agent_internal::MemorySource source(bytes);
  return Upload(kind, name, source);
}

absl::StatusOr<v1::Artifact> JobContext::Upload(const std::string& kind, const std::string& name,
                                                agent_internal::ByteSource& source) {
  v1::ArtifactHeader header;
  header.set_lease_id(lease_id());
  header.set_agent_id(runtime_->agent_id());
  header.set_kind(kind);
  header.set_name(name);
  int64_t size = 0;
  std::string sha;
  // Hash first: the coordinator verifies the data against the header before storing the blob.
  TAILOR_RETURN_IF_ERROR(agent_internal::DigestSource(source, &size, &sha));
  header.set_size_bytes(size);
  header.set_sha256(sha);
  OutageRetry retry(runtime_->options(), &outage_);
  while (true) {
    if (Cancelled()) return absl::CancelledError("job stopped; upload abandoned");
    absl::StatusOr<v1::Artifact> artifact = UploadOnce(header, source);
    if (artifact.ok()) {
      spdlog::info("job {}: uploaded {} artifact {} ({} bytes, sha256 {})", job().id(), kind,
                   name, size, sha);
      return artifact;
    }
    const absl::Status& status = artifact.status();
    if (!retry.ShouldRetry(status)) {
      return absl::Status(status.code(), absl::StrCat("uploading artifact ", name, ": ",
                                                      status.message()));
    }
    spdlog::warn("job {}: upload of {} failed ({}); retrying", job().id(), name,
                 status.ToString());
    SleepUnlessCancelled(retry.NextDelay());
  }
}

absl::StatusOr<v1::Artifact> JobContext::UploadOnce(const v1::ArtifactHeader& header,
                                                    agent_internal::ByteSource& source) {
  TAILOR_RETURN_IF_ERROR(source.Rewind());
  auto rpc = MakeContext(UploadTimeout(header.size_bytes()), token());
  v1::Artifact artifact;
  auto writer = runtime_->stub()->UploadArtifact(rpc.get(), &artifact);
  v1::UploadArtifactRequest request;
  *request.mutable_header() = header;
  bool ok = writer->Write(request);
  std::string buf(kChunkBytes, '\0');
  absl::Status local_error;
  while (ok) {
    if (Cancelled()) {
      local_error = absl::CancelledError("job stopped; upload abandoned");
      break;
    }
    absl::StatusOr<size_t> n = source.Read(buf.data(), buf.size());
    if (!n.ok()) {
      local_error = n.status();
      break;
    }
    if (*n == 0) break;
    request.Clear();
    request.set_data(buf.data(), *n);
    ok = writer->Write(request);
  }
  if (!local_error.ok()) {
    rpc->TryCancel();
    writer->Finish();
    return local_error;
  }
  // A failed Write means the server closed the stream; Finish() carries its reason.
  if (ok) writer->WritesDone();
  TAILOR_RETURN_IF_ERROR(FromGrpcStatus(writer->Finish()));
  return artifact;
}

absl::Status JobContext::DownloadArtifact(const std::string& digest, const std::string& path) {
  if (!IsSha256Hex(digest)) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact digest must be 64 lowercase hex characters, got '", digest, "'"));
  }
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  const std::string part = path + ".part";
  std::FILE* out = std::fopen(part.c_str(), "wb");
  if (out == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", part, ": ", std::strerror(errno)));
  }
  auto fail = [&](absl::Status status) {
    if (out != nullptr) std::fclose(out);
    fs::remove(part, ec);
    return status;
  };
  Sha256 hasher;
  int64_t written = 0;
  int64_t total = -1;
  OutageRetry retry(runtime_->options(), &outage_);
  while (true) {
    absl::Status status = DownloadOnce(digest, out, &written, &total, hasher);
    if (status.ok()) break;
    if (!retry.ShouldRetry(status)) {
      return fail(absl::Status(status.code(), absl::StrCat("downloading artifact ", digest, ": ",
                                                           status.message())));
    }
    spdlog::warn("job {}: download of {} interrupted at {} bytes ({}); resuming", job().id(),
                 digest, written, status.ToString());
    if (!SleepUnlessCancelled(retry.NextDelay())) {
      return fail(absl::CancelledError("job stopped; download abandoned"));
    }
  }
  // fsync before rename so a crash cannot leave a complete-looking but empty file.
  if (std::fflush(out) != 0 || ::fsync(fileno(out)) != 0) {
    return fail(absl::InternalError(absl::StrCat("writing ", part, ": ", std::strerror(errno))));
  }
  std::fclose(out);
  out = nullptr;
  if (total >= 0 && written != total) {
    return fail(absl::DataLossError(absl::StrCat("artifact ", digest, ": got ", written,
                                                 " bytes, expected ", total)));
  }
  const std::string got = hasher.HexDigest();
  if (got != digest) {
    return fail(absl::DataLossError(
        absl::StrCat("artifact sha256 mismatch: expected ", digest, ", got ", got)));
  }
  fs::rename(part, path, ec);
  if (ec) {
    return fail(absl::InternalError(absl::StrCat("renaming ", part, ": ", ec.message())));
  }
  return absl::OkStatus();
}

absl::Status JobContext::DownloadOnce(const std::string& digest, std::FILE* out,
                                      int64_t* written, int64_t* total, Sha256& hasher) {
  v1::DownloadArtifactRequest request;
  request.set_digest(digest);
  request.set_offset(*written);
  auto rpc = MakeContext(kDownloadTimeout, token());
  auto reader = runtime_->stub()->DownloadArtifact(rpc.get(), request);
  v1::ArtifactChunk chunk;
  bool first = true;
  absl::Status local_error;
  while (reader->Read(&chunk)) {
    // Only the first chunk's offset is checked: it proves the server honoured the resume
    // offset. The sha256 check at the end covers everything else.
    if (first && chunk.offset() != *written) {
      local_error = absl::DataLossError(absl::StrCat(
          "server resumed at offset ", chunk.offset(), " instead of ", *written));
      break;
    }
    first = false;
    if (Cancelled()) {
      local_error = absl::CancelledError("job stopped; download abandoned");
      break;
    }
    if (chunk.total_size() > 0) *total = chunk.total_size();
    const std::string& data = chunk.data();
    if (!data.empty() && std::fwrite(data.data(), 1, data.size(), out) != data.size()) {
      local_error = absl::InternalError(absl::StrCat("writing download: ", std::strerror(errno)));
      break;
    }
    hasher.Update(data);
    *written += static_cast<int64_t>(data.size());
  }
  if (!local_error.ok()) {
    rpc->TryCancel();
    reader->Finish();
    return local_error;
  }
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<v1::CostTable> JobContext::PutCostTable(const v1::CostTable& table) {
  v1::PutCostTableRequest request;
  request.set_lease_id(lease_id());
  request.set_agent_id(runtime_->agent_id());
  *request.mutable_table() = table;
  OutageRetry retry(runtime_->options(), &outage_);
  while (true) {
    v1::CostTable stored;
    auto rpc = MakeContext(runtime_->options().rpc_timeout, token());
    absl::Status status =
        FromGrpcStatus(runtime_->stub()->PutCostTable(rpc.get(), request, &stored));
    if (status.ok()) return stored;
    if (!retry.ShouldRetry(status)) {
      return absl::Status(status.code(),
                          absl::StrCat("storing the cost table: ", status.message()));
    }
    spdlog::warn("job {}: PutCostTable failed ({}); retrying", job().id(), status.ToString());
    if (!SleepUnlessCancelled(retry.NextDelay())) {
      return absl::CancelledError("job stopped; cost table not stored");
    }
  }
}

}  // namespace tailor
