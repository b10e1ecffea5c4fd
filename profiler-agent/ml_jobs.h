#ifndef TAILOR_PROFILER_AGENT_ML_JOBS_H_
#define TAILOR_PROFILER_AGENT_ML_JOBS_H_

// The `profile` and `verify` jobs (built only with LibTorch: TAILOR_AGENT_WITH_TORCH).
//
// profile: reads the parent's config (contract parent.path, or the parent artifact),
//   profiles a cost table in the built-in engine under the contract (device, precision,
//   batch and lengths) and validates it on held-out architectures
//   (costmodel::ProfileCostTable), stores it with PutCostTable, uploads the per-architecture
//   validation as an artifact, and returns a ProfileResult (job_output.proto; errors as
//   fractions: 0.032 = 3.2%) as its output's detail.
// verify: unless a method's VerifyVariant takes the job (handlers.h), serves the finished model under the contract and fills its output's measured
//   costs, quality and budgets (one BudgetCheck per budget the contract sets). The model is
//   the dependency output's `model_digest` (whichever job produced it), else the contract's
//   parent (path or artifact). A model that fails validation (bad archive, config or weights) fails the job
//   with INVALID_ARGUMENT and the reason (not retried).
//
// Both check that the contract's engine is this one (tailor-builtin at kEngineVersion):
// FAILED_PRECONDITION otherwise, since numbers from another engine would be mislabelled.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/agent_runtime.h"
#include "compression/costmodel/profiler.h"
#include "profiler-agent/handlers.h"
#include "tailor/v1/job_output.pb.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::profiler {

struct MlJobConfig {
  std::string device = "cpu";       // "cpu" or "cuda:N"
  std::string device_kind = "cpu";  // stored in the cost table
  // Verify: measured repetitions and task samples per suite (tests shrink them).
  int verify_repetitions = 15;
  int verify_task_samples = 64;
  // Profile: overrides for tests (0 = the profiler's defaults).
  int profile_rounds = 0;
  int profile_validation_architectures = 0;
};

// The agent's device and its --profile-*/--verify-* overrides.
MlJobConfig MlJobConfigOf(const DeviceDescription& device, const HandlerOptions& options);

// Engine, precision (default FP32 on cpu, BF16 on cuda) and workload from the contract.
absl::StatusOr<engine::EngineOptions> EngineOptionsFor(const v1::DeploymentContract& contract,
                                                       const MlJobConfig& config);

using MlProgressFn = costmodel::ProgressFn;

// The profile job without the runtime: table (as the proto PutCostTable takes) and the
// profiler's full result. `parent_dir` holds config.json.
struct ProfileJobOutput {
  v1::CostTable table;
  costmodel::ProfileResult result;
};
absl::StatusOr<ProfileJobOutput> RunProfile(const v1::DeploymentContract& contract,
                                            const std::string& parent_dir,
                                            const MlJobConfig& config,
                                            const MlProgressFn& progress);

// The verify job without the runtime. `model_dir` holds config.json + model.safetensors.
absl::StatusOr<v1::JobOutput> RunVerify(const v1::DeploymentContract& contract,
                                        const std::string& model_dir, const MlJobConfig& config,
                                        const MlProgressFn& progress);

JobHandler MakeProfileHandler(MlJobConfig config);
// `variants`: kinds of model a method verifies its own way (VerifyVariant); the first whose
// `applies` holds takes the job.
JobHandler MakeVerifyHandler(MlJobConfig config, std::vector<VerifyVariant> variants = {});

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_ML_JOBS_H_
