#include "common/contract_io.h"

#include <vector>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/util/json_util.h"

namespace tailor {
namespace {

// Protobuf's text parser says `Message type "tailor.v1.Workload" has no field named "batch".`;
// users think in contract terms, so we say "unknown field 'batch' in tailor.v1.Workload".
std::string FriendlyTextError(const std::string& message) {
  static const std::string kPrefix = "Message type \"";
  static const std::string kMiddle = "\" has no field named \"";
  if (!absl::StartsWith(message, kPrefix)) return message;
  size_t middle = message.find(kMiddle);
  if (middle == std::string::npos) return message;
  std::string type = message.substr(kPrefix.size(), middle - kPrefix.size());
  size_t name_start = middle + kMiddle.size();
  size_t name_end = message.find('"', name_start);
  if (name_end == std::string::npos) return message;
  return absl::StrCat("unknown field '", message.substr(name_start, name_end - name_start),
                      "' in ", type);
}

// Returns the first quoted text after `marker` in `message`, or "" if absent.
std::string QuotedAfter(const std::string& message, const std::string& marker) {
  size_t start = message.find(marker);
  if (start == std::string::npos) return "";
  start = message.find('"', start + marker.size());
  if (start == std::string::npos) return "";
  ++start;
  size_t end = message.find('"', start);
  if (end == std::string::npos) return "";
  return message.substr(start, end - start);
}

// Byte offset in `line` of the tokenizer's zero-based `column` (a tab advances the tokenizer's
// column to the next multiple of 8).
size_t ByteOffsetOfColumn(absl::string_view line, int column) {
  int c = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (c >= column) return i;
    c = line[i] == '\t' ? c + 8 - c % 8 : c + 1;
  }
  return line.size();
}

// Keeps the first error (the parser stops there; later messages are consequences) with a
// 1-based line and byte column. The parser reports the position *after* the offending token,
// so when the message quotes the token (a field name or enum value) we point at the token
// itself, which is what an editor's "go to line:col" should land on.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  FirstErrorCollector(absl::string_view text, absl::string_view source)
      : text_(text), source_(source) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!error_.empty()) return;
    if (line < 0) {
      // Errors not tied to a position (e.g. missing required fields) have line -1.
      error_ = absl::StrCat(source_, ": ", FriendlyTextError(message));
      return;
    }
    size_t byte = ByteOffsetOfColumn(Line(line), column);
    std::string token = QuotedAfter(message, "has no field named");
    if (token.empty()) token = QuotedAfter(message, "Unknown enumeration value of");
    if (token.empty()) token = QuotedAfter(message, "Non-repeated field");
    if (!token.empty()) {
      size_t found = Line(line).substr(0, byte).rfind(token);
      if (found != absl::string_view::npos) byte = found;
    }
    error_ = absl::StrCat(source_, ":", line + 1, ":", byte + 1, ": ",
                          FriendlyTextError(message));
  }

  const std::string& error() const { return error_; }

 private:
  absl::string_view Line(int index) const {
    absl::string_view rest = text_;
    for (int i = 0; i < index; ++i) {
      size_t newline = rest.find('\n');
      if (newline == absl::string_view::npos) return "";
      rest.remove_prefix(newline + 1);
    }
    return rest.substr(0, rest.find('\n'));
  }

  absl::string_view text_;
  std::string source_;
  std::string error_;
};

absl::StatusOr<v1::DeploymentContract> ParseTextProto(absl::string_view text,
                                                     absl::string_view source) {
  v1::DeploymentContract contract;
  FirstErrorCollector errors(text, source);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  // Unknown fields and extensions stay errors (the defaults); a typo must never be ignored.
  if (!parser.ParseFromString(std::string(text), &contract)) {
    std::string error = errors.error();
    if (error.empty()) error = absl::StrCat(source, ": not a valid textproto contract");
    return absl::InvalidArgumentError(error);
  }
  return contract;
}

// "batchSize" -> "batch_size": protobuf reports paths by proto field name whichever JSON
// spelling the contract used.
std::string ToSnake(absl::string_view key) {
  std::string out;
  for (char c : key) {
    if (absl::ascii_isupper(static_cast<unsigned char>(c))) {
      out.push_back('_');
      out.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Protobuf's JSON parser reports errors by field path ("(workload.batch_size): invalid value")
// or with a text snippet, never by line and column. This small scanner recovers positions so
// JSON errors read like textproto ones, and finds duplicate keys, which protobuf silently
// resolves to the last value. It only adds positions: protobuf stays the judge of validity.
class JsonLocator {
 public:
  explicit JsonLocator(absl::string_view text) : text_(text) {
    SkipSpace();
    if (Value("", 0)) {
      SkipSpace();
      if (pos_ != text_.size()) Fail("unexpected text after the contract");
    }
  }

  bool ok() const { return error_.empty(); }
  size_t error_offset() const { return error_offset_; }
  const std::string& error() const { return error_; }
  bool has_duplicate() const { return !duplicate_key_.empty(); }
  size_t duplicate_offset() const { return duplicate_offset_; }
  const std::string& duplicate_key() const { return duplicate_key_; }

  // Offset of the key of member `path` ("workload.batch_size") or of array element
  // "entropy.table_log[1]".
  std::optional<size_t> Find(const std::string& path) const {
    auto it = offsets_.find(path);
    if (it == offsets_.end()) return std::nullopt;
    return it->second;
  }

 private:
  // Contracts nest four levels deep; the cap keeps hostile input from exhausting the stack.
  static constexpr int kMaxDepth = 64;

  bool Fail(absl::string_view why) {
    if (error_.empty()) {
      error_ = std::string(why);
      error_offset_ = pos_;
    }
    return false;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }

  bool Value(const std::string& path, int depth) {
    if (depth > kMaxDepth) return Fail("nested too deeply");
    if (pos_ >= text_.size()) return Fail("expected a value");
    switch (text_[pos_]) {
      case '{':
        return Object(path, depth);
      case '[':
        return Array(path, depth);
      case '"':
        return String(nullptr);
      default:
        return Scalar();
    }
  }

  bool Object(const std::string& path, int depth) {
    ++pos_;  // '{'
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return true;
    }
    std::set<std::string> keys;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Fail("expected a quoted key");
      size_t key_offset = pos_;
      std::string key;
      if (!String(&key)) return false;
      std::string snake = ToSnake(key);
      std::string member = path.empty() ? snake : absl::StrCat(path, ".", snake);
      if (!keys.insert(snake).second && duplicate_key_.empty()) {
        duplicate_key_ = key;
        duplicate_offset_ = key_offset;
      }
      offsets_.emplace(member, key_offset);
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Fail("expected ':'");
      ++pos_;
      SkipSpace();
      if (!Value(member, depth + 1)) return false;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

  bool Array(const std::string& path, int depth) {
    ++pos_;  // '['
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (int index = 0;; ++index) {
      SkipSpace();
      std::string element = absl::StrCat(path, "[", index, "]");
      offsets_.emplace(element, pos_);
      if (!Value(element, depth + 1)) return false;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }

  // A quoted string; `out` gets it with simple escapes decoded (\u escapes kept as written,
  // which is enough for naming keys in messages).
  bool String(std::string* out) {
    ++pos_;  // '"'
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string");
      if (c == '\\') {
        if (pos_ + 1 >= text_.size()) break;
        char e = text_[pos_ + 1];
        if (e == 'u') {
          if (pos_ + 6 > text_.size()) break;
          for (size_t i = pos_ + 2; i < pos_ + 6; ++i) {
            if (!absl::ascii_isxdigit(static_cast<unsigned char>(text_[i]))) {
              return Fail("invalid \\u escape");
            }
          }
          if (out != nullptr) out->append(text_.data() + pos_, 6);
          pos_ += 6;
          continue;
        }
        static const std::string kEscapes = "\"\\/bfnrt";
        static const std::string kDecoded = "\"\\/\b\f\n\r\t";
        size_t which = kEscapes.find(e);
        if (which == std::string::npos) return Fail("invalid escape sequence");
        if (out != nullptr) out->push_back(kDecoded[which]);
        pos_ += 2;
        continue;
      }
      if (out != nullptr) out->push_back(c);
      ++pos_;
    }
    return Fail("unterminated string");
  }

  // Numbers and literals; their exact grammar is protobuf's business.
  bool Scalar() {
    size_t start = pos_;
    while (pos_ < text_.size() &&
           (absl::ascii_isalnum(static_cast<unsigned char>(text_[pos_])) ||
            text_[pos_] == '-' || text_[pos_] == '+' || text_[pos_] == '.')) {
      ++pos_;
    }
    return pos_ > start || Fail("expected a value");
  }

  absl::string_view text_;
  size_t pos_ = 0;
  std::map<std::string, size_t> offsets_;
  std::string error_;
  size_t error_offset_ = 0;
  std::string duplicate_key_;
  size_t duplicate_offset_ = 0;
};

// "source:line:col: " for a byte offset (1-based line and byte column).
std::string PositionPrefix(absl::string_view source, absl::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  absl::string_view before = text.substr(0, offset);
  size_t line = 1 + std::count(before.begin(), before.end(), '\n');
  size_t line_start = before.rfind('\n');
  size_t column = offset - (line_start == absl::string_view::npos ? 0 : line_start + 1) + 1;
  return absl::StrCat(source, ":", line, ":", column, ": ");
}

// Rewrites protobuf's JSON error into "<where>: <what>" and finds where it happened.
// Shapes seen: "(a.b) name: Cannot find field.", "name: Cannot find field.",
// "(a.b[1]): invalid value ...", and syntax errors "What.\n<snippet>\n   ^".
std::string DescribeJsonError(absl::string_view source, absl::string_view text,
                              const JsonLocator& where, const std::string& message) {
  constexpr absl::string_view kUnknown = ": Cannot find field.";
  std::string path;
  std::optional<size_t> at;
  absl::string_view m = message;
  absl::ConsumePrefix(&m, ": ");  // an empty path, e.g. ": Root element must be a message."
  if (absl::StartsWith(m, "(")) {
    size_t close = m.find(')');
    if (close != absl::string_view::npos) {
      path = std::string(m.substr(1, close - 1));
      m.remove_prefix(close + 1);
      if (!absl::ConsumePrefix(&m, ": ")) absl::ConsumePrefix(&m, " ");
    }
  }
  if (absl::EndsWith(m, kUnknown)) {
    std::string name(m.substr(0, m.size() - kUnknown.size()));
    std::string full = path.empty() ? ToSnake(name) : absl::StrCat(path, ".", ToSnake(name));
    at = where.Find(full);
    std::string in = path.empty() ? "tailor.v1.DeploymentContract" : path;
    std::string what = absl::StrCat("unknown field '", name, "' in ", in);
    return at ? absl::StrCat(PositionPrefix(source, text, *at), what)
              : absl::StrCat(source, ": ", what);
  }
  if (!path.empty()) {
    at = where.Find(path);
    std::string what = absl::StrCat(path, ": ", m);
    return at ? absl::StrCat(PositionPrefix(source, text, *at), what)
              : absl::StrCat(source, ": ", what);
  }
  if (!where.ok()) {
    // A syntax error: our scanner knows the position, so the snippet lines can go.
    absl::string_view first_line = m.substr(0, m.find('\n'));
    return absl::StrCat(PositionPrefix(source, text, where.error_offset()), first_line);
  }
  return absl::StrCat(source, ": ", m);
}

absl::StatusOr<v1::DeploymentContract> ParseJson(absl::string_view text,
                                                absl::string_view source) {
  v1::DeploymentContract contract;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), &contract, options);
  JsonLocator where(text);
  if (!status.ok()) {
    std::string message(status.message().data(), status.message().size());
    if (message.empty()) message = "not a valid JSON contract";
    return absl::InvalidArgumentError(DescribeJsonError(source, text, where, message));
  }
  if (where.ok() && where.has_duplicate()) {
    // Textproto rejects a repeated singular field; JSON must not quietly keep the last one.
    return absl::InvalidArgumentError(
        absl::StrCat(PositionPrefix(source, text, where.duplicate_offset()), "duplicate key '",
                     where.duplicate_key(), "'"));
  }
  return contract;
}

bool LooksLikeJson(absl::string_view text) {
  for (char c : text) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) continue;
    return c == '{';
  }
  return false;
}

ContractFormat FormatFromExtension(const std::string& path) {
  std::string ext = absl::AsciiStrToLower(std::filesystem::path(path).extension().string());
  if (ext == ".json") return ContractFormat::kJson;
  if (ext == ".textproto" || ext == ".txtpb" || ext == ".pbtxt") {
    return ContractFormat::kTextProto;
  }
  return ContractFormat::kAuto;
}

absl::Status TooLarge(absl::string_view source, uintmax_t size) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": contract is ", size,
                                                 " bytes, larger than the limit of ",
                                                 kMaxContractBytes, " bytes"));
}

}  // namespace

absl::StatusOr<v1::DeploymentContract> ParseContract(absl::string_view text,
                                                    ContractFormat format,
                                                    absl::string_view source_name) {
  std::string source = source_name.empty() ? "<contract>" : std::string(source_name);
  if (text.size() > kMaxContractBytes) return TooLarge(source, text.size());
  if (format == ContractFormat::kAuto) {
    format = LooksLikeJson(text) ? ContractFormat::kJson : ContractFormat::kTextProto;
  }
  if (format == ContractFormat::kJson) return ParseJson(text, source);
  return ParseTextProto(text, source);
}

absl::StatusOr<v1::DeploymentContract> LoadContractFile(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    return absl::NotFoundError(absl::StrCat("contract file '", path, "' not found"));
  }
  if (std::filesystem::is_directory(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("contract file '", path, "' is a directory"));
  }
  // Check the size before reading so a huge file is refused without loading it.
  uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxContractBytes) return TooLarge(path, size);

  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    std::string why = absl::StrCat("cannot read contract file '", path, "': ", std::strerror(err));
    if (err == EACCES) return absl::PermissionDeniedError(why);
    return absl::UnavailableError(why);
  }
  // Read at most one byte past the limit: a file that grew after the size check is still caught.
  std::string text(kMaxContractBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    return absl::UnavailableError(absl::StrCat("cannot read contract file '", path, "'"));
  }
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxContractBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": contract is more than the limit of ",
                                                   kMaxContractBytes, " bytes"));
  }
  return ParseContract(text, FormatFromExtension(path), path);
}

std::string ContractToJson(const v1::DeploymentContract& contract) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  // Printing a message without Any fields cannot fail; keep a valid JSON value regardless.
  if (!google::protobuf::util::MessageToJsonString(contract, &json, options).ok()) return "{}";
  return json;
}

namespace {

// The path ("contract.workload") and number of the first unknown field in `m` or below it.
std::optional<std::string> FirstUnknownField(const google::protobuf::Message& m,
                                             const std::string& path) {
  const google::protobuf::Reflection* r = m.GetReflection();
  const google::protobuf::UnknownFieldSet& unknown = r->GetUnknownFields(m);
  if (!unknown.empty()) {
    return absl::StrCat(path, ": unknown field number ", unknown.field(0).number());
  }
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const std::string child = absl::StrCat(path, ".", f->name());
    if (!f->is_repeated()) {
      if (auto found = FirstUnknownField(r->GetMessage(m, f), child)) return found;
      continue;
    }
    for (int i = 0; i < r->FieldSize(m, f); ++i) {
      if (auto found =
              FirstUnknownField(r->GetRepeatedMessage(m, f, i), absl::StrCat(child, "[", i, "]"))) {
        return found;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status CheckWireContract(const v1::DeploymentContract& contract) {
  const size_t bytes = contract.ByteSizeLong();
  if (bytes > kMaxContractBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("contract: ", bytes, " bytes encoded; the limit is ", kMaxContractBytes,
                     " bytes (docs/architecture.md \"Limits\")"));
  }
  if (auto unknown = FirstUnknownField(contract, "contract")) {
    return absl::InvalidArgumentError(absl::StrCat(
        *unknown, ": not a field of this coordinator's contract (a newer client, or a typo); "
                  "unknown fields are refused as they are in contract files"));
  }
  return absl::OkStatus();
}

}  // namespace tailor
