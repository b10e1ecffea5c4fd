#include "compression/model/model_archive.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace tailor::model {

namespace {

constexpr size_t kBlock = 512;
constexpr size_t kChunk = 1 << 20;

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int err = errno;
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  return err == ENOENT ? absl::NotFoundError(msg) : absl::InternalError(msg);
}

// Octal, zero-padded to width - 1 digits and NUL-terminated (the ustar convention).
void PutOctal(char* field, size_t width, uint64_t value) {
  std::snprintf(field, width, "%0*llo", static_cast<int>(width - 1),
                static_cast<unsigned long long>(value));
}

unsigned Checksum(const char* header) {
  unsigned sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    // The checksum field itself counts as eight spaces.
    const bool in_field = i >= 148 && i < 156;
    sum += in_field ? ' ' : static_cast<unsigned char>(header[i]);
  }
  return sum;
}

void MakeHeader(const std::string& name, uint64_t size, char* h) {
  std::memset(h, 0, kBlock);
  std::memcpy(h, name.data(), name.size());
  PutOctal(h + 100, 8, 0644);  // mode
  PutOctal(h + 108, 8, 0);     // uid
  PutOctal(h + 116, 8, 0);     // gid
  PutOctal(h + 124, 12, size);
  PutOctal(h + 136, 12, 0);  // mtime: fixed, so equal models give equal bytes
  h[156] = '0';              // regular file
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::snprintf(h + 148, 8, "%06o", Checksum(h));
  h[155] = ' ';
}

bool ParseOctal(const char* field, size_t width, uint64_t* out) {
  uint64_t v = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  bool digits = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
    digits = true;
  }
  for (; i < width; ++i) {
    if (field[i] != '\0' && field[i] != ' ') return false;
  }
  *out = v;
  return digits;
}

absl::Status CopyBytes(std::FILE* in, std::FILE* out, uint64_t n, const std::string& from,
                       const std::string& to) {
  std::vector<char> buf(kChunk);
  while (n > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(n, kChunk));
    if (std::fread(buf.data(), 1, want, in) != want) {
      return absl::DataLossError(absl::StrCat(from, ": truncated while reading ", to));
    }
    if (std::fwrite(buf.data(), 1, want, out) != want) return ErrnoError("write", to);
    n -= want;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PackModelArchive(const std::string& dir, const std::string& path) {
  return PackFilesArchive(dir, {kModelConfigFile, kModelWeightsFile}, path);
}

absl::Status PackFilesArchive(const std::string& dir, const std::vector<std::string>& names,
                              const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    File out(std::fopen(tmp.c_str(), "wb"));
    if (out == nullptr) return ErrnoError("create", tmp);
    char header[kBlock];
    const char zeros[kBlock] = {};
    for (const std::string& name : names) {
      if (name.empty() || name.size() > 99 || name.find('/') != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            dir, "/", name, ": a packed file name must be 1..99 bytes without '/'"));
      }
      const std::string src = absl::StrCat(dir, "/", name);
      File in(std::fopen(src.c_str(), "rb"));
      if (in == nullptr) return ErrnoError("open", src);
      struct stat st {};
      if (fstat(fileno(in.get()), &st) != 0) return ErrnoError("stat", src);
      const uint64_t size = static_cast<uint64_t>(st.st_size);
      MakeHeader(name, size, header);
      if (std::fwrite(header, 1, kBlock, out.get()) != kBlock) return ErrnoError("write", tmp);
      TAILOR_RETURN_IF_ERROR(CopyBytes(in.get(), out.get(), size, src, tmp));
      const size_t pad = (kBlock - size % kBlock) % kBlock;
      if (std::fwrite(zeros, 1, pad, out.get()) != pad) return ErrnoError("write", tmp);
    }
    // End of archive: two zero blocks.
    for (int i = 0; i < 2; ++i) {
      if (std::fwrite(zeros, 1, kBlock, out.get()) != kBlock) return ErrnoError("write", tmp);
    }
    if (std::fflush(out.get()) != 0 || fsync(fileno(out.get())) != 0) {
      return ErrnoError("flush", tmp);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

namespace {

struct EntryHeader {
  std::string name;
  uint64_t size = 0;
};

// Which entries an archive may hold, and how an error says so.
struct EntryRule {
  std::function<bool(const std::string& name)> allowed;
  std::string holds;  // " (a model archive holds only ...)"
};

// Reads the next ustar header; nullopt at the end-of-archive marker (or a clean EOF once
// `may_end`). Refuses anything but the regular files `rule` allows.
absl::StatusOr<std::optional<EntryHeader>> NextEntry(std::FILE* in, const std::string& path,
                                                     bool may_end, const EntryRule& rule) {
  char h[kBlock];
  const size_t got = std::fread(h, 1, kBlock, in);
  if (got == 0 && may_end) return std::nullopt;  // tolerate a missing end-of-archive marker
  if (got != kBlock) return absl::DataLossError(absl::StrCat(path, ": truncated archive"));
  bool zero = true;
  for (char c : h) zero &= c == '\0';
  if (zero) return std::nullopt;
  if (std::memcmp(h + 257, "ustar", 5) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a tar (ustar) archive"));
  }
  uint64_t sum = 0;
  EntryHeader entry;
  if (!ParseOctal(h + 148, 8, &sum) || sum != Checksum(h)) {
    return absl::DataLossError(absl::StrCat(path, ": bad tar header checksum"));
  }
  if (!ParseOctal(h + 124, 12, &entry.size)) {
    return absl::DataLossError(absl::StrCat(path, ": bad tar entry size"));
  }
  entry.name = std::string(h, strnlen(h, 100));
  const std::string prefix(h + 345, strnlen(h + 345, 155));
  if (!prefix.empty()) entry.name = absl::StrCat(prefix, "/", entry.name);
  if (entry.name.rfind("./", 0) == 0) entry.name = entry.name.substr(2);
  const char type = h[156];
  if (type != '0' && type != '\0') {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": entry '", entry.name, "' is not a regular file", rule.holds));
  }
  if (!rule.allowed(entry.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": unexpected entry '", entry.name, "'", rule.holds));
  }
  return entry;
}

EntryRule ModelRule() {
  return {[](const std::string& name) {
            return name == kModelConfigFile || name == kModelWeightsFile;
          },
          absl::StrCat(" (a model archive holds only ", kModelConfigFile, " and ",
                       kModelWeightsFile, ")")};
}

// Unpacks every entry of `path` into `dir` (created), each allowed by `rule` and at most once;
// the names seen, in order. `at_least` entries must come before an EOF ends it.
absl::StatusOr<std::vector<std::string>> UnpackArchive(const std::string& path,
                                                       const std::string& dir,
                                                       const EntryRule& rule, size_t at_least) {
  File in(std::fopen(path.c_str(), "rb"));
  if (in == nullptr) return ErrnoError("open", path);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", dir, ": ", ec.message()));
  std::set<std::string> seen;
  std::vector<std::string> names;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(std::optional<EntryHeader> entry,
                            NextEntry(in.get(), path, seen.size() >= at_least, rule));
    if (!entry.has_value()) break;
    if (!seen.insert(entry->name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": entry '", entry->name, "' twice"));
    }
    names.push_back(entry->name);
    const std::string dst = absl::StrCat(dir, "/", entry->name);
    {
      File out(std::fopen(dst.c_str(), "wb"));
      if (out == nullptr) return ErrnoError("create", dst);
      TAILOR_RETURN_IF_ERROR(CopyBytes(in.get(), out.get(), entry->size, path, dst));
    }
    const size_t pad = (kBlock - entry->size % kBlock) % kBlock;
    if (pad > 0 && std::fseek(in.get(), static_cast<long>(pad), SEEK_CUR) != 0) {
      return absl::DataLossError(absl::StrCat(path, ": truncated archive"));
    }
  }
  return names;
}

}  // namespace

absl::Status UnpackModelArchive(const std::string& path, const std::string& dir) {
  TAILOR_ASSIGN_OR_RETURN(std::vector<std::string> names,
                          UnpackArchive(path, dir, ModelRule(), 2));
  for (const char* name : {kModelConfigFile, kModelWeightsFile}) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": model archive has no ", name));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> UnpackDatasetArchive(const std::string& path,
                                                              const std::string& dir) {
  const EntryRule rule{
      [](const std::string& name) {
        return name.size() > 6 && name.find('/') == std::string::npos && name[0] != '.' &&
               name.compare(name.size() - 6, 6, ".jsonl") == 0;
      },
      " (a dataset archive holds only *.jsonl files)"};
  TAILOR_ASSIGN_OR_RETURN(std::vector<std::string> names, UnpackArchive(path, dir, rule, 1));
  if (names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a dataset archive with no files"));
  }
  return names;
}

absl::StatusOr<std::string> ReadModelArchiveConfig(const std::string& path,
                                                   uint64_t max_bytes) {
  File in(std::fopen(path.c_str(), "rb"));
  if (in == nullptr) return ErrnoError("open", path);
  TAILOR_ASSIGN_OR_RETURN(std::optional<EntryHeader> entry,
                          NextEntry(in.get(), path, false, ModelRule()));
  // Packing writes config.json first, so a reader needs only the first entry.
  if (!entry.has_value() || entry->name != kModelConfigFile) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": model archive does not start with ", kModelConfigFile));
  }
  if (entry->size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", kModelConfigFile, " is ",
                                                   entry->size, " bytes, limit ", max_bytes));
  }
  std::string text(entry->size, '\0');
  if (std::fread(text.data(), 1, text.size(), in.get()) != text.size()) {
    return absl::DataLossError(absl::StrCat(path, ": truncated archive"));
  }
  return text;
}

}  // namespace tailor::model
