#ifndef TAILOR_COORDINATOR_PLANNER_H_
#define TAILOR_COORDINATOR_PLANNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/contract_validation.h"
#include "methods/api/graph_builder.h"
#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::coordinator {

// Version of the layer family whose costs a profile job measures; part of the fingerprint so
// that changing the model family invalidates every cost table.
inline constexpr char kLayerFamilyVersion[] = "hybrid-v1";

using methods::PlannedJob;

// Builds the job graph of the contract's method (methods/<method>/). The graph is
// topologically ordered: every job appears after its dependencies.
absl::StatusOr<std::vector<PlannedJob>> PlanCampaign(const ValidatedContract& contract);
// Validates and defaults `contract` first (for tools and tests that hold a raw contract).
absl::StatusOr<std::vector<PlannedJob>> PlanCampaign(const v1::DeploymentContract& contract);

// A recompression's graph (Coordinator::Recompress): `plan` behind a drift_check job that
// every root job waits for, so nothing is profiled or trained before the drift check decided
// what is still valid. A plan that verifies nothing is returned as is.
absl::StatusOr<std::vector<PlannedJob>> WithDriftCheck(const v1::DeploymentContract& contract,
                                                       std::vector<PlannedJob> plan);

// Hex sha256 of (device kind, engine, engine version, precision, batch, input, output, cached
// prefix lengths, layer-family version): the key of cost tables.
std::string TargetFingerprint(const ValidatedContract& contract);
// Defaults `contract` first, so "engine unset" and "engine: tailor-builtin" share cost tables.
std::string TargetFingerprint(const v1::DeploymentContract& contract);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_PLANNER_H_
