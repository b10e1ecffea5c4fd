#ifndef TAILOR_COMMON_MODEL_FETCH_H_
#define TAILOR_COMMON_MODEL_FETCH_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/agent_runtime.h"

namespace tailor {

// Unpacks the model archive `tar` (compression/model/model_archive.h) into `dir` and returns
// `dir`. A bad archive is INVALID_ARGUMENT "model artifact DIGEST (NAME) failed validation:
// ...", so every job that takes a model names the artifact and its role the same way.
absl::StatusOr<std::string> UnpackModelArtifact(const std::string& tar, const std::string& dir,
                                                const std::string& digest, const std::string& name);

// Downloads model artifact `digest` (sha256-verified by the download) to
// `work_dir`/NAME.tar and unpacks it into `work_dir`/NAME; returns that directory. The one
// fetch-verify-unpack path of the agent's and the worker's jobs (the worker's collective
// fetch downloads on rank 0 and unpacks on every rank with UnpackModelArtifact).
absl::StatusOr<std::string> FetchModelArtifact(JobContext& job, const std::string& digest,
                                               const std::string& work_dir,
                                               const std::string& name);

// The same for a dataset artifact (model::UnpackDatasetArchive): INVALID_ARGUMENT "dataset
// artifact DIGEST (NAME) failed validation: ..." for a bad one.
absl::StatusOr<std::string> UnpackDatasetArtifact(const std::string& tar, const std::string& dir,
                                                  const std::string& digest,
                                                  const std::string& name);
absl::StatusOr<std::string> FetchDatasetArtifact(JobContext& job, const std::string& digest,
                                                 const std::string& work_dir,
                                                 const std::string& name);

}  // namespace tailor

#endif  // TAILOR_COMMON_MODEL_FETCH_H_
