// Streaming verbs: artifact downloads and job logs.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/format.h"
#include "common/grpc_util.h"
#include "common/sha256.h"

namespace tailor::cli {
namespace {

constexpr char kDigestNotFound[] =
    "check the digest; `tailor artifacts list CAMPAIGN` shows a campaign's artifacts";
constexpr absl::Duration kProgressInterval = absl::Milliseconds(100);

absl::Status ErrnoStatus(absl::string_view what, int err) {
  return absl::Status(err == ENOENT ? absl::StatusCode::kNotFound
                      : (err == EACCES || err == EPERM) ? absl::StatusCode::kPermissionDenied
                                                         : absl::StatusCode::kInternal,
                      absl::StrCat(what, ": ", std::strerror(err)));
}

absl::Status WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", errno);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// The directory entry of a rename is only durable once the directory itself is synced.
void SyncParentDirectory(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

// A downloaded file that is removed unless Commit() succeeds, so a failed or corrupt download
// never leaves anything at PATH or PATH.part.
class PartFile {
 public:
  explicit PartFile(std::string path) : path_(std::move(path)), part_(path_ + ".part") {}
  ~PartFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(part_.c_str());
  }
  absl::Status Open() {
    fd_ = ::open(part_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return ErrnoStatus(absl::StrCat("cannot create ", part_), errno);
    return absl::OkStatus();
  }
  absl::Status Write(const std::string& data) { return WriteAll(fd_, data); }
  absl::Status Commit() {
    if (::fsync(fd_) != 0) return ErrnoStatus(absl::StrCat("fsync ", part_), errno);
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return ErrnoStatus(absl::StrCat("close ", part_), errno);
    if (::rename(part_.c_str(), path_.c_str()) != 0) {
      return ErrnoStatus(absl::StrCat("rename ", part_, " to ", path_), errno);
    }
    committed_ = true;
    SyncParentDirectory(path_);
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  const std::string part_;
  int fd_ = -1;
  bool committed_ = false;
};

void DrawDownloadProgress(const CliEnv& env, int64_t done, int64_t total) {
  const double f = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0;
  *env.err << "\r\x1b[2K" << ProgressBar(f, 32) << " " << FormatPercent(f) << "  "
           << FormatBytes(done) << " / " << FormatBytes(total) << std::flush;
}

}  // namespace

int RunArtifactsGet(const Invocation& inv, const CliEnv& env) {
  const std::string digest = absl::AsciiStrToLower(inv.target);
  const std::string what = absl::StrCat("download of ", ShortHash(digest), " failed");
  PartFile file(inv.output_path);
  if (absl::Status s = file.Open(); !s.ok()) return ReportError(*env.err, what, s, env.address);

  v1::DownloadArtifactRequest request;
  request.set_digest(digest);
  auto ctx = env.StreamContext();
  auto reader = env.agents->DownloadArtifact(ctx.get(), request);
  Sha256 hash;
  int64_t written = 0;
  int64_t total = -1;
  absl::Status local;  // a failure on our side; the stream is cancelled
  absl::Time last_draw = absl::InfinitePast();
  v1::ArtifactChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.offset() != written) {
      local = absl::DataLossError(absl::StrFormat("chunk at offset %d, expected %d",
                                                  chunk.offset(), written));
      break;
    }
    if (total < 0) total = chunk.total_size();
    if (local = file.Write(chunk.data()); !local.ok()) break;
    hash.Update(chunk.data());
    written += static_cast<int64_t>(chunk.data().size());
    if (env.err_is_tty && env.clock->Now() - last_draw >= kProgressInterval) {
      last_draw = env.clock->Now();
      DrawDownloadProgress(env, written, total);
    }
  }
  if (!local.ok()) ctx->TryCancel();
  const grpc::Status status = reader->Finish();
  if (env.err_is_tty && last_draw != absl::InfinitePast()) {
    DrawDownloadProgress(env, written, total);
    *env.err << "\n";
  }
  if (!local.ok()) return ReportError(*env.err, what, local, env.address);
  if (!status.ok()) {
    return ReportError(*env.err, what, FromGrpcStatus(status), env.address, kDigestNotFound);
  }
  if (total >= 0 && written != total) {
    return ReportError(*env.err, what,
                       absl::DataLossError(absl::StrFormat(
                           "got %d bytes, the coordinator announced %d", written, total)),
                       env.address);
  }
  const std::string got = hash.HexDigest();
  if (got != digest) {
    *env.err << "tailor: " << what << ": checksum mismatch: the data hashes to " << got
             << "\n  hint: nothing was written; retry, and if it persists the stored blob is "
                "corrupt\n";
    return kExitFailure;
  }
  if (absl::Status s = file.Commit(); !s.ok()) return ReportError(*env.err, what, s, env.address);
  *env.out << "wrote " << inv.output_path << " (" << FormatBytes(written)
           << ", sha256 verified)\n";
  return kExitOk;
}

int RunLogs(const Invocation& inv, const CliEnv& env) {
  int64_t offset = 0;
  bool received = false;
  Reconnector reconnector(env);
  while (true) {
    v1::GetJobLogRequest request;
    request.set_job_id(inv.target);
    request.set_offset(offset);
    request.set_follow(inv.follow);
    auto ctx = env.StreamContext();
    auto reader = env.campaigns->GetJobLog(ctx.get(), request);
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) {
      // Skip what a resumed stream repeats, so a reconnect never prints a byte twice.
      const int64_t end = chunk.offset() + static_cast<int64_t>(chunk.data().size());
      if (end <= offset) continue;
      const size_t skip = chunk.offset() < offset ? static_cast<size_t>(offset - chunk.offset()) : 0;
      env.out->write(chunk.data().data() + skip,
                     static_cast<std::streamsize>(chunk.data().size() - skip));
      env.out->flush();
      if (!env.out->good()) {
        // The reader went away (`tailor logs JOB -f | head`): stop quietly, like `tail`.
        ctx->TryCancel();
        (void)reader->Finish();
        return kExitOk;
      }
      offset = end;
      received = true;
      reconnector.Progress();
    }
    const grpc::Status status = reader->Finish();
    if (status.ok()) return kExitOk;
    const absl::Status s = FromGrpcStatus(status);
    const std::string what = absl::StrCat("cannot read the log of job ", inv.target);
    // Before any byte arrived an UNAVAILABLE most likely means no coordinator at all: say so
    // now rather than after a minute of retries.
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || !received) {
      return ReportError(*env.err, what, s, env.address,
                         "check the job id; `tailor status CAMPAIGN` lists its jobs");
    }
    if (!reconnector.in_outage()) {
      *env.err << "tailor: lost the log stream from " << env.address << " (" << s.message()
               << "); reconnecting at byte " << offset << "\n";
    }
    if (!reconnector.Wait()) return ReportError(*env.err, what, s, env.address);
  }
}

}  // namespace tailor::cli
