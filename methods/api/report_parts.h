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

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_API_REPORT_PARTS_H_
