#ifndef TAILOR_COMPRESSION_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
#define TAILOR_COMPRESSION_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_

// A SentencePiece tokenizer.model (Llama-2, Mistral/Mixtral), read and encoded by tailor:
// the model's protobuf parsed here (Debian ships no sentencepiece_model.pb.h), and BPE
// encoding written here: spaces become U+2581 (with one in front when add_dummy_prefix),
// the text splits into characters, and the adjacent pair whose joined piece scores highest
// (leftmost on ties) merges until none is a piece; a character no piece holds becomes its
// UTF-8 bytes' <0xXX> pieces (byte fallback), or <unk>. Tests hold it to Debian's
// libsentencepiece and to llama.cpp on the same model; the library itself cannot be linked
// here (it carries protobuf-lite symbols that crash processes linking libprotobuf).
//
// Only what llama.cpp's "llama" tokenizer reproduces loads: a BPE model with the identity
// normalizer that keeps whitespace runs (Llama-2's settings). Control and user-defined pieces
// written in the text are cut out first and each remaining fragment is encoded on its own
// (with its dummy-prefix space), as llama.cpp does.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
  // The BPE merge of one fragment (text between whole tokens).
  void EncodeFragment(absl::string_view text, std::vector<int32_t>& out) const;

  std::string source_;
  SentencePieceModelInfo info_;
  std::unordered_map<std::string, int32_t> pieces_;  // normal and user-defined pieces
  int32_t byte_ids_[256];                            // <0xXX> pieces; -1 where none
  std::vector<WholeToken> control_;                  // control and unknown pieces
  std::vector<WholeToken> user_defined_;
};

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
