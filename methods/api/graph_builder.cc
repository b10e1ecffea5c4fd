#include "methods/api/graph_builder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "methods/registry.h"

namespace tailor::methods {

void GraphBuilder::Add(std::string key, const std::string& kind,
                       const v1::ResourceRequest& block, std::vector<std::string> deps) {
  const JobKind* declared = FindJobKind(kind);
  if (declared == nullptr) {
    error_ = absl::InternalError(absl::StrCat("job ", key, ": no method declares kind ", kind));
    return;
  }
  v1::ResourceSpec spec = Spec(block);
  spec.set_placement(std::string(PlacementName(declared->placement)));
  if (declared->placement == Placement::kAgent) {
    spec.set_device_kind(contract_.target().device_kind());
    spec.set_engine(contract_.target().engine());
    spec.set_engine_version(contract_.target().engine_version());
    spec.set_nodes(1);
    spec.set_ranks_per_node(1);
  }
  Push(std::move(key), kind, std::move(spec), std::move(deps));
}

absl::StatusOr<std::vector<PlannedJob>> GraphBuilder::Finish() && {
  if (!error_.ok()) return error_;
  return std::move(jobs_);
}

v1::ResourceSpec GraphBuilder::Spec(const v1::ResourceRequest& r) const {
  v1::ResourceSpec spec;
  spec.set_nodes(r.nodes());
  spec.set_ranks_per_node(r.ranks_per_node());
  spec.set_gpus_per_node(r.gpus_per_node());
  spec.set_gpu_type(r.gpu_type());
  spec.set_memory_mib(r.memory_mib());
  spec.set_time_limit_s(r.time_limit_s());
  spec.set_max_attempts(r.max_attempts());
  spec.set_priority(contract_.priority());
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
