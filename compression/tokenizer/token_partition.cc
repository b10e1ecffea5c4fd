#include "compression/tokenizer/token_partition.h"

#include <algorithm>
#include <utility>

#include "compression/tokenizer/unicode.h"

namespace tailor::tokenizer {

std::vector<Fragment> PartitionOnTokens(absl::string_view text, std::vector<WholeToken> tokens) {
  std::sort(tokens.begin(), tokens.end(), [](const WholeToken& a, const WholeToken& b) {
    return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.id < b.id;
  });
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({false, 0, text});
  for (const WholeToken& token : tokens) {
    if (token.text.empty()) continue;
    std::vector<Fragment> next;
    for (const Fragment& f : fragments) {
      if (f.is_token) {
        next.push_back(f);
        continue;
      }
      absl::string_view rest = f.text;
      for (size_t at = rest.find(token.text); at != absl::string_view::npos;
           at = rest.find(token.text)) {
        if (at > 0) next.push_back({false, 0, rest.substr(0, at)});
        next.push_back({true, token.id, {}});
        rest.remove_prefix(at + token.text.size());
      }
      if (!rest.empty()) next.push_back({false, 0, rest});
    }
    fragments = std::move(next);
  }
  return fragments;
}

absl::StatusOr<std::vector<int32_t>> EncodeAroundTokens(absl::string_view text,
                                                        std::vector<WholeToken> tokens,
                                                        const FragmentEncoder& encode_fragment) {
  if (absl::StatusOr<std::vector<char32_t>> cps = DecodeUtf8(text); !cps.ok()) {
    return cps.status();
  }
  std::vector<int32_t> ids;
  for (const Fragment& f : PartitionOnTokens(text, std::move(tokens))) {
    if (f.is_token) {
      ids.push_back(f.id);
    } else if (absl::Status s = encode_fragment(f.text, ids); !s.ok()) {
      return s;
    }
  }
  return ids;
}

}  // namespace tailor::tokenizer
