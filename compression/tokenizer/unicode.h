#ifndef TAILOR_COMPRESSION_TOKENIZER_UNICODE_H_
#define TAILOR_COMPRESSION_TOKENIZER_UNICODE_H_

// The Unicode facts the tokenizers need: UTF-8 decoding with a precise error, the general
// category class of a code point (\p{L}, \p{N}, ... of the pre-tokenizer patterns) and the
// White_Space property (\s). The category table is generated from Python's unicodedata
// (tools/gen_unicode_categories.py), as llama.cpp generates its own.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::tokenizer {

// The first letter of a code point's general category; kUnassigned for Cn.
enum class CharClass : uint8_t {
  kUnassigned,
  kLetter,       // L*
  kNumber,       // N*
  kPunctuation,  // P*
  kMark,         // M*
  kSymbol,       // S*
  kSeparator,    // Z*
  kOther,        // Cc, Cf, Cs, Co
};

CharClass ClassOf(char32_t cp);
bool IsLetter(char32_t cp);
bool IsNumber(char32_t cp);
// Unicode's White_Space property (what \s matches in the tokenizers' regex engines).
bool IsWhitespace(char32_t cp);

// The code points of `text`; InvalidArgument naming the byte offset of the first byte that
// does not start a well-formed UTF-8 sequence (overlong forms and surrogates included).
absl::StatusOr<std::vector<char32_t>> DecodeUtf8(absl::string_view text);
void AppendUtf8(char32_t cp, std::string& out);
std::string EncodeUtf8(const std::vector<char32_t>& cps, size_t begin, size_t end);

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_UNICODE_H_
