#ifndef TAILOR_WORKER_JOB_DATA_H_
#define TAILOR_WORKER_JOB_DATA_H_

// The contract's datasets (data { calibration, train, eval }) as the worker's jobs read them:
// the stored bytes the coordinator validated (by digest), read with the parent's vocabulary
// exactly as the coordinator read them, each rank its own documents (docs/data.md).

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include <vector>

#include "absl/status/statusor.h"
#include "compression/data/parent_vocabulary.h"
#include "compression/data/text_dataset.h"
#include "compression/model/config.h"
#include "worker/worker_context.h"

namespace tailor::worker {

struct JobDataset {
  std::string role;    // calibration, train, eval
  std::string digest;  // the stored dataset
  std::string dir;     // its shards, unpacked on this rank
  bool packing = true;
  int64_t sequence_tokens = 0;  // data.<role>.sequence_tokens (0: unset)
  int64_t max_sequences = 0;    // over all ranks; 0: all
};

// The parent's vocabulary: parent.path's config and tokenizer, as the coordinator read them;
// a parent stored as an artifact is a tailor-format model, whose ranked copy `teacher` has
// the same vocabulary and context.
absl::StatusOr<data::ParentVocabulary> JobParentVocabulary(const WorkerContext& ctx,
                                                           const model::HybridConfig& teacher);

// Collective: the dataset of `role` ("calibration", "train", "eval") fetched and unpacked.
// FailedPrecondition when the stored contract has no digest for it.
absl::StatusOr<JobDataset> FetchJobDataset(WorkerContext& ctx, const std::string& role);

struct ReaderOptions {
  int64_t sequence_tokens = 0;
  bool packing = true;
  int rank = 0;
  int world_size = 1;
  uint64_t seed = 1;
  int64_t shuffle_window = 0;  // 0: file order
  bool only_prompts = false;   // TextDatasetOptions::only_prompts
};

// A reader of `d` for one rank: its share of d.max_sequences (at least 1).
absl::StatusOr<std::unique_ptr<data::TextDatasetReader>> OpenJobReader(
    const JobDataset& d, const data::ParentVocabulary& vocab, const ReaderOptions& options);

// Up to `batches` batches of `rows` full sequences of `length` tokens each ([rows, length]
// int64), read in file order from the whole dataset (one reader, as rank 0 of 1): what a job
// step run by rank 0 alone (importance for the repair, the baseline's scoring) reads. A last
// partial batch is dropped unless it is the only one; InvalidArgument naming the role when
// the data holds no full sequence.
absl::StatusOr<std::vector<at::Tensor>> ReadBatches(const JobDataset& d,
                                                    const data::ParentVocabulary& vocab,
                                                    int64_t length, int64_t rows,
                                                    int64_t batches);

}  // namespace tailor::worker

#endif  // TAILOR_WORKER_JOB_DATA_H_
