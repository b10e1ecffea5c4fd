#ifndef TAILOR_COORDINATOR_CONTRACT_VALIDATION_H_
#define TAILOR_COORDINATOR_CONTRACT_VALIDATION_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "methods/api/contract_checker.h"
#include "methods/registry.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::coordinator {

// Input limits on the contract's strings and lists (docs/operations.md, "Input limits"). The
// whole contract text is capped by kMaxContractBytes (common/contract_io.h); numeric ranges
// are in docs/contract.md.
inline constexpr size_t kMaxNameChars = 64;          // name, team, target.engine(_version)
inline constexpr size_t kMaxParentPathBytes = 4096;  // parent.path
inline constexpr size_t kMaxParentFormatBytes = 64;  // parent.format
inline constexpr size_t kMaxDeviceKindChars = 128;   // target.device_kind
inline constexpr size_t kMaxGpuTypeChars = 32;       // resources.<block>.gpu_type
inline constexpr int kMaxLabels = 32;                // labels entries
inline constexpr size_t kMaxLabelKeyChars = 63;      // labels key
inline constexpr size_t kMaxLabelValueChars = 256;   // labels value

using methods::FieldError;

// Checks every rule of docs/contract.md: the shared sections here and each method's own
// (methods/<method>/). Returns all violations in field order (empty = valid).
std::vector<FieldError> CheckContract(const v1::DeploymentContract& contract,
                                      const methods::MethodRegistry& registry);
// The same over methods::BuiltinMethods().
std::vector<FieldError> CheckContract(const v1::DeploymentContract& contract);

// OK, or INVALID_ARGUMENT whose message lists every violation ("a: why; b: why").
absl::Status ValidateContract(const v1::DeploymentContract& contract);

// Returns the contract with every documented default filled in (engine, precision, search
// hyper-parameters, resources, priority, team, seed ...). Applying it twice is a no-op.
// The coordinator stores and hands out the defaulted contract, so workers never guess.
v1::DeploymentContract WithDefaults(const v1::DeploymentContract& contract);

// A contract that passed ValidateContract, with its defaults applied: what the coordinator
// stores, plans and fingerprints. Planning and fingerprinting take it, so a submission is
// validated once and defaulted once.
class ValidatedContract {
 public:
  // INVALID_ARGUMENT as ValidateContract, else the defaulted contract.
  static absl::StatusOr<ValidatedContract> From(const v1::DeploymentContract& contract);

  const v1::DeploymentContract& contract() const { return defaulted_; }

  // The stored datasets' digests (IngestDatasets' result): the one change a validated
  // contract takes, since the digests exist only once the data is stored.
  void SetDatasetDigests(const v1::DataParams& stored) {
    v1::DataParams* d = defaulted_.mutable_data();
    if (d->has_calibration()) {
      d->mutable_calibration()->set_artifact_digest(stored.calibration().artifact_digest());
    }
    if (d->has_train()) d->mutable_train()->set_artifact_digest(stored.train().artifact_digest());
    if (d->has_eval()) d->mutable_eval()->set_artifact_digest(stored.eval().artifact_digest());
  }

 private:
  explicit ValidatedContract(v1::DeploymentContract defaulted)
      : defaulted_(std::move(defaulted)) {}

  v1::DeploymentContract defaulted_;
};

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_CONTRACT_VALIDATION_H_
