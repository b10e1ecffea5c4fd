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
// Both run in the agent's serving engine (serving_engine.h): the built-in one here
// (RunProfile, RunVerify), or llama.cpp (llama_cpp_engine.h). Each checks that the contract
// names its engine: FAILED_PRECONDITION otherwise, since numbers from another engine would be
// mislabelled.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/agent_runtime.h"
#include "compression/costmodel/cost_table.h"
#include "compression/costmodel/profiler.h"
#include "compression/engine/engine.h"
#include "profiler-agent/handlers.h"
#include "profiler-agent/request_latency.h"
#include "profiler-agent/serving_engine.h"
#include "tailor/v1/job_output.pb.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::profiler {

struct MlJobConfig {
  std::string device = "cpu";       // "cpu" or "cuda:N"
  std::string device_kind = "cpu";  // stored in the cost table
  // Verify: measured repetitions and task samples per suite (tests shrink them).
  int verify_repetitions = 15;
  int verify_task_samples = 64;
  // Verify: serves of the student judged on their median (request_latency.h MeasureServes),
  // as the measure job judges the settle's rungs on the median of 3 rounds.
  int verify_serves = 3;
  // Verify and the measure job: more serves of a figure within the band of a budget
  // (request_latency.h CloseCalls).
  // Two groups of three, each after the agent's --close-call-pause-s (60 s: the host's slow
  // minutes, CloseCalls::groups); none here, for the tests that build their own config.
  CloseCalls close_calls = {6, 0.10, 2, absl::ZeroDuration()};
  // The measure job: its rounds served again, up to `remeasures` times `pause` apart, while
  // the candidates measure further above their prices than their table's validated worst
  // error, and never less than `bound` (request_latency.h SlowHostCheck: a median over ~8
  // candidates of 3-round medians still moves by +-5% on a quiet host). The agent's
  // --slow-host-pause-s is 60 s; none here, for the tests that build their own config.
  SlowHostCheck slow_host = {{}, 0.10, 2, absl::ZeroDuration(), nullptr};
  // Of data.eval, when the contract has one: enough to cover the usual held-out set, so the
  // served perplexity is over the tokens the distill job's figure is.
  int verify_eval_sequences = 256;
  // Profile: overrides for tests (0 = the profiler's defaults).
  int profile_rounds = 0;
  int profile_validation_architectures = 0;
  // Profile (llama.cpp, the whole-model profiler and its recheck): how often a model whose
  // requests show interference is served again (-1 = the profiler's default, 2). Tests of
  // tiny models set 0: node's own jitter spreads their sub-millisecond layers past any
  // threshold, so every model would be served three times for nothing.
  int profile_remeasures = -1;
  // Profile (llama.cpp): rounds of every model while the table's held-out latency MAPE is
  // over profile_target_latency_mape (WholeModelProfileOptions::max_rounds). The agent's
  // --profile-max-rounds is 3; one here, for the tests that build their own config.
  int profile_max_rounds = 1;
  // Profile (llama.cpp, per-layer layouts): how deep a profiling model stacks its node
  // (WholeModelProfileOptions::stack_depth; 0 = at the parent's positions).
  int profile_stack_depth = 0;
  double profile_target_latency_mape = costmodel::kTrustedLatencyMape;
  // tailor-builtin: LibTorch intra-op threads serving each request; part of the engine's
  // version (engine::BuiltinEngineVersion).
  int builtin_threads = 1;
};

// A wait that sleeps in steps of at most a second, reporting `why` and the seconds left at
// `fraction` before each: a cancelled job (progress false) stops within one.
std::function<bool(absl::Duration)> PauseReporting(const MlProgressFn& progress,
                                                   double fraction, const std::string& why);

// `close` with PauseReporting's wait.
CloseCalls CloseCallsReporting(CloseCalls close, const MlProgressFn& progress,
                               double fraction);

// The agent's device and its --profile-*/--verify-* overrides.
MlJobConfig MlJobConfigOf(const DeviceDescription& device, const HandlerOptions& options);

// The built-in engine's identity on `threads` (tailor-builtin at BuiltinEngineVersion).
EngineIdentity BuiltinIdentity(int threads = 1);

// Engine, precision (default FP32 on cpu, BF16 on cuda) and workload from the contract,
// after CheckContractEngine against the built-in engine.
absl::StatusOr<engine::EngineOptions> EngineOptionsFor(const v1::DeploymentContract& contract,
                                                       const MlJobConfig& config);
// The same without the engine check: how tailor's own forward pass runs a model verified in
// another engine (its quality, its reference distribution).
absl::StatusOr<engine::EngineOptions> TailorEngineOptionsFor(
    const v1::DeploymentContract& contract, const MlJobConfig& config);

// The parent a profile job profiles: its internal config and its cost-table key, both from
// one read of config.json (the key the coordinator computed from it decides reuse). A bad
// config is INVALID_ARGUMENT ("parent model failed validation: ...").
struct ParentForProfile {
  model::HybridConfig config;
  std::string architecture;
};
absl::StatusOr<ParentForProfile> ReadParentForProfile(const v1::DeploymentContract& contract,
                                                    const std::string& parent_dir);

// The profile job in the built-in engine. `parent_dir` holds config.json.
absl::StatusOr<ProfileJobOutput> RunProfile(const v1::DeploymentContract& contract,
                                            const std::string& parent_dir,
                                            const MlJobConfig& config,
                                            const MlProgressFn& progress);

// The verify job in the built-in engine. `model_dir` holds config.json + model.safetensors;
// with `eval`, the served model's perplexity on it goes into the quality; with `parent_dir`,
// the parent's architecture is served alongside (ModelToServe.parent_dir).
absl::StatusOr<v1::JobOutput> RunVerify(const v1::DeploymentContract& contract,
                                        const std::string& model_dir, const MlJobConfig& config,
                                        const MlProgressFn& progress,
                                        const EvalSample* eval = nullptr,
                                        const std::string& parent_dir = "");

// The drift check's re-measurement in the built-in engine: each architecture served as verify
// serves (engine::Engine::Measure, dummy weights), latency the robust per-step figure its
// tables predict, memory the peak.
absl::StatusOr<costmodel::RecheckResult> RunRecheck(const v1::DeploymentContract& contract,
                                                    const std::string& parent_dir,
                                                    const v1::CostTable& table,
                                                    const MlJobConfig& config,
                                                    const MlProgressFn& progress);

// The settle's rungs in the built-in engine (ServingEngine::Measure): each architecture with
// dummy weights, served as verify serves a model.
absl::StatusOr<std::vector<v1::ModelCosts>> RunMeasure(
    const v1::DeploymentContract& contract, const std::vector<model::HybridConfig>& architectures,
    const MlJobConfig& config, const MlProgressFn& progress);

// The built-in engine as a ServingEngine (RunProfile, RunVerify, RunRecheck, RunMeasure).
std::shared_ptr<ServingEngine> MakeBuiltinEngine(const MlJobConfig& config);

// Exact-match accuracy over the task suites (and the parameter count) of a model loaded in
// tailor's engine.
absl::StatusOr<v1::ModelQuality> TaskQuality(engine::Engine& eng, uint64_t seed, int samples);

// One BudgetCheck in `out` per budget `b` sets, judged on out.measured(); a budget relative
// to the parent on request time names out.parent_beside()'s figure when there is one.
void JudgeBudgets(const v1::Budget& b, v1::JobOutput& out);

// A verify's serving: `serves` serves of the model (`serve_model`) judged on their median
// (MeasureServes) into out.measured(); with `serve_parent`, alternating with serves of the
// parent into out.parent_beside() (MeasureServesBesideParent). The budgets to judge: the
// contract's, resolved against the parent served alongside when there is one.
using ServeFn = std::function<absl::StatusOr<v1::ModelCosts>()>;
absl::StatusOr<v1::Budget> MeasureVerified(const v1::DeploymentContract& contract, int serves,
                                           const ServeFn& serve_model,
                                           const ServeFn& serve_parent, const CloseCalls& close,
                                           v1::JobOutput& out);

// Codes that mean "this model is unusable", not "try again"; and such an error restated.
bool IsBadModel(absl::StatusCode code);
absl::Status BadModel(absl::string_view what, const absl::Status& st);

// The parent's own architecture served kParentServes times as the measure job serves a
// candidate (ServingEngine::Measure, dummy weights), judged on the median serve
// (MedianServe): what budgets relative to the parent resolve against
// (CostTable.parent_measured).
inline constexpr int kParentServes = 3;
absl::StatusOr<v1::ModelCosts> MeasureParent(ServingEngine& engine,
                                             const v1::DeploymentContract& contract,
                                             const std::string& parent_dir,
                                             const std::string& work_dir,
                                             const MlProgressFn& progress);

// profile: the engine's validated cost table of the parent with the parent's measurement
// (MeasureParent), stored with PutCostTable; a v1::ProfileResult.
JobHandler MakeProfileHandler(std::shared_ptr<ServingEngine> engine);
// drift_check: the assignment's source_cost_table re-measured (ServingEngine::Recheck) and the
// source's student (the input with a model_digest) verified in this engine; the verification
// is the output's measured / budgets, the verdicts its v1::DriftCheckResult detail.
JobHandler MakeDriftCheckHandler(std::shared_ptr<ServingEngine> engine);
// measure: the candidate architectures of the job it depends on (JobOutput.candidates)
// served in this engine (ServingEngine::Measure); a v1::MeasureResult in the same order.
JobHandler MakeMeasureHandler(MlJobConfig config, std::shared_ptr<ServingEngine> engine);
// `variants`: kinds of model a method verifies its own way (VerifyVariant); the first whose
// `applies` holds takes the job. The parent's quality (the main verify) is scored in tailor's
// engine under `config`, whatever engine verifies.
JobHandler MakeVerifyHandler(MlJobConfig config, std::shared_ptr<ServingEngine> engine,
                             std::vector<VerifyVariant> variants = {});

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_ML_JOBS_H_
