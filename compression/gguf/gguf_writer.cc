#include "compression/gguf/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tailor::gguf {
namespace {

// GGUF is little-endian; these append fixed-width integers byte by byte so the output does
// not depend on the host's byte order.
template <typename T>
void PutInt(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
  }
}

void PutFloat(std::string& out, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  PutInt<uint32_t>(out, bits);
}

void PutString(std::string& out, absl::string_view s) {
  PutInt<uint64_t>(out, s.size());
  out.append(s.data(), s.size());
}

void PutType(std::string& out, ValueType t) { PutInt<uint32_t>(out, static_cast<uint32_t>(t)); }

// Type tag and payload of one metadata value.
struct ValueWriter {
  std::string& out;
  void operator()(uint32_t v) const {
    PutType(out, ValueType::kUint32);
    PutInt(out, v);
  }
  void operator()(int32_t v) const {
    PutType(out, ValueType::kInt32);
    PutInt<uint32_t>(out, static_cast<uint32_t>(v));
  }
  void operator()(float v) const {
    PutType(out, ValueType::kFloat32);
    PutFloat(out, v);
  }
  void operator()(bool v) const {
    PutType(out, ValueType::kBool);
    out.push_back(v ? 1 : 0);
  }
  void operator()(const std::string& v) const {
    PutType(out, ValueType::kString);
    PutString(out, v);
  }
  void operator()(uint64_t v) const {
    PutType(out, ValueType::kUint64);
    PutInt(out, v);
  }
  void operator()(const std::vector<std::string>& v) const {
    Array(ValueType::kString, v.size());
    for (const std::string& s : v) PutString(out, s);
  }
  void operator()(const std::vector<int32_t>& v) const {
    Array(ValueType::kInt32, v.size());
    for (int32_t x : v) PutInt<uint32_t>(out, static_cast<uint32_t>(x));
  }
  void operator()(const std::vector<float>& v) const {
    Array(ValueType::kFloat32, v.size());
    for (float x : v) PutFloat(out, x);
  }
  void Array(ValueType element, uint64_t n) const {
    PutType(out, ValueType::kArray);
    PutType(out, element);
    PutInt<uint64_t>(out, n);
  }
};

uint64_t AlignUp(uint64_t offset, uint64_t alignment) {
  return offset + (alignment - offset % alignment) % alignment;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Closes the FILE on every path; Write removes the temporary file on failure.
struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};

absl::Status WriteAll(FILE* f, const char* data, size_t size, const std::string& path,
                      absl::string_view what) {
  if (size == 0) return absl::OkStatus();
  if (std::fwrite(data, 1, size, f) != size) {
    return absl::InternalError(
        absl::StrCat(path, ": writing ", what, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view TensorTypeName(TensorType t) {
  switch (t) {
    case TensorType::kF32:
      return "F32";
    case TensorType::kF16:
      return "F16";
    case TensorType::kBF16:
      return "BF16";
  }
  return "?";
}

uint64_t TensorTypeSize(TensorType t) { return t == TensorType::kF32 ? 4 : 2; }

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  // A bad alignment is a programming error; fall back to the default rather than write a
  // file no reader accepts.
  if (alignment_ == 0 || alignment_ % 8 != 0) alignment_ = kDefaultAlignment;
  if (alignment_ != kDefaultAlignment) metadata_.emplace_back("general.alignment", alignment_);
}

absl::Status GgufWriter::Add(absl::string_view key, Value value) {
  if (key.empty()) return absl::InvalidArgumentError("GGUF metadata: empty key");
  for (const auto& [k, v] : metadata_) {
    if (k == key) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF metadata: key ", key, " added twice"));
    }
  }
  metadata_.emplace_back(std::string(key), std::move(value));
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensor(absl::string_view name, const std::vector<int64_t>& shape,
                                   TensorType type, TensorSource source) {
  const std::string what = absl::StrCat("GGUF tensor ", name, " ", ShapeString(shape));
  if (name.empty() || name.size() > kMaxTensorNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the name must be 1 to ", kMaxTensorNameBytes, " bytes"));
  }
  if (shape.empty() || shape.size() > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": 1 to ", kMaxDims, " dimensions"));
  }
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return absl::InvalidArgumentError(absl::StrCat(what, ": added twice"));
  }
  TensorInfo info{std::string(name), {}, type, data_size_, TensorTypeSize(type)};
  for (auto it = shape.rbegin(); it != shape.rend(); ++it) {
    if (*it <= 0) return absl::InvalidArgumentError(absl::StrCat(what, ": non-positive size"));
    info.ne.push_back(static_cast<uint64_t>(*it));
    info.size_bytes *= static_cast<uint64_t>(*it);
  }
  data_size_ = AlignUp(info.offset + info.size_bytes, alignment_);
  tensors_.push_back(std::move(info));
  sources_.push_back(std::move(source));
  return absl::OkStatus();
}

absl::Status GgufWriter::AddTensorBytes(absl::string_view name, const std::vector<int64_t>& shape,
                                        TensorType type, const char* data, size_t size) {
  return AddTensor(name, shape, type,
                   [data, size](const ByteSink& sink) { return sink(data, size); });
}

std::string GgufWriter::SerializeHeader() const {
  std::string out;
  PutInt<uint32_t>(out, kGgufMagic);
  PutInt<uint32_t>(out, kGgufVersion);
  PutInt<uint64_t>(out, tensors_.size());
  PutInt<uint64_t>(out, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    PutString(out, key);
    std::visit(ValueWriter{out}, value);
  }
  for (const TensorInfo& t : tensors_) {
    PutString(out, t.name);
    PutInt<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) PutInt<uint64_t>(out, n);
    PutInt<uint32_t>(out, static_cast<uint32_t>(t.type));
    PutInt<uint64_t>(out, t.offset);
  }
  out.resize(AlignUp(out.size(), alignment_), '\0');
  return out;
}

uint64_t GgufWriter::DataSectionOffset() const { return SerializeHeader().size(); }

absl::Status GgufWriter::Write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  }
  absl::Status status = [&]() -> absl::Status {
    const std::string header = SerializeHeader();
    absl::Status s = WriteAll(f.get(), header.data(), header.size(), tmp, "the header");
    static const char kZeros[64] = {};
    for (size_t i = 0; s.ok() && i < tensors_.size(); ++i) {
      const TensorInfo& t = tensors_[i];
      const std::string what = absl::StrCat("tensor ", t.name);
      uint64_t written = 0;
      s = sources_[i]([&](const char* data, size_t size) -> absl::Status {
        if (written + size > t.size_bytes) {
          return absl::InternalError(absl::StrCat(tmp, ": ", what, ": more than its ",
                                                  t.size_bytes, " bytes produced"));
        }
        written += size;
        return WriteAll(f.get(), data, size, tmp, what);
      });
      if (s.ok() && written != t.size_bytes) {
        s = absl::InternalError(absl::StrCat(tmp, ": ", what, ": ", written, " bytes produced, ",
                                             t.size_bytes, " expected"));
      }
      // Padding to the next tensor (and after the last: the data section is a whole
      // number of alignment units, as ggml's own writer leaves it).
      uint64_t pad = AlignUp(t.offset + t.size_bytes, alignment_) - (t.offset + t.size_bytes);
      while (s.ok() && pad > 0) {
        const size_t n = std::min<uint64_t>(pad, sizeof(kZeros));
        s = WriteAll(f.get(), kZeros, n, tmp, what + " padding");
        pad -= n;
      }
    }
    if (s.ok() && std::fflush(f.get()) != 0) {
      s = absl::InternalError(absl::StrCat(tmp, ": flush: ", std::strerror(errno)));
    }
    return s;
  }();
  const bool closed = std::fclose(f.release()) == 0;
  if (status.ok() && !closed) {
    status = absl::InternalError(absl::StrCat(tmp, ": close: ", std::strerror(errno)));
  }
  if (status.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::InternalError(absl::StrCat(path, ": rename: ", std::strerror(errno)));
  }
  if (!status.ok()) std::remove(tmp.c_str());
  return status;
}

}  // namespace tailor::gguf
