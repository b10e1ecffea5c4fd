#ifndef TAILOR_COORDINATOR_PARENT_ARCHITECTURE_H_
#define TAILOR_COORDINATOR_PARENT_ARCHITECTURE_H_

// The parent-architecture half of the cost-table key, as the coordinator sees the parent at
// submission (docs/costmodel.md, "Reuse"). A profile job is skipped only for a stored table
// with the same target fingerprint AND the same parent architecture.

#include <string>

#include "absl/status/statusor.h"
#include "storage/blob_store.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::coordinator {

// hf::ParentArchitectureKey of the parent's config.json: `parent.path`/config.json, or the
// first entry of the `parent.artifact_digest` archive. Empty when this coordinator cannot
// read or parse it (e.g. the path exists only on the workers' filesystem): the campaign then
// profiles rather than risk another parent's table, and the profile job, which reads the
// parent itself, reports what is wrong with it. Reads at most one config (16 MiB), never
// weights; call it outside the coordinator's lock.
// The parent's config.json text: parent.path's file (refusing one over the config limit) or
// the first entry of the stored parent archive.
absl::StatusOr<std::string> ParentConfigText(const v1::ModelRef& parent,
                                             const storage::BlobStore& blobs);

std::string ResolveParentArchitecture(const v1::ModelRef& parent,
                                      const storage::BlobStore& blobs);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_PARENT_ARCHITECTURE_H_
