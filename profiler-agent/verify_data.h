#ifndef TAILOR_PROFILER_AGENT_VERIFY_DATA_H_
#define TAILOR_PROFILER_AGENT_VERIFY_DATA_H_

// What the verify job reads of the contract's data (docs/data.md): the first sequences of
// data.eval, downloaded by digest (the bytes stored at submission) and tokenized with the
// parent's vocabulary exactly as the distill job reads them (sequence_tokens capped at the
// parent's context, the contract's packing and max_sequences), so the perplexity verify
// measures in the serving engine and the one the distill job measured in tailor's model are
// over the same tokens whenever the sample holds the whole set.

#include <string>

#include "absl/status/statusor.h"
#include "common/agent_runtime.h"
#include "profiler-agent/serving_engine.h"

namespace tailor::profiler {

// At most `max_sequences` sequences of data.eval (a larger set is cut: verify serves every
// sequence). No sequences (and no error) when the contract has no data.eval; the reader's
// errors prefixed "data.eval: " otherwise.
absl::StatusOr<EvalSample> ReadEvalSample(JobContext& ctx, const std::string& parent_dir,
                                          int max_sequences);

// The served model's perplexity over `tokens` predicted positions of `sequences` sequences of
// `sample`, as ModelQuality fields (every engine's verify reports it the same way).
void SetServedPerplexity(const EvalSample& sample, int64_t sequences, int64_t tokens,
                         double perplexity, v1::ModelQuality& quality);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_VERIFY_DATA_H_
