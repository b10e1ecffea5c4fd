// Fuzz target: contract parsing (textproto or JSON, chosen at compile time by
// TAILOR_FUZZ_CONTRACT_JSON) and validation. Invariants on every accepted contract:
//   - CheckContract/ValidateContract agree, and every error names a field;
//   - WithDefaults is idempotent and keeps a valid contract valid;
//   - a valid contract's canonical JSON (ContractToJson) parses back to the same contract.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/contract_io.h"
#include "coordinator/contract_validation.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

#ifdef TAILOR_FUZZ_CONTRACT_JSON
constexpr tailor::ContractFormat kFormat = tailor::ContractFormat::kJson;
#else
constexpr tailor::ContractFormat kFormat = tailor::ContractFormat::kTextProto;
#endif

bool Same(const tailor::v1::DeploymentContract& a, const tailor::v1::DeploymentContract& b) {
  google::protobuf::util::MessageDifferencer diff;
  // NaN budgets or hyper-parameters are legal input (validation rejects them); a NaN never
  // equals itself, so compare them as equal here.
  diff.set_float_comparison(google::protobuf::util::MessageDifferencer::EXACT);
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  diff.set_field_comparator(&comparator);
  return diff.Compare(a, b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = tailor::ParseContract(text, kFormat, "fuzz");
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               parsed.status().ToString().c_str());
    return 0;
  }
  const tailor::v1::DeploymentContract& contract = *parsed;

  const auto errors = tailor::coordinator::CheckContract(contract);
  const absl::Status valid = tailor::coordinator::ValidateContract(contract);
  FUZZ_CHECK(errors.empty() == valid.ok(), "%zu errors vs %s", errors.size(),
             valid.ToString().c_str());
  for (const auto& e : errors) FUZZ_CHECK(!e.field.empty(), "error without a field: %s",
                                          e.reason.c_str());

  const tailor::v1::DeploymentContract defaulted = tailor::coordinator::WithDefaults(contract);
  FUZZ_CHECK(Same(tailor::coordinator::WithDefaults(defaulted), defaulted),
             "WithDefaults is not idempotent");
  if (valid.ok()) {
    const absl::Status still = tailor::coordinator::ValidateContract(defaulted);
    FUZZ_CHECK(still.ok(), "defaults made a valid contract invalid: %s",
               still.ToString().c_str());
  }

  // The canonical JSON form is promised for valid contracts (validation refuses strings that
  // are not UTF-8, which JSON cannot carry).
  if (!valid.ok()) return 0;
  const std::string json = tailor::ContractToJson(contract);
  auto reparsed = tailor::ParseContract(json, tailor::ContractFormat::kJson, "fuzz-json");
  if (json.size() <= tailor::kMaxContractBytes) {
    FUZZ_CHECK(reparsed.ok(), "canonical JSON does not parse: %s\n%s",
               reparsed.status().ToString().c_str(), json.c_str());
    FUZZ_CHECK(Same(*reparsed, contract), "JSON round trip changed the contract:\n%s",
               json.c_str());
  }
  return 0;
}
