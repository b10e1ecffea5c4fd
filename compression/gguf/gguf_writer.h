#ifndef TAILOR_COMPRESSION_GGUF_GGUF_WRITER_H_
#define TAILOR_COMPRESSION_GGUF_GGUF_WRITER_H_

// tailor's own writer of GGUF v3 files, the single-file model format of ggml / llama.cpp
// (docs/model.md, "Export to GGUF"). Layout, all little-endian:
//
//   "GGUF" | uint32 version 3 | uint64 tensor count | uint64 metadata count
//   metadata: (string key, uint32 value type, value)*       string = uint64 length + bytes
//   tensor infos: (string name, uint32 n_dims, uint64 ne[n_dims], uint32 ggml type,
//                  uint64 offset relative to the data section)*
//   zero padding to `general.alignment` (32 unless set), then the data section, each tensor
//   starting at a multiple of the alignment.
//
// Dimensions are ggml's `ne`: ne[0] is the fastest-varying one, the reverse of the row-major
// shape safetensors and PyTorch write ([rows, cols] is ne = {cols, rows}). AddTensor takes
// the row-major shape and reverses it, so callers think in one convention only.
//
// Tensor bytes are not held by the writer: each tensor has a callback that streams its bytes
// into the file when Write runs (from a memory-mapped shard, row by row), so exporting a
// model never needs a second copy of its weights in memory.
//
// No LibTorch here.

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tailor::gguf {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr size_t kMaxTensorNameBytes = 64;  // GGML_MAX_NAME - 1 in ggml
inline constexpr size_t kMaxDims = 4;              // GGML_MAX_DIMS

// gguf_metadata_value_type.
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// The ggml tensor types tailor writes (ggml_type values).
enum class TensorType : uint32_t { kF32 = 0, kF16 = 1, kBF16 = 30 };

absl::string_view TensorTypeName(TensorType t);  // "F32", "F16", "BF16"
uint64_t TensorTypeSize(TensorType t);           // bytes per element

// One metadata value. Scalars are written with their own type; vectors as arrays of it.
using Value = std::variant<uint32_t, int32_t, float, bool, std::string, uint64_t,
                           std::vector<std::string>, std::vector<int32_t>, std::vector<float>>;

// Where a tensor's bytes go: called any number of times with consecutive pieces.
using ByteSink = std::function<absl::Status(const char* data, size_t size)>;
// Produces a tensor's bytes (exactly its declared size) into `sink`.
using TensorSource = std::function<absl::Status(const ByteSink& sink)>;

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order: ne[0] fastest-varying
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;  // in the data section, filled in by the writer
  uint64_t size_bytes = 0;
};

class GgufWriter {
 public:
  // `alignment` must be a positive multiple of 8; anything but 32 is also written as the
  // general.alignment key so that readers use it.
  explicit GgufWriter(uint32_t alignment = kDefaultAlignment);

  // Keys are written in the order added; a key added twice is InvalidArgument naming it.
  absl::Status Add(absl::string_view key, Value value);

  // `shape` is row-major (safetensors order, outermost first); at most 4 dimensions, each
  // positive. The name must be at most 64 bytes and unique. `source` runs during Write.
  absl::Status AddTensor(absl::string_view name, const std::vector<int64_t>& shape,
                         TensorType type, TensorSource source);
  // The same with bytes already in memory that outlive Write.
  absl::Status AddTensorBytes(absl::string_view name, const std::vector<int64_t>& shape,
                              TensorType type, const char* data, size_t size);

  // Writes the file (to `path`.tmp, renamed into place when complete, so a failed export
  // leaves no partial file). Errors name the file and the tensor being written.
  absl::Status Write(const std::string& path) const;

  // Header + metadata + tensor infos + padding: where the data section begins.
  uint64_t DataSectionOffset() const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  uint32_t alignment() const { return alignment_; }

 private:
  std::string SerializeHeader() const;

  uint32_t alignment_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
  std::vector<TensorSource> sources_;
  uint64_t data_size_ = 0;  // aligned end of the last tensor
};

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_GGUF_WRITER_H_
