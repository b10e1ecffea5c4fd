#include "compression/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tailor::model {

MappedFile::~MappedFile() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

absl::Status MappedFile::Map(const std::string& path, uint64_t size) {
  if (size == 0) return absl::OkStatus();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot map: ", std::strerror(err)));
  }
  if (addr_ != nullptr) ::munmap(addr_, size_);
  addr_ = addr;
  size_ = size;
  return absl::OkStatus();
}

absl::string_view MappedFile::bytes() const {
  return addr_ == nullptr ? absl::string_view()
                          : absl::string_view(static_cast<const char*>(addr_), size_);
}

}  // namespace tailor::model
