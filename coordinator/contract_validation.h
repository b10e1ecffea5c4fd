#ifndef TAILOR_COORDINATOR_CONTRACT_VALIDATION_H_
#define TAILOR_COORDINATOR_CONTRACT_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::coordinator {

// One violated rule: the field path as written in a contract ("workload.batch_size",
// "resources.search.nodes", "entropy.table_log[1]") and why.
struct FieldError {
  std::string field;
  std::string reason;  // e.g. "must be >= 1, got 0"
  std::string ToString() const { return field + ": " + reason; }
};

// Checks every rule of docs/contract.md. Returns all violations in field order (empty = valid).
std::vector<FieldError> CheckContract(const v1::DeploymentContract& contract);

// OK, or INVALID_ARGUMENT whose message lists every violation ("a: why; b: why").
absl::Status ValidateContract(const v1::DeploymentContract& contract);

// Returns the contract with every documented default filled in (engine, precision, search
// hyper-parameters, resources, priority, team, seed ...). Applying it twice is a no-op.
// The coordinator stores and hands out the defaulted contract, so workers never guess.
v1::DeploymentContract WithDefaults(const v1::DeploymentContract& contract);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_CONTRACT_VALIDATION_H_
