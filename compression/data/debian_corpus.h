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

}  // namespace tailor::data

#endif  // TAILOR_COMPRESSION_DATA_DEBIAN_CORPUS_H_
