#ifndef TAILOR_WORKER_JOB_IO_H_
#define TAILOR_WORKER_JOB_IO_H_

// Inputs and outputs of multi-rank jobs. Only rank 0 talks to the coordinator (it holds the
// lease); what every rank needs (a model artifact, the cost table) is fetched by rank 0 and
// broadcast over the process group, so ranks on other hosts need no shared filesystem.
// Every function here is a collective when it says so: all ranks must call it in the same
// order.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/model/hybrid_lm.h"
#include "tailor/v1/campaign.pb.h"
#include "worker/worker_context.h"

namespace tailor::worker {

// The output of dependency `dep` (job key); FAILED_PRECONDITION when the graph lost it.
absl::StatusOr<const v1::JobOutput*> Input(const WorkerContext& ctx, const std::string& dep);

// `value`, a field `field` of dependency `dep`'s output, when set; FAILED_PRECONDITION naming
// both when empty (an upstream job that finished without the artifact this one needs).
absl::StatusOr<std::string> NonEmpty(const std::string& dep, absl::string_view field,
                                     const std::string& value);

// Collective. Rank 0 downloads the model archive `digest` (model_archive.h), every rank
// unpacks it below its work dir as `name` and loads it. A bad archive or model is
// INVALID_ARGUMENT naming the digest (not retryable: the artifact will not get better).
absl::StatusOr<model::HybridLM> FetchModel(WorkerContext& ctx, const std::string& digest,
                                           const std::string& name);

// Collective. Rank 0 downloads the dataset archive `digest` (a contract dataset the
// coordinator stored) and streams it to every rank in 64 MiB broadcasts (never the whole
// corpus in memory); every rank unpacks its *.jsonl shards below its work dir as `name` and
// gets that directory. A bad archive is INVALID_ARGUMENT naming the digest.
absl::StatusOr<std::string> FetchDataset(WorkerContext& ctx, const std::string& digest,
                                         const std::string& name);
// Collective. Rank 0 reads the cost table `id` from the coordinator; every rank gets it.
absl::StatusOr<v1::CostTable> FetchCostTable(WorkerContext& ctx, const std::string& id);

// Rank 0 only: saves `m` (F32 safetensors + config.json) in UploadedModelDir(ctx, name),
// packs it as a model archive and uploads it as artifact `kind`. Returns the artifact
// (digest = the `model_digest` a verify job reads). Other ranks get FAILED_PRECONDITION.
absl::StatusOr<v1::Artifact> UploadModel(WorkerContext& ctx, const model::HybridLM& m,
                                         const std::string& kind, const std::string& name);

// Where UploadModel saved model `name`: later steps of the job (exports) read it there
// instead of saving the model a second time.
std::string UploadedModelDir(const WorkerContext& ctx, const std::string& name);

// A directory that survives attempts of the same job on this host (RankEnv::checkpoint_dir).
// Created on first use; a retried attempt resumes from what an earlier one left there.
std::string CheckpointDir(const WorkerContext& ctx);

}  // namespace tailor::worker

#endif  // TAILOR_WORKER_JOB_IO_H_
