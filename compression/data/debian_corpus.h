#ifndef TAILOR_COMPRESSION_DATA_DEBIAN_CORPUS_H_
#define TAILOR_COMPRESSION_DATA_DEBIAN_CORPUS_H_

// A text corpus every Debian machine has, for the offline demo, the tests and the benches:
// the license texts under /usr/share/common-licenses, cut into paragraphs. Written as JSONL
// datasets (compression/data/text_dataset.h): train.jsonl and eval.jsonl ({"text": ...}),
// split by a hash of each paragraph (about one in `eval_one_in` is held out, so the split
// does not depend on file order), and in eval.jsonl also prompt/answer lines cut from the
// held-out paragraphs (a sentence's words, then its last word as the answer). Deterministic:
// the same files give the same bytes.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tailor::data {

struct DebianCorpusOptions {
  std::string source_dir = "/usr/share/common-licenses";
  int eval_one_in = 8;
  int64_t max_paragraph_bytes = 4096;  // longer paragraphs are cut at a line end
  int64_t prompts = 64;                // prompt/answer lines in eval.jsonl, at most
};

struct DebianCorpus {
  std::vector<std::string> train;  // paragraphs
  std::vector<std::string> eval;
  std::vector<std::pair<std::string, std::string>> prompts;  // (prompt, answer)
  int64_t bytes = 0;
};

// Reads the corpus; NotFound when the source folder is missing or holds no text.
absl::StatusOr<DebianCorpus> ReadDebianCorpus(const DebianCorpusOptions& options = {});

// Writes DIR/train.jsonl and DIR/eval.jsonl (DIR created).
absl::Status WriteDebianCorpus(const DebianCorpus& corpus, const std::string& dir);

// The corpus with a vocabulary of its own, for a parent that learns the text: a tailor-format
// parent speaks token ids, so the paragraphs are also written as input_ids of a byte-level BPE
// trained on the training split (its bytes keep ids 0..255, so ids 1 and 2, the task
// vocabulary's <bos> and <eos>, are control bytes no paragraph contains).
struct TokenizedCorpusOptions {
  int64_t vocab_size = 512;
  size_t max_train = 0;  // paragraphs kept, 0: all
  size_t max_eval = 0;
  DebianCorpusOptions source;
};

// WriteDebianCorpus, plus DIR/tokenizer.json (the BPE) and DIR/train_ids.jsonl and
// DIR/eval_ids.jsonl ({"input_ids": ...} per paragraph). Returns the corpus written.
absl::StatusOr<DebianCorpus> WriteTokenizedDebianCorpus(const std::string& dir,
                                                        const TokenizedCorpusOptions& options);

}  // namespace tailor::data

#endif  // TAILOR_COMPRESSION_DATA_DEBIAN_CORPUS_H_
