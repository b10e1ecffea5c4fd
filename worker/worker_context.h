#ifndef TAILOR_WORKER_WORKER_CONTEXT_H_
#define TAILOR_WORKER_WORKER_CONTEXT_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/agent_runtime.h"
#include "common/rank_env.h"
#include "tailor/v1/job_output.pb.h"
#include "tailor/v1/agent.pb.h"
#include "worker/dist.h"

namespace tailor::worker {

// What a job handler sees on every rank. Only rank 0 has `job` (progress, artifacts,
// completion go through it); the other ranks compute and take part in collectives.
struct WorkerContext {
  const RankEnv& env;
  const v1::AcquireJobResponse& assignment;
  Dist* dist;
  JobContext* job = nullptr;  // rank 0 only
  std::string work_dir;

  bool is_rank0() const { return env.rank == 0; }
  const v1::DeploymentContract& contract() const { return assignment.contract(); }
  // Rank-0 progress; a no-op elsewhere so handlers need no rank checks.
  void Progress(double fraction, const std::string& message, int64_t step = 0,
                int64_t total = 0, const std::map<std::string, double>& metrics = {}) {
    if (job != nullptr) {
      job->ReportProgress(fraction, message, step, total, metrics).IgnoreError();
    }
  }
  bool Cancelled() const { return job != nullptr && job->Cancelled(); }
};

using WorkerHandler = std::function<absl::StatusOr<v1::JobOutput>(WorkerContext&)>;

// Job kinds the worker runs (rank, search, distill, ...), registered by the ML libraries.
void RegisterWorkerHandler(const std::string& kind, WorkerHandler handler);
const WorkerHandler* FindWorkerHandler(const std::string& kind);
void RegisterBuiltinHandlers();

}  // namespace tailor::worker

#endif  // TAILOR_WORKER_WORKER_CONTEXT_H_
