#include "compression/tokenizer/unicode.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tailor::tokenizer {
namespace {

struct ClassRange {
  char32_t start;
  CharClass char_class;
};

constexpr ClassRange kClassRanges[] = {
#include "compression/tokenizer/unicode_categories.inc"
};

// Unicode 14 PropList.txt, White_Space.
constexpr std::pair<char32_t, char32_t> kWhitespace[] = {
    {0x0009, 0x000D}, {0x0020, 0x0020}, {0x0085, 0x0085}, {0x00A0, 0x00A0},
    {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
    {0x205F, 0x205F}, {0x3000, 0x3000},
};

absl::Status BadUtf8(size_t offset) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid UTF-8 at byte ", offset, ": not a well-formed sequence"));
}

}  // namespace

CharClass ClassOf(char32_t cp) {
  if (cp > 0x10FFFF) return CharClass::kUnassigned;
  auto it = std::upper_bound(std::begin(kClassRanges), std::end(kClassRanges), cp,
                             [](char32_t c, const ClassRange& r) { return c < r.start; });
  return std::prev(it)->char_class;
}

bool IsLetter(char32_t cp) { return ClassOf(cp) == CharClass::kLetter; }
bool IsNumber(char32_t cp) { return ClassOf(cp) == CharClass::kNumber; }

bool IsWhitespace(char32_t cp) {
  for (const auto& [lo, hi] : kWhitespace) {
    if (cp < lo) return false;
    if (cp <= hi) return true;
  }
  return false;
}

absl::StatusOr<std::vector<char32_t>> DecodeUtf8(absl::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    int len = 0;
    char32_t cp = 0;
    char32_t min = 0;
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
      return BadUtf8(i);
    }
    if (i + len > text.size()) return BadUtf8(i);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) return BadUtf8(i);
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return BadUtf8(i);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void AppendUtf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) AppendUtf8(cps[i], out);
  return out;
}

}  // namespace tailor::tokenizer
