#ifndef TAILOR_COORDINATOR_DATASET_INGEST_H_
#define TAILOR_COORDINATOR_DATASET_INGEST_H_

// A contract's datasets (data { calibration, train, eval }) become artifacts at submission:
// each is read through once exactly as its jobs will read it (the parent's own tokenizer,
// vocabulary, context and BOS/EOS; one document in memory at a time), so bad data is refused
// before anything runs, then stored as one archive of its *.jsonl shards, by digest. Jobs read
// only the stored bytes: a resumed or retried job reads exactly what the first attempt read,
// and the report names the digests that produced the student (docs/data.md).

#include <cstdint>

#include "absl/status/status.h"
#include "storage/blob_store.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::coordinator {

// All of one contract's datasets together, in bytes; more is refused at submission.
inline constexpr int64_t kMaxDatasetBytes = int64_t{8} << 30;

// The sequence length a role's reader uses (the eval set's cut to the parent's context).
int64_t DatasetSequenceTokens(const v1::DeploymentContract& contract, const char* role,
                              int64_t context_tokens);

// Validates every dataset of the defaulted `contract`, then stores each given by path and
// sets its artifact_digest. One given by artifact_digest must already be stored; it is not
// read again (recompressions reuse the bytes of their source). Nothing is stored unless every
// dataset reads cleanly. InvalidArgument / NotFound naming the field first:
// "data.train.path: /d/x.jsonl:12: not JSON", "data.eval.path: ...: no sequence to evaluate".
absl::Status IngestDatasets(v1::DeploymentContract& contract, storage::BlobStore& blobs);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_DATASET_INGEST_H_
