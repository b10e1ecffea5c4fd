#ifndef TAILOR_COORDINATOR_CONTRACT_VALIDATION_H_
#define TAILOR_COORDINATOR_CONTRACT_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::coordinator {

// Input limits on the contract's strings and lists (docs/operations.md, "Input limits"). The
// whole contract text is capped by kMaxContractBytes (common/contract_io.h); numeric ranges
// are in docs/contract.md.
inline constexpr size_t kMaxNameChars = 64;          // name, team, target.engine(_version)
inline constexpr size_t kMaxParentPathBytes = 4096;  // parent.path
inline constexpr size_t kMaxDeviceKindChars = 128;   // target.device_kind
inline constexpr size_t kMaxGpuTypeChars = 32;       // resources.<block>.gpu_type
inline constexpr int kMaxLabels = 32;                // labels entries
inline constexpr size_t kMaxLabelKeyChars = 63;      // labels key
inline constexpr size_t kMaxLabelValueChars = 256;   // labels value
inline constexpr int kMaxCandidates = 16;            // entropy.* candidate lists

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
