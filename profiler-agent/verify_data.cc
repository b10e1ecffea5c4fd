#include "profiler-agent/verify_data.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_fetch.h"
#include "compression/data/parent_vocabulary.h"

namespace tailor::profiler {

absl::StatusOr<EvalSample> ReadEvalSample(JobContext& ctx, const std::string& parent_dir,
                                          int max_sequences) {
  EvalSample sample;
  const v1::DeploymentContract& contract = ctx.contract();
  if (!contract.has_data() || !contract.data().has_eval()) return sample;
  const v1::DatasetRef& ref = contract.data().eval();
  if (ref.artifact_digest().empty()) {
    return absl::FailedPreconditionError(
        "data.eval has no artifact_digest: the coordinator stores each dataset at submission, "
        "and this contract was not submitted through it");
  }
  absl::StatusOr<data::ParentVocabulary> vocab =
      data::ReadParentVocabularyDir(parent_dir, contract.parent().format());
  if (!vocab.ok()) return vocab.status();
  absl::StatusOr<std::string> dir =
      FetchDatasetArtifact(ctx, ref.artifact_digest(), ctx.work_dir(), "data-eval");
  if (!dir.ok()) return dir.status();
  data::TextDatasetOptions o = vocab->Options(
      std::min<int64_t>(ref.sequence_tokens(), vocab->context_tokens));
  o.packing = !ref.has_packing() || ref.packing();
  if (ref.max_sequences() > 0) o.max_sequences = ref.max_sequences();
  absl::StatusOr<std::unique_ptr<data::TextDatasetReader>> reader =
      data::TextDatasetReader::Open(*dir, o, vocab->tokenizer.get());
  auto prefixed = [](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("data.eval: ", s.message()));
  };
  if (!reader.ok()) return prefixed(reader.status());
  sample.digest = ref.artifact_digest();
  while (static_cast<int>(sample.sequences.size()) < max_sequences) {
    absl::StatusOr<std::optional<data::TokenSequence>> s = (*reader)->Next();
    if (!s.ok()) return prefixed(s.status());
    if (!s->has_value()) break;
    sample.sequences.push_back(**std::move(s));
  }
  return sample;
}

void SetServedPerplexity(const EvalSample& sample, int64_t sequences, int64_t tokens,
                         double perplexity, v1::ModelQuality& quality) {
  quality.set_eval_dataset_digest(sample.digest);
  quality.set_eval_sequences(sequences);
  quality.set_eval_tokens(tokens);
  // Proto JSON has no infinity: a distribution that underflowed is left without a figure.
  if (std::isfinite(perplexity)) quality.set_perplexity(perplexity);
}

}  // namespace tailor::profiler
