// The job kinds this worker build runs. Each ML issue adds its kinds here.
#include "worker/worker_context.h"

namespace tailor::worker {

void RegisterRankJob();
void RegisterDistillJob();
void RegisterSearchJobs();
void RegisterBlockRemovalJobs();
void RegisterEntropyJobs();

void RegisterBuiltinHandlers() {
  RegisterRankJob();
  RegisterDistillJob();
  RegisterSearchJobs();
  RegisterBlockRemovalJobs();
  RegisterEntropyJobs();
}

}  // namespace tailor::worker
