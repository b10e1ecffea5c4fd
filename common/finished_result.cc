#include "common/finished_result.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tailor {
namespace {

std::string PathOf(const std::string& dir, const std::string& job_id) {
  return (std::filesystem::path(dir) / absl::StrCat("finished-", job_id, ".pb")).string();
}

}  // namespace

absl::Status StoreFinishedResult(const std::string& dir, const std::string& job_id,
                                 const v1::JobOutput& result) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = PathOf(dir, job_id);
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const std::string bytes = result.SerializeAsString();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  const bool written =
      ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) &&
      ::fsync(fd) == 0;
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::filesystem::remove(tmp, ec);
    return absl::UnavailableError(absl::StrCat("cannot store the finished result in ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::JobOutput> LoadFinishedResult(const std::string& dir,
                                                            const std::string& job_id) {
  const std::string path = PathOf(dir, job_id);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("no finished result in ", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  v1::JobOutput result;
  if (!result.ParseFromString(bytes.str())) {
    return absl::DataLossError(absl::StrCat(path, ": not a stored job result"));
  }
  return result;
}

void DropFinishedResult(const std::string& dir, const std::string& job_id) {
  std::error_code ec;
  std::filesystem::remove(PathOf(dir, job_id), ec);
}

}  // namespace tailor
