#ifndef TAILOR_COMMON_FINISHED_RESULT_H_
#define TAILOR_COMMON_FINISHED_RESULT_H_

// A launcher job's finished result, kept in the job's checkpoint dir (which outlives its
// attempts) until the coordinator has accepted it. A rank whose coordinator never came back
// exits leaving it there, and the job's next attempt reports it instead of running the job
// again (docs/reliability.md "A coordinator that never returns").

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor {

// Written atomically (temporary file, fsync, rename) as <dir>/finished-<job_id>.pb.
absl::Status StoreFinishedResult(const std::string& dir, const std::string& job_id,
                                 const v1::JobOutput& result);
// NOT_FOUND when no result is stored; DATA_LOSS naming the file when it does not parse.
absl::StatusOr<v1::JobOutput> LoadFinishedResult(const std::string& dir,
                                                            const std::string& job_id);
// Once the coordinator has the result; a missing file is fine.
void DropFinishedResult(const std::string& dir, const std::string& job_id);

}  // namespace tailor

#endif  // TAILOR_COMMON_FINISHED_RESULT_H_
