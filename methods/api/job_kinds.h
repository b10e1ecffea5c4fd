#ifndef TAILOR_METHODS_API_JOB_KINDS_H_
#define TAILOR_METHODS_API_JOB_KINDS_H_

// Job kinds that more than one method plans. The planner names jobs with these constants and
// the worker and agent register their handlers under the same ones, so a kind is spelled in
// one place. Kinds of a single method live in methods/<method>/job_kinds.h.
namespace tailor::methods::jobs {

// Agent: measures the per-layer cost table on the target (AUTOCOMPRESS, budget-driven
// BLOCK_REMOVAL).
inline constexpr char kProfile[] = "profile";
// Agent: measures a produced model against the contract's budgets on the target.
inline constexpr char kVerify[] = "verify";
// Agent: the first job of a recompression: re-measures the source campaign's cost table and
// its student in the new engine version (v1::DriftCheckResult).
inline constexpr char kDriftCheck[] = "drift_check";
// Agent: serves the candidate architectures of the job it depends on (JobOutput.candidates)
// with dummy weights under the contract's workload (v1::MeasureResult).
inline constexpr char kMeasure[] = "measure";
// Launcher: logit distillation of a chosen student from its teacher.
inline constexpr char kDistill[] = "distill";

}  // namespace tailor::methods::jobs

#endif  // TAILOR_METHODS_API_JOB_KINDS_H_
