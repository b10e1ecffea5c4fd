#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/synchronization/mutex.h"
#include "methods/registry.h"
#include "worker/worker_context.h"

namespace tailor::worker {
namespace {
absl::Mutex registry_mu(absl::kConstInit);
std::map<std::string, WorkerHandler>& Registry() {
  static auto* registry = new std::map<std::string, WorkerHandler>();
  return *registry;
}
}  // namespace

void RegisterWorkerHandler(const std::string& kind, WorkerHandler handler) {
  // Only kinds a method declares as launcher jobs: a handler for anything else would never
  // be given a job, or would take jobs the planner placed on agents.
  const methods::JobKind* declared = methods::FindJobKind(kind);
  if (declared == nullptr || declared->placement != methods::Placement::kLauncher) {
    std::fprintf(stderr, "worker: job kind %s is not declared as a launcher job by any method\n",
                 kind.c_str());
    std::abort();
  }
  absl::MutexLock lock(&registry_mu);
  Registry()[kind] = std::move(handler);
}

const WorkerHandler* FindWorkerHandler(const std::string& kind) {
  absl::MutexLock lock(&registry_mu);
  auto it = Registry().find(kind);
  return it == Registry().end() ? nullptr : &it->second;
}

}  // namespace tailor::worker
