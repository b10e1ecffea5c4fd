#ifndef TAILOR_WORKER_STUDENT_EXPORT_H_
#define TAILOR_WORKER_STUDENT_EXPORT_H_

// A distilled student of a Hugging Face parent handed back in layouts serving engines load
// (docs/model.md, "Export"): an HF folder (a tar of config.json, shards, index and the
// parent's tokenizer files; vLLM / transformers): the family's layout when the student's
// widths are uniform, else DeciLM's block_configs layout where it fits; and GGUF (llama.cpp:
// the family's arch, or `deci` for per-layer widths). Each
// layout the student does not fit is recorded with the reason instead of failing the job.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tailor/v1/job_output.pb.h"
#include "worker/worker_context.h"

namespace tailor::worker {

// Rank 0 only: `student_dir` is the student as SaveHybridLM wrote it (the folder UploadModel
// left). Empty for a parent in tailor's own format (nothing to convert). Errors other than a
// layout's Unimplemented (I/O, upload) fail the job: a student that should have been
// exported is never silently missing.
absl::StatusOr<std::vector<v1::StudentExport>> ExportStudent(WorkerContext& ctx,
                                                             const std::string& student_dir);

}  // namespace tailor::worker

#endif  // TAILOR_WORKER_STUDENT_EXPORT_H_
