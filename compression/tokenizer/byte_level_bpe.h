#ifndef TAILOR_COMPRESSION_TOKENIZER_BYTE_LEVEL_BPE_H_
#define TAILOR_COMPRESSION_TOKENIZER_BYTE_LEVEL_BPE_H_

// The Hugging Face tokenizer.json byte-level BPE (GPT-2, Llama-3, Qwen2/Qwen3, Nemotron-H
// families): pre-tokenize with the family's split pattern (pre_tokenizer.h), map each byte to
// its printable symbol (GPT-2's table), merge adjacent symbols lowest merge rank first
// (leftmost on ties), and look the symbols up; with ignore_merges (Llama-3) a piece that is
// itself a token is that token. Added tokens are cut out first (token_partition.h).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/tokenizer/pre_tokenizer.h"
#include "compression/tokenizer/token_partition.h"
#include "compression/tokenizer/tokenizer.h"

namespace tailor::tokenizer {

// Token ids a tokenizer.json may use: the largest vocabulary tailor's models take
// (model::kMaxVocab), so a bad id cannot make the reader allocate gigabytes.
inline constexpr int64_t kMaxTokenizerVocab = int64_t{1} << 24;

// The printable symbol (UTF-8) GPT-2's byte-level alphabet gives `byte`.
std::string ByteSymbol(uint8_t byte);

struct ByteLevelBpeOptions {
  // false: a split pattern tailor does not implement still loads (Vocabulary() then says
  // pre "default"), but Encode fails; what the GGUF exporter needs to carry token ids.
  bool require_pre_tokenizer = true;
};

class ByteLevelBpe : public Tokenizer {
 public:
  // `json` is a tokenizer.json's text; `source` names it in errors. InvalidArgument naming
  // what is wrong: not JSON, not a BPE model, not byte-level, a bad id or merge, a token
  // twice, or (require_pre_tokenizer) a split pattern tailor does not implement.
  static absl::StatusOr<std::unique_ptr<ByteLevelBpe>> FromJson(
      absl::string_view json, const std::string& source, const ByteLevelBpeOptions& options = {});
  static absl::StatusOr<std::unique_ptr<ByteLevelBpe>> Load(
      const std::string& path, const ByteLevelBpeOptions& options = {});

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool parse_special) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocabulary_.tokens.size()); }
  const Vocabulary& vocabulary() const override { return vocabulary_; }
  std::string Describe() const override;

  std::optional<PreTokenizer> pre_tokenizer() const { return pre_; }

 private:
  ByteLevelBpe() = default;
  absl::Status EncodePiece(absl::string_view piece, std::vector<int32_t>& out) const;

  std::string source_;  // the tokenizer.json, for errors
  Vocabulary vocabulary_;
  std::optional<PreTokenizer> pre_;
  bool ignore_merges_ = false;
  std::unordered_map<std::string, int32_t> ids_;    // token text -> id (model vocab)
  std::unordered_map<std::string, int32_t> ranks_;  // "a b" -> merge rank
  std::vector<WholeToken> special_;                 // added tokens with "special": true
  std::vector<WholeToken> user_defined_;            // the other added tokens
  std::unordered_map<std::string, uint8_t> symbol_bytes_;  // ByteSymbol inverse
};

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_BYTE_LEVEL_BPE_H_
