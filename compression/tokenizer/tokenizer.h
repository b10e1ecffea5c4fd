#ifndef TAILOR_COMPRESSION_TOKENIZER_TOKENIZER_H_
#define TAILOR_COMPRESSION_TOKENIZER_TOKENIZER_H_

// A parent's own tokenizer, read from its checkpoint folder and written by tailor (no
// tokenizer library is in Debian besides sentencepiece): the HF tokenizer.json byte-level
// BPE (ByteLevelBpe) or a SentencePiece tokenizer.model (SentencePieceTokenizer).
//
// Both tokenize exactly as llama.cpp does on the vocabulary tailor's GGUF exporter writes
// (Vocabulary() below): the student is served there, so its training data must be cut the
// way it will be served. Where llama.cpp and HF tokenizers differ (HF's NFC normalizer of
// Qwen2, HF splitting special tokens out of plain text), tailor follows llama.cpp.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::tokenizer {

// llama.cpp's tokenizer.ggml.token_type values (also SentencePiece's piece types).
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// What a GGUF's tokenizer.ggml.* keys hold, as the tokenizer defines it.
struct Vocabulary {
  std::string model;                // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;                  // tokenizer.ggml.pre ("gpt2" only); "default" if unknown
  std::vector<std::string> tokens;  // by id
  std::vector<TokenType> types;     // by id
  std::vector<float> scores;        // by id ("llama" only)
  std::vector<std::string> merges;  // "a b" by rank ("gpt2" only)
  int64_t unk = -1;                 // the unknown piece ("llama"), -1 when none
  bool add_space_prefix = false;    // "llama": SentencePiece's add_dummy_prefix
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The ids of `text`, with no BOS/EOS added. Control tokens written in the text
  // ("<|eot_id|>", "</s>") become those tokens only with `parse_special`, else they are
  // plain text; user-defined (non-special added) tokens always match. InvalidArgument for
  // text that is not UTF-8 (naming the byte).
  virtual absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                                      bool parse_special) const = 0;
  // The text of `ids`; control tokens as their text. Ids outside the vocabulary are skipped.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  // One past the largest id.
  virtual int64_t vocab_size() const = 0;
  virtual const Vocabulary& vocabulary() const = 0;
  // "byte-level BPE (llama3 pre-tokenizer)", "SentencePiece BPE": for reports and errors.
  virtual std::string Describe() const = 0;
};

// The tokenizer of a checkpoint folder: tokenizer.json when it is a byte-level BPE, else
// tokenizer.model. NotFound when the folder has neither; InvalidArgument naming the file and
// what in it tailor cannot reproduce (the first reason of each file when both fail).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& dir);

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_TOKENIZER_H_
