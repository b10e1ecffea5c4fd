#ifndef TAILOR_METHODS_API_REPORT_PARTS_H_
#define TAILOR_METHODS_API_REPORT_PARTS_H_

#include <string>
#include <vector>

#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::methods {

// The output of the job keyed `key` among `jobs`, or nullptr when there is no such job.
const v1::JobOutput* OutputOfJob(const std::vector<v1::Job>& jobs, const std::string& key);

// Adds the quality rows a verify job measured for `model` ("student", "baseline"): the
// model's `quality` (task accuracy on the target) with its KD loss from the distillation that
// produced it (it holds the teacher; verify does not), and with `with_parent` also the
// verify job's `parent_quality` as row "parent" before it. No-op without a verify output.
void AddVerifiedQuality(const v1::JobOutput* verify, const v1::JobOutput* distill,
                        const std::string& model, bool with_parent, v1::CampaignReport& report);

// Adds what the distill job that produced `model` measured on the contract's data.eval
// (DistillResult.eval): the model's perplexity and exact match on its quality row, and with
// `with_parent` the teacher's on row "parent"; rows are added when verify left none (a
// student that missed a quality floor is never verified). No-op without an eval.
void AddEvalQuality(const v1::JobOutput* distill, const std::string& model, bool with_parent,
                    v1::CampaignReport& report);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_API_REPORT_PARTS_H_
