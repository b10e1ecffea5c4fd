// The `select` job of ENTROPY_CODE and of the entropy tail (key select / entropy_select;
// docs/entropy.md): reads the autotuner's per-tensor Pareto frontiers, picks one point per
// tensor minimising the summed batch-1 GEMV latency with the package's resident bytes under
// budget.weight_memory_mib_max (the exact selector; without a budget, the smallest point),
// builds the package and uploads it as a model artifact. Returns package_digest and
// predicted.weight_memory_mib with a SelectResult detail
// (methods/entropy_code/entropy_code_results.proto). Rank 0 does the work; the job needs one
// rank.
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job_output.h"
#include "common/status_macros.h"
#include "compression/engine/package_build.h"
#include "compression/entropy/autotune.h"
#include "compression/entropy/package.h"
#include "common/model_fetch.h"
#include "worker/job_io.h"
#include "worker/worker_context.h"
#include "methods/entropy_code/entropy_code_results.pb.h"
#include "methods/entropy_code/job_kinds.h"

namespace tailor::worker {
namespace {

using v1::entropy_code::AutotuneResult;
using v1::entropy_code::SelectResult;

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The autotune dependency's result and the per-tensor Pareto frontiers it uploaded.
struct Tuned {
  AutotuneResult result;
  std::vector<entropy::TensorFrontier> frontiers;
  std::string weight_format;  // as the frontiers name it
};

absl::StatusOr<Tuned> ReadTuned(WorkerContext& ctx) {
  // The tail's autotune is keyed entropy_autotune, ENTROPY_CODE's autotune.
  const std::string dep = ctx.assignment.inputs().contains(methods::jobs::kTailAutotune)
                              ? methods::jobs::kTailAutotune
                              : methods::jobs::kAutotune;
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* input, Input(ctx, dep));
  std::optional<AutotuneResult> tuned = DetailOf<AutotuneResult>(*input);
  if (!tuned.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("select: job input '", dep, "' holds no autotune result"));
  }
  TAILOR_ASSIGN_OR_RETURN(std::string frontiers_digest,
                          NonEmpty(dep, "frontiers_digest", tuned->frontiers_digest()));
  const std::string frontiers_path = ctx.work_dir + "/frontiers.json";
  TAILOR_RETURN_IF_ERROR(ctx.job->DownloadArtifact(frontiers_digest, frontiers_path));
  TAILOR_ASSIGN_OR_RETURN(std::string json, ReadText(frontiers_path));
  Tuned out;
  out.result = *std::move(tuned);
  TAILOR_ASSIGN_OR_RETURN(out.frontiers, entropy::FrontiersFromJson(json, &out.weight_format));
  return out;
}

// The source model the frontiers were tuned on, fetched when it is an artifact.
struct SourceModel {
  std::string digest;  // empty: `dir` is the autotune result's path
  std::string dir;
  std::vector<engine::SourceTensor> tensors;
};

absl::StatusOr<SourceModel> LoadSource(WorkerContext& ctx, const AutotuneResult& tuned) {
  SourceModel s;
  s.digest = tuned.source_model_digest();
  s.dir = tuned.source_model_path();
  if (!s.digest.empty()) {
    TAILOR_ASSIGN_OR_RETURN(s.dir, FetchModelArtifact(*ctx.job, s.digest, ctx.work_dir, "source"));
  }
  if (s.dir.empty()) {
    return absl::FailedPreconditionError("select: the autotune result names no source model");
  }
  TAILOR_ASSIGN_OR_RETURN(s.tensors, engine::ReadSourceTensors(s.dir));
  return s;
}

// What the selector chooses from: one option list (bytes, batch-1 latency) per frontier.
struct Problem {
  std::vector<std::vector<entropy::Option>> items;
  int64_t fixed = 0;         // bytes every choice pays
  int64_t min_total = 0;     // the package with every tensor at its smallest point
  double dense_latency = 0;  // summed latency of the dense points
};

absl::StatusOr<Problem> ProblemOf(const std::vector<engine::SourceTensor>& tensors,
                                  v1::WeightFormat format,
                                  const std::vector<entropy::TensorFrontier>& frontiers) {
  Problem p;
  // Bytes every choice pays: dense extras (f32) and the per-row scales of coded tensors.
  std::map<std::string, const engine::SourceTensor*> codable;
  for (const engine::SourceTensor& t : tensors) {
    if (t.codable) {
      codable[t.name] = &t;
      TAILOR_ASSIGN_OR_RETURN(entropy::DType d, engine::FormatFor(format, t));
      if (entropy::HasScales(d)) p.fixed += t.rows() * 4;
    } else {
      p.fixed += static_cast<int64_t>(t.values.size()) * 4;
    }
  }
  if (frontiers.size() != codable.size()) {
    return absl::InvalidArgumentError(absl::StrCat("frontiers cover ", frontiers.size(),
                                                   " tensors, the source model has ",
                                                   codable.size(), " codable ones"));
  }
  p.min_total = p.fixed;
  for (const entropy::TensorFrontier& f : frontiers) {
    if (codable.count(f.name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("frontier for unknown tensor ", f.name));
    }
    std::vector<entropy::Option> options;
    int64_t smallest = INT64_MAX;
    for (const entropy::ConfigPoint& point : f.frontier) {
      options.push_back({point.bytes, point.latency_us});
      smallest = std::min(smallest, point.bytes);
      if (point.dense) p.dense_latency += point.latency_us;
    }
    p.min_total += smallest;
    p.items.push_back(std::move(options));
  }
  return p;
}

// No budget: the smallest package (ties: the faster point).
entropy::Selection SmallestPackage(const std::vector<std::vector<entropy::Option>>& items) {
  entropy::Selection sel;
  sel.exact = true;
  for (const auto& options : items) {
    int best = 0;
    for (size_t i = 1; i < options.size(); ++i) {
      if (options[i].bytes < options[best].bytes ||
          (options[i].bytes == options[best].bytes && options[i].latency < options[best].latency)) {
        best = static_cast<int>(i);
      }
    }
    sel.choice.push_back(best);
    sel.total_bytes += options[best].bytes;
    sel.total_latency += options[best].latency;
  }
  return sel;
}

// budget.weight_memory_mib_max in bytes; 0 without one.
int64_t BudgetBytes(const v1::Budget& b) {
  if (!b.has_weight_memory_mib_max()) return 0;
  return static_cast<int64_t>(b.weight_memory_mib_max() * (1 << 20));
}

// One point per tensor: the exact selector under the weight budget, else the smallest.
absl::StatusOr<entropy::Selection> Choose(const v1::Budget& b, int64_t budget_bytes,
                                          const Problem& p) {
  if (!b.has_weight_memory_mib_max()) return SmallestPackage(p.items);
  if (budget_bytes < p.min_total) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "budget.weight_memory_mib_max %.3f MiB is below the smallest package this model "
        "allows, %.3f MiB (every tensor at its smallest code)",
        b.weight_memory_mib_max(), static_cast<double>(p.min_total) / (1 << 20)));
  }
  return entropy::SelectUnderBudget(p.items, budget_bytes - p.fixed);
}

// The chosen point of every tensor, as the package builder takes it.
struct Choices {
  std::map<std::string, engine::TensorChoice> by_name;
  int coded = 0;
};

Choices ChoicesOf(const std::vector<entropy::TensorFrontier>& frontiers,
                  const entropy::Selection& sel) {
  Choices out;
  for (size_t i = 0; i < frontiers.size(); ++i) {
    const entropy::TensorFrontier& f = frontiers[i];
    const entropy::ConfigPoint& p = f.frontier[sel.choice[i]];
    engine::TensorChoice c;
    c.coded = !p.dense;
    c.config = p.config;
    c.frontier = f.frontier;
    c.chosen = sel.choice[i];
    c.entropy_bits_per_weight = f.entropy_bits_per_weight;
    out.coded += c.coded;
    out.by_name[f.name] = std::move(c);
  }
  return out;
}

// The built package, loaded back (which validates it), and the artifact it went up as.
struct Built {
  entropy::Package package;
  v1::Artifact artifact;
};

absl::StatusOr<Built> BuildAndUpload(WorkerContext& ctx, const SourceModel& source,
                                     v1::WeightFormat format, const Choices& choices,
                                     const entropy::PackageSummary& summary) {
  const std::string dir = ctx.work_dir + "/package";
  TAILOR_RETURN_IF_ERROR(
      engine::BuildPackage(source.dir, source.tensors, format, choices.by_name, summary, dir));
  Built built;
  TAILOR_ASSIGN_OR_RETURN(built.package, entropy::LoadPackage(dir));  // validate
  const std::string tar = ctx.work_dir + "/package.tar";
  TAILOR_RETURN_IF_ERROR(entropy::PackPackage(dir, tar));
  TAILOR_ASSIGN_OR_RETURN(built.artifact,
                          ctx.job->UploadArtifactFile("model", "package.tar", tar));
  return built;
}

absl::StatusOr<v1::JobOutput> RunSelect(WorkerContext& ctx) {
  if (!ctx.is_rank0()) return v1::JobOutput();
  TAILOR_ASSIGN_OR_RETURN(Tuned tuned, ReadTuned(ctx));
  TAILOR_ASSIGN_OR_RETURN(SourceModel source, LoadSource(ctx, tuned.result));
  const v1::WeightFormat format = ctx.contract().entropy().weight_format();
  TAILOR_ASSIGN_OR_RETURN(Problem problem, ProblemOf(source.tensors, format, tuned.frontiers));
  const v1::Budget& b = ctx.contract().budget();
  const int64_t budget_bytes = BudgetBytes(b);
  TAILOR_ASSIGN_OR_RETURN(entropy::Selection sel, Choose(b, budget_bytes, problem));

  const Choices choices = ChoicesOf(tuned.frontiers, sel);
  const int coded = choices.coded;
  ctx.Progress(0.5, absl::StrCat("selected: ", coded, " of ", tuned.frontiers.size(),
                                 " tensors coded"));
  entropy::PackageSummary summary;
  summary.weight_format = tuned.weight_format;
  summary.budget_bytes = budget_bytes;
  summary.source = source.digest.empty() ? source.dir : source.digest;
  TAILOR_ASSIGN_OR_RETURN(Built built, BuildAndUpload(ctx, source, format, choices, summary));
  const entropy::Package& package = built.package;

  int64_t weights = 0;
  double entropy_bits = 0;
  for (const entropy::LoadedTensor& t : package.tensors) {
    weights += t.info.rows() * t.info.cols();
    entropy_bits += t.info.entropy_bits_per_weight * t.info.rows() * t.info.cols();
  }
  v1::JobOutput output;
  output.set_package_digest(built.artifact.digest());
  const double mib = static_cast<double>(package.resident_bytes()) / (1 << 20);
  output.mutable_predicted()->set_weight_memory_mib(mib);
  SelectResult r;
  r.set_weight_format(tuned.weight_format);
  if (!source.digest.empty()) r.set_source_model_digest(source.digest);
  if (source.digest.empty()) r.set_source_model_path(source.dir);
  r.set_resident_bytes(package.resident_bytes());
  r.set_dense_bytes(package.dense_bytes());
  r.set_bits_per_weight(weights ? 8.0 * package.resident_bytes() / weights : 0);
  r.set_entropy_bits_per_weight(weights ? entropy_bits / weights : 0);
  r.set_coded_tensors(coded);
  r.set_dense_tensors(static_cast<int64_t>(package.tensors.size()) - coded);
  r.set_gemv_batch1_us(sel.total_latency);
  r.set_dense_gemv_batch1_us(problem.dense_latency);
  r.set_exact(sel.exact);
  if (b.has_weight_memory_mib_max()) r.set_budget_mib(b.weight_memory_mib_max());
  SetDetail(output, r);
  ctx.Progress(1.0, absl::StrFormat("package %.3f MiB (%d coded tensors)", mib, coded));
  return output;
}

}  // namespace

void RegisterSelectJob() { RegisterWorkerHandler(methods::jobs::kSelect, RunSelect); }

}  // namespace tailor::worker
