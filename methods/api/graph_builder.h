#ifndef TAILOR_METHODS_API_GRAPH_BUILDER_H_
#define TAILOR_METHODS_API_GRAPH_BUILDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::methods {

// One node of a campaign's job graph. `key` is unique within the campaign and is also the
// job kind except where one kind appears twice (e.g. "verify" and "verify_baseline" are both
// kind "verify").
struct PlannedJob {
  std::string key;
  std::string kind;
  std::vector<std::string> depends_on;  // keys of jobs that must succeed (or be skipped) first
  v1::ResourceSpec resources;           // placement "agent" or "launcher"
};

// Appends jobs while keeping the graph's invariants in one place: unique keys, and every
// dependency already present (which makes the list topologically ordered by construction).
// Methods plan on it; a planner bug fails the submission instead of writing a graph that can
// never finish.
class GraphBuilder {
 public:
  // `contract` must outlive the builder and carry its defaults (priority, device kind).
  explicit GraphBuilder(const v1::DeploymentContract& contract) : contract_(contract) {}

  // A job of `kind` under `key`, placed where the kind's declaration says (JobKind,
  // methods/api/method.h): an agent job is pulled by the profiler agent of the target's
  // device kind, one process (nodes and ranks 1 whatever the block says); a launcher job is
  // started by the coordinator's launcher. A kind no method declares fails Finish().
  void Add(std::string key, const std::string& kind, const v1::ResourceRequest& block,
           std::vector<std::string> deps);

  absl::StatusOr<std::vector<PlannedJob>> Finish() &&;

 private:
  v1::ResourceSpec Spec(const v1::ResourceRequest& r) const;
  void Push(std::string key, std::string kind, v1::ResourceSpec spec,
            std::vector<std::string> deps);

  const v1::DeploymentContract& contract_;
  std::vector<PlannedJob> jobs_;
  absl::Status error_;
};

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_API_GRAPH_BUILDER_H_
