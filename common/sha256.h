#ifndef TAILOR_COMMON_SHA256_H_
#define TAILOR_COMMON_SHA256_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace tailor {

// Streaming SHA-256 (OpenSSL EVP). Hex digests are lowercase, 64 characters.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(absl::string_view data);
  // Finishes the hash; the object must not be updated afterwards.
  std::string HexDigest();

  static std::string Hex(absl::string_view data);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

bool IsSha256Hex(absl::string_view s);

}  // namespace tailor

#endif  // TAILOR_COMMON_SHA256_H_
