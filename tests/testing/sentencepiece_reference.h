#ifndef TAILOR_TESTS_TESTING_SENTENCEPIECE_REFERENCE_H_
#define TAILOR_TESTS_TESTING_SENTENCEPIECE_REFERENCE_H_

// Debian's libsentencepiece (0.1.97), the reference tailor's own SentencePiece encoder
// (compression/tokenizer/sentencepiece_tokenizer.h) is tested against. Behind plain C++
// types: its header declares absl::string_view itself, which collides with Abseil's, so only
// sentencepiece_reference.cc includes it. Only test binaries link it: the library carries its
// own copy of protobuf-lite, whose symbols crash a process that also links libprotobuf.

#include <memory>
#include <string>
#include <vector>

namespace tailor::testing {

class SentencePieceReference {
 public:
  SentencePieceReference();
  ~SentencePieceReference();
  // false with `error` set when `path` is not a SentencePiece model.
  bool Load(const std::string& path, std::string& error);
  bool Encode(const std::string& text, std::vector<int>& ids, std::string& error) const;
  std::string Decode(const std::vector<int>& ids) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tailor::testing

#endif  // TAILOR_TESTS_TESTING_SENTENCEPIECE_REFERENCE_H_
