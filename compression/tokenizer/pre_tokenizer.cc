#include "compression/tokenizer/pre_tokenizer.h"

#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/tokenizer/unicode.h"

namespace tailor::tokenizer {
namespace {

// Adjacent raw literals: one regex each, cut where an alternative starts.
constexpr absl::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr absl::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr absl::string_view kLlama3RegexAlt =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))"
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr absl::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr absl::string_view kQwen2RegexAlt =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))"
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// One split pattern over a decoded text: Next(pos) is the end of the match starting at pos.
class Splitter {
 public:
  Splitter(PreTokenizer kind, const std::vector<char32_t>& cps) : kind_(kind), cps_(cps) {}

  size_t Next(size_t pos) const {
    if (size_t end = Contraction(pos); end > pos) return end;
    if (size_t end = LetterRun(pos); end > pos) return end;
    if (size_t end = NumberRun(pos); end > pos) return end;
    if (size_t end = OtherRun(pos); end > pos) return end;
    return WhitespaceRun(pos);
  }

 private:
  bool In(size_t i) const { return i < cps_.size(); }
  bool Letter(size_t i) const { return In(i) && IsLetter(cps_[i]); }
  bool Number(size_t i) const { return In(i) && IsNumber(cps_[i]); }
  bool Space(size_t i) const { return In(i) && IsWhitespace(cps_[i]); }
  bool CrLf(size_t i) const { return In(i) && (cps_[i] == '\r' || cps_[i] == '\n'); }
  // [^\s\p{L}\p{N}]
  bool Other(size_t i) const { return In(i) && !Space(i) && !Letter(i) && !Number(i); }
  char32_t Lower(size_t i) const {
    if (!In(i)) return 0;
    const char32_t c = cps_[i];
    // Only the ASCII letters of the contractions can match, so ASCII folding is exact.
    return kind_ == PreTokenizer::kGpt2 || c < 'A' || c > 'Z' ? c : c + ('a' - 'A');
  }

  // 's|'t|'re|'ve|'m|'ll|'d (case-insensitive but for GPT-2).
  size_t Contraction(size_t pos) const {
    if (!In(pos) || cps_[pos] != '\'') return pos;
    const char32_t a = Lower(pos + 1), b = Lower(pos + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
      return pos + 3;
    }
    return pos;
  }

  // GPT-2: ' ?\p{L}+'. Llama-3/Qwen2: '[^\r\n\p{L}\p{N}]?\p{L}+'.
  size_t LetterRun(size_t pos) const {
    size_t i = pos;
    if (kind_ == PreTokenizer::kGpt2) {
      if (In(i) && cps_[i] == ' ' && Letter(i + 1)) ++i;
    } else if (!Letter(i) && In(i) && !CrLf(i) && !Number(i) && Letter(i + 1)) {
      ++i;
    }
    if (!Letter(i)) return pos;
    while (Letter(i)) ++i;
    return i;
  }

  // GPT-2: ' ?\p{N}+'. Llama-3: '\p{N}{1,3}'. Qwen2: '\p{N}'.
  size_t NumberRun(size_t pos) const {
    size_t i = pos;
    if (kind_ == PreTokenizer::kGpt2) {
      if (In(i) && cps_[i] == ' ' && Number(i + 1)) ++i;
      if (!Number(i)) return pos;
      while (Number(i)) ++i;
      return i;
    }
    const size_t most = kind_ == PreTokenizer::kLlama3 ? 3 : 1;
    while (Number(i) && i - pos < most) ++i;
    return i;
  }

  // ' ?[^\s\p{L}\p{N}]+', followed by '[\r\n]*' but for GPT-2.
  size_t OtherRun(size_t pos) const {
    size_t i = pos;
    if (In(i) && cps_[i] == ' ' && Other(i + 1)) ++i;
    if (!Other(i)) return pos;
    while (Other(i)) ++i;
    if (kind_ != PreTokenizer::kGpt2) {
      while (CrLf(i)) ++i;
    }
    return i;
  }

  // '\s*[\r\n]+' (not GPT-2), then '\s+(?!\S)', then '\s+'; a lone unmatched code point
  // otherwise (none is left by these patterns, but a match must always advance).
  size_t WhitespaceRun(size_t pos) const {
    size_t end = pos;
    size_t last_crlf = pos;
    while (Space(end)) {
      if (CrLf(end)) last_crlf = end + 1;
      ++end;
    }
    if (kind_ != PreTokenizer::kGpt2 && last_crlf > pos) return last_crlf;
    const size_t run = end - pos;
    if (run > 1 && In(end)) return end - 1;  // leave the last space to the next word
    if (run > 0) return end;
    return pos + 1;
  }

  PreTokenizer kind_;
  const std::vector<char32_t>& cps_;
};

}  // namespace

std::string PreTokenizerRegex(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kGpt2:
      return std::string(kGpt2Regex);
    case PreTokenizer::kLlama3:
      return std::string(kLlama3Regex);
    case PreTokenizer::kQwen2:
      return std::string(kQwen2Regex);
  }
  return "";
}

absl::StatusOr<PreTokenizer> PreTokenizerFromRegex(absl::string_view regex) {
  if (regex == kGpt2Regex) return PreTokenizer::kGpt2;
  if (regex == kLlama3Regex || regex == kLlama3RegexAlt) return PreTokenizer::kLlama3;
  if (regex == kQwen2Regex || regex == kQwen2RegexAlt) return PreTokenizer::kQwen2;
  return absl::NotFoundError(absl::StrCat(
      "split pattern \"", regex,
      "\" is not one tailor implements (the GPT-2, Llama-3 and Qwen2 patterns)"));
}

std::string GgufPreName(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kGpt2:
      return "gpt-2";
    case PreTokenizer::kLlama3:
      return "llama-bpe";
    case PreTokenizer::kQwen2:
      return "qwen2";
  }
  return "default";
}

std::string PreTokenizerName(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kGpt2:
      return "gpt2";
    case PreTokenizer::kLlama3:
      return "llama3";
    case PreTokenizer::kQwen2:
      return "qwen2";
  }
  return "";
}

absl::StatusOr<PreTokenizer> PreTokenizerFromName(absl::string_view name) {
  for (PreTokenizer k : {PreTokenizer::kGpt2, PreTokenizer::kLlama3, PreTokenizer::kQwen2}) {
    if (name == PreTokenizerName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pre-tokenizer \"", name, "\": expected gpt2, llama3 or qwen2"));
}

absl::StatusOr<std::vector<std::string>> PreTokenize(PreTokenizer kind, absl::string_view text) {
  absl::StatusOr<std::vector<char32_t>> cps = DecodeUtf8(text);
  if (!cps.ok()) return cps.status();
  const Splitter splitter(kind, *cps);
  std::vector<std::string> pieces;
  for (size_t pos = 0; pos < cps->size();) {
    const size_t end = splitter.Next(pos);
    pieces.push_back(EncodeUtf8(*cps, pos, end));
    pos = end;
  }
  return pieces;
}

}  // namespace tailor::tokenizer
