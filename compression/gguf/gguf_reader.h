#ifndef TAILOR_COMPRESSION_GGUF_GGUF_READER_H_
#define TAILOR_COMPRESSION_GGUF_GGUF_READER_H_

// A reader of the GGUF v3 files tailor writes (gguf_writer.h): header, the metadata value
// types GgufWriter writes, tensor infos and data. Used by the tests to check exports and by
// later tools that inspect a GGUF; it is not a general reader (uint8/16, int8/16/64 and
// float64 values and nested arrays are refused naming the key). Every malformed input is
// DataLoss naming the file and the key or tensor.
//
// No LibTorch here.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/gguf/gguf_writer.h"

namespace tailor::gguf {

class GgufFile {
 public:
  // Reads the whole file into memory (test and inspection sizes).
  static absl::StatusOr<GgufFile> Read(const std::string& path);
  static absl::StatusOr<GgufFile> Parse(std::string bytes, absl::string_view source);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  // Keys in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* Find(absl::string_view key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(absl::string_view name) const;
  // The bytes of a tensor (a view into this object).
  absl::string_view TensorData(const TensorInfo& t) const;

 private:
  std::string bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_GGUF_READER_H_
