#ifndef TAILOR_COMPRESSION_TOKENIZER_SENTENCEPIECE_BRIDGE_H_
#define TAILOR_COMPRESSION_TOKENIZER_SENTENCEPIECE_BRIDGE_H_

// Debian's libsentencepiece (0.1.97) behind plain C++ types: its header declares
// absl::string_view itself, which collides with Abseil's, so only sentencepiece_bridge.cc
// includes it and no Abseil header may be included there or here.

#include <memory>
#include <string>
#include <vector>

namespace tailor::tokenizer {

class SentencePieceBridge {
 public:
  SentencePieceBridge();
  ~SentencePieceBridge();
  // false with `error` set when `path` is not a SentencePiece model.
  bool Load(const std::string& path, std::string& error);
  bool Encode(const std::string& text, std::vector<int>& ids, std::string& error) const;
  std::string Decode(const std::vector<int>& ids) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_SENTENCEPIECE_BRIDGE_H_
