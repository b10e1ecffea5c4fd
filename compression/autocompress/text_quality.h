#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_TEXT_QUALITY_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_TEXT_QUALITY_H_

// Quality of a teacher and a student on a contract's eval set (data.eval): next-token
// perplexity over every predicted position, and for the prompt/answer lines (read unpacked)
// greedy exact match, i.e. the argmax at every answer position, teacher-forced, is the answer
// token: exactly when greedy generation from the prompt reproduces the whole answer.
// The set is streamed; sequences of equal length are evaluated together.

#include <cmath>
#include <cstdint>

#include "absl/status/statusor.h"
#include "compression/data/text_dataset.h"
#include "compression/model/hybrid_lm.h"

namespace tailor::autocompress {

struct ModelTextQuality {
  double nll_sum = 0;      // nats over every predicted position
  int64_t exact_hits = 0;  // prompt/answer sequences answered exactly
};

struct TextQuality {
  int64_t sequences = 0;
  int64_t tokens = 0;       // predicted positions (each sequence's length - 1)
  int64_t exact_items = 0;  // prompt/answer sequences
  ModelTextQuality teacher;
  ModelTextQuality student;

  static double Perplexity(const ModelTextQuality& m, int64_t tokens) {
    return tokens > 0 ? std::exp(m.nll_sum / static_cast<double>(tokens)) : 0.0;
  }
  double ExactMatch(const ModelTextQuality& m) const {
    return exact_items > 0 ? static_cast<double>(m.exact_hits) / exact_items : 0.0;
  }
};

// Reads `reader` to its end. InvalidArgument when it holds no sequence (an empty eval set),
// the reader's errors as they are.
absl::StatusOr<TextQuality> EvaluateText(model::HybridLM& teacher, model::HybridLM& student,
                                         data::TextDatasetReader& reader);

// One model on `sequences` held in memory (the verify job's served model on the first
// sequences of data.eval): its NLL and exact-match hits, and in `tokens` the predicted
// positions. InvalidArgument when no sequence has two tokens.
absl::StatusOr<ModelTextQuality> ScoreSequences(model::HybridLM& m,
                                                const std::vector<data::TokenSequence>& sequences,
                                                int64_t& tokens);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_TEXT_QUALITY_H_
