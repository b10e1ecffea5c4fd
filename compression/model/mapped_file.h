#ifndef TAILOR_COMPRESSION_MODEL_MAPPED_FILE_H_
#define TAILOR_COMPRESSION_MODEL_MAPPED_FILE_H_

// A read-only private mapping of a whole file, unmapped on destruction: how checkpoint
// shards and saved students are read without a second copy of their bytes in memory.
//
// No LibTorch here.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tailor::model {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Maps the first `size` bytes of `path` (its size, normally). Size 0 maps nothing (mmap
  // refuses length 0; the caller's format check reports the empty file). Unavailable
  // naming the path when it cannot be opened or mapped.
  absl::Status Map(const std::string& path, uint64_t size);
  absl::string_view bytes() const;

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_MAPPED_FILE_H_
