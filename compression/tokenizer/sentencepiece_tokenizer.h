#ifndef TAILOR_COMPRESSION_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
#define TAILOR_COMPRESSION_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_

// A SentencePiece tokenizer.model (Llama-2, Mistral/Mixtral): ids from Debian's
// libsentencepiece, the vocabulary (pieces, scores, types, add_dummy_prefix) read from the
// model's protobuf by tailor, since Debian ships no sentencepiece_model.pb.h.
//
// Only what llama.cpp's "llama" tokenizer reproduces loads: a BPE model with the identity
// normalizer that keeps whitespace runs (Llama-2's settings). Control and user-defined pieces
// written in the text are cut out first and each remaining fragment is encoded on its own
// (with its dummy-prefix space), as llama.cpp does.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/tokenizer/sentencepiece_bridge.h"
#include "compression/tokenizer/token_partition.h"
#include "compression/tokenizer/tokenizer.h"

namespace tailor::tokenizer {

// What tailor reads from a tokenizer.model's ModelProto.
struct SentencePieceModelInfo {
  Vocabulary vocabulary;  // model "llama"
  int model_type = 1;     // trainer_spec.model_type: 1 unigram, 2 BPE, 3 word, 4 char
  bool byte_fallback = false;
  std::string normalizer = "nmt_nfkc";  // normalizer_spec.name
  bool remove_extra_whitespaces = true;
};

// InvalidArgument naming `source` when `bytes` is not a ModelProto.
absl::StatusOr<SentencePieceModelInfo> ParseSentencePieceModel(absl::string_view bytes,
                                                               const std::string& source);

class SentencePieceTokenizer : public Tokenizer {
 public:
  // InvalidArgument naming the file and the setting llama.cpp would not reproduce.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& path);

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool parse_special) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override {
    return static_cast<int64_t>(info_.vocabulary.tokens.size());
  }
  const Vocabulary& vocabulary() const override { return info_.vocabulary; }
  std::string Describe() const override;

 private:
  SentencePieceTokenizer() = default;

  std::string source_;
  SentencePieceModelInfo info_;
  SentencePieceBridge bridge_;
  std::vector<WholeToken> control_;       // control and unknown pieces
  std::vector<WholeToken> user_defined_;
};

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
