#ifndef TAILOR_METHODS_BLOCK_REMOVAL_JOB_KINDS_H_
#define TAILOR_METHODS_BLOCK_REMOVAL_JOB_KINDS_H_

namespace tailor::methods::jobs {

// Launcher: per-block gate gradients over the calibration set, reduced over ranks.
inline constexpr char kGateGradients[] = "gate_gradients";
// Launcher: builds the Fisher QUBO and keeps its k lowest states (chooses M when budget-driven).
inline constexpr char kSolve[] = "solve";
// Launcher: real held-out loss of each kept state (and the later stages); picks the student.
inline constexpr char kEvaluateCandidates[] = "evaluate_candidates";

}  // namespace tailor::methods::jobs

#endif  // TAILOR_METHODS_BLOCK_REMOVAL_JOB_KINDS_H_
