#include <map>

#include "absl/synchronization/mutex.h"
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
  absl::MutexLock lock(&registry_mu);
  Registry()[kind] = std::move(handler);
}

const WorkerHandler* FindWorkerHandler(const std::string& kind) {
  absl::MutexLock lock(&registry_mu);
  auto it = Registry().find(kind);
  return it == Registry().end() ? nullptr : &it->second;
}

}  // namespace tailor::worker
