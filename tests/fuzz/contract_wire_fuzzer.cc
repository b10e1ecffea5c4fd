// Fuzz target: a contract as the coordinator receives it over gRPC (binary protobuf from any
// client), through CheckWireContract and validation. Invariants:
//   - CheckWireContract refuses exactly the contracts over kMaxContractBytes encoded or with
//     unknown fields at any depth, always with INVALID_ARGUMENT and a message naming them;
//   - a contract it accepts re-encodes within the limit and parses back to the same contract
//     (nothing unknown rides along into the store);
//   - CheckContract and ValidateContract agree on what passes the wire check.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "common/contract_io.h"
#include "coordinator/contract_validation.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tailor::v1::DeploymentContract contract;
  if (!contract.ParseFromArray(data, static_cast<int>(size))) return 0;
  const absl::Status wire = tailor::CheckWireContract(contract);
  if (!wire.ok()) {
    FUZZ_CHECK(wire.code() == absl::StatusCode::kInvalidArgument, "%s", wire.ToString().c_str());
    FUZZ_CHECK(absl::StartsWith(wire.message(), "contract"), "unnamed: %s",
               wire.ToString().c_str());
    FUZZ_CHECK(contract.ByteSizeLong() > tailor::kMaxContractBytes ||
                   absl::StrContains(wire.message(), "unknown field number"),
               "refused for another reason: %s", wire.ToString().c_str());
    return 0;
  }
  const std::string bytes = contract.SerializeAsString();
  FUZZ_CHECK(bytes.size() <= tailor::kMaxContractBytes, "%zu bytes passed", bytes.size());
  tailor::v1::DeploymentContract again;
  FUZZ_CHECK(again.ParseFromString(bytes), "re-encoded contract does not parse");
  // NaN budgets or hyper-parameters are legal wire input (validation refuses them); a NaN
  // never equals itself, so they compare as equal here.
  google::protobuf::util::MessageDifferencer diff;
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  diff.set_field_comparator(&comparator);
  FUZZ_CHECK(diff.Compare(again, contract),
             "an accepted contract changed on re-encoding (unknown fields kept?)");
  const auto errors = tailor::coordinator::CheckContract(contract);
  const absl::Status valid = tailor::coordinator::ValidateContract(contract);
  FUZZ_CHECK(errors.empty() == valid.ok(), "%zu errors vs %s", errors.size(),
             valid.ToString().c_str());
  return 0;
}
