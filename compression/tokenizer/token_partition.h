#ifndef TAILOR_COMPRESSION_TOKENIZER_TOKEN_PARTITION_H_
#define TAILOR_COMPRESSION_TOKENIZER_TOKEN_PARTITION_H_

// Cutting whole-token texts ("<|eot_id|>", "<s>") out of a text before the subword model sees
// the rest, as llama.cpp does: the longest token first, each token at every occurrence in
// the fragments still left as text, left to right.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::tokenizer {

struct WholeToken {
  std::string text;
  int32_t id = 0;
};

struct Fragment {
  bool is_token = false;
  int32_t id = 0;         // is_token
  absl::string_view text;  // !is_token; a view into the partitioned text
};

// `tokens` in any order (sorted here by length, longest first, then by id).
std::vector<Fragment> PartitionOnTokens(absl::string_view text, std::vector<WholeToken> tokens);

// The ids of `text`: `tokens` cut out as themselves, every other fragment through
// `encode_fragment` (which appends its ids). InvalidArgument naming the byte for text that is
// not UTF-8; `encode_fragment`'s first error as it is.
using FragmentEncoder = std::function<absl::Status(absl::string_view, std::vector<int32_t>&)>;
absl::StatusOr<std::vector<int32_t>> EncodeAroundTokens(absl::string_view text,
                                                        std::vector<WholeToken> tokens,
                                                        const FragmentEncoder& encode_fragment);

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_TOKEN_PARTITION_H_
