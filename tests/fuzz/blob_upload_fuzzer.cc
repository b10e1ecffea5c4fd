// Fuzz target: artifact upload framing as the coordinator's UploadArtifact stream feeds the
// blob store. The input is a sequence of frames, each a 2-byte little-endian length and that
// many bytes of a serialized UploadArtifactRequest (one gRPC stream message): the first must
// carry the header, every later one a data chunk (a second header rejects the upload, as the
// coordinator does). A mode byte up front picks whether Commit checks
// the header's claimed sha256/size or the true ones (an honest client), so both the
// rejection paths and the publish path run.
//
// Invariants: Append refuses more than the declared size; Commit succeeds only when size and
// digest match; a committed blob reads back byte for byte under its digest; a rejected
// upload leaves no temp file behind.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/sha256.h"
#include "storage/blob_store.h"
#include "tailor/v1/agent.pb.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace fs = std::filesystem;

// Declared sizes are clamped so a hostile header cannot make the harness write gigabytes;
// the store's own limit logic is the same at any scale.
constexpr int64_t kMaxFuzzBlob = 1 << 16;

tailor::storage::BlobStore* Store() {
  static tailor::storage::BlobStore* store = [] {
    const char* base = std::getenv("TAILOR_FUZZ_TMPDIR");
    fs::path root = base != nullptr ? fs::path(base)
                    : fs::exists("/dev/shm") ? fs::path("/dev/shm")
                                             : fs::temp_directory_path();
    root /= "tailor-blob-fuzz-" + std::to_string(::getpid());
    fs::create_directories(root);
    static const std::string to_remove = root.string();
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(to_remove, ignored);
    });
    auto opened = tailor::storage::BlobStore::Open(root.string());
    FUZZ_CHECK(opened.ok(), "%s", opened.status().ToString().c_str());
    return opened->release();
  }();
  return store;
}

bool NextFrame(const uint8_t*& p, const uint8_t* end, std::string* out) {
  if (end - p < 2) return false;
  size_t n = p[0] | (size_t{p[1]} << 8);
  p += 2;
  if (static_cast<size_t>(end - p) < n) n = end - p;
  out->assign(reinterpret_cast<const char*>(p), n);
  p += n;
  return true;
}

bool TmpIsEmpty() {
  return fs::is_empty(fs::path(Store()->root()) / "tmp");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const uint8_t* p = data + 1;
  const uint8_t* end = data + size;
  std::string frame;
  if (!NextFrame(p, end, &frame)) return 0;
  tailor::v1::UploadArtifactRequest first;
  if (!first.ParseFromString(frame) || !first.has_header()) return 0;
  const tailor::v1::ArtifactHeader& header = first.header();
  const int64_t declared = header.size_bytes();
  if (declared < 0 || declared > kMaxFuzzBlob) return 0;  // ValidateHeader refuses these

  auto writer = Store()->NewWriter(declared);
  FUZZ_CHECK(writer.ok(), "%s", writer.status().ToString().c_str());
  std::string sent;
  while (NextFrame(p, end, &frame)) {
    tailor::v1::UploadArtifactRequest chunk;
    if (!chunk.ParseFromString(frame)) break;  // a broken message ends the stream
    if (chunk.has_header()) {                  // "a second header was sent"
      writer->reset();
      FUZZ_CHECK(TmpIsEmpty(), "abandoned upload left a temp file");
      return 0;
    }
    const absl::Status appended = (*writer)->Append(chunk.data());
    if (!appended.ok()) {
      FUZZ_CHECK(appended.code() == absl::StatusCode::kResourceExhausted, "%s",
                 appended.ToString().c_str());
      FUZZ_CHECK(static_cast<int64_t>(sent.size() + chunk.data().size()) > declared,
                 "refused %zu bytes with %zu of %lld sent", chunk.data().size(), sent.size(),
                 static_cast<long long>(declared));
      FUZZ_CHECK(TmpIsEmpty(), "rejected upload left a temp file");
      return 0;
    }
    sent += chunk.data();
    FUZZ_CHECK(static_cast<int64_t>(sent.size()) <= declared, "accepted past the limit");
  }

  const std::string actual = tailor::Sha256::Hex(sent);
  const std::string want_sha = (mode & 1) ? header.sha256() : actual;
  const int64_t want_size = (mode & 2) ? declared : static_cast<int64_t>(sent.size());
  auto blob = (*writer)->Commit(want_sha, want_size);
  writer->reset();
  const bool should_pass = (want_sha.empty() || want_sha == actual) &&
                           (want_size < 0 || want_size == static_cast<int64_t>(sent.size()));
  FUZZ_CHECK(blob.ok() == should_pass, "Commit: %s", blob.status().ToString().c_str());
  FUZZ_CHECK(TmpIsEmpty(), "upload left a temp file");
  if (!blob.ok()) {
    FUZZ_CHECK(blob.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               blob.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(blob->digest == actual && blob->size_bytes == static_cast<int64_t>(sent.size()),
             "published %s/%lld", blob->digest.c_str(), static_cast<long long>(blob->size_bytes));
  auto back = Store()->ReadAll(blob->digest, kMaxFuzzBlob);
  FUZZ_CHECK(back.ok() && *back == sent, "read back differs");
  return 0;
}
