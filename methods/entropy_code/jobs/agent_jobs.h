#ifndef TAILOR_METHODS_ENTROPY_CODE_JOBS_AGENT_JOBS_H_
#define TAILOR_METHODS_ENTROPY_CODE_JOBS_AGENT_JOBS_H_

// Agent side of ENTROPY_CODE and of the `package { entropy_code: true }` tail
// (docs/entropy.md). Built only with LibTorch.
//
// autotune (key autotune / entropy_autotune): the source model is the contract's parent
//   (ENTROPY_CODE) or the model the `verify` dependency verified (tail). Every codable
//   tensor is quantised to entropy.weight_format (unset: kept) and autotuned on this device:
//   candidate codes priced, encoded, their batch-1 fused GEMV latency measured; the
//   per-tensor Pareto frontiers go up as artifact `entropy_frontiers`. Returns an
//   AutotuneResult detail (methods/entropy_code/entropy_code_results.proto).
// verify of a package (a dependency's output has `package_digest`; a VerifyVariant of the
//   shared verify job, profiler-agent/handlers.h): serves the package in
//   the built-in engine like any verify (measured/quality/budgets), and adds a
//   PackageVerifyResult detail whose `entropy` holds:
//   greedy outputs on task prompts against the dense twin (the source quantised with the
//   same scheme, never coded) — any difference fails the job —, fused-vs-dense GEMV
//   equality and batch-1 latency per tensor, end-to-end latency of package vs dense twin,
//   and the package's resident weight memory, which is what measured.weight_memory_mib and
//   the weight budget report.

#include "absl/status/statusor.h"
#include "common/agent_runtime.h"
#include "profiler-agent/handlers.h"
#include "profiler-agent/ml_jobs.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::profiler {

JobHandler MakeAutotuneHandler(MlJobConfig config);

// True when `ctx`'s inputs name a package (then the verify handler delegates here).
bool HasPackageInput(const JobContext& ctx);
absl::StatusOr<v1::JobOutput> RunPackageVerifyJob(JobContext& ctx, const MlJobConfig& config);

// Registers autotune and the package verify variant when the agent offers the built-in
// engine (cmake/method_jobs.cmake).
void RegisterEntropyAgentJobs(AgentJobs& jobs);

}  // namespace tailor::profiler

#endif  // TAILOR_METHODS_ENTROPY_CODE_JOBS_AGENT_JOBS_H_
