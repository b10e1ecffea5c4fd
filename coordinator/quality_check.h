#ifndef TAILOR_COORDINATOR_QUALITY_CHECK_H_
#define TAILOR_COORDINATOR_QUALITY_CHECK_H_

// The contract's quality floors (quality { ... }) against what the student's distill job
// measured on data.eval (v1::EvalQuality): the student's perplexity relative to the parent's,
// and its greedy exact match. A student that misses a floor fails its campaign, after its
// artifacts are stored, with these figures as the reason (docs/data.md).

#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::coordinator {

// Always a check (met when the contract sets no floor), with the figures in `reason`.
v1::QualityCheck JudgeQuality(const v1::QualityParams& floors, const v1::EvalQuality& eval);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_QUALITY_CHECK_H_
