#ifndef TAILOR_COMPRESSION_TOKENIZER_PRE_TOKENIZER_H_
#define TAILOR_COMPRESSION_TOKENIZER_PRE_TOKENIZER_H_

// The split patterns byte-level BPE tokenizers cut text with before merging, written out by
// hand for the families tailor supports (a general regex engine with \p{..} classes is not in
// the standard library, and llama.cpp hand-writes the same patterns):
//   kGpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kLlama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2   kLlama3 with \p{N} (single digits) in place of \p{N}{1,3}
// Matching is leftmost-first, as in the regex engines (oniguruma in HF tokenizers, std::regex
// and hand-written code in llama.cpp): at each position the first alternative that matches
// wins, and each alternative is greedy.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::tokenizer {

enum class PreTokenizer { kGpt2, kLlama3, kQwen2 };

// The regex of each pattern as tokenizer.json spells it (Llama-3's (?i:..) form).
std::string PreTokenizerRegex(PreTokenizer kind);
// The pattern a tokenizer.json Split regex names (Llama-3's and Qwen2's two spellings of the
// contractions accepted); NotFound for any other regex.
absl::StatusOr<PreTokenizer> PreTokenizerFromRegex(absl::string_view regex);
// llama.cpp's tokenizer.ggml.pre for the pattern: "gpt-2", "llama-bpe", "qwen2".
std::string GgufPreName(PreTokenizer kind);
// "gpt2", "llama3", "qwen2" (for messages and flags).
std::string PreTokenizerName(PreTokenizer kind);
absl::StatusOr<PreTokenizer> PreTokenizerFromName(absl::string_view name);

// The pieces of `text` in order (their concatenation is `text`); InvalidArgument for text
// that is not UTF-8.
absl::StatusOr<std::vector<std::string>> PreTokenize(PreTokenizer kind, absl::string_view text);

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_PRE_TOKENIZER_H_
