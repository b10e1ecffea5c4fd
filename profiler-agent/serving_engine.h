#ifndef TAILOR_PROFILER_AGENT_SERVING_ENGINE_H_
#define TAILOR_PROFILER_AGENT_SERVING_ENGINE_H_

// The serving engine a profiler agent profiles and verifies in (docs/costmodel.md,
// "Engines"). A cost table or a verification only means something in the engine the model
// will be served with, so an agent serves exactly one engine, registers its identity
// (AgentInfo.engine / engine_version) and runs only contracts naming it (target.engine):
//
//   tailor-builtin  tailor's eager LibTorch engine (ml_jobs.h): tests, and the fallback on
//                   machines without node
//   llama.cpp       node-llama-cpp's prebuilt llama.cpp, every model in a child process of its
//                   own (llama_cpp_engine.h)
//
// Built only with LibTorch (TAILOR_AGENT_WITH_TORCH): every engine checks models against
// tailor's own forward pass.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compression/costmodel/drift_check.h"
#include "compression/costmodel/profiler.h"
#include "compression/data/text_dataset.h"
#include "compression/model/config.h"
#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::profiler {

using MlProgressFn = costmodel::ProgressFn;

struct EngineIdentity {
  std::string name;     // what target.engine names
  std::string version;  // what target.engine_version names
  std::string build;    // what else the engine reports about itself (llama.cpp's release)
  int threads = 1;      // threads the engine serves a request with
};

// FAILED_PRECONDITION naming both unless the contract's target.engine / engine_version (empty:
// the built-in engine's) are `identity`'s: numbers from another engine would be mislabelled.
absl::Status CheckContractEngine(const v1::DeploymentContract& contract,
                                 const EngineIdentity& identity);

// The profile job's result without the runtime: the table as PutCostTable takes it, and the
// profiler's full result.
struct ProfileJobOutput {
  v1::CostTable table;
  costmodel::ProfileResult result;
};

// The first sequences of the contract's data.eval (verify_data.h), read as the distill job
// reads them: what verify measures the served model's perplexity on.
struct EvalSample {
  std::string digest;
  std::vector<data::TokenSequence> sequences;
};

// A model verify serves: tailor's model folder, or the parent's own folder (a Hugging Face
// checkpoint or a tailor model); `eval` is null when the contract has no data.eval. With
// `parent_dir` (the contract holds a budget on request time relative to the parent), the
// parent's own architecture is served alongside the model and those budgets are judged
// against it (request_latency.h MeasureServesBesideParent).
struct ModelToServe {
  std::string dir;
  bool is_parent = false;
  const EvalSample* eval = nullptr;
  std::string parent_dir;
};

class ServingEngine {
 public:
  virtual ~ServingEngine() = default;
  virtual EngineIdentity identity() const = 0;

  // A validated cost table of the parent in `parent_dir` under the contract's workload.
  // `work_dir` is the job's scratch space.
  virtual absl::StatusOr<ProfileJobOutput> Profile(const v1::DeploymentContract& contract,
                                                   const std::string& parent_dir,
                                                   const std::string& work_dir,
                                                   const MlProgressFn& progress) = 0;

  // The model served under the contract: measured costs, quality and one BudgetCheck per
  // budget the contract sets.
  virtual absl::StatusOr<v1::JobOutput> Verify(const v1::DeploymentContract& contract,
                                               const ModelToServe& model,
                                               const std::string& work_dir,
                                               const MlProgressFn& progress) = 0;

  // The drift check's half of a recompression: `table` (the parent's, measured in an
  // earlier engine version) against fresh architectures served in this engine as it is now
  // (costmodel/drift_check.h), under the contract's workload.
  // The settle's rungs: each architecture of the parent's space (in `parent_dir`), with
  // dummy weights drawn from the contract's seed, served under the contract's workload as
  // Verify measures a model (the whole request at the contract's percentile, served again
  // while interference shows, memory as the engine allocates it), in order.
  virtual absl::StatusOr<std::vector<v1::ModelCosts>> Measure(
      const v1::DeploymentContract& contract, const std::string& parent_dir,
      const std::vector<model::HybridConfig>& architectures, const std::string& work_dir,
      const MlProgressFn& progress) = 0;

  virtual absl::StatusOr<costmodel::RecheckResult> Recheck(const v1::DeploymentContract& contract,
                                                           const std::string& parent_dir,
                                                           const v1::CostTable& table,
                                                           const std::string& work_dir,
                                                           const MlProgressFn& progress) = 0;
};

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_SERVING_ENGINE_H_
