#ifndef TAILOR_COMMON_JOB_OUTPUT_H_
#define TAILOR_COMMON_JOB_OUTPUT_H_

// Reading and writing JobOutput (proto/tailor/v1/job_output.proto): the typed result every
// job hands on, with its kind's own message packed in `detail`.
#include <optional>
#include <string>

#include "tailor/v1/job_output.pb.h"

namespace tailor {

// Packs `detail` (the job kind's own result message) into `output`.
template <typename T>
void SetDetail(v1::JobOutput& output, const T& detail) {
  output.mutable_detail()->PackFrom(detail);
}

// The kind's own result when `output` holds one of type T; nullopt otherwise (a job that
// skipped, or one whose kind has no detail).
template <typename T>
std::optional<T> DetailOf(const v1::JobOutput& output) {
  T detail;
  if (!output.has_detail() || !output.detail().UnpackTo(&detail)) return std::nullopt;
  return detail;
}

}  // namespace tailor

#endif  // TAILOR_COMMON_JOB_OUTPUT_H_
