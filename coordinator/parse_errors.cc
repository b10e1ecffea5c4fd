#include "coordinator/parse_errors.h"

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

thread_local const absl::Status* pending_parse_error = nullptr;

// Protobuf's limit on nested messages and groups (100 unless a program changes it).
int RecursionLimit() { return google::protobuf::io::CodedInputStream::GetDefaultRecursionLimit(); }

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// Strict UTF-8 (RFC 3629) as protobuf checks proto3 strings: no overlong forms, surrogates or
// code points past U+10FFFF.
bool IsValidUtf8(absl::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    int n = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (c < 0x80) {
      ++p;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (int i = 2; i <= n; ++i) {
      if (p[i] < 0x80 || p[i] > 0xBF) return false;
    }
    p += n + 1;
  }
  return true;
}

// Walks protobuf's wire format the way its parser does and says where it first goes wrong.
class WireChecker {
 public:
  explicit WireChecker(absl::string_view bytes) : in_(bytes) {}

  // Checks `d`'s fields up to the end of the input, or (group != 0) up to the end-group tag
  // of field `group`. "" when fine. `d` is null inside unknown groups.
  std::string Message(const Descriptor* d, int depth, uint32_t group) {
    while (!in_.empty()) {
      uint64_t tag = 0;
      if (!ReadVarint(&tag) || tag > UINT32_MAX) return Where("malformed field tag");
      const uint32_t number = static_cast<uint32_t>(tag >> 3);
      const uint32_t wire = static_cast<uint32_t>(tag & 7);
      if (wire == kEndGroup) {
        if (group != 0 && number == group) return "";
        return Where(absl::StrCat("end-group tag of field ", number, " without its start"));
      }
      if (number == 0) return Where("field number 0");
      const FieldDescriptor* f = d == nullptr ? nullptr : d->FindFieldByNumber(number);
      path_.push_back(f != nullptr ? f->name() : absl::StrCat("field ", number));
      std::string problem = Field(f, number, wire, depth);
      if (!problem.empty()) return problem;
      path_.pop_back();
    }
    if (group != 0) return Where(absl::StrCat("group of field ", group, " is not closed"));
    return "";
  }

 private:
  std::string Field(const FieldDescriptor* f, uint32_t number, uint32_t wire, int depth) {
    switch (wire) {
      case kVarint: {
        uint64_t v = 0;
        if (!ReadVarint(&v)) return Where("truncated or overlong varint");
        return "";
      }
      case kFixed64:
        return Skip(8) ? "" : Where("truncated (8 bytes expected)");
      case kFixed32:
        return Skip(4) ? "" : Where("truncated (4 bytes expected)");
      case kLengthDelimited:
        return LengthDelimited(f, depth);
      case kStartGroup: {
        if (depth + 1 > RecursionLimit()) return TooDeep();
        const Descriptor* type =
            f != nullptr && f->type() == FieldDescriptor::TYPE_GROUP ? f->message_type() : nullptr;
        return Message(type, depth + 1, number);
      }
      default:
        return Where(absl::StrCat("invalid wire type ", wire));
    }
  }

  std::string LengthDelimited(const FieldDescriptor* f, int depth) {
    uint64_t length = 0;
    if (!ReadVarint(&length)) return Where("truncated length");
    if (length > INT32_MAX) return Where(absl::StrCat("invalid length ", length));
    if (length > in_.size()) {
      return Where(absl::StrCat("truncated (length ", length, ", ", in_.size(),
                                in_.size() == 1 ? " byte" : " bytes", " left)"));
    }
    const absl::string_view value = in_.substr(0, length);
    in_.remove_prefix(length);
    if (f == nullptr) return "";  // unknown: kept as bytes, never parsed
    switch (f->type()) {
      case FieldDescriptor::TYPE_STRING:
        if (f->file()->syntax() == FileDescriptor::SYNTAX_PROTO3 && !IsValidUtf8(value)) {
          return Where("invalid UTF-8 in a string");
        }
        return "";
      case FieldDescriptor::TYPE_MESSAGE: {
        if (depth + 1 > RecursionLimit()) return TooDeep();
        WireChecker inner(value);
        inner.path_ = path_;
        return inner.Message(f->message_type(), depth + 1, 0);
      }
      case FieldDescriptor::TYPE_BYTES:
        return "";
      default:
        break;
    }
    // A packed repeated scalar: varints must be well-formed.
    if (!f->is_repeated()) return "";
    switch (f->type()) {
      case FieldDescriptor::TYPE_INT32:
      case FieldDescriptor::TYPE_INT64:
      case FieldDescriptor::TYPE_UINT32:
      case FieldDescriptor::TYPE_UINT64:
      case FieldDescriptor::TYPE_SINT32:
      case FieldDescriptor::TYPE_SINT64:
      case FieldDescriptor::TYPE_BOOL:
      case FieldDescriptor::TYPE_ENUM: {
        WireChecker packed(value);
        while (!packed.in_.empty()) {
          uint64_t v = 0;
          if (!packed.ReadVarint(&v)) return Where("truncated or overlong varint in packed field");
        }
        return "";
      }
      default:
        return "";
    }
  }

  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int i = 0; i < 10 && i < static_cast<int>(in_.size()); ++i) {
      const auto b = static_cast<unsigned char>(in_[i]);
      *v |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
      if ((b & 0x80) == 0) {
        in_.remove_prefix(i + 1);
        return true;
      }
    }
    return false;
  }

  bool Skip(size_t n) {
    if (in_.size() < n) return false;
    in_.remove_prefix(n);
    return true;
  }

  std::string TooDeep() const {
    return absl::StrCat("nested deeper than protobuf's recursion limit of ", RecursionLimit());
  }

  // "path.to.field: problem", shortening a long (recursive) path.
  std::string Where(absl::string_view problem) const {
    if (path_.empty()) return std::string(problem);
    std::string where;
    if (path_.size() <= 6) {
      where = absl::StrJoin(path_, ".");
    } else {
      where = absl::StrCat(absl::StrJoin(path_.begin(), path_.begin() + 3, "."), "...",
                           absl::StrJoin(path_.end() - 2, path_.end(), "."));
    }
    return absl::StrCat(where, ": ", problem);
  }

  absl::string_view in_;
  std::vector<std::string> path_;
};

std::string ReadAll(grpc_byte_buffer* bytes, bool* ok) {
  grpc_byte_buffer_reader reader;
  *ok = grpc_byte_buffer_reader_init(&reader, bytes) != 0;
  if (!*ok) return "";
  grpc_slice slice = grpc_byte_buffer_reader_readall(&reader);
  std::string out(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                  GRPC_SLICE_LENGTH(slice));
  grpc_slice_unref(slice);
  grpc_byte_buffer_reader_destroy(&reader);
  return out;
}

}  // namespace

absl::Status PendingParseError() {
  return pending_parse_error == nullptr ? absl::OkStatus() : *pending_parse_error;
}

std::string WireFormatProblem(const Descriptor* type, absl::string_view bytes) {
  return WireChecker(bytes).Message(type, 0, 0);
}

namespace parse_internal {

absl::Status InvalidRequest(const Descriptor* type, grpc_byte_buffer* bytes,
                            const grpc::Status& parse_status) {
  std::string why;
  if (bytes == nullptr) {
    why = "no request message";
  } else {
    bool readable = false;
    const std::string data = ReadAll(bytes, &readable);
    if (readable) why = WireFormatProblem(type, data);
  }
  if (why.empty()) why = parse_status.error_message();
  if (why.empty()) why = "protobuf could not parse it";
  return absl::InvalidArgumentError(
      absl::StrCat("request: not a valid ", type->full_name(), " (", why, ")"));
}

ScopedPendingError::ScopedPendingError(const absl::Status* error) : previous_(pending_parse_error) {
  pending_parse_error = error;
}

ScopedPendingError::~ScopedPendingError() { pending_parse_error = previous_; }

int MethodIndex(absl::string_view service, absl::string_view method, const Descriptor* request,
                const Descriptor* response, bool server_streaming) {
  const google::protobuf::ServiceDescriptor* s =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(std::string(service));
  const google::protobuf::MethodDescriptor* m =
      s == nullptr ? nullptr : s->FindMethodByName(std::string(method));
  if (m == nullptr || m->input_type() != request || m->output_type() != response ||
      m->client_streaming() || m->server_streaming() != server_streaming) {
    spdlog::critical("ParseChecked: {}/{} is not a {} method from {} to {}", std::string(service),
                     std::string(method), server_streaming ? "server-streaming" : "unary",
                     request->full_name(), response->full_name());
    std::abort();
  }
  return m->index();
}

}  // namespace parse_internal
}  // namespace tailor::coordinator
