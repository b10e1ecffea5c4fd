#ifndef TAILOR_COORDINATOR_PLANNER_H_
#define TAILOR_COORDINATOR_PLANNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::coordinator {

// Version of the layer family whose costs a profile job measures; part of the fingerprint so
// that changing the model family invalidates every cost table.
inline constexpr char kLayerFamilyVersion[] = "hybrid-v1";

// One node of a campaign's job graph. `key` is unique within the campaign and is also the
// job kind except where one kind appears twice (e.g. "verify" and "verify_baseline" are both
// kind "verify").
struct PlannedJob {
  std::string key;
  std::string kind;
  std::vector<std::string> depends_on;  // keys of jobs that must succeed (or be skipped) first
  v1::ResourceSpec resources;           // placement "agent" or "launcher"
};

// Builds the job graph for a validated, defaulted contract (see WithDefaults). The graph is
// topologically ordered: every job appears after its dependencies.
absl::StatusOr<std::vector<PlannedJob>> PlanCampaign(const v1::DeploymentContract& contract);

// Hex sha256 of (device kind, engine, engine version, precision, batch, input, output, cached
// prefix lengths, layer-family version): the key of cost tables.
std::string TargetFingerprint(const v1::DeploymentContract& contract);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_PLANNER_H_
