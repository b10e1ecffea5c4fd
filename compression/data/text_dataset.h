#ifndef TAILOR_COMPRESSION_DATA_TEXT_DATASET_H_
#define TAILOR_COMPRESSION_DATA_TEXT_DATASET_H_

// A platform team's own data: JSONL files, one document per line, either
//   {"text": "..."}           tokenized with the parent's own tokenizer,
//   {"input_ids": [1, 2, 3]}  already tokenized (ids checked against the vocabulary), or
//   {"prompt": "...", "answer": "..."}  a question with its expected answer (tokenized apart,
//                             answer after prompt): text for perplexity, and an exact-match
//                             item when read unpacked,
// in a file or a directory of *.jsonl shards (read in name order). Read as a stream of
// token sequences: a reader holds one document and one shuffle window, never the corpus.
//
// Documents are numbered over the whole dataset (shards in order, lines in order; blank lines
// are skipped and not numbered). A reader for rank r of w takes the documents whose number
// is r mod w, so ranks see disjoint documents, and together every document once; each reads
// in the same order on every run, so a retried job sees the same sequences in the same order.
//
// Packing (the default) joins a rank's documents, each as [bos] tokens [eos], and cuts the
// stream into sequences of exactly `sequence_tokens` (the last may be shorter); without it each
// document is its own sequence, cut to `sequence_tokens`. Errors name the file and line.
// No LibTorch here.

#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace tailor::data {

struct TextDatasetOptions {
  int64_t sequence_tokens = 512;
  bool packing = true;
  int64_t max_sequences = 0;  // per reader; 0: all
  int32_t bos = -1;           // prepended to each document when >= 0
  int32_t eos = -1;           // appended to each document when >= 0
  int64_t vocab_size = 0;     // the parent's; ids must be below it
  int64_t context_tokens = 0;  // the parent's context; sequence_tokens may not exceed it
  // Sequences pass through a window of this many, drawn from it in an order seeded by
  // `seed` (training data); 0 or 1 keeps the file order (calibration, evaluation).
  int64_t shuffle_window = 0;
  uint64_t seed = 1;
  // Only the prompt/answer lines (the others are skipped before tokenizing): the exact-match
  // pass over an eval set whose text lines may be longer than the context.
  bool only_prompts = false;
};

struct TokenSequence {
  std::vector<int32_t> tokens;
  // Unpacked prompt/answer lines: the index of the answer's first token (the answer runs to
  // the end, EOS included); -1 otherwise (and when the cut left the answer incomplete).
  int64_t answer_begin = -1;
  // Numbers of the documents with tokens in this sequence (a packed sequence can span
  // several), for tests and records of what a rank saw.
  std::vector<int64_t> documents;
};

// The shard files of a dataset path in reading order: the file itself, or the *.jsonl files
// of a directory by name. NotFound / InvalidArgument naming the path when there is none.
absl::StatusOr<std::vector<std::string>> DatasetFiles(const std::string& path);

class TextDatasetReader {
 public:
  // `tokenizer` may be null when every line has input_ids (a "text" line is then an error);
  // it must outlive the reader. InvalidArgument for options that cannot work (sequence_tokens
  // < 2 or above context_tokens, a bad rank), NotFound for a missing path.
  static absl::StatusOr<std::unique_ptr<TextDatasetReader>> Open(
      const std::string& path, const TextDatasetOptions& options,
      const tokenizer::Tokenizer* tokenizer, int rank = 0, int world_size = 1);

  // The next sequence of this rank; nullopt at the end. InvalidArgument naming file:line for
  // a bad line: not JSON, no text / input_ids, an id outside the vocabulary, a non-packed
  // document longer than the context.
  absl::StatusOr<std::optional<TokenSequence>> Next();

  int64_t documents_read() const { return documents_read_; }

 private:
  TextDatasetReader() = default;
  // The next of this rank's documents as [bos] ids [eos]; nullopt at the end.
  absl::StatusOr<std::optional<std::vector<int32_t>>> NextDocument();
  // A line's ids; `answer_begin` set for a prompt/answer line (index into the ids).
  absl::StatusOr<std::vector<int32_t>> ParseLine(const nlohmann::json& j, const std::string& where,
                                                 int64_t& answer_begin) const;
  absl::StatusOr<std::vector<int32_t>> Tokenize(const std::string& text,
                                                const std::string& where) const;
  absl::StatusOr<std::optional<TokenSequence>> NextInFileOrder();
  uint64_t NextRandom();

  TextDatasetOptions options_;
  const tokenizer::Tokenizer* tokenizer_ = nullptr;
  int rank_ = 0;
  int world_size_ = 1;
  std::vector<std::string> files_;
  size_t file_index_ = 0;
  std::ifstream in_;
  int64_t line_number_ = 0;
  int64_t next_document_ = 0;  // the number the next non-blank line gets
  int64_t current_document_ = -1;
  int64_t current_answer_begin_ = -1;  // of the document NextDocument returned last
  int64_t documents_read_ = 0;
  // Packing: tokens not yet cut into a sequence, and the documents they come from as
  // (document, tokens of it still pending) in order.
  std::deque<int32_t> pending_;
  std::deque<std::pair<int64_t, int64_t>> pending_documents_;
  bool exhausted_ = false;
  std::deque<TokenSequence> window_;
  uint64_t rng_state_ = 0;
  int64_t emitted_ = 0;
};

}  // namespace tailor::data

#endif  // TAILOR_COMPRESSION_DATA_TEXT_DATASET_H_
