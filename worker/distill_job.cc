// The `distill` job (spec §1 Step 4, recovery): logit distillation of the extracted student
// from the ranked parent, data-parallel over the job's ranks. Planned twice in AUTOCOMPRESS
// with the same code and settings -- "distill" after "search" and "distill_baseline" after
// "baseline_uniform" -- so both students get the same data, order and learning rate.
// Rank 0 checkpoints under CheckpointDir/distill; a retried attempt resumes from there.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "common/job_output.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "compression/autocompress/dataset_rows.h"
#include "compression/autocompress/distill.h"
#include "compression/autocompress/text_quality.h"
#include "compression/model/hybrid_lm.h"
#include "spdlog/spdlog.h"
#include "worker/job_data.h"
#include "worker/job_io.h"
#include "worker/student_export.h"
#include "worker/worker_context.h"
#include "methods/api/job_kinds.h"

namespace tailor::worker {
namespace {

// Held-out evaluation batches (rank 0 only, before and after training).
constexpr int64_t kEvalBatches = 8;
// Rows of each held-out batch read from data.eval.
constexpr int64_t kEvalRows = 8;
// Training sequences pass through a seeded window of this many (per rank) before use.
constexpr int64_t kShuffleWindow = 64;
// Progress fractions: fetching the models, training, evaluation and upload.
constexpr double kTrainBegin = 0.05;
constexpr double kTrainEnd = 0.95;

// The dependency that hands distillation its student: the one input whose output names a
// student (student_digest) or says it found none (feasible: false), whatever job produced it
// (search, baseline_uniform, evaluate_candidates, or another method's step).
absl::StatusOr<std::string> SourceJob(const WorkerContext& ctx) {
  std::vector<std::string> sources;
  for (const auto& [key, output] : ctx.assignment.inputs()) {
    if (!output.student_digest().empty() || (output.has_feasible() && !output.feasible())) {
      sources.push_back(key);
    }
  }
  std::sort(sources.begin(), sources.end());
  if (sources.size() == 1) return sources.front();
  const std::string named =
      sources.empty() ? "" : absl::StrCat(" (", absl::StrJoin(sources, ", "), ")");
  return absl::FailedPreconditionError(absl::StrCat(
      "distill needs exactly one input whose output names a student (student_digest); got ",
      sources.size(), named));
}

// A comparison job that found no model (e.g. no uniform baseline meets the budget): the
// distill job passes the reason on instead of failing the campaign.
v1::JobOutput SkippedOutput(WorkerContext& ctx, const std::string& source,
                            const v1::JobOutput& input) {
  v1::JobOutput skipped;
  skipped.set_skipped(true);
  skipped.set_reason(absl::StrCat(
      source, " found no model",
      input.reason().empty() ? "" : absl::StrCat(": ", input.reason())));
  ctx.Progress(1.0, skipped.reason());
  return skipped;
}

// Reads the recovery options from the stored contract (the coordinator filled its defaults)
// and wires this rank into the job's data parallelism and checkpointing.
autocompress::DistillOptions DistillOptionsOf(WorkerContext& ctx, const model::HybridLM& teacher,
                                              const model::HybridLM& student) {
  const v1::RecoveryParams& rec = ctx.contract().recovery();
  const int world = ctx.env.world_size;
  autocompress::DistillOptions o;
  o.tokens = rec.tokens();
  o.learning_rate = rec.learning_rate();
  o.batch_sequences = rec.batch_sequences();
  // Rows longer than the models accept would only fail; shorter rows keep the token budget
  // (more steps), so the run still trains `tokens` tokens.
  o.sequence_length = std::min<int64_t>(
      rec.sequence_length(), std::min(teacher->config().max_seq, student->config().max_seq));
  o.seed = ctx.contract().seed();
  o.eval_batches = ctx.is_rank0() ? kEvalBatches : 0;
  o.rank = ctx.env.rank;
  o.world_size = world;
  if (world > 1) {
    o.after_backward = [&ctx](const std::vector<at::Tensor>& params) {
      return ctx.dist->AverageGradients(params);
    };
    // Only rank 0 writes checkpoints; everyone resumes from its bytes, so all ranks agree on
    // the step even when they run on other hosts.
    o.share_checkpoint = [&ctx](std::string& bytes) { return ctx.dist->BroadcastBytes(bytes, 0); };
  }
  o.checkpoint_dir = CheckpointDir(ctx) + "/distill";
  o.checkpoint_every_steps = rec.checkpoint_every_steps();
  o.write_checkpoints = ctx.is_rank0();
  return o;
}

// The contract's data for this job, when it gives any: data.train's rows (this rank's
// documents) and data.eval for the held-out KD loss and the quality report. Lives as long as
// the training that points into it.
struct JobData {
  std::optional<data::ParentVocabulary> vocab;
  std::optional<JobDataset> train;
  std::optional<JobDataset> eval;
  std::unique_ptr<autocompress::DatasetRows> rows;
};

// Collective. Fetches data.train / data.eval and points `o` at them.
absl::Status SetUpData(WorkerContext& ctx, const model::HybridLM& teacher,
                       autocompress::DistillOptions& o, JobData& d) {
  const v1::DataParams& data = ctx.contract().data();
  if (!data.has_train() && !data.has_eval()) return absl::OkStatus();
  TAILOR_ASSIGN_OR_RETURN(d.vocab, JobParentVocabulary(ctx, teacher->config()));
  if (data.has_train()) {
    TAILOR_ASSIGN_OR_RETURN(d.train, FetchJobDataset(ctx, "train"));
    const ReaderOptions base{.sequence_tokens = o.sequence_length,
                             .rank = ctx.env.rank,
                             .world_size = ctx.env.world_size,
                             .seed = o.seed,
                             .shuffle_window = kShuffleWindow};
    d.rows = std::make_unique<autocompress::DatasetRows>([&d, base](int64_t epoch) {
      ReaderOptions r = base;
      r.seed = base.seed + static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL;
      return OpenJobReader(*d.train, *d.vocab, r);
    });
    o.data = d.rows.get();
    absl::StrAppend(&o.identity, ";train=", d.train->digest);
  }
  if (data.has_eval()) {
    TAILOR_ASSIGN_OR_RETURN(d.eval, FetchJobDataset(ctx, "eval"));
    if (ctx.is_rank0()) {
      absl::StatusOr<std::vector<at::Tensor>> held =
          ReadBatches(*d.eval, *d.vocab, o.sequence_length, kEvalRows, kEvalBatches);
      if (held.ok()) {
        o.held_out = *std::move(held);
      } else if (absl::IsInvalidArgument(held.status())) {
        o.eval_batches = 0;  // no full row in the eval set: no held-out KD loss
      } else {
        return held.status();
      }
    }
  }
  return absl::OkStatus();
}

// Rank 0: teacher and student on data.eval. Perplexity as the contract reads the set
// (packed or not); exact match always from an unpacked read (packing joins answers away).
absl::StatusOr<v1::EvalQuality> EvalQualityOf(const JobData& d, model::HybridLM& teacher,
                                              model::HybridLM& student) {
  const int64_t context = std::min(teacher->config().max_seq, student->config().max_seq);
  ReaderOptions r{.sequence_tokens = std::min(d.eval->sequence_tokens, context),
                  .packing = d.eval->packing};
  TAILOR_ASSIGN_OR_RETURN(auto reader, OpenJobReader(*d.eval, *d.vocab, r));
  TAILOR_ASSIGN_OR_RETURN(autocompress::TextQuality q,
                          autocompress::EvaluateText(teacher, student, *reader));
  if (d.eval->packing) {
    r.packing = false;
    r.only_prompts = true;
    TAILOR_ASSIGN_OR_RETURN(auto unpacked, OpenJobReader(*d.eval, *d.vocab, r));
    absl::StatusOr<autocompress::TextQuality> exact =
        autocompress::EvaluateText(teacher, student, *unpacked);
    // An eval set without prompt/answer lines has no exact-match items (not an error).
    if (!exact.ok() && !absl::IsInvalidArgument(exact.status())) return exact.status();
    if (exact.ok()) {
      q.exact_items = exact->exact_items;
      q.teacher.exact_hits = exact->teacher.exact_hits;
      q.student.exact_hits = exact->student.exact_hits;
    }
  }
  v1::EvalQuality e;
  e.set_dataset_digest(d.eval->digest);
  e.set_sequences(q.sequences);
  e.set_tokens(q.tokens);
  e.set_teacher_perplexity(autocompress::TextQuality::Perplexity(q.teacher, q.tokens));
  e.set_student_perplexity(autocompress::TextQuality::Perplexity(q.student, q.tokens));
  e.set_exact_match_items(q.exact_items);
  if (q.exact_items > 0) {
    e.set_teacher_exact_match(q.ExactMatch(q.teacher));
    e.set_student_exact_match(q.ExactMatch(q.student));
  }
  return e;
}

// Collective. Every rank's DataShard, gathered on rank 0 (others get only their own).
absl::StatusOr<std::vector<v1::DataShard>> GatherShards(WorkerContext& ctx,
                                                        const autocompress::DatasetRows& rows) {
  v1::DataShard mine;
  mine.set_rank(ctx.env.rank);
  mine.set_sequences(rows.rows_read());
  const std::vector<int64_t>& docs = rows.documents();
  Sha256 hash;
  std::vector<int64_t> distinct;
  for (const int64_t d : docs) {
    char le[8];  // little-endian
    for (int b = 0; b < 8; ++b) le[b] = static_cast<char>(static_cast<uint64_t>(d) >> (8 * b));
    hash.Update(absl::string_view(le, 8));
    distinct.push_back(d);
  }
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  mine.set_documents(static_cast<int64_t>(distinct.size()));
  if (!distinct.empty()) {
    mine.set_first_document(distinct.front());
    mine.set_last_document(distinct.back());
  }
  mine.set_documents_sha256(hash.HexDigest());
  std::vector<v1::DataShard> shards;
  for (int r = 0; r < ctx.env.world_size; ++r) {
    std::string bytes = r == ctx.env.rank ? mine.SerializeAsString() : std::string();
    if (ctx.env.world_size > 1) TAILOR_RETURN_IF_ERROR(ctx.dist->BroadcastBytes(bytes, r));
    v1::DataShard s;
    if (!s.ParseFromString(bytes)) return absl::InternalError("a rank's data shard is garbled");
    shards.push_back(std::move(s));
  }
  return shards;
}

// Where the training stands, shared by the library's log lines and the step callback.
struct TrainingState {
  double fraction = kTrainBegin;  // of the job's progress bar
  bool first_step = true;
  absl::Status collective = absl::OkStatus();  // the per-step all-reduce's failure, if any
};

// Every rank joins one small all-reduce per step: the global KD loss for the report and
// rank 0's cancellation flag, so all ranks stop after the same step.
autocompress::DistillProgress StepCallback(WorkerContext& ctx,
                                           const autocompress::DistillOptions& o,
                                           TrainingState& state) {
  return [&ctx, &o, &state](const autocompress::DistillStep& s) {
    const int world = ctx.env.world_size;
    at::Tensor stats = torch::tensor({s.loss, ctx.Cancelled() ? 1.0 : 0.0}, torch::kFloat64);
    if (world > 1) {
      state.collective = ctx.dist->AllReduceSum(stats);
      if (!state.collective.ok()) return false;
    }
    const double kd = stats[0].item<double>() / world;
    const bool cancelled = stats[1].item<double>() > 0;
    state.fraction = kTrainBegin + (kTrainEnd - kTrainBegin) * static_cast<double>(s.step) /
                                       static_cast<double>(std::max<int64_t>(1, s.steps));
    std::string message = absl::StrFormat("step %d/%d kd=%.4f", s.step, s.steps, kd);
    if (state.first_step && s.step > 1) {
      absl::StrAppend(&message, " (resumed from step ", s.step - 1, ")");
    }
    state.first_step = false;
    ctx.Progress(state.fraction, message, s.step, s.steps,
                 {{"kd_loss", kd},
                  {"tokens", static_cast<double>(s.step * o.batch_sequences * o.sequence_length)},
                  {"lr", s.lr}});
    return !cancelled;
  };
}

absl::StatusOr<v1::JobOutput> RunDistill(WorkerContext& ctx) {
  TAILOR_ASSIGN_OR_RETURN(const std::string source, SourceJob(ctx));
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* input, Input(ctx, source));
  if (input->has_feasible() && !input->feasible()) return SkippedOutput(ctx, source, *input);
  TAILOR_ASSIGN_OR_RETURN(const std::string student_digest,
                          NonEmpty(source, "student_digest", input->student_digest()));
  TAILOR_ASSIGN_OR_RETURN(const std::string teacher_digest,
                          NonEmpty(source, "teacher_digest", input->teacher_digest()));
  ctx.Progress(0.0, absl::StrCat("fetching teacher and student (from '", source, "')"));
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM teacher, FetchModel(ctx, teacher_digest, "teacher"));
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM student,
                          FetchModel(ctx, student_digest, "student-initial"));

  const int world = ctx.env.world_size;
  autocompress::DistillOptions o = DistillOptionsOf(ctx, teacher, student);
  o.identity = absl::StrCat("teacher=", teacher_digest, ";student=", student_digest);
  JobData data;
  TAILOR_RETURN_IF_ERROR(SetUpData(ctx, teacher, o, data));
  TrainingState state;
  o.log = [&](const std::string& line) {
    spdlog::info("distill: {}", line);
    ctx.Progress(state.fraction, line);
  };
  const int64_t steps = autocompress::DistillSteps(o.tokens, o.batch_sequences, o.sequence_length);
  const int64_t asked_length = ctx.contract().recovery().sequence_length();
  ctx.Progress(state.fraction,
               absl::StrCat("distilling ", steps, " steps of ", o.batch_sequences, "x",
                            o.sequence_length, " tokens over ", world, " ranks",
                            data.train ? " from data.train" : "",
                            o.sequence_length < asked_length
                                ? absl::StrCat(" (sequence_length capped to max_seq ",
                                               o.sequence_length, ")")
                                : std::string()));

  TAILOR_ASSIGN_OR_RETURN(autocompress::DistillResult r,
                          autocompress::Distill(teacher, student, o, StepCallback(ctx, o, state)));
  TAILOR_RETURN_IF_ERROR(state.collective);
  if (r.stopped) {
    return absl::CancelledError(
        absl::StrCat("distill cancelled after step ", r.steps_done, " of ", r.steps));
  }

  v1::JobOutput output;
  v1::DistillResult result;
  result.set_recovery_tokens(r.tokens_trained);
  result.set_steps(r.steps);
  output.set_world_size(world);
  result.set_resumed_from_step(r.resumed_from_step);
  if (data.rows != nullptr) {
    result.set_train_dataset_digest(data.train->digest);
    TAILOR_ASSIGN_OR_RETURN(std::vector<v1::DataShard> shards, GatherShards(ctx, *data.rows));
    for (v1::DataShard& shard : shards) *result.add_shards() = std::move(shard);
  }
  if (!ctx.is_rank0()) {
    SetDetail(output, result);
    return output;
  }

  ctx.Progress(kTrainEnd, "uploading the distilled student");
  TAILOR_ASSIGN_OR_RETURN(v1::Artifact art, UploadModel(ctx, student, "student", "student"));
  output.set_model_digest(art.digest());
  // Rank 0 always evaluates; a non-finite loss is no measurement, so it is left out (absent,
  // as the Struct results had to) rather than shown as a number.
  if (std::isfinite(r.kd_loss_after)) output.set_kd_loss(r.kd_loss_after);
  if (std::isfinite(r.kd_loss_before)) result.set_kd_loss_before(r.kd_loss_before);
  output.set_parameters(static_cast<int64_t>(student->config().ParameterCount()));
  result.set_sequence_length(o.sequence_length);
  output.set_teacher_digest(teacher_digest);
  output.set_student_digest(student_digest);
  output.set_architecture(input->architecture());
  if (data.eval) {
    ctx.Progress(kTrainEnd, "evaluating teacher and student on data.eval");
    TAILOR_ASSIGN_OR_RETURN(*result.mutable_eval(), EvalQualityOf(data, teacher, student));
  }
  ctx.Progress(kTrainEnd, "exporting the student for serving engines");
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::StudentExport> exports,
                          ExportStudent(ctx, UploadedModelDir(ctx, "student")));
  for (v1::StudentExport& e : exports) *result.add_exports() = std::move(e);
  SetDetail(output, result);
  ctx.Progress(1.0, absl::StrFormat("distilled %d tokens: kd %.4f -> %.4f", r.tokens_trained,
                                    r.kd_loss_before, r.kd_loss_after));
  return output;
}

}  // namespace

void RegisterDistillJob() { RegisterWorkerHandler(methods::jobs::kDistill, RunDistill); }

}  // namespace tailor::worker
