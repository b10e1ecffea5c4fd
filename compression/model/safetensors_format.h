#ifndef TAILOR_COMPRESSION_MODEL_SAFETENSORS_FORMAT_H_
#define TAILOR_COMPRESSION_MODEL_SAFETENSORS_FORMAT_H_

// Our own reader and writer of the safetensors format
// (https://github.com/huggingface/safetensors): 8-byte little-endian header length N, N
// bytes of JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
// {str: str}}, then the data buffer. Offsets are relative to the buffer.
//
// Everything is validated before any tensor is handed out: header length, JSON, dtype
// names, shape * dtype size == byte length, offsets inside the buffer, tensors neither
// overlapping nor leaving gaps, names non-empty and unique. Corruption is DataLoss, with the
// file path and the tensor name in the message.
//
// No LibTorch here (the fuzzers and torch-free tools read files with it);
// compression/model/safetensors.h adds the LibTorch boundary.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::model {

// Input limits (docs/operations.md, "Input limits"); a file beyond them is DataLoss naming
// the limit, and the writer refuses to produce one.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;  // JSON header
inline constexpr size_t kMaxSafetensorsTensors = 131072;              // tensors per file
inline constexpr size_t kMaxTensorNameBytes = 1024;                   // one tensor name
inline constexpr size_t kMaxTensorRank = 8;                           // shape entries

enum class DType { kF32, kBF16, kF16, kI8, kU8, kI32, kI64 };

absl::string_view DTypeName(DType dtype);  // "F32", "BF16", ...
absl::StatusOr<DType> ParseDType(absl::string_view name);
int64_t DTypeSize(DType dtype);

struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data buffer
  uint64_t end = 0;
};

// The validated index of a file without its data buffer: everything SafetensorsFile::Parse
// checks (header length, JSON, entries, bounds, tiling), so a reader can map or stream the
// tensor bytes instead of holding the whole file in memory.
struct SafetensorsHeader {
  std::string source;
  uint64_t file_size = 0;
  uint64_t data_start = 0;  // 8 + header length: where the data buffer begins in the file
  std::map<std::string, std::string> metadata;
  std::vector<TensorEntry> tensors;  // sorted by name

  const TensorEntry* Find(absl::string_view name) const;
};

// Parses and validates the header of a file of `file_size` bytes. `prefix` is the start of
// the file (a whole mapping, or at least its first 8 + header-length bytes); the data
// buffer itself is never touched. Errors are those of SafetensorsFile::Parse, plus
// InvalidArgument when `prefix` stops inside a header that the file holds entirely.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view prefix,
                                                         uint64_t file_size, std::string source);

// A parsed file: the whole file in memory plus a validated index.
class SafetensorsFile {
 public:
  // `source` names the bytes in error messages (normally the file path).
  static absl::StatusOr<SafetensorsFile> Parse(std::string bytes, std::string source);
  static absl::StatusOr<SafetensorsFile> Read(const std::string& path);

  const std::string& source() const { return source_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Sorted by name.
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const TensorEntry* Find(absl::string_view name) const;
  // Raw little-endian bytes of one tensor.
  absl::string_view Bytes(const TensorEntry& entry) const;

 private:
  std::string source_;
  std::string bytes_;
  uint64_t data_start_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorEntry> tensors_;
};

// One tensor to write; `data` holds shape-product * DTypeSize bytes, little-endian.
struct RawTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::string data;
};

// Builds the file bytes (header padded to 8 bytes so the buffer is aligned). Rejects
// empty or duplicate names, "__metadata__" as a name and data whose length disagrees
// with shape and dtype.
absl::StatusOr<std::string> SerializeSafetensors(
    const std::vector<RawTensor>& tensors, const std::map<std::string, std::string>& metadata);
absl::Status WriteSafetensors(const std::string& path, const std::vector<RawTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

// One tensor of a streamed file: `bytes` produces its data (shape-product * DTypeSize
// bytes) when the file is written, so the writer holds one tensor's bytes at a time.
struct StreamedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::function<absl::StatusOr<std::string>()> bytes;
};

// The bytes SerializeSafetensors gives for the same tensors, written to a temporary file
// one tensor at a time, fsynced and renamed to `path`: the same checks, errors prefixed with
// `path` (a producer's error names the tensor), nothing left behind on failure.
absl::Status WriteSafetensorsStreamed(const std::string& path,
                                      const std::vector<StreamedTensor>& tensors,
                                      const std::map<std::string, std::string>& metadata);

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_SAFETENSORS_FORMAT_H_
