// The job kinds this worker build runs: the shared distill job, then each method's launcher
// jobs from the generated list (cmake/method_jobs.cmake, methods/*/jobs/CMakeLists.txt).
#include "worker/worker_context.h"

namespace tailor::worker {

void RegisterDistillJob();
#define TAILOR_METHOD_JOBS(register_fn) void register_fn();
#include "method_jobs.inc"
#undef TAILOR_METHOD_JOBS

void RegisterBuiltinHandlers() {
  RegisterDistillJob();
#define TAILOR_METHOD_JOBS(register_fn) register_fn();
#include "method_jobs.inc"
#undef TAILOR_METHOD_JOBS
}

}  // namespace tailor::worker
