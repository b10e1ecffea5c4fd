#include "storage/blob_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/status_macros.h"

// The store only touches the file system and keeps no mutable state, so it is safe to use
// from several threads at once; each Writer belongs to one caller. The root is assumed to be
// owned by one process: Open clears <root>/tmp, which would break another process's uploads.

namespace tailor::storage {
namespace {

namespace fs = std::filesystem;

constexpr size_t kReadBufferSize = 1 << 20;

absl::Status ErrnoStatus(int err, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

// For writes a missing path is a broken store, not a missing blob.
absl::Status WriteErrnoStatus(int err, absl::string_view what) {
  absl::Status s = ErrnoStatus(err, what);
  if (s.code() == absl::StatusCode::kNotFound) return absl::InternalError(s.message());
  return s;
}

absl::Status CheckDigest(absl::string_view digest) {
  if (IsSha256Hex(digest)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "malformed blob digest '", digest.substr(0, 80), "': want 64 lowercase hex characters"));
}

absl::Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY);
  if (fd < 0) return WriteErrnoStatus(errno, absl::StrCat("opening directory ", path));
  absl::Status status;
  if (::fsync(fd) != 0) status = WriteErrnoStatus(errno, absl::StrCat("fsync of ", path));
  ::close(fd);
  return status;
}

// mkdir that tolerates an existing directory; `created` tells the caller whether the parent
// needs an fsync to make the new entry durable.
absl::Status MakeDir(const std::string& path, bool* created) {
  if (created != nullptr) *created = false;
  if (::mkdir(path.c_str(), 0755) == 0) {
    if (created != nullptr) *created = true;
    return absl::OkStatus();
  }
  if (errno == EEXIST) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  return WriteErrnoStatus(errno, absl::StrCat("creating directory ", path));
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return WriteErrnoStatus(errno, absl::StrCat("writing ", path));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

class FileWriter : public BlobStore::Writer {
 public:
  FileWriter(std::string root, std::string tmp_path, int fd, int64_t max_size)
      : root_(std::move(root)), tmp_path_(std::move(tmp_path)), fd_(fd), max_size_(max_size) {}

  ~FileWriter() override { Discard(); }

  absl::Status Append(absl::string_view data) override {
    if (finished_) return absl::FailedPreconditionError("blob writer already finished");
    const int64_t n = static_cast<int64_t>(data.size());
    if (n > max_size_ - size_) {
      Discard();
      return absl::ResourceExhaustedError(absl::StrCat(
          "blob exceeds the maximum size of ", max_size_, " bytes (", size_ + n, " so far)"));
    }
    absl::Status s = WriteAll(fd_, data, tmp_path_);
    if (!s.ok()) {
      Discard();
      return s;
    }
    // Hashing as we go avoids reading the whole file back at Commit.
    hash_.Update(data);
    size_ += n;
    return absl::OkStatus();
  }

  absl::StatusOr<BlobInfo> Commit(absl::string_view expected_sha256,
                                  int64_t expected_size) override {
    if (finished_) return absl::FailedPreconditionError("blob writer already finished");
    BlobInfo info;
    info.digest = hash_.HexDigest();
    info.size_bytes = size_;
    if (expected_size >= 0 && expected_size != size_) {
      Discard();
      return absl::InvalidArgumentError(absl::StrCat(
          "blob size mismatch: expected ", expected_size, " bytes, got ", size_));
    }
    if (!expected_sha256.empty() && expected_sha256 != info.digest) {
      Discard();
      return absl::InvalidArgumentError(absl::StrCat(
          "blob sha256 mismatch: expected ", expected_sha256.substr(0, 80), ", got ",
          info.digest));
    }
    absl::Status s = Publish(info.digest);
    if (!s.ok()) {
      Discard();
      return s;
    }
    return info;
  }

 private:
  absl::Status Publish(const std::string& digest) {
    // Durable before visible: the data reaches the disk before the rename can.
    if (::fsync(fd_) != 0) return WriteErrnoStatus(errno, absl::StrCat("fsync of ", tmp_path_));
    // Blobs are immutable; read-only files guard against accidental in-place edits.
    ::fchmod(fd_, 0444);
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return WriteErrnoStatus(errno, absl::StrCat("closing ", tmp_path_));

    const std::string shard_dir = absl::StrCat(root_, "/sha256/", digest.substr(0, 2));
    const std::string final_path = absl::StrCat(shard_dir, "/", digest.substr(2));
    bool created = false;
    TAILOR_RETURN_IF_ERROR(MakeDir(shard_dir, &created));
    if (created) TAILOR_RETURN_IF_ERROR(FsyncPath(absl::StrCat(root_, "/sha256")));

    // An existing blob of this digest is replaced atomically by our verified copy: same bytes
    // when it is intact, and a repair when it was damaged. Readers keep their open file.
    if (::rename(tmp_path_.c_str(), final_path.c_str()) != 0) {
      return WriteErrnoStatus(errno, absl::StrCat("renaming ", tmp_path_, " to ", final_path));
    }
    finished_ = true;  // the temp file is gone; nothing left to discard
    return FsyncPath(shard_dir);
  }

  // Closes and removes the temp file; the writer is unusable afterwards.
  void Discard() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    if (!finished_) ::unlink(tmp_path_.c_str());
    finished_ = true;
  }

  const std::string root_;
  const std::string tmp_path_;
  int fd_;
  const int64_t max_size_;
  int64_t size_ = 0;
  bool finished_ = false;
  Sha256 hash_;
};

// Opens a published blob for reading; NOT_FOUND when absent.
absl::StatusOr<int> OpenBlob(const std::string& path, absl::string_view digest,
                             int64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("blob ", digest, " not found"));
    return ErrnoStatus(errno, absl::StrCat("opening blob ", path));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ErrnoStatus(errno, absl::StrCat("stat of blob ", path));
    ::close(fd);
    return s;
  }
  *size = static_cast<int64_t>(st.st_size);
  return fd;
}

// Closes the descriptor on scope exit so every early return is leak-free.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

std::string BlobPath(const std::string& root, absl::string_view digest) {
  return absl::StrCat(root, "/sha256/", digest.substr(0, 2), "/", digest.substr(2));
}

}  // namespace

absl::StatusOr<std::unique_ptr<BlobStore>> BlobStore::Open(const std::string& root) {
  if (root.empty()) return absl::InvalidArgumentError("blob store root is empty");
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    return WriteErrnoStatus(ec.value(), absl::StrCat("creating blob store root ", root));
  }
  TAILOR_RETURN_IF_ERROR(MakeDir(absl::StrCat(root, "/sha256"), nullptr));
  const std::string tmp = absl::StrCat(root, "/tmp");
  TAILOR_RETURN_IF_ERROR(MakeDir(tmp, nullptr));
  // Anything left in tmp belongs to uploads a previous process never finished.
  std::vector<fs::path> leftovers;
  for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
    leftovers.push_back(it->path());
  }
  if (ec) return WriteErrnoStatus(ec.value(), absl::StrCat("listing ", tmp));
  for (const fs::path& p : leftovers) {
    fs::remove_all(p, ec);
    if (ec) {
      return WriteErrnoStatus(ec.value(), absl::StrCat("removing leftover temp file ", p.string()));
    }
  }
  return std::unique_ptr<BlobStore>(new BlobStore(root));
}

absl::StatusOr<std::unique_ptr<BlobStore::Writer>> BlobStore::NewWriter(int64_t max_size) {
  if (max_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative max_size ", max_size));
  }
  std::string path = absl::StrCat(root_, "/tmp/upload-XXXXXX");
  int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) return WriteErrnoStatus(errno, absl::StrCat("creating temp file in ", root_, "/tmp"));
  return std::unique_ptr<Writer>(new FileWriter(root_, std::move(path), fd, max_size));
}

absl::StatusOr<BlobInfo> BlobStore::Put(absl::string_view data) {
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<Writer> writer,
                          NewWriter(static_cast<int64_t>(data.size())));
  TAILOR_RETURN_IF_ERROR(writer->Append(data));
  return writer->Commit("", static_cast<int64_t>(data.size()));
}

bool BlobStore::Exists(absl::string_view digest) const {
  if (!IsSha256Hex(digest)) return false;
  struct stat st;
  return ::stat(BlobPath(root_, digest).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<int64_t> BlobStore::Size(absl::string_view digest) const {
  TAILOR_RETURN_IF_ERROR(CheckDigest(digest));
  struct stat st;
  const std::string path = BlobPath(root_, digest);
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("blob ", digest, " not found"));
    return ErrnoStatus(errno, absl::StrCat("stat of blob ", path));
  }
  return static_cast<int64_t>(st.st_size);
}

absl::StatusOr<std::string> BlobStore::PathOf(absl::string_view digest) const {
  TAILOR_RETURN_IF_ERROR(Size(digest).status());
  return BlobPath(root_, digest);
}

absl::StatusOr<std::string> BlobStore::ReadChunk(absl::string_view digest, int64_t offset,
                                                 int64_t max_bytes) const {
  TAILOR_RETURN_IF_ERROR(CheckDigest(digest));
  if (offset < 0 || max_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("negative offset ", offset, " or max_bytes ", max_bytes));
  }
  const std::string path = BlobPath(root_, digest);
  int64_t size = 0;
  TAILOR_ASSIGN_OR_RETURN(int fd, OpenBlob(path, digest, &size));
  FdCloser closer(fd);
  if (offset > size) {
    return absl::OutOfRangeError(absl::StrCat("offset ", offset, " is past the end of blob ",
                                              digest, " (", size, " bytes)"));
  }
  const int64_t want = std::min(max_bytes, size - offset);
  std::string out(static_cast<size_t>(want), '\0');
  int64_t done = 0;
  while (done < want) {
    ssize_t n = ::pread(fd, out.data() + done, static_cast<size_t>(want - done), offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("reading blob ", path));
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrCat("blob ", digest, " shrank while being read"));
    }
    done += n;
  }
  return out;
}

absl::StatusOr<std::string> BlobStore::ReadAll(absl::string_view digest,
                                               int64_t max_bytes) const {
  TAILOR_ASSIGN_OR_RETURN(int64_t size, Size(digest));
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("blob ", digest, " is ", size,
                                                     " bytes, more than the limit of ",
                                                     max_bytes));
  }
  return ReadChunk(digest, 0, size);
}

absl::Status BlobStore::Verify(absl::string_view digest) const {
  TAILOR_RETURN_IF_ERROR(CheckDigest(digest));
  const std::string path = BlobPath(root_, digest);
  int64_t size = 0;
  TAILOR_ASSIGN_OR_RETURN(int fd, OpenBlob(path, digest, &size));
  FdCloser closer(fd);
  Sha256 hash;
  std::string buf(kReadBufferSize, '\0');
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("reading blob ", path));
    }
    if (n == 0) break;
    hash.Update(absl::string_view(buf.data(), static_cast<size_t>(n)));
  }
  const std::string actual = hash.HexDigest();
  if (actual != digest) {
    return absl::DataLossError(
        absl::StrCat("blob ", digest, " is corrupt: its content hashes to ", actual));
  }
  return absl::OkStatus();
}

}  // namespace tailor::storage
