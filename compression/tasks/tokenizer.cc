#include "compression/tasks/tokenizer.h"

#include "absl/strings/str_cat.h"

namespace tailor::tasks {
namespace {

constexpr absl::string_view kPunct = "+:,?()[]{}|=";
constexpr Token kPunctBase = 4;
constexpr absl::string_view kTaskNames[kNumTasks] = {"copy",     "reverse", "sort",  "add",
                                                     "brackets", "recall",  "count", "pattern"};

std::string SpecialName(Token t) {
  switch (t) {
    case kPad:
      return "<pad>";
    case kBos:
      return "<bos>";
    case kEos:
      return "<eos>";
    default:
      break;
  }
  if (t >= kTaskBase && t < kTaskBase + kNumTasks) {
    return absl::StrCat("<", kTaskNames[t - kTaskBase], ">");
  }
  return absl::StrCat("<", t, ">");
}

}  // namespace

Token DigitToken(int digit) { return kDigit0 + digit; }
Token LetterToken(int letter) { return kLetterA + letter; }
Token TaskToken(int task) { return kTaskBase + task; }

Token PunctToken(char c) {
  const size_t i = kPunct.find(c);
  return i == absl::string_view::npos ? kPad : kPunctBase + static_cast<Token>(i);
}

bool IsDigit(Token t) { return t >= kDigit0 && t < kDigit0 + 10; }
int DigitValue(Token t) { return IsDigit(t) ? t - kDigit0 : -1; }

std::string Decode(const std::vector<Token>& tokens) {
  std::string out;
  for (Token t : tokens) {
    if (t == kAnswer) {
      out += '>';
    } else if (IsDigit(t)) {
      out += static_cast<char>('0' + (t - kDigit0));
    } else if (t >= kLetterA && t < kLetterA + 26) {
      out += static_cast<char>('a' + (t - kLetterA));
    } else if (t >= kPunctBase && t < kPunctBase + static_cast<Token>(kPunct.size())) {
      out += kPunct[t - kPunctBase];
    } else {
      out += SpecialName(t);
    }
  }
  return out;
}

absl::StatusOr<std::vector<Token>> Encode(absl::string_view text) {
  std::vector<Token> out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '<') {
      const size_t close = text.find('>', i);
      if (close == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("unterminated <name> at ", i));
      }
      const absl::string_view name = text.substr(i, close - i + 1);
      bool found = false;
      for (Token t = 0; t < kVocabSize && !found; ++t) {
        if (t != kAnswer && SpecialName(t) == name) {
          out.push_back(t);
          found = true;
        }
      }
      if (!found) return absl::InvalidArgumentError(absl::StrCat("unknown token ", name));
      i = close;
    } else if (c == '>') {
      out.push_back(kAnswer);
    } else if (c >= '0' && c <= '9') {
      out.push_back(DigitToken(c - '0'));
    } else if (c >= 'a' && c <= 'z') {
      out.push_back(LetterToken(c - 'a'));
    } else if (PunctToken(c) != kPad) {
      out.push_back(PunctToken(c));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("no token for '", std::string(1, c), "'"));
    }
  }
  return out;
}

}  // namespace tailor::tasks
