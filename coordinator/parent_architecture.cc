#include "coordinator/parent_architecture.h"

#include <sys/stat.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "compression/hf/parent_architecture.h"
#include "compression/model/config.h"
#include "compression/model/model_archive.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {
namespace {

// config.json of a parent directory, refusing one larger than any config tailor parses.
absl::StatusOr<std::string> ReadDirectoryConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": not readable here"));
  }
  if (static_cast<uint64_t>(st.st_size) > model::kMaxConfigJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.st_size, " bytes, limit ",
                                                   model::kMaxConfigJsonBytes));
  }
  return model::ReadFileToString(path);
}

}  // namespace

absl::StatusOr<std::string> ParentConfigText(const v1::ModelRef& parent,
                                             const storage::BlobStore& blobs) {
  if (!parent.path().empty()) return ReadDirectoryConfig(parent.path());
  absl::StatusOr<std::string> archive = blobs.PathOf(parent.artifact_digest());
  if (!archive.ok()) return archive.status();
  return model::ReadModelArchiveConfig(*archive, model::kMaxConfigJsonBytes);
}

std::string ResolveParentArchitecture(const v1::ModelRef& parent,
                                      const storage::BlobStore& blobs) {
  if (parent.path().empty() && parent.artifact_digest().empty()) return "";
  absl::StatusOr<std::string> text = ParentConfigText(parent, blobs);
  absl::StatusOr<std::string> key =
      text.ok() ? hf::ParentArchitectureKey(*text, "config.json", parent.format())
                : absl::StatusOr<std::string>(text.status());
  if (!key.ok()) {
    spdlog::info("parent architecture unresolved, the campaign will profile: {}",
                 key.status().ToString());
    return "";
  }
  return *key;
}

}  // namespace tailor::coordinator
