#ifndef TAILOR_COMPRESSION_DATA_PARENT_VOCABULARY_H_
#define TAILOR_COMPRESSION_DATA_PARENT_VOCABULARY_H_

// What reading a dataset for a parent needs to know about it: its vocabulary size, context,
// BOS/EOS ids and its own tokenizer, from its config.json in either layout (Hugging Face, or
// tailor's own, whose models speak the 64-token task vocabulary: <bos> 1, <eos> 2) and the
// tokenizer files of its folder. Shared by the coordinator (which validates a contract's
// datasets at submission) and the jobs (which read them), so both read the same ids.
// No LibTorch.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/data/text_dataset.h"
#include "compression/tokenizer/tokenizer.h"

namespace tailor::data {

struct ParentVocabulary {
  int64_t vocab_size = 0;
  int64_t context_tokens = 0;
  int32_t bos = -1;
  int32_t eos = -1;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // null when the parent has none
  std::string no_tokenizer_reason;                  // why, when null

  // TextDatasetOptions for this parent (vocabulary, context, BOS/EOS) and `sequence_tokens`.
  TextDatasetOptions Options(int64_t sequence_tokens) const;
};

// A tailor-format parent's: the task vocabulary's <bos> 1 and <eos> 2, no tokenizer
// (ReadParentVocabulary adds the one in its folder, if any).
ParentVocabulary TailorParentVocabulary(int64_t vocab_size, int64_t context_tokens);

// `config_json` is the parent's config.json (`source` names it in errors); `format` forces
// the HF layout as parent.format does; `dir` is the parent folder its tokenizer is read from
// ("" for a parent stored as an artifact: no tokenizer).
absl::StatusOr<ParentVocabulary> ReadParentVocabulary(absl::string_view config_json,
                                                      absl::string_view source,
                                                      absl::string_view format,
                                                      const std::string& dir);

// ReadParentVocabulary of the folder `dir` (its config.json and tokenizer files).
absl::StatusOr<ParentVocabulary> ReadParentVocabularyDir(const std::string& dir,
                                                         absl::string_view format);

}  // namespace tailor::data

#endif  // TAILOR_COMPRESSION_DATA_PARENT_VOCABULARY_H_
