#include "compression/gguf/gguf_reader.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tailor::gguf {
namespace {

// A bounds-checked little-endian cursor; the first failure sticks and names what was read.
class Cursor {
 public:
  Cursor(absl::string_view bytes, absl::string_view source) : bytes_(bytes), source_(source) {}

  template <typename T>
  T Int(absl::string_view what) {
    uint64_t v = 0;
    if (!Need(sizeof(T), what)) return 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
    }
    pos_ += sizeof(T);
    return static_cast<T>(v);
  }
  float Float(absl::string_view what) {
    const uint32_t bits = Int<uint32_t>(what);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  std::string String(absl::string_view what) {
    const uint64_t n = Int<uint64_t>(what);
    if (!Need(n, what)) return "";
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  void Fail(absl::string_view message) {
    if (status_.ok()) status_ = absl::DataLossError(absl::StrCat(source_, ": ", message));
  }
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }
  uint64_t pos() const { return pos_; }

 private:
  bool Need(uint64_t n, absl::string_view what) {
    if (!status_.ok()) return false;
    if (n > bytes_.size() - pos_) {
      Fail(absl::StrCat(what, ": truncated at byte ", pos_, " (needs ", n, " more, file has ",
                        bytes_.size(), ")"));
      return false;
    }
    return true;
  }

  absl::string_view bytes_;
  std::string source_;
  uint64_t pos_ = 0;
  absl::Status status_;
};

template <typename T, typename F>
std::vector<T> ReadArray(Cursor& c, uint64_t n, F read) {
  std::vector<T> out;
  for (uint64_t i = 0; i < n && c.ok(); ++i) out.push_back(read());
  return out;
}

Value ReadValue(Cursor& c, const std::string& key) {
  const auto type = static_cast<ValueType>(c.Int<uint32_t>(key));
  switch (type) {
    case ValueType::kUint32:
      return c.Int<uint32_t>(key);
    case ValueType::kInt32:
      return static_cast<int32_t>(c.Int<uint32_t>(key));
    case ValueType::kFloat32:
      return c.Float(key);
    case ValueType::kBool:
      return c.Int<uint8_t>(key) != 0;
    case ValueType::kString:
      return c.String(key);
    case ValueType::kUint64:
      return c.Int<uint64_t>(key);
    case ValueType::kArray: {
      const auto element = static_cast<ValueType>(c.Int<uint32_t>(key));
      const uint64_t n = c.Int<uint64_t>(key);
      if (element == ValueType::kString) {
        return ReadArray<std::string>(c, n, [&] { return c.String(key); });
      }
      if (element == ValueType::kInt32) {
        return ReadArray<int32_t>(c, n, [&] { return static_cast<int32_t>(c.Int<uint32_t>(key)); });
      }
      if (element == ValueType::kFloat32) {
        return ReadArray<float>(c, n, [&] { return c.Float(key); });
      }
      c.Fail(absl::StrCat(key, ": arrays of value type ", static_cast<uint32_t>(element),
                          " are not supported"));
      return uint32_t{0};
    }
    default:
      c.Fail(absl::StrCat(key, ": value type ", static_cast<uint32_t>(type),
                          " is not supported"));
      return uint32_t{0};
  }
}

uint64_t AlignUp(uint64_t offset, uint64_t alignment) {
  return offset + (alignment - offset % alignment) % alignment;
}

}  // namespace

absl::StatusOr<GgufFile> GgufFile::Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return Parse(std::move(buffer).str(), path);
}

absl::StatusOr<GgufFile> GgufFile::Parse(std::string bytes, absl::string_view source) {
  GgufFile f;
  f.bytes_ = std::move(bytes);
  Cursor c(f.bytes_, source);
  if (c.Int<uint32_t>("magic") != kGgufMagic && c.ok()) c.Fail("not a GGUF file (bad magic)");
  f.version_ = c.Int<uint32_t>("version");
  if (c.ok() && f.version_ != kGgufVersion) {
    c.Fail(absl::StrCat("GGUF version ", f.version_, " (only 3 is read)"));
  }
  const uint64_t n_tensors = c.Int<uint64_t>("tensor count");
  const uint64_t n_kv = c.Int<uint64_t>("metadata count");
  for (uint64_t i = 0; i < n_kv && c.ok(); ++i) {
    std::string key = c.String("metadata key");
    Value v = ReadValue(c, key);
    if (key == "general.alignment" && std::holds_alternative<uint32_t>(v)) {
      f.alignment_ = std::get<uint32_t>(v);
      if (f.alignment_ == 0 || f.alignment_ % 8 != 0) c.Fail("general.alignment: bad value");
    }
    f.metadata_.emplace_back(std::move(key), std::move(v));
  }
  for (uint64_t i = 0; i < n_tensors && c.ok(); ++i) {
    TensorInfo t;
    t.name = c.String("tensor name");
    const uint32_t dims = c.Int<uint32_t>(t.name);
    if (c.ok() && (dims == 0 || dims > kMaxDims)) c.Fail(absl::StrCat(t.name, ": bad n_dims"));
    for (uint32_t d = 0; d < dims && c.ok(); ++d) t.ne.push_back(c.Int<uint64_t>(t.name));
    t.type = static_cast<TensorType>(c.Int<uint32_t>(t.name));
    t.offset = c.Int<uint64_t>(t.name);
    t.size_bytes = TensorTypeSize(t.type);
    for (uint64_t n : t.ne) t.size_bytes *= n;
    f.tensors_.push_back(std::move(t));
  }
  if (!c.ok()) return c.status();
  f.data_offset_ = AlignUp(c.pos(), f.alignment_);
  for (const TensorInfo& t : f.tensors_) {
    if (t.offset % f.alignment_ != 0 ||
        f.data_offset_ + t.offset + t.size_bytes > f.bytes_.size()) {
      return absl::DataLossError(absl::StrCat(source, ": tensor ", t.name, ": data at offset ",
                                              t.offset, " (", t.size_bytes,
                                              " bytes) misaligned or past the end of the file"));
    }
  }
  return f;
}

const Value* GgufFile::Find(absl::string_view key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const TensorInfo* GgufFile::FindTensor(absl::string_view name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::string_view GgufFile::TensorData(const TensorInfo& t) const {
  return absl::string_view(bytes_).substr(data_offset_ + t.offset, t.size_bytes);
}

}  // namespace tailor::gguf
