#include "methods/api/graph_builder.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tailor::methods {

void GraphBuilder::Agent(std::string key, std::string kind, const v1::ResourceRequest& block,
                         std::vector<std::string> deps) {
  v1::ResourceSpec spec = Spec(block, kPlacementAgent);
  spec.set_device_kind(contract_.target().device_kind());
  spec.set_nodes(1);
  spec.set_ranks_per_node(1);
  Push(std::move(key), std::move(kind), std::move(spec), std::move(deps));
}

void GraphBuilder::Launcher(std::string key, std::string kind, const v1::ResourceRequest& block,
                            std::vector<std::string> deps) {
  Push(std::move(key), std::move(kind), Spec(block, kPlacementLauncher), std::move(deps));
}

absl::StatusOr<std::vector<PlannedJob>> GraphBuilder::Finish() && {
  if (!error_.ok()) return error_;
  return std::move(jobs_);
}

v1::ResourceSpec GraphBuilder::Spec(const v1::ResourceRequest& r, const char* placement) const {
  v1::ResourceSpec spec;
  spec.set_nodes(r.nodes());
  spec.set_ranks_per_node(r.ranks_per_node());
  spec.set_gpus_per_node(r.gpus_per_node());
  spec.set_gpu_type(r.gpu_type());
  spec.set_memory_mib(r.memory_mib());
  spec.set_time_limit_s(r.time_limit_s());
  spec.set_max_attempts(r.max_attempts());
  spec.set_priority(contract_.priority());
  spec.set_placement(placement);
  return spec;
}

void GraphBuilder::Push(std::string key, std::string kind, v1::ResourceSpec spec,
                        std::vector<std::string> deps) {
  for (const PlannedJob& job : jobs_) {
    if (job.key == key) error_ = absl::InternalError(absl::StrCat("duplicate job key ", key));
  }
  for (const std::string& dep : deps) {
    bool found = false;
    for (const PlannedJob& job : jobs_) found |= job.key == dep;
    if (!found) {
      error_ = absl::InternalError(absl::StrCat("job ", key, " depends on unplanned ", dep));
    }
  }
  jobs_.push_back({std::move(key), std::move(kind), std::move(deps), std::move(spec)});
}

}  // namespace tailor::methods
