#ifndef TAILOR_COMMON_CONTRACT_IO_H_
#define TAILOR_COMMON_CONTRACT_IO_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tailor/v1/contract.pb.h"

namespace tailor {

enum class ContractFormat { kAuto, kTextProto, kJson };

// Largest contract file accepted (bytes).
inline constexpr size_t kMaxContractBytes = 256 * 1024;

// Parses a contract in textproto or JSON (kAuto: JSON when the first non-space character is
// '{'). Errors are INVALID_ARGUMENT naming the source, line and column and what was wrong,
// e.g. "npc.textproto:4:11: unknown field 'batch'". Unknown fields are errors in both formats.
absl::StatusOr<v1::DeploymentContract> ParseContract(absl::string_view text,
                                                    ContractFormat format,
                                                    absl::string_view source_name);

// Reads and parses a file; the format is taken from the extension (.json -> JSON,
// .textproto/.txtpb/.pbtxt -> textproto, else auto). NOT_FOUND when the file is missing.
absl::StatusOr<v1::DeploymentContract> LoadContractFile(const std::string& path);

// The limits a contract received over the wire must meet, whatever client sent it (the
// coordinator checks them before validating): at most kMaxContractBytes encoded, and no
// unknown fields at any depth (the same rule as in files). INVALID_ARGUMENT naming the size,
// or the field path and number of the first unknown field.
absl::Status CheckWireContract(const v1::DeploymentContract& contract);

// Canonical JSON of a contract (protobuf JSON mapping, field names as in the .proto).
std::string ContractToJson(const v1::DeploymentContract& contract);

}  // namespace tailor

#endif  // TAILOR_COMMON_CONTRACT_IO_H_
