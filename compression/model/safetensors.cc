#include "compression/model/safetensors.h"

#include <torch/torch.h>

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
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
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

absl::StatusOr<SafetensorsFile> SafetensorsFile::Parse(std::string bytes, std::string source) {
  if (bytes.size() < 8) {
    return Corrupt(source, absl::StrCat("file is ", bytes.size(),
                                        " bytes, too short for the 8-byte header length"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) {
    header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  }
  if (header_len > kMaxHeaderBytes) {
    return Corrupt(source, absl::StrCat("header length ", header_len, " exceeds the ",
                                        kMaxHeaderBytes, "-byte limit"));
  }
  if (header_len > bytes.size() - 8) {
    return Corrupt(source, absl::StrCat("header length ", header_len, " exceeds the ",
                                        bytes.size() - 8, " bytes after it (truncated file?)"));
  }
  const absl::string_view header(bytes.data() + 8, header_len);
  // The JSON library keeps the last of duplicate keys silently; a duplicated tensor name
  // would hide a tensor, so count top-level keys while parsing.
  std::set<std::string> seen;
  std::string duplicate;
  Json::parser_callback_t on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1) {
      std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  Json j = Json::parse(header.begin(), header.end(), on_event, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt(source, "header is not valid JSON");
  if (!j.is_object()) return Corrupt(source, "header is not a JSON object");
  if (!duplicate.empty()) {
    return Corrupt(source, absl::StrCat("duplicate tensor name '", duplicate, "'"));
  }
  SafetensorsFile file;
  file.source_ = std::move(source);
  file.data_start_ = 8 + header_len;
  const uint64_t buffer_size = bytes.size() - file.data_start_;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it->is_object()) return Corrupt(file.source_, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return Corrupt(file.source_,
                         absl::StrCat("__metadata__ value for '", m.key(), "' is not a string"));
        }
        file.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TAILOR_ASSIGN_OR_RETURN(TensorEntry e, ParseEntry(file.source_, it.key(), *it));
    if (e.end > buffer_size) {
      return CorruptTensor(
          file.source_, e.name,
          absl::StrCat("data_offsets [", e.begin, ", ", e.end, "] out of bounds: data buffer is ",
                       buffer_size, " bytes (truncated file?)"));
    }
    file.tensors_.push_back(std::move(e));
  }
  TAILOR_RETURN_IF_ERROR(CheckTiling(file.source_, file.tensors_, buffer_size));
  std::sort(file.tensors_.begin(), file.tensors_.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  file.bytes_ = std::move(bytes);
  return file;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Read(const std::string& path) {
  TAILOR_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return Parse(std::move(bytes), path);
}

const TensorEntry* SafetensorsFile::Find(absl::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorEntry& e, absl::string_view n) { return e.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

absl::string_view SafetensorsFile::Bytes(const TensorEntry& entry) const {
  return absl::string_view(bytes_).substr(data_start_ + entry.begin, entry.end - entry.begin);
}

absl::StatusOr<std::string> SerializeSafetensors(
    const std::vector<RawTensor>& tensors, const std::map<std::string, std::string>& metadata) {
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

namespace {

at::ScalarType ToTorch(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return at::kFloat;
    case DType::kBF16:
      return at::kBFloat16;
    case DType::kF16:
      return at::kHalf;
    case DType::kI8:
      return at::kChar;
    case DType::kU8:
      return at::kByte;
    case DType::kI32:
      return at::kInt;
    case DType::kI64:
      return at::kLong;
  }
  return at::kFloat;
}

}  // namespace

absl::StatusOr<DType> DTypeFromTorch(const at::Tensor& tensor) {
  for (const DTypeInfo& d : kDTypes) {
    if (ToTorch(d.dtype) == tensor.scalar_type()) return d.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype ", c10::toString(tensor.scalar_type()), " has no safetensors code"));
}

absl::StatusOr<TensorMap> TensorsFromSafetensors(const SafetensorsFile& file) {
  TensorMap out;
  try {
    for (const TensorEntry& e : file.tensors()) {
      // Copy instead of from_blob: the buffer is only 8-byte aligned if the writer padded
      // the header, and the tensor must outlive the file bytes anyway.
      at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(ToTorch(e.dtype)));
      const absl::string_view bytes = file.Bytes(e);
      if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
      out.emplace(e.name, std::move(t));
    }
  } catch (const c10::Error& err) {
    return absl::InternalError(absl::StrCat(file.source(), ": ", err.what_without_backtrace()));
  }
  return out;
}

absl::StatusOr<TensorMap> LoadSafetensors(const std::string& path,
                                          std::map<std::string, std::string>* metadata) {
  TAILOR_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Read(path));
  if (metadata != nullptr) *metadata = file.metadata();
  return TensorsFromSafetensors(file);
}

absl::Status SaveSafetensors(const std::string& path, const TensorMap& tensors,
                             const std::map<std::string, std::string>& metadata) {
  std::vector<RawTensor> raw;
  raw.reserve(tensors.size());
  try {
    for (const auto& [name, tensor] : tensors) {
      absl::StatusOr<DType> dtype = DTypeFromTorch(tensor);
      if (!dtype.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor '", name, "': ", dtype.status().message()));
      }
      at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
      RawTensor r;
      r.name = name;
      r.dtype = *dtype;
      r.shape = cpu.sizes().vec();
      r.data.assign(static_cast<const char*>(cpu.data_ptr()), cpu.nbytes());
      raw.push_back(std::move(r));
    }
  } catch (const c10::Error& err) {
    return absl::InternalError(absl::StrCat(path, ": ", err.what_without_backtrace()));
  }
  return WriteSafetensors(path, raw, metadata);
}

}  // namespace tailor::model
