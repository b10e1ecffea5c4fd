#ifndef TAILOR_STORAGE_BLOB_STORE_H_
#define TAILOR_STORAGE_BLOB_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::storage {

struct BlobInfo {
  std::string digest;  // lowercase sha256 hex
  int64_t size_bytes = 0;
};

// Content-addressed files under <root>/sha256/ab/cdef... A blob becomes visible only after its
// bytes were written to <root>/tmp, fsynced, hashed, checked against what the uploader
// claimed, and renamed into place (then the directory is fsynced). A corrupt, truncated or
// oversized upload therefore leaves no blob behind.
class BlobStore {
 public:
  // Streaming writer for one blob. Destroying it without Commit removes the temp file.
  class Writer {
   public:
    virtual ~Writer() = default;
    // RESOURCE_EXHAUSTED once more than max_size bytes were appended (temp file removed).
    virtual absl::Status Append(absl::string_view data) = 0;
    // Verifies size and sha256 (INVALID_ARGUMENT naming expected and actual values on a
    // mismatch; the temp file is removed) and publishes the blob. An empty expected_sha256
    // or expected_size < 0 skips that check. Committing an existing digest is OK.
    virtual absl::StatusOr<BlobInfo> Commit(absl::string_view expected_sha256,
                                            int64_t expected_size) = 0;
  };

  // Creates <root>/sha256 and <root>/tmp, removes leftover temp files.
  static absl::StatusOr<std::unique_ptr<BlobStore>> Open(const std::string& root);

  absl::StatusOr<std::unique_ptr<Writer>> NewWriter(int64_t max_size);
  // Convenience: one-shot write of `data`.
  absl::StatusOr<BlobInfo> Put(absl::string_view data);

  bool Exists(absl::string_view digest) const;
  // NOT_FOUND for unknown digests, INVALID_ARGUMENT for malformed ones.
  absl::StatusOr<int64_t> Size(absl::string_view digest) const;
  absl::StatusOr<std::string> PathOf(absl::string_view digest) const;
  // Up to max_bytes starting at offset (OUT_OF_RANGE when offset > size).
  absl::StatusOr<std::string> ReadChunk(absl::string_view digest, int64_t offset,
                                        int64_t max_bytes) const;
  absl::StatusOr<std::string> ReadAll(absl::string_view digest, int64_t max_bytes) const;
  // Re-hashes the file; DATA_LOSS if it no longer matches its name.
  absl::Status Verify(absl::string_view digest) const;

  const std::string& root() const { return root_; }

 private:
  explicit BlobStore(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

}  // namespace tailor::storage

#endif  // TAILOR_STORAGE_BLOB_STORE_H_
