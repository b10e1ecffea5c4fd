#include "worker/job_data.h"

#include <torch/torch.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/job_io.h"

namespace tailor::worker {

absl::StatusOr<data::ParentVocabulary> JobParentVocabulary(const WorkerContext& ctx,
                                                           const model::HybridConfig& teacher) {
  const v1::ModelRef& parent = ctx.contract().parent();
  if (parent.path().empty()) {
    return data::TailorParentVocabulary(teacher.vocab, teacher.max_seq);
  }
  return data::ReadParentVocabularyDir(parent.path(), parent.format());
}

absl::StatusOr<JobDataset> FetchJobDataset(WorkerContext& ctx, const std::string& role) {
  const v1::DataParams& data = ctx.contract().data();
  const v1::DatasetRef& ref = role == "train"  ? data.train()
                              : role == "eval" ? data.eval()
                                               : data.calibration();
  if (ref.artifact_digest().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data.", role, " has no artifact_digest: the coordinator stores each dataset at "
        "submission, and this contract was not submitted through it"));
  }
  JobDataset d;
  d.role = role;
  d.digest = ref.artifact_digest();
  d.packing = !ref.has_packing() || ref.packing();
  d.sequence_tokens = ref.sequence_tokens();
  d.max_sequences = ref.max_sequences();
  absl::StatusOr<std::string> dir = FetchDataset(ctx, d.digest, "data-" + role);
  if (!dir.ok()) return dir.status();
  d.dir = *std::move(dir);
  return d;
}

absl::StatusOr<std::unique_ptr<data::TextDatasetReader>> OpenJobReader(
    const JobDataset& d, const data::ParentVocabulary& vocab, const ReaderOptions& options) {
  data::TextDatasetOptions o = vocab.Options(options.sequence_tokens);
  o.packing = options.packing;
  o.seed = options.seed;
  o.shuffle_window = options.shuffle_window;
  o.only_prompts = options.only_prompts;
  if (d.max_sequences > 0) {
    o.max_sequences = std::max<int64_t>(1, d.max_sequences / options.world_size);
  }
  absl::StatusOr<std::unique_ptr<data::TextDatasetReader>> r = data::TextDatasetReader::Open(
      d.dir, o, vocab.tokenizer.get(), options.rank, options.world_size);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat("data.", d.role, ": ", r.status().message()));
  }
  return r;
}

absl::StatusOr<std::vector<at::Tensor>> ReadBatches(const JobDataset& d,
                                                    const data::ParentVocabulary& vocab,
                                                    int64_t length, int64_t rows,
                                                    int64_t batches) {
  absl::StatusOr<std::unique_ptr<data::TextDatasetReader>> reader =
      OpenJobReader(d, vocab, {.sequence_tokens = length});
  if (!reader.ok()) return reader.status();
  std::vector<at::Tensor> out;
  std::vector<int64_t> flat;
  while (static_cast<int64_t>(out.size()) < batches) {
    absl::StatusOr<std::optional<data::TokenSequence>> s = (*reader)->Next();
    if (!s.ok()) return s.status();
    if (!s->has_value()) break;
    if (static_cast<int64_t>((*s)->tokens.size()) != length) continue;
    flat.insert(flat.end(), (*s)->tokens.begin(), (*s)->tokens.end());
    if (static_cast<int64_t>(flat.size()) == rows * length) {
      out.push_back(torch::tensor(flat, torch::kLong).reshape({rows, length}));
      flat.clear();
    }
  }
  if (out.empty() && !flat.empty()) {
    const int64_t n = static_cast<int64_t>(flat.size()) / length;
    out.push_back(torch::tensor(flat, torch::kLong).reshape({n, length}));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("data.", d.role, ": no sequence of ", length,
                                                   " tokens in the dataset"));
  }
  return out;
}

}  // namespace tailor::worker
