#include "worker/student_export.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/gguf/student_to_gguf.h"
#include "compression/hf/hf_export.h"
#include "compression/hf/hf_import.h"
#include "compression/model/model_archive.h"

namespace tailor::worker {
namespace {

// The HF folder as one tar artifact: config.json first, then the other files by name.
absl::StatusOr<v1::StudentExport> UploadHfFolder(WorkerContext& ctx, const std::string& dir,
                                                 const hf::HfExportSummary& summary) {
  std::vector<std::string> names = {"config.json"};
  for (const std::string& shard : summary.shards) names.push_back(shard);
  if (summary.shards.size() > 1) names.push_back("model.safetensors.index.json");
  for (const std::string& file : summary.tokenizer_files) names.push_back(file);
  const std::string tar = dir + ".tar";
  TAILOR_RETURN_IF_ERROR(model::PackFilesArchive(dir, names, tar));
  TAILOR_ASSIGN_OR_RETURN(v1::Artifact art,
                          ctx.job->UploadArtifactFile("model-hf", "student-hf.tar", tar));
  v1::StudentExport e;
  e.set_layout("hf");
  e.set_format(summary.layout.architecture);
  e.set_digest(art.digest());
  return e;
}

// One layout: the artifact, or (Unimplemented) the reason it cannot express the student.
v1::StudentExport Unavailable(absl::string_view layout, const absl::Status& why) {
  v1::StudentExport e;
  e.set_layout(std::string(layout));
  e.set_unavailable(std::string(why.message()));
  return e;
}

absl::StatusOr<v1::StudentExport> ExportHf(WorkerContext& ctx, const std::string& student_dir,
                                           const hf::HfCheckpoint& parent) {
  const std::string dir = absl::StrCat(ctx.work_dir, "/student-hf");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  absl::StatusOr<hf::HfExportSummary> s = hf::ExportStudentAsHf(student_dir, parent, dir);
  if (s.status().code() == absl::StatusCode::kUnimplemented) return Unavailable("hf", s.status());
  if (!s.ok()) return s.status();
  return UploadHfFolder(ctx, dir, *s);
}

absl::StatusOr<v1::StudentExport> ExportGguf(WorkerContext& ctx, const std::string& student_dir,
                                             const hf::HfCheckpoint& parent) {
  const std::string path = absl::StrCat(ctx.work_dir, "/student.gguf");
  absl::StatusOr<gguf::StudentGgufSummary> s =
      gguf::ExportStudentToGguf(student_dir, parent, path);
  if (s.status().code() == absl::StatusCode::kUnimplemented) {
    return Unavailable("gguf", s.status());
  }
  if (!s.ok()) return s.status();
  TAILOR_ASSIGN_OR_RETURN(v1::Artifact art,
                          ctx.job->UploadArtifactFile("model-gguf", "student.gguf", path));
  v1::StudentExport e;
  e.set_layout("gguf");
  e.set_format(s->arch);
  e.set_digest(art.digest());
  return e;
}

}  // namespace

absl::StatusOr<std::vector<v1::StudentExport>> ExportStudent(WorkerContext& ctx,
                                                             const std::string& student_dir) {
  if (!ctx.is_rank0()) {
    return absl::FailedPreconditionError("ExportStudent: only rank 0 uploads artifacts");
  }
  const v1::ModelRef& ref = ctx.contract().parent();
  if (ref.path().empty() || !hf::IsHfCheckpointDir(ref.path(), ref.format())) {
    return std::vector<v1::StudentExport>();
  }
  hf::HfCheckpointOptions options;
  options.format = ref.format();
  TAILOR_ASSIGN_OR_RETURN(hf::HfCheckpoint parent, hf::HfCheckpoint::Open(ref.path(), options));
  TAILOR_ASSIGN_OR_RETURN(v1::StudentExport hf_folder, ExportHf(ctx, student_dir, parent));
  TAILOR_ASSIGN_OR_RETURN(v1::StudentExport gguf_file, ExportGguf(ctx, student_dir, parent));
  return std::vector<v1::StudentExport>{hf_folder, gguf_file};
}

}  // namespace tailor::worker
