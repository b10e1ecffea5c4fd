#ifndef TAILOR_METHODS_AUTOCOMPRESS_JOB_KINDS_H_
#define TAILOR_METHODS_AUTOCOMPRESS_JOB_KINDS_H_

namespace tailor::methods::jobs {

// Launcher: activation-importance ranking; writes the permuted parent (the supernet's teacher).
inline constexpr char kRank[] = "rank";
// Launcher: the differentiable architecture search over the ranked supernet.
inline constexpr char kSearch[] = "search";
// Launcher: the homogeneous baseline under the same cost table and supernet.
inline constexpr char kBaselineUniform[] = "baseline_uniform";
// Launcher: the measured settle (search.settle_rungs > 0): picks the search's growth-ladder
// rung from the `measure` job's figures and slices that student from the ranked parent.
inline constexpr char kSettle[] = "settle";

// Keys of the baseline's recovery and verification (kinds kDistill and kVerify).
inline constexpr char kDistillBaseline[] = "distill_baseline";
inline constexpr char kVerifyBaseline[] = "verify_baseline";

}  // namespace tailor::methods::jobs

#endif  // TAILOR_METHODS_AUTOCOMPRESS_JOB_KINDS_H_
