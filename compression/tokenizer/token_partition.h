#ifndef TAILOR_COMPRESSION_TOKENIZER_TOKEN_PARTITION_H_
#define TAILOR_COMPRESSION_TOKENIZER_TOKEN_PARTITION_H_

// Cutting whole-token texts ("<|eot_id|>", "<s>") out of a text before the subword model sees
// the rest, as llama.cpp does: the longest token first, each token at every occurrence in
// the fragments still left as text, left to right.

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_TOKEN_PARTITION_H_
