#ifndef TAILOR_COMPRESSION_TASKS_TOKENIZER_H_
#define TAILOR_COMPRESSION_TASKS_TOKENIZER_H_

// The fixed 64-token vocabulary shared by every synthetic task:
//   0 <pad>  1 <bos>  2 <eos>  3 '>' (answer follows)  4..15 punctuation '+', ':', ',', '?',
//   '(', ')', '[', ']', '{', '}', '|', '='
//   16..25 digits '0'..'9'   26..51 letters 'a'..'z'   52..59 task ids   60..63 unused.
// A sample reads <bos> <task> question... '>' answer... <eos>.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::tasks {

using Token = int32_t;

inline constexpr int64_t kVocabSize = 64;
inline constexpr Token kPad = 0;
inline constexpr Token kBos = 1;
inline constexpr Token kEos = 2;
inline constexpr Token kAnswer = 3;  // '>'
inline constexpr Token kDigit0 = 16;
inline constexpr Token kLetterA = 26;
inline constexpr Token kTaskBase = 52;
inline constexpr int kNumTasks = 8;

Token DigitToken(int digit);    // 0..9
Token LetterToken(int letter);  // 0..25 -> 'a'..'z'
Token TaskToken(int task);      // 0..7
// '+', ':', ',', '?', '(', ')', '[', ']', '{', '}', '|', '='.
Token PunctToken(char c);
bool IsDigit(Token t);
int DigitValue(Token t);  // -1 when not a digit

// Human-readable form: single characters for digits, letters and punctuation, <name>
// for specials ("<bos><add>12+3>42<eos>"). Encode is its inverse.
std::string Decode(const std::vector<Token>& tokens);
absl::StatusOr<std::vector<Token>> Encode(absl::string_view text);

}  // namespace tailor::tasks

#endif  // TAILOR_COMPRESSION_TASKS_TOKENIZER_H_
