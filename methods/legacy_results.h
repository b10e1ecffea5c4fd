#ifndef TAILOR_METHODS_LEGACY_RESULTS_H_
#define TAILOR_METHODS_LEGACY_RESULTS_H_

// Converting the job results the schema-5 release stored as google.protobuf.Struct into the
// typed JobOutput (storage migration 6). The typed messages keep the old keys as field names,
// so each top-level key moves by name: into the kind's detail message when that message
// declares it, else into JobOutput. Parsing is strict: a key that fits neither fails the
// conversion, and with it the migration, rather than be dropped.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/struct.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::methods {

// The detail messages a job of `kind` may carry: the shared kinds' (profile, distill) and
// every built-in method's JobKinds() for that kind, in registration order.
std::vector<const google::protobuf::Descriptor*> DetailTypesOf(const std::string& kind);

// `result`, stored by the schema-5 release for a job of `kind`, as its JobOutput: without a
// detail when every key is a JobOutput field, else with the first of DetailTypesOf(kind) that
// takes the remaining keys. INVALID_ARGUMENT naming the keys when none does.
absl::StatusOr<v1::JobOutput> UpgradeLegacyResult(const std::string& kind,
                                                  const google::protobuf::Struct& result);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_LEGACY_RESULTS_H_
