#include "compression/model/safetensors_format.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compression/model/config.h"
#include "nlohmann/json.hpp"

namespace tailor::model {
namespace {

using Json = nlohmann::json;

// Same cap as the reference implementation: a larger header is corruption, not a model.
constexpr uint64_t kMaxHeaderBytes = kMaxSafetensorsHeaderBytes;
constexpr absl::string_view kMetadataKey = "__metadata__";

struct DTypeInfo {
  DType dtype;
  absl::string_view name;
  int64_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "F32", 4}, {DType::kBF16, "BF16", 2}, {DType::kF16, "F16", 2},
    {DType::kI8, "I8", 1},   {DType::kU8, "U8", 1},     {DType::kI32, "I32", 4},
    {DType::kI64, "I64", 8},
};

absl::Status Corrupt(absl::string_view source, absl::string_view message) {
  return absl::DataLossError(absl::StrCat(source, ": ", message));
}

absl::Status CorruptTensor(absl::string_view source, absl::string_view name,
                           absl::string_view message) {
  return absl::DataLossError(absl::StrCat(source, ": tensor '", name, "': ", message));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Byte length of a tensor, or an error on overflow (a hostile header must not wrap).
absl::StatusOr<uint64_t> ByteLength(const std::vector<int64_t>& shape, DType dtype) {
  uint64_t n = static_cast<uint64_t>(DTypeSize(dtype));
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension ", d));
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d)) {
      return absl::InvalidArgumentError("shape overflows 64 bits");
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

absl::StatusOr<TensorEntry> ParseEntry(absl::string_view source, const std::string& name,
                                       const Json& j) {
  if (name.empty()) return Corrupt(source, "empty tensor name");
  if (name.size() > kMaxTensorNameBytes) {
    return Corrupt(source, absl::StrCat("tensor name of ", name.size(), " bytes exceeds the ",
                                        kMaxTensorNameBytes, "-byte limit: '",
                                        name.substr(0, 64), "...'"));
  }
  if (!j.is_object()) return CorruptTensor(source, name, "header entry is not an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets") {
      return CorruptTensor(source, name, absl::StrCat("unknown field '", it.key(), "'"));
    }
  }
  TensorEntry e;
  e.name = name;
  auto dtype = j.find("dtype");
  if (dtype == j.end() || !dtype->is_string()) {
    return CorruptTensor(source, name, "missing or non-string dtype");
  }
  absl::StatusOr<DType> parsed = ParseDType(dtype->get<std::string>());
  if (!parsed.ok()) return CorruptTensor(source, name, parsed.status().message());
  e.dtype = *parsed;
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array()) {
    return CorruptTensor(source, name, "missing or non-array shape");
  }
  if (shape->size() > kMaxTensorRank) {
    return CorruptTensor(source, name,
                         absl::StrCat("shape has ", shape->size(), " dimensions, more than the ",
                                      kMaxTensorRank, " allowed"));
  }
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned()) {
      return CorruptTensor(source, name,
                           absl::StrCat("shape entries must be integers >= 0, got ", d.dump()));
    }
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX))
      return CorruptTensor(source, name, "dimension too large");
    e.shape.push_back(static_cast<int64_t>(v));
  }
  auto offsets = j.find("data_offsets");
  if (offsets == j.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return CorruptTensor(source, name, "data_offsets must be [begin, end] (integers >= 0)");
  }
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end) {
    return CorruptTensor(source, name,
                         absl::StrCat("data_offsets [", e.begin, ", ", e.end, "] has begin > end"));
  }
  absl::StatusOr<uint64_t> want = ByteLength(e.shape, e.dtype);
  if (!want.ok()) return CorruptTensor(source, name, want.status().message());
  if (*want != e.end - e.begin) {
    return CorruptTensor(
        source, name,
        absl::StrCat("shape ", ShapeString(e.shape), " with dtype ", DTypeName(e.dtype), " needs ",
                     *want, " bytes, but data_offsets [", e.begin, ", ", e.end, "] span ",
                     e.end - e.begin));
  }
  return e;
}

// Builds the DOM like Json::parse and remembers the first duplicated top-level key: the JSON
// library keeps the last of duplicate keys silently, and a duplicated tensor name would hide
// a tensor. (A parse callback could do this too, but nlohmann's callback parser walks the
// whole object on every key, which made a header at the tensor-count limit take minutes.)
class DuplicateKeySax {
 public:
  explicit DuplicateKeySax(Json& root) : dom_(root, /*allow_exceptions_=*/false) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(Json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(Json::number_float_t v, const std::string& s) {
    return dom_.number_float(v, s);
  }
  bool string(Json::string_t& v) { return dom_.string(v); }
  bool binary(Json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    ++depth_;
    return dom_.start_object(n);
  }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    ++depth_;
    return dom_.start_array(n);
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool key(Json::string_t& k) {
    if (depth_ == 1 && !seen_.insert(k).second && duplicate_.empty()) duplicate_ = k;
    return dom_.key(k);
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    failed_ = true;
    return dom_.parse_error(position, token, e);
  }

  bool failed() const { return failed_ || dom_.is_errored(); }
  const std::string& duplicate() const { return duplicate_; }

 private:
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  int depth_ = 0;
  std::set<std::string> seen_;
  std::string duplicate_;
  bool failed_ = false;
};

// Tensors must tile the buffer exactly: an overlap means two tensors alias the same
// bytes (a writer bug or tampering), a gap or tail means bytes nobody accounts for.
absl::Status CheckTiling(absl::string_view source, std::vector<TensorEntry> entries,
                         uint64_t buffer_size) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const TensorEntry* prev = nullptr;
  for (const TensorEntry& e : entries) {
    if (e.begin < cursor) {
      return CorruptTensor(
          source, e.name,
          absl::StrCat("data_offsets [", e.begin, ", ", e.end, "] overlap tensor '", prev->name,
                       "' [", prev->begin, ", ", prev->end, "]"));
    }
    if (e.begin > cursor) {
      return CorruptTensor(source, e.name,
                           absl::StrCat("gap of ", e.begin - cursor, " bytes before data_offsets [",
                                        e.begin, ", ", e.end, "]"));
    }
    cursor = e.end;
    prev = &e;
  }
  if (cursor != buffer_size) {
    return Corrupt(source, absl::StrCat("data buffer is ", buffer_size, " bytes but tensors cover ",
                                        cursor, " (trailing bytes)"));
  }
  return absl::OkStatus();
}

// Binary search in a name-sorted index.
const TensorEntry* FindEntry(const std::vector<TensorEntry>& tensors, absl::string_view name) {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const TensorEntry& e, absl::string_view n) { return e.name < n; });
  if (it == tensors.end() || it->name != name) return nullptr;
  return &*it;
}

}  // namespace

absl::string_view DTypeName(DType dtype) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype \"", name, "\" (supported: F32, BF16, F16, I8, U8, I32, I64)"));
}

int64_t DTypeSize(DType dtype) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.dtype == dtype) return d.size;
  }
  return 0;
}

namespace {

// Fills `out`'s metadata and tensors from the parsed header object `j` (out.source,
// file_size and data_start already set) and checks bounds and tiling.
absl::Status ParseHeaderEntries(const Json& j, SafetensorsHeader& out) {
  const uint64_t buffer_size = out.file_size - out.data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it->is_object()) return Corrupt(out.source, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return Corrupt(out.source,
                         absl::StrCat("__metadata__ value for '", m.key(), "' is not a string"));
        }
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TAILOR_ASSIGN_OR_RETURN(TensorEntry e, ParseEntry(out.source, it.key(), *it));
    if (e.end > buffer_size) {
      return CorruptTensor(
          out.source, e.name,
          absl::StrCat("data_offsets [", e.begin, ", ", e.end, "] out of bounds: data buffer is ",
                       buffer_size, " bytes (truncated file?)"));
    }
    out.tensors.push_back(std::move(e));
  }
  TAILOR_RETURN_IF_ERROR(CheckTiling(out.source, out.tensors, buffer_size));
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view prefix,
                                                         uint64_t file_size, std::string source) {
  if (prefix.size() > file_size) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", prefix.size(),
                                                   " bytes given for a file of ", file_size));
  }
  if (file_size < 8) {
    return Corrupt(source, absl::StrCat("file is ", file_size,
                                        " bytes, too short for the 8-byte header length"));
  }
  if (prefix.size() < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": only ", prefix.size(), " bytes given, need the first 8"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) {
    header_len = (header_len << 8) | static_cast<unsigned char>(prefix[i]);
  }
  if (header_len > kMaxHeaderBytes) {
    return Corrupt(source, absl::StrCat("header length ", header_len, " exceeds the ",
                                        kMaxHeaderBytes, "-byte limit"));
  }
  if (header_len > file_size - 8) {
    return Corrupt(source, absl::StrCat("header length ", header_len, " exceeds the ",
                                        file_size - 8, " bytes after it (truncated file?)"));
  }
  if (header_len > prefix.size() - 8) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": only ", prefix.size(),
                                                   " bytes given, the header needs ",
                                                   8 + header_len));
  }
  const absl::string_view header(prefix.data() + 8, header_len);
  Json j;
  DuplicateKeySax sax(j);
  if (!Json::sax_parse(header.begin(), header.end(), &sax) || sax.failed() || j.is_discarded()) {
    return Corrupt(source, "header is not valid JSON");
  }
  const std::string& duplicate = sax.duplicate();
  if (!j.is_object()) return Corrupt(source, "header is not a JSON object");
  if (!duplicate.empty()) {
    return Corrupt(source, absl::StrCat("duplicate tensor name '", duplicate, "'"));
  }
  const size_t tensor_count = j.size() - (j.contains(kMetadataKey) ? 1 : 0);
  if (tensor_count > kMaxSafetensorsTensors) {
    return Corrupt(source, absl::StrCat("header lists ", tensor_count, " tensors, more than the ",
                                        kMaxSafetensorsTensors, " allowed"));
  }
  SafetensorsHeader out;
  out.source = std::move(source);
  out.file_size = file_size;
  out.data_start = 8 + header_len;
  TAILOR_RETURN_IF_ERROR(ParseHeaderEntries(j, out));
  return out;
}

const TensorEntry* SafetensorsHeader::Find(absl::string_view name) const {
  return FindEntry(tensors, name);
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Parse(std::string bytes, std::string source) {
  TAILOR_ASSIGN_OR_RETURN(SafetensorsHeader header,
                          ParseSafetensorsHeader(bytes, bytes.size(), std::move(source)));
  SafetensorsFile file;
  file.source_ = std::move(header.source);
  file.data_start_ = header.data_start;
  file.metadata_ = std::move(header.metadata);
  file.tensors_ = std::move(header.tensors);
  file.bytes_ = std::move(bytes);
  return file;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Read(const std::string& path) {
  TAILOR_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return Parse(std::move(bytes), path);
}

const TensorEntry* SafetensorsFile::Find(absl::string_view name) const {
  return FindEntry(tensors_, name);
}

absl::string_view SafetensorsFile::Bytes(const TensorEntry& entry) const {
  return absl::string_view(bytes_).substr(data_start_ + entry.begin, entry.end - entry.begin);
}

namespace {

// What the header says of one tensor; `bytes` is its data length.
struct TensorMeta {
  const std::string* name;
  DType dtype;
  const std::vector<int64_t>* shape;
  uint64_t bytes;
};

// The file's first bytes (header length, header padded to 8 bytes so the data buffer is
// aligned) for tensors in the order given (sorted by name), each checked as documented.
absl::StatusOr<std::string> FilePrefix(const std::vector<TensorMeta>& order,
                                       const std::map<std::string, std::string>& metadata) {
  if (order.size() > kMaxSafetensorsTensors) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors: ", order.size(),
                                                   " tensors, more than the ",
                                                   kMaxSafetensorsTensors, " allowed"));
  }
  Json header = Json::object();
  uint64_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const TensorMeta& t = order[i];
    const std::string& name = *t.name;
    if (name.empty()) return absl::InvalidArgumentError("safetensors: empty tensor name");
    if (name == kMetadataKey) {
      return absl::InvalidArgumentError("safetensors: '__metadata__' is reserved");
    }
    if (name.size() > kMaxTensorNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: tensor name of ", name.size(), " bytes exceeds the ",
                       kMaxTensorNameBytes, "-byte limit"));
    }
    if (t.shape->size() > kMaxTensorRank) {
      return absl::InvalidArgumentError(absl::StrCat("safetensors: tensor '", name, "': shape has ",
                                                     t.shape->size(), " dimensions, more than the ",
                                                     kMaxTensorRank, " allowed"));
    }
    if (i > 0 && *order[i - 1].name == name) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: duplicate tensor name '", name, "'"));
    }
    absl::StatusOr<uint64_t> want = ByteLength(*t.shape, t.dtype);
    if (!want.ok() || *want != t.bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "safetensors: tensor '", name, "': shape ", ShapeString(*t.shape), " with dtype ",
          DTypeName(t.dtype), " does not match ", t.bytes, " data bytes"));
    }
    header[name] = {{"dtype", std::string(DTypeName(t.dtype))},
                    {"shape", *t.shape},
                    {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  std::string header_text = header.dump();
  if (header_text.size() + 7 > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors: header of ", header_text.size(),
                                                   " bytes exceeds the ", kMaxHeaderBytes,
                                                   "-byte limit"));
  }
  // Pad with spaces (valid JSON whitespace) so the data buffer starts 8-byte aligned.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  std::string out;
  const uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header_text;
}

// Sorted names make the file bytes a function of the contents only (stable digests).
template <typename T>
std::vector<const T*> ByName(const std::vector<T>& tensors) {
  std::vector<const T*> order;
  for (const T& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const T* a, const T* b) { return a->name < b->name; });
  return order;
}

}  // namespace

absl::StatusOr<std::string> SerializeSafetensors(
    const std::vector<RawTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  const std::vector<const RawTensor*> order = ByName(tensors);
  std::vector<TensorMeta> metas;
  uint64_t total = 0;
  for (const RawTensor* t : order) {
    metas.push_back({&t->name, t->dtype, &t->shape, t->data.size()});
    total += t->data.size();
  }
  TAILOR_ASSIGN_OR_RETURN(std::string out, FilePrefix(metas, metadata));
  out.reserve(out.size() + total);
  for (const RawTensor* t : order) out += t->data;
  return out;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<RawTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  absl::StatusOr<std::string> bytes = SerializeSafetensors(tensors, metadata);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(), absl::StrCat(path, ": ", bytes.status().message()));
  }
  return WriteFileAtomically(path, *bytes);
}

namespace {

absl::Status WriteStreamedTo(FILE* f, const std::string& path,
                             const std::vector<const StreamedTensor*>& order,
                             const std::string& prefix) {
  auto put = [&](absl::string_view bytes) -> absl::Status {
    if (std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size()) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
  };
  TAILOR_RETURN_IF_ERROR(put(prefix));
  for (const StreamedTensor* t : order) {
    absl::StatusOr<std::string> bytes = t->bytes();
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          absl::StrCat(path, ": tensor '", t->name, "': ", bytes.status().message()));
    }
    absl::StatusOr<uint64_t> want = ByteLength(t->shape, t->dtype);
    if (!want.ok() || *want != bytes->size()) {
      return absl::InternalError(absl::StrCat(path, ": tensor '", t->name, "': produced ",
                                              bytes->size(), " bytes for shape ",
                                              ShapeString(t->shape)));
    }
    TAILOR_RETURN_IF_ERROR(put(*bytes));
  }
  if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0) {
    return absl::UnavailableError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSafetensorsStreamed(const std::string& path,
                                      const std::vector<StreamedTensor>& tensors,
                                      const std::map<std::string, std::string>& metadata) {
  const std::vector<const StreamedTensor*> order = ByName(tensors);
  std::vector<TensorMeta> metas;
  for (const StreamedTensor* t : order) {
    absl::StatusOr<uint64_t> bytes = ByteLength(t->shape, t->dtype);
    metas.push_back({&t->name, t->dtype, &t->shape, bytes.ok() ? *bytes : ~uint64_t{0}});
  }
  absl::StatusOr<std::string> prefix = FilePrefix(metas, metadata);
  if (!prefix.ok()) {
    return absl::Status(prefix.status().code(),
                        absl::StrCat(path, ": ", prefix.status().message()));
  }
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  }
  absl::Status s = WriteStreamedTo(f, path, order, *prefix);
  if (std::fclose(f) != 0 && s.ok()) {
    s = absl::UnavailableError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
  }
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::UnavailableError(absl::StrCat(path, ": rename failed: ", std::strerror(errno)));
  }
  if (!s.ok()) std::remove(tmp.c_str());
  return s;
}

}  // namespace tailor::model
