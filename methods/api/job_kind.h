#ifndef TAILOR_METHODS_API_JOB_KIND_H_
#define TAILOR_METHODS_API_JOB_KIND_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tailor::methods {

// Where a job runs: pulled by the profiler agent of the target's device kind, or started by
// the coordinator's launcher (local processes or Slurm) as a multi-rank worker job.
enum class Placement { kAgent, kLauncher };

// As ResourceSpec.placement spells it: "agent" or "launcher".
absl::string_view PlacementName(Placement p);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_API_JOB_KIND_H_
