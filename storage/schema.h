#ifndef TAILOR_STORAGE_SCHEMA_H_
#define TAILOR_STORAGE_SCHEMA_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"
#include "storage/database.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::storage {

// Converts a job result the schema-5 release stored (a Struct) of job kind `kind` into the
// typed JobOutput. The conversion knows every method's result types, which storage does not:
// the coordinator passes methods::UpgradeLegacyResult (methods/legacy_results.h).
using LegacyResultConverter = std::function<absl::StatusOr<v1::JobOutput>(
    const std::string& kind, const google::protobuf::Struct& result)>;

// The coordinator's schema as numbered migrations. Append new steps; never edit old ones.
// Step 6 moves every stored job result into its typed output with `convert`; without one,
// a database that still holds such results is refused (FAILED_PRECONDITION) and unchanged.
std::vector<Migration> CoordinatorMigrations(LegacyResultConverter convert = nullptr);

}  // namespace tailor::storage

#endif  // TAILOR_STORAGE_SCHEMA_H_
