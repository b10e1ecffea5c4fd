#ifndef TAILOR_COMPRESSION_TOKENIZER_BPE_TRAINER_H_
#define TAILOR_COMPRESSION_TOKENIZER_BPE_TRAINER_H_

// Trains a byte-level BPE vocabulary on a corpus and writes it as a Hugging Face
// tokenizer.json in the layout of the chosen family (Llama-3: Split + ByteLevel, ignore_merges;
// Qwen2: Split + ByteLevel; GPT-2: ByteLevel with its regex). For the offline demo and the
// tests: a parent tailor trains itself gets a real tokenizer over text Debian ships.
//
// Ids: the 256 byte symbols in byte order, then one token per merge, then the special
// tokens. Each step merges the most frequent adjacent pair (ties: the smaller pair by text),
// so the result depends only on the corpus and the options.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/tokenizer/pre_tokenizer.h"

namespace tailor::tokenizer {

struct BpeTrainOptions {
  int64_t vocab_size = 1024;  // bytes + merges + special tokens
  PreTokenizer pre_tokenizer = PreTokenizer::kLlama3;
  std::vector<std::string> special_tokens;  // added as control tokens, after the merges
  int64_t min_pair_count = 2;               // training stops when no pair is this frequent
};

// InvalidArgument when vocab_size leaves no room past the bytes and special tokens, or a
// text is not UTF-8 (naming its index).
absl::StatusOr<std::string> TrainByteLevelBpe(const std::vector<std::string>& texts,
                                              const BpeTrainOptions& options);

}  // namespace tailor::tokenizer

#endif  // TAILOR_COMPRESSION_TOKENIZER_BPE_TRAINER_H_
