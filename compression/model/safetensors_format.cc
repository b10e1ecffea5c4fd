#include "compression/model/safetensors_format.h"

#include <algorithm>
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

absl::StatusOr<std::string> SerializeSafetensors(
    const std::vector<RawTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  if (tensors.size() > kMaxSafetensorsTensors) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors: ", tensors.size(),
                                                   " tensors, more than the ",
                                                   kMaxSafetensorsTensors, " allowed"));
  }
  std::vector<const RawTensor*> order;
  for (const RawTensor& t : tensors) order.push_back(&t);
  // Sorted names make the file bytes a function of the contents only (stable digests).
  std::sort(order.begin(), order.end(),
            [](const RawTensor* a, const RawTensor* b) { return a->name < b->name; });
  Json header = Json::object();
  uint64_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const RawTensor& t = *order[i];
    if (t.name.empty()) return absl::InvalidArgumentError("safetensors: empty tensor name");
    if (t.name == kMetadataKey) {
      return absl::InvalidArgumentError("safetensors: '__metadata__' is reserved");
    }
    if (t.name.size() > kMaxTensorNameBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: tensor name of ", t.name.size(), " bytes exceeds the ",
                       kMaxTensorNameBytes, "-byte limit"));
    }
    if (t.shape.size() > kMaxTensorRank) {
      return absl::InvalidArgumentError(absl::StrCat("safetensors: tensor '", t.name, "': shape has ",
                                                     t.shape.size(), " dimensions, more than the ",
                                                     kMaxTensorRank, " allowed"));
    }
    if (i > 0 && order[i - 1]->name == t.name) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: duplicate tensor name '", t.name, "'"));
    }
    absl::StatusOr<uint64_t> want = ByteLength(t.shape, t.dtype);
    if (!want.ok() || *want != t.data.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "safetensors: tensor '", t.name, "': shape ", ShapeString(t.shape), " with dtype ",
          DTypeName(t.dtype), " does not match ", t.data.size(), " data bytes"));
    }
    header[t.name] = {{"dtype", std::string(DTypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
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
  out.reserve(8 + header_text.size() + offset);
  uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += header_text;
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

}  // namespace tailor::model
