#include "common/model_fetch.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/model/model_archive.h"

namespace tailor {

absl::StatusOr<std::string> UnpackModelArtifact(const std::string& tar, const std::string& dir,
                                                const std::string& digest,
                                                const std::string& name) {
  if (absl::Status st = model::UnpackModelArchive(tar, dir); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model artifact ", digest, " (", name, ") failed validation: ", st.message()));
  }
  return dir;
}

absl::StatusOr<std::string> FetchModelArtifact(JobContext& job, const std::string& digest,
                                               const std::string& work_dir,
                                               const std::string& name) {
  const std::string tar = absl::StrCat(work_dir, "/", name, ".tar");
  TAILOR_RETURN_IF_ERROR(job.DownloadArtifact(digest, tar));
  return UnpackModelArtifact(tar, absl::StrCat(work_dir, "/", name), digest, name);
}

absl::StatusOr<std::string> UnpackDatasetArtifact(const std::string& tar, const std::string& dir,
                                                  const std::string& digest,
                                                  const std::string& name) {
  absl::StatusOr<std::vector<std::string>> names = model::UnpackDatasetArchive(tar, dir);
  if (!names.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset artifact ", digest, " (", name,
                                                   ") failed validation: ",
                                                   names.status().message()));
  }
  return dir;
}

absl::StatusOr<std::string> FetchDatasetArtifact(JobContext& job, const std::string& digest,
                                                 const std::string& work_dir,
                                                 const std::string& name) {
  const std::string tar = absl::StrCat(work_dir, "/", name, ".tar");
  TAILOR_RETURN_IF_ERROR(job.DownloadArtifact(digest, tar));
  return UnpackDatasetArtifact(tar, absl::StrCat(work_dir, "/", name), digest, name);
}

}  // namespace tailor
