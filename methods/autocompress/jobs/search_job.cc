// The `search` and `baseline_uniform` jobs of AUTOCOMPRESS (spec §1 Steps 3-4).
//
// search: differentiable architecture search over the ranked parent's space, data-parallel
// over the job's ranks (each rank holds a slice of every global batch; gradients averaged),
// priced by the profiled cost table through a differentiable predictor. Rank 0 checkpoints
// every kCheckpointEvery steps (or recovery.checkpoint_every_steps, if smaller) under
// CheckpointDir/search; a retried attempt resumes there (the other ranks resume from rank 0's
// checkpoint bytes, so they need no shared disk). The argmax architecture is priced with
// CostModel::Predict; if it violates a budget it is repaired greedily (uniform.h), then the
// student is sliced from the ranked parent and uploaded as "student_initial".
//
// baseline_uniform: the Minitron-style uniform baseline (uniform.h) on rank 0, scored on
// held-out batches; same result fields, so the distill job and the report treat both alike.
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/job_output.h"
#include "common/status_macros.h"
#include "compression/autocompress/cost_predictor.h"
#include "compression/autocompress/dataset_rows.h"
#include "compression/autocompress/extract.h"
#include "compression/autocompress/ranking.h"
#include "compression/autocompress/search.h"
#include "compression/autocompress/settle.h"
#include "compression/autocompress/space.h"
#include "compression/autocompress/uniform.h"
#include "compression/costmodel/cost_model.h"
#include "compression/costmodel/cost_table_proto.h"
#include "compression/engine/workload.h"
#include "compression/gguf/student_to_gguf.h"
#include "compression/hf/hf_config.h"
#include "compression/hf/hf_import.h"
#include "compression/model/hybrid_lm.h"
#include "compression/tasks/suites.h"
#include "spdlog/spdlog.h"
#include "worker/job_data.h"
#include "worker/job_io.h"
#include "worker/worker_context.h"
#include "methods/api/job_kinds.h"
#include "methods/autocompress/autocompress_results.pb.h"
#include "methods/autocompress/contract_budgets.h"
#include "methods/autocompress/job_kinds.h"

namespace tailor::worker {
namespace {

namespace ac = v1::autocompress;

// Search checkpoint interval; the contract's recovery.checkpoint_every_steps, when smaller,
// tightens it (a contract that asks for frequent checkpoints gets them in the search too).
constexpr int64_t kCheckpointEvery = 25;
// Batches for the repair's importance scores and for scoring uniform candidates.
constexpr int64_t kImportanceBatches = 4;
constexpr int64_t kUniformEvalBatches = 4;
// Seed salts: search data, importance data and held-out data are separate streams.
constexpr uint64_t kSearchSalt = 0x7365617263680000ULL;   // "search"
constexpr uint64_t kRepairSalt = 0x7265706169720000ULL;   // "repair"
constexpr uint64_t kUniformSalt = 0x756e69666f726d00ULL;  // "uniform"
constexpr size_t kMaxMessage = 3000;                      // progress messages are <= 4096 B

uint64_t Mix(uint64_t seed, uint64_t salt, int64_t step) {
  uint64_t x = seed ^ salt ^ (static_cast<uint64_t>(step) * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ULL;
  return x ^ (x >> 29);
}

// `rows` x `length` tokens of the task mixture, packed: samples run on from one row into the
// next, so every position is a real token and the token count is exact. A pure function of
// (seed, salt, step), so every rank builds the same global batch and a resumed search sees
// the batches it would have seen.
at::Tensor PackedBatch(uint64_t seed, uint64_t salt, int64_t step, int64_t rows, int64_t length,
                       tasks::Split split) {
  const auto suites = tasks::AllSuites();
  std::vector<const tasks::TaskSuite*> ptrs;
  for (const auto& s : suites) ptrs.push_back(s.get());
  tasks::TaskMixture mixture(ptrs, Mix(seed, salt, step), split);
  std::vector<int64_t> flat;
  flat.reserve(rows * length);
  while (static_cast<int64_t>(flat.size()) < rows * length) {
    for (tasks::Token t : mixture.Next().tokens) {
      if (static_cast<int64_t>(flat.size()) == rows * length) break;
      flat.push_back(t);
    }
  }
  return torch::tensor(flat, torch::kLong).reshape({rows, length});
}

// What both jobs start from (LoadInputs is a collective).
struct Inputs {
  std::string teacher_digest;
  v1::CostTable table;
  model::HybridLM teacher{nullptr};
  autocompress::SearchSpace space;
  autocompress::Budgets budgets;  // the planning budgets (PlanBudgets), not the contract's
  ac::Planning planning;          // how they were derived, for the result
  std::optional<costmodel::CostModel> cost_model;
  // The contract's data.calibration (the search's training rows, the repair's importance)
  // and data.eval (the baseline's scoring), fetched when the contract gives them.
  std::optional<data::ParentVocabulary> vocab;
  std::optional<JobDataset> calibration;
  std::optional<JobDataset> eval;
  // The ranked parent's importance scores (RepairImportance), computed on first use: the
  // repair and the settle's ladders share them.
  std::optional<autocompress::Importance> importance;
};

// Largest planning margin: a table that validated worse than this is a poor table, and
// planning further below the budget would only hide it (the error is in `costs list`).
constexpr double kMaxPlanningMargin = 0.10;

// The budgets the search and the baseline plan against. (1) A margin: the cost table's own
// held-out error (MAPE, capped at kMaxPlanningMargin) is taken off each ceiling and added to
// each floor, so a student predicted inside the dead zone still measures within the
// contract's budget when the prediction errs by the table's typical error. (2) The lower side
// of the dead zone is dropped for a resource the parent already stays clear of. Both
// searches get the same planning budgets, so the comparison stays fair.
absl::Status PlanBudgets(Inputs& in, const costmodel::CostModel& cost_model, double delta) {
  const double lat_margin = std::clamp(in.table.latency_mape(), 0.0, kMaxPlanningMargin);
  const double mem_margin = std::clamp(in.table.memory_mape(), 0.0, kMaxPlanningMargin);
  autocompress::Budgets& b = in.budgets;
  if (b.latency_ms) *b.latency_ms *= 1.0 - lat_margin;
  if (b.memory_mib) *b.memory_mib *= 1.0 - mem_margin;
  // Throughput is batch * output / latency: the latency error carries over.
  if (b.throughput) *b.throughput *= 1.0 + lat_margin;
  TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction parent, cost_model.Predict(in.teacher->config()));
  if (b.latency_ms) b.slack_latency = parent.latency_ms / *b.latency_ms >= 1.0 - delta;
  if (b.memory_mib) b.slack_memory = parent.memory_mib / *b.memory_mib >= 1.0 - delta;
  if (b.throughput) {
    b.slack_throughput = *b.throughput / parent.throughput_tokens_per_s >= 1.0 - delta;
  }
  ac::Planning& planning = in.planning;
  planning.set_latency_margin(lat_margin);
  planning.set_memory_margin(mem_margin);
  ac::PlannedBudgets& planned = *planning.mutable_budgets();
  // ceiling_only names budgets as the contract and the report spell them.
  if (b.latency_ms) {
    planned.set_latency_ms(*b.latency_ms);
    if (!b.slack_latency) planning.add_ceiling_only("latency_ms");
  }
  if (b.memory_mib) {
    planned.set_memory_mib(*b.memory_mib);
    if (!b.slack_memory) planning.add_ceiling_only("memory_mib");
  }
  if (b.throughput) {
    planned.set_throughput_tokens_per_s(*b.throughput);
    if (!b.slack_throughput) planning.add_ceiling_only("throughput_tokens_per_s");
  }
  return absl::OkStatus();
}

// A bad table is the profile job's fault and will not improve on retry.
absl::StatusOr<costmodel::CostModel> ModelOf(const v1::CostTable& table) {
  absl::StatusOr<costmodel::CostModel> m = costmodel::CostModel::FromTable(table);
  if (!m.ok() && absl::IsInternal(m.status())) {
    return absl::FailedPreconditionError(m.status().message());
  }
  return m;
}

std::string Clip(std::string s) {
  if (s.size() > kMaxMessage) s = s.substr(0, kMaxMessage) + "...";
  return s;
}

// The space's shape: restricted to the student shapes the export layouts can write for the
// parent (gguf::StudentShapeRulesOf: one width per kind for Qwen3, Qwen2 and the MoE
// families; Qwen2 keeps hidden width and heads), so the student the search picks is one the
// export writes; and the layers that layout adds to a student without a kind, which the cost
// model prices. Every rank reads the same config.json.
struct ExportShape {
  autocompress::SpaceOptions space;
  std::vector<model::StandInLayer> stand_ins;
  model::KvCacheLayout kv_cache_layout = model::KvCacheLayout::kPerLayer;
};

absl::StatusOr<ExportShape> ExportShapeFor(WorkerContext& ctx) {
  ExportShape out;
  autocompress::SpaceOptions& o = out.space;
  const v1::ModelRef& ref = ctx.contract().parent();
  if (ref.path().empty() || !hf::IsHfCheckpointDir(ref.path(), ref.format())) return out;
  TAILOR_ASSIGN_OR_RETURN(const hf::HfConfig parent,
                          hf::ReadHfConfig(ref.path() + "/config.json", ref.format()));
  const gguf::StudentShapeRules rules = gguf::StudentShapeRulesOf(parent);
  out.stand_ins = rules.stand_ins;
  out.kv_cache_layout = rules.kv_cache_layout;
  o.uniform_layers = !rules.per_layer_widths;
  o.prune_hidden_and_heads = rules.prune_hidden_and_heads;
  o.keep_shared_experts = rules.keep_shared_experts;
  if (!rules.why.empty()) {
    ctx.Progress(0.0, Clip(absl::StrCat("search space restricted to what the export writes: ",
                                        rules.why)));
  }
  return out;
}

using methods::ContractBudgets;

v1::ModelCosts CostsOf(const costmodel::Prediction& p) {
  v1::ModelCosts c;
  c.set_latency_ms(p.latency_ms);
  c.set_throughput_tokens_per_s(p.throughput_tokens_per_s);
  c.set_memory_mib(p.memory_mib);
  return c;
}

absl::StatusOr<Inputs> LoadInputs(WorkerContext& ctx) {
  Inputs in;
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* profile, Input(ctx, methods::jobs::kProfile));
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* rank, Input(ctx, methods::jobs::kRank));
  const std::optional<v1::ProfileResult> profiled = DetailOf<v1::ProfileResult>(*profile);
  const std::optional<ac::RankResult> ranked = DetailOf<ac::RankResult>(*rank);
  TAILOR_ASSIGN_OR_RETURN(
      const std::string table_id,
      NonEmpty(methods::jobs::kProfile, "cost_table_id",
               profiled ? profiled->cost_table_id() : std::string()));
  TAILOR_ASSIGN_OR_RETURN(
      in.teacher_digest,
      NonEmpty(methods::jobs::kRank, "ranked_model_digest",
               ranked ? ranked->ranked_model_digest() : std::string()));
  ctx.Progress(0.0, absl::StrCat("fetching cost table ", table_id, " and the ranked parent"));
  TAILOR_ASSIGN_OR_RETURN(in.table, FetchCostTable(ctx, table_id));
  TAILOR_ASSIGN_OR_RETURN(in.teacher, FetchModel(ctx, in.teacher_digest, "teacher"));
  for (at::Tensor& p : in.teacher->parameters()) p.requires_grad_(false);  // frozen
  TAILOR_ASSIGN_OR_RETURN(const ExportShape shape, ExportShapeFor(ctx));
  TAILOR_ASSIGN_OR_RETURN(in.space,
                          autocompress::BuildSearchSpace(in.teacher->config(), shape.space));
  in.budgets = ContractBudgets(ctx.contract().budget());
  TAILOR_ASSIGN_OR_RETURN(costmodel::CostModel cost_model, ModelOf(in.table));
  // The stand-ins and the KV cache layout are the exported file's, which the other engines
  // serve; the built-in engine runs tailor's own model.
  if (in.table.engine() != engine::kEngineName) {
    cost_model.SetStandIns(shape.stand_ins);
    cost_model.SetKvCacheLayout(shape.kv_cache_layout);
  }
  in.cost_model.emplace(std::move(cost_model));
  TAILOR_RETURN_IF_ERROR(PlanBudgets(in, *in.cost_model, ctx.contract().search().dead_zone()));
  const v1::DataParams& data = ctx.contract().data();
  if (data.has_calibration() || data.has_eval()) {
    TAILOR_ASSIGN_OR_RETURN(in.vocab, JobParentVocabulary(ctx, in.teacher->config()));
  }
  if (data.has_calibration()) {
    TAILOR_ASSIGN_OR_RETURN(in.calibration, FetchJobDataset(ctx, "calibration"));
  }
  return in;
}

// The batches a step run by rank 0 alone scores on: `rows` x `length` from `d` when the
// contract gives it, else the task suites' stream of (seed, salt, split).
absl::StatusOr<std::vector<at::Tensor>> WholeBatches(const Inputs& in,
                                                     const std::optional<JobDataset>& d,
                                                     uint64_t seed, uint64_t salt, int64_t count,
                                                     int64_t rows, int64_t length,
                                                     tasks::Split split) {
  if (d.has_value()) return ReadBatches(*d, *in.vocab, length, rows, count);
  std::vector<at::Tensor> batches;
  for (int64_t b = 0; b < count; ++b) {
    batches.push_back(PackedBatch(seed, salt, b, rows, length, split));
  }
  return batches;
}


void SetPredicted(v1::JobOutput& output, const costmodel::Prediction& p) {
  *output.mutable_predicted() = CostsOf(p);
}

void SetArchitecture(v1::JobOutput& output, const model::HybridConfig& config) {
  output.set_architecture(autocompress::DescribeArchitecture(config));
  for (const std::string& l : autocompress::DescribeLayers(config)) output.add_layers(l);
  output.set_parameters(static_cast<int64_t>(config.ParameterCount()));
}


// ----------------------------------------------------------------------------------------

// The search as the contract asks for it: the library's options plus the batch shape the
// job's data source and result need.
struct SearchPlan {
  autocompress::SearchOptions o;
  int64_t global_batch = 0;  // rows per step over all ranks
  int64_t local_batch = 0;   // this rank's rows
  int64_t length = 0;        // tokens per row
  uint64_t data_seed = 0;
};

// Reads the search options from the stored contract (the coordinator filled its defaults).
SearchPlan PlanSearch(WorkerContext& ctx, const Inputs& in) {
  const v1::SearchParams& sp = ctx.contract().search();
  const model::HybridConfig& config = in.teacher->config();
  const int world = ctx.env.world_size;
  SearchPlan plan;
  autocompress::SearchOptions& o = plan.o;
  o.schedule.steps = sp.steps();
  o.schedule.k_start = sp.logit_scale_start();
  o.schedule.k_end = sp.logit_scale_end();
  o.schedule.tau_start = sp.temperature_start();
  o.schedule.tau_end = sp.temperature_end();
  o.samples = sp.sampled_architectures();
  o.alpha = sp.alpha();
  o.delta = sp.dead_zone();
  o.router.hidden = sp.router_hidden();
  o.router.learning_rate = sp.router_lr();
  o.router.seed = ctx.contract().seed();
  o.supernet_lr = sp.supernet_lr();
  o.extract_threshold = sp.extraction_threshold();
  o.stop_when_converged = true;
  o.accept_extraction = [&parent = config, &space = in.space, &cost_model = *in.cost_model,
                         &budgets = in.budgets](const autocompress::ExtractionDecision& d) {
    absl::StatusOr<model::HybridConfig> child = autocompress::ChildConfig(parent, space, d.indices);
    if (!child.ok()) return false;
    absl::StatusOr<costmodel::Prediction> p = cost_model.Predict(*child);
    return p.ok() && autocompress::BudgetViolations(*p, budgets).empty();
  };
  o.seed = ctx.contract().seed() ^ kSearchSalt;
  // Equal slices keep "mean of the ranks' KD means" equal to the global KD mean (and the
  // averaged gradient equal to the global one), so the global batch is rounded up to a
  // multiple of the world size.
  const int64_t asked_batch = sp.batch_sequences();
  plan.global_batch = (asked_batch + world - 1) / world * world;
  plan.local_batch = plan.global_batch / world;
  plan.length = std::min<int64_t>(sp.sequence_length(), config.max_seq);
  o.global_batch = plan.global_batch;
  o.row_offset = ctx.env.rank * plan.local_batch;
  const v1::RecoveryParams& rec = ctx.contract().recovery();
  o.checkpoint_every = rec.checkpoint_every_steps() > 0
                           ? std::min<int64_t>(kCheckpointEvery, rec.checkpoint_every_steps())
                           : kCheckpointEvery;
  plan.data_seed = ctx.contract().seed();
  o.checkpoint_dir = CheckpointDir(ctx) + "/search";
  o.write_checkpoints = ctx.is_rank0();
  return plan;
}

// Rank 0 owns CheckpointDir/search; every other rank resumes from a copy of rank 0's
// committed files (broadcast, so no shared disk is needed), so all ranks restart at the same
// step. A collective when world > 1.
absl::Status ShareRank0Checkpoint(WorkerContext& ctx, autocompress::SearchOptions& o) {
  if (ctx.env.world_size <= 1) return absl::OkStatus();
  std::string blob;
  if (ctx.is_rank0()) {
    absl::StatusOr<std::string> packed = autocompress::PackCheckpoint(o.checkpoint_dir);
    if (packed.ok()) {
      blob = *std::move(packed);
    } else {
      spdlog::warn("search: checkpoint unreadable, starting fresh: {}",
                   packed.status().ToString());
    }
  }
  TAILOR_RETURN_IF_ERROR(ctx.dist->BroadcastBytes(blob, 0));
  if (!ctx.is_rank0()) {
    o.checkpoint_dir = ctx.work_dir + "/search-resume";
    std::error_code ec;
    std::filesystem::remove_all(o.checkpoint_dir, ec);
    std::filesystem::create_directories(o.checkpoint_dir, ec);
    TAILOR_RETURN_IF_ERROR(autocompress::UnpackCheckpoint(blob, o.checkpoint_dir));
  }
  return absl::OkStatus();
}

// Gradient averaging and the KD-loss mean over the job's ranks (none with a single rank).
autocompress::SearchHooks CollectiveHooks(WorkerContext& ctx) {
  autocompress::SearchHooks hooks;
  if (ctx.env.world_size > 1) {
    hooks.after_backward = [&ctx](const std::vector<at::Tensor>& params) {
      return ctx.dist->AverageGradients(params);
    };
    hooks.reduce_mean = [&ctx](at::Tensor& t) { return ctx.dist->AllReduceMean(t); };
  }
  return hooks;
}

// This rank's rows of each step's global batch: from the task suites every rank builds the
// same global batch and keeps its rows; from data.calibration each rank reads its own
// documents (so the batch depends on the number of ranks, as any sharded corpus does).
autocompress::BatchSource RankBatches(WorkerContext& ctx, const Inputs& in,
                                      const SearchPlan& plan) {
  if (in.calibration.has_value()) {
    const JobDataset& d = *in.calibration;
    const data::ParentVocabulary& vocab = *in.vocab;
    const ReaderOptions base{.sequence_tokens = plan.length,
                             .rank = ctx.env.rank,
                             .world_size = ctx.env.world_size,
                             .seed = plan.data_seed,
                             .shuffle_window = 64};
    auto rows = std::make_shared<autocompress::DatasetRows>([&d, &vocab, base](int64_t epoch) {
      ReaderOptions r = base;
      r.seed = base.seed + static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL;
      return OpenJobReader(d, vocab, r);
    });
    return [rows, &plan](int64_t step) {
      return rows->TrainRows(step, plan.local_batch, plan.length);
    };
  }
  return [&plan](int64_t step) -> absl::StatusOr<at::Tensor> {
    return PackedBatch(plan.data_seed, kSearchSalt, step, plan.global_batch, plan.length,
                       tasks::Split::kTrain)
        .slice(0, plan.o.row_offset, plan.o.row_offset + plan.local_batch);
  };
}

// What the per-step cancellation check leaves for the job to act on after the search.
struct StepSync {
  absl::Status error = absl::OkStatus();
  bool cancelled = false;
};

// Rank 0 alone knows about cancellation: every rank learns it here, so all stop after the
// same step and no collective is left waiting. False when the broadcast itself failed.
bool ShareCancellation(WorkerContext& ctx, StepSync& sync) {
  if (ctx.env.world_size > 1) {
    at::Tensor flag = torch::tensor({ctx.Cancelled() ? 1.0 : 0.0}, torch::kFloat64);
    sync.error = ctx.dist->Broadcast(flag, 0);
    if (!sync.error.ok()) return false;
    sync.cancelled = flag.item<double>() > 0;
  } else {
    sync.cancelled = ctx.Cancelled();
  }
  return true;
}

// Rank 0's progress for one step: the current argmax architecture with its predicted costs
// next to the planning budgets. `resumed_from` > 0 notes a resume (on the first step only).
void ReportSearchStep(WorkerContext& ctx, const Inputs& in, int64_t steps, int64_t resumed_from,
                      const autocompress::StepReport& r) {
  std::map<std::string, double> metrics = {{"kd_loss", r.kd_loss},
                                           {"penalty", r.penalty},
                                           {"min_top", r.decision.min_top},
                                           {"temperature", r.temperature},
                                           {"logit_scale", r.logit_scale}};
  std::string arch;
  absl::StatusOr<model::HybridConfig> child =
      autocompress::ChildConfig(in.teacher->config(), in.space, r.decision.indices);
  if (child.ok()) {
    arch = autocompress::DescribeArchitecture(*child);
    absl::StatusOr<costmodel::Prediction> p = in.cost_model->Predict(*child);
    if (p.ok()) {
      metrics["predicted_latency_ms"] = p->latency_ms;
      metrics["predicted_memory_mib"] = p->memory_mib;
      metrics["predicted_throughput_tokens_per_s"] = p->throughput_tokens_per_s;
    }
  }
  if (in.budgets.latency_ms) metrics["budget_latency_ms"] = *in.budgets.latency_ms;
  if (in.budgets.memory_mib) metrics["budget_memory_mib"] = *in.budgets.memory_mib;
  if (in.budgets.throughput) metrics["budget_throughput_tokens_per_s"] = *in.budgets.throughput;
  std::string message = absl::StrFormat("step %d/%d kd=%.4f penalty=%.4f min_top=%.3f (%s)",
                                        r.step + 1, steps, r.kd_loss, r.penalty,
                                        r.decision.min_top, r.decision.weakest_axis);
  if (resumed_from > 0) absl::StrAppend(&message, " resumed from step ", resumed_from);
  absl::StrAppend(&message, ": ", arch);
  ctx.Progress(0.05 + 0.85 * static_cast<double>(r.step + 1) / steps, Clip(message), r.step + 1,
               steps, metrics);
}

// Importance of the ranked parent's units on a few training batches, and each axis step's
// KD loss on the same batches: what the repair gives up and the settle's ladder regains per
// unit of cost. Whole global batches (rank 0 alone runs this), so the same search on another
// number of ranks picks the same student.
absl::StatusOr<const autocompress::Importance*> RepairImportance(Inputs& in,
                                                                  const SearchPlan& plan) {
  if (!in.importance.has_value()) {
    TAILOR_ASSIGN_OR_RETURN(
        std::vector<at::Tensor> calib,
        WholeBatches(in, in.calibration, plan.data_seed, kRepairSalt, kImportanceBatches,
                     plan.global_batch, plan.length, tasks::Split::kTrain));
    model::HybridLM teacher = in.teacher;  // a handle: the same module
    TAILOR_ASSIGN_OR_RETURN(in.importance, autocompress::RankImportance(teacher, calib));
    TAILOR_RETURN_IF_ERROR(autocompress::MeasureAxisKd(teacher, in.space, calib, *in.importance));
  }
  return &*in.importance;
}

// The argmax architecture, priced by the cost model itself (not the soft predictor); one
// that violates a budget is repaired greedily, giving up the units that matter least.
// (What the budgets leave is not filled: docs/autocompress.md, "Extraction".)
absl::StatusOr<autocompress::RepairResult> RepairArgmax(WorkerContext& ctx, Inputs& in,
                                                        const SearchPlan& plan,
                                                        const std::vector<int>& indices) {
  const model::HybridConfig& config = in.teacher->config();
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig argmax,
                          autocompress::ChildConfig(config, in.space, indices));
  TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction predicted, in.cost_model->Predict(argmax));
  const std::vector<std::string> violations = autocompress::BudgetViolations(predicted, in.budgets);
  autocompress::RepairResult repair;
  repair.indices = indices;
  repair.predicted = predicted;
  if (violations.empty()) return repair;
  TAILOR_ASSIGN_OR_RETURN(const autocompress::Importance* importance,
                          RepairImportance(in, plan));
  ctx.Progress(0.9, Clip(absl::StrCat("argmax architecture violates the budget (",
                                      absl::StrJoin(violations, "; "), "); repairing")));
  return autocompress::RepairToBudgets(config, in.space, *in.cost_model, in.budgets, indices,
                                       importance);
}

// Slices the (repaired) architecture out of the ranked parent, uploads it as
// "student_initial" and records it in `output`; returns the student's config.
// `space`: the one `repair.indices` choose in (the search's, or the settle's finer one).
absl::StatusOr<model::HybridConfig> UploadStudent(WorkerContext& ctx, const Inputs& in,
                                                  const autocompress::SearchSpace& space,
                                                  const autocompress::RepairResult& repair,
                                                  v1::JobOutput& output) {
  TAILOR_ASSIGN_OR_RETURN(autocompress::Student student,
                          autocompress::ExtractStudent(in.teacher, space, repair.indices));
  ctx.Progress(0.95, "uploading the extracted student");
  TAILOR_ASSIGN_OR_RETURN(v1::Artifact art,
                          UploadModel(ctx, student.model, "student_initial", "student-initial"));
  output.set_student_digest(art.digest());
  output.set_teacher_digest(in.teacher_digest);
  SetPredicted(output, repair.predicted);
  SetArchitecture(output, student.config);
  return student.config;
}

// How far past the contract's budgets the settle's ladder climbs: the table's planning margin
// (its held-out error), at least 5%, since a rung the table over-prices may measure within.
constexpr double kMinLadderReach = 0.05;

// At most this many branch ladders (uniform.h BranchLadders) besides the search's own.
constexpr int kMaxBranches = 2;

// The settle's ladders list at most this many rungs each (autocompress::ThinLadder): every
// rung is a config in the job's output, which the coordinator bounds (max_result_bytes,
// 1 MiB by default).
constexpr int kMaxLadderRungs = 48;

// The contract's budgets moved by `reach` (a fraction): outward (ceilings up, the floor down)
// when `sign` is +1, inward when -1.
autocompress::Budgets Moved(autocompress::Budgets b, double latency_reach, double memory_reach,
                            int sign) {
  if (b.latency_ms) *b.latency_ms *= 1.0 + sign * latency_reach;
  if (b.memory_mib) *b.memory_mib *= 1.0 + sign * memory_reach;
  if (b.throughput) *b.throughput *= 1.0 - sign * latency_reach;
  return b;
}

// The descent's target: the one resource the search's choice is likeliest to break when
// measured (the largest share of its budget, each share raised by that resource's reach: the
// table's error there) narrowed to the choice's share of it less that reach; every other
// resource at its budget. Narrowing every resource to the binding share let the one the
// table prices well steer the descent: on the quickstart's parent memory (validated within
// 5%) took its bottom to hidden 64 for a rung barely cheaper in latency (19.48 against
// 19.75 ms predicted), the resource the table can be 10% wrong about.
autocompress::Budgets Below(const autocompress::Budgets& budgets,
                            const costmodel::Prediction& choice, double latency_reach,
                            double memory_reach) {
  enum Resource { kNone, kLatency, kMemory, kThroughput } binding = kNone;
  double risk = 0, share = 0;
  auto consider = [&](Resource r, double s, double reach) {
    if (s * (1 + reach) > risk) {
      risk = s * (1 + reach);
      binding = r;
      share = s * (1 - reach);
    }
  };
  if (budgets.latency_ms) consider(kLatency, choice.latency_ms / *budgets.latency_ms,
                                   latency_reach);
  if (budgets.memory_mib) consider(kMemory, choice.memory_mib / *budgets.memory_mib,
                                   memory_reach);
  if (budgets.throughput && choice.throughput_tokens_per_s > 0) {
    consider(kThroughput, *budgets.throughput / choice.throughput_tokens_per_s, latency_reach);
  }
  autocompress::Budgets out = budgets;
  if (binding == kLatency) *out.latency_ms *= share;
  if (binding == kMemory) *out.memory_mib *= share;
  if (binding == kThroughput) *out.throughput /= share;
  return out;
}

// Every rung of `ladder` (number `ladder_id`: 0 the search's own) into result.settle.rungs and
// output.candidates, which the `measure` job serves: up to `count` evenly spaced in its first
// pass, the rest on demand (CandidateArchitecture.on_demand). Below the search's choice the
// first pass serves only the bottom rung; then the choice itself and rungs above it.
absl::Status AddMeasuredRungs(const Inputs& in, const autocompress::SearchSpace& space,
                              const std::vector<autocompress::LadderRung>& ladder, int ladder_id,
                              int count, int choice, v1::JobOutput& output,
                              ac::SearchResult& result) {
  ac::Settle& settle = *result.mutable_settle();
  std::vector<bool> first_pass(ladder.size(), false);
  if (choice > 0) first_pass[0] = true;
  for (int k : autocompress::RungsToMeasure(static_cast<int>(ladder.size()) - choice,
                                            count - (choice > 0 ? 1 : 0))) {
    first_pass[choice + k] = true;
  }
  for (size_t step = 0; step < ladder.size(); ++step) {
    const autocompress::LadderRung& rung = ladder[step];
    TAILOR_ASSIGN_OR_RETURN(
        model::HybridConfig config,
        autocompress::ChildConfig(in.teacher->config(), space, rung.indices));
    ac::SettleRung& r = *settle.add_rungs();
    r.set_step(static_cast<int>(step) - choice);
    r.set_ladder(ladder_id);
    r.set_architecture(autocompress::DescribeArchitecture(config));
    r.set_change(rung.change);  // the settle joins those of the rungs nobody served
    *r.mutable_predicted() = CostsOf(rung.predicted);
    for (int i : rung.indices) r.add_indices(i);
    v1::CandidateArchitecture& c = *output.add_candidates();
    c.set_architecture(r.architecture());
    c.set_config_json(model::HybridConfigToJson(config));
    *c.mutable_predicted() = r.predicted();
    c.set_change(r.change());
    c.set_ladder(ladder_id);
    c.set_on_demand(!first_pass[step]);
  }
  return absl::OkStatus();
}

// search.settle_rungs > 0: the growth ladder from the (repaired) argmax toward the contract's
// budgets widened by the table's error, the branches past the global steps it could not take
// (each from the budgets narrowed by as much up to the widened ones), and the rungs the
// `measure` job serves: their configs in output.candidates, their choice indices in
// result.settle.rungs (for the settle job).
absl::Status AddSettleLadder(WorkerContext& ctx, Inputs& in, const SearchPlan& plan,
                             const autocompress::RepairResult& repair, v1::JobOutput& output,
                             ac::SearchResult& result) {
  const v1::SearchParams& sp = ctx.contract().search();
  const autocompress::Budgets budgets = ContractBudgets(ctx.contract().budget());
  const double lat_reach = std::max(in.planning.latency_margin(), kMinLadderReach);
  const double mem_reach = std::max(in.planning.memory_margin(), kMinLadderReach);
  const autocompress::Budgets ceiling = Moved(budgets, lat_reach, mem_reach, +1);
  ctx.Progress(0.92, "building the settle's growth ladder");
  TAILOR_ASSIGN_OR_RETURN(const autocompress::Importance* coarse, RepairImportance(in, plan));
  // The ladders step in a finer space than the search's (the contract's settle_fine_steps;
  // recorded in Settle.fine_steps, so the settle job reads the rungs' choices in it too).
  const autocompress::SearchSpace space =
      autocompress::RefineSpace(in.space, sp.settle_fine_steps());
  TAILOR_ASSIGN_OR_RETURN(const std::vector<int> choice_indices,
                          autocompress::RefineIndices(in.space, space, repair.indices));
  TAILOR_ASSIGN_OR_RETURN(const autocompress::Importance fine,
                          autocompress::RefineImportance(*coarse, in.space, space));
  const autocompress::Importance* importance = &fine;
  const model::HybridConfig& parent = in.teacher->config();
  TAILOR_ASSIGN_OR_RETURN(std::vector<autocompress::LadderRung> ladder,
                          autocompress::GrowthLadder(parent, space, *in.cost_model, ceiling,
                                                     choice_indices, importance));
  // With three rungs or more on its own ladder, the ladder starts below the search's choice
  // too, for a table that is optimistic there (its binding share lowered by the reach).
  std::vector<autocompress::LadderRung> descent = {ladder.front()};
  if (sp.settle_rungs() >= 3) {
    // Its bottom under the target, and not by another reach below it where a smaller step
    // gets there.
    const autocompress::Budgets target =
        Below(budgets, repair.predicted, lat_reach, mem_reach);
    TAILOR_ASSIGN_OR_RETURN(
        descent, autocompress::DescentLadder(parent, space, *in.cost_model, target,
                                             Moved(target, lat_reach, mem_reach, -1),
                                             choice_indices, importance));
  }
  int choice = static_cast<int>(descent.size()) - 1;
  ladder.front().change = descent.back().change;
  ladder.insert(ladder.begin(), descent.begin(), descent.end() - 1);
  // A branch only when every ladder gets three measured rungs or more: one branch from 6
  // rungs, two from 10.
  const int max_branches = std::min(kMaxBranches, (sp.settle_rungs() - 2) / 4);
  std::vector<autocompress::Branch> branches;
  if (max_branches > 0) {
    const int start = autocompress::BranchStart(ladder, budgets);
    TAILOR_ASSIGN_OR_RETURN(
        branches, autocompress::BranchLadders(parent, space, *in.cost_model,
                                              Moved(budgets, lat_reach, mem_reach, -1), ceiling,
                                              ladder[start].indices, max_branches, importance));
  }
  choice = autocompress::ThinLadder(ladder, choice, kMaxLadderRungs);
  for (autocompress::Branch& b : branches) autocompress::ThinLadder(b.ladder, 0, kMaxLadderRungs);
  ac::Settle& settle = *result.mutable_settle();
  settle.set_fine_steps(std::max(sp.settle_fine_steps(), 1));
  // The measure job's yardstick for a slow host: a whole ladder measured further off than
  // any held-out architecture was is the host, not the table.
  output.set_candidates_latency_error(in.table.latency_max_error());
  settle.set_ladder_steps(static_cast<int32_t>(ladder.size()) - 1 - choice);
  settle.set_descent_steps(choice);
  settle.set_margin(sp.settle_margin());
  // Each branch its share of the rungs, or fewer when its ladder is shorter; the search's
  // own ladder the rest.
  const int per_branch = sp.settle_rungs() / (static_cast<int>(branches.size()) + 1);
  int own = sp.settle_rungs();
  for (const autocompress::Branch& b : branches) {
    own -= std::min(per_branch, static_cast<int>(b.ladder.size()));
  }
  TAILOR_RETURN_IF_ERROR(AddMeasuredRungs(in, space, ladder, 0, own, choice, output, result));
  for (size_t k = 0; k < branches.size(); ++k) {
    TAILOR_RETURN_IF_ERROR(AddMeasuredRungs(in, space, branches[k].ladder,
                                            static_cast<int>(k) + 1, per_branch, 0, output,
                                            result));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::JobOutput> RunSearchJob(WorkerContext& ctx) {
  TAILOR_ASSIGN_OR_RETURN(Inputs in, LoadInputs(ctx));
  const costmodel::CostModel& cost_model = *in.cost_model;
  const model::HybridConfig& config = in.teacher->config();
  // Deterministic on every rank, so all ranks fail (or go on) together.
  TAILOR_RETURN_IF_ERROR(
      autocompress::CheckBudgetsReachable(config, in.space, cost_model, in.budgets));
  TAILOR_ASSIGN_OR_RETURN(autocompress::CostPredictor predictor,
                          autocompress::MakeCostPredictor(cost_model, config, in.space));

  // The supernet starts as a copy of the ranked parent; only it is trained.
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM supernet, model::CreateHybridLM(config, 0));
  TAILOR_RETURN_IF_ERROR(supernet->LoadStateDict(in.teacher->StateDict(), "supernet copy"));

  const int world = ctx.env.world_size;
  SearchPlan plan = PlanSearch(ctx, in);
  autocompress::SearchOptions& o = plan.o;
  TAILOR_RETURN_IF_ERROR(ShareRank0Checkpoint(ctx, o));
  const int64_t resume_step = autocompress::CheckpointStep(
      o.checkpoint_dir, autocompress::SearchDigest(config, in.space, in.budgets, o));
  autocompress::SearchHooks hooks = CollectiveHooks(ctx);
  autocompress::BatchSource batches = RankBatches(ctx, in, plan);

  ctx.Progress(0.02,
               absl::StrCat("searching ", in.space.axes.size(), " axes (", in.space.total_choices(),
                            " choices) for ", o.schedule.steps, " steps of ", plan.global_batch,
                            "x", plan.length, " tokens over ", world, " ranks",
                            resume_step > 0 ? absl::StrCat("; resumed from step ", resume_step)
                                            : std::string()));

  StepSync sync;
  bool first = true;
  autocompress::ProgressCallback progress = [&](const autocompress::StepReport& r) {
    if (!ShareCancellation(ctx, sync)) return false;
    if (ctx.is_rank0()) ReportSearchStep(ctx, in, o.schedule.steps, first ? resume_step : 0, r);
    first = false;
    return !sync.cancelled;
  };

  autocompress::ArchRouter router(in.space, o.router);
  TAILOR_ASSIGN_OR_RETURN(autocompress::SearchResult sr,
                          autocompress::RunSearch(in.teacher, supernet, in.space, router, batches,
                                                  predictor, in.budgets, o, progress, hooks));
  TAILOR_RETURN_IF_ERROR(sync.error);
  if (sync.cancelled) {
    return absl::CancelledError(absl::StrCat("search cancelled after step ", sr.steps_run));
  }

  v1::JobOutput output;
  ac::SearchResult result;
  output.set_world_size(world);
  result.set_steps_run(sr.steps_run);
  result.set_resumed_from_step(sr.resumed_from);
  result.set_search_tokens(sr.steps_run * plan.global_batch * plan.length);
  result.set_converged(sr.decision.converged);
  result.set_min_top(sr.decision.min_top);
  output.set_kd_loss(sr.kd_loss);
  *result.mutable_planning() = in.planning;
  if (!ctx.is_rank0()) {
    SetDetail(output, result);
    return output;
  }

  TAILOR_ASSIGN_OR_RETURN(autocompress::RepairResult repair,
                          RepairArgmax(ctx, in, plan, sr.decision.indices));
  result.set_repaired(repair.repaired);
  if (repair.repaired) {
    for (const std::string& c : repair.changes) result.add_repair_changes(c);
  }
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig student,
                          UploadStudent(ctx, in, in.space, repair, output));
  if (ctx.contract().search().settle_rungs() > 0) {
    TAILOR_RETURN_IF_ERROR(AddSettleLadder(ctx, in, plan, repair, output, result));
  }
  if (in.importance.has_value() && !in.importance->axis_kd_skipped.empty()) {
    result.set_axis_kd_skipped(in.importance->axis_kd_skipped);
    spdlog::warn("search: axis steps priced by unit scores, their KD not measured: {}",
                 in.importance->axis_kd_skipped);
  }
  SetDetail(output, result);
  ctx.Progress(1.0, Clip(absl::StrCat("extracted after ", sr.steps_run, " steps",
                                      repair.repaired ? " (repaired)" : "", ": ",
                                      autocompress::DescribeArchitecture(student))));
  return output;
}

// ----------------------------------------------------------------------------------------

costmodel::Prediction PredictionOf(const v1::ModelCosts& c) {
  costmodel::Prediction p;
  p.latency_ms = c.latency_ms();
  p.memory_mib = c.memory_mib();
  p.throughput_tokens_per_s = c.throughput_tokens_per_s();
  return p;
}

// The held-out batches candidates of different shapes are compared on (the uniform baseline's
// grid, the settle's picks): the contract's data.eval when it gives one (fetched into
// `in.eval` beforehand), else its calibration data or the task suites' eval split.
absl::StatusOr<std::vector<at::Tensor>> HeldOutBatches(WorkerContext& ctx, const Inputs& in) {
  const v1::SearchParams& sp = ctx.contract().search();
  const int64_t length = std::min<int64_t>(sp.sequence_length(), in.teacher->config().max_seq);
  return WholeBatches(in, in.eval.has_value() ? in.eval : in.calibration, ctx.contract().seed(),
                      kUniformSalt, kUniformEvalBatches, sp.batch_sequences(), length,
                      tasks::Split::kEval);
}

// The held-out KD loss of each pick (rung index into settle.rungs), sliced untrained from the
// ranked parent, on the batches the uniform baseline scores its candidates on.
absl::StatusOr<std::vector<double>> PickLosses(WorkerContext& ctx, Inputs& in,
                                               const autocompress::SearchSpace& space,
                                               const ac::Settle& settle,
                                               const std::vector<int>& picks) {
  if (ctx.contract().data().has_eval()) {
    TAILOR_ASSIGN_OR_RETURN(in.eval, FetchJobDataset(ctx, "eval"));
  }
  TAILOR_ASSIGN_OR_RETURN(std::vector<at::Tensor> eval, HeldOutBatches(ctx, in));
  std::vector<std::vector<int>> indices;
  for (int p : picks) {
    indices.emplace_back(settle.rungs(p).indices().begin(), settle.rungs(p).indices().end());
  }
  ctx.Progress(0.5, absl::StrCat("scoring the ", picks.size(),
                                 " ladders' fitting rungs on held-out batches"));
  return autocompress::HeldOutKd(in.teacher, space, indices, eval);
}

// The rungs the measure job served, with their figures in `figures`: the unserved ones
// dropped (their changes joined into the next served rung of their ladder), those served in
// its second pass marked `refined`. Every rung is served when the agent predates `served`.
std::vector<v1::ModelCosts> KeepServedRungs(const v1::JobOutput& search,
                                            const v1::MeasureResult& measured,
                                            ac::Settle& settle) {
  const bool all = measured.served_size() != settle.rungs_size();
  google::protobuf::RepeatedPtrField<ac::SettleRung> kept;
  std::vector<v1::ModelCosts> figures;
  std::vector<std::string> pending;  // changes of unserved rungs since the last served one
  int ladder = -1;  // the rung before's (read before it is moved out)
  for (int i = 0; i < settle.rungs_size(); ++i) {
    ac::SettleRung& r = *settle.mutable_rungs(i);
    if (r.ladder() != ladder) pending.clear();
    ladder = r.ladder();
    if (!r.change().empty()) pending.push_back(r.change());
    if (!all && !measured.served(i)) continue;
    r.set_change(autocompress::JoinSteps(pending));
    pending.clear();
    r.set_refined(i < search.candidates_size() && search.candidates(i).on_demand());
    *kept.Add() = std::move(r);
    figures.push_back(measured.measured(i));
  }
  settle.mutable_rungs()->Swap(&kept);
  return figures;
}

// The measured settle: the rung of the search's ladder the `measure` job's figures choose
// (autocompress::ChooseRung), sliced from the ranked parent as the student distillation
// starts from. Its result is the search's, with `settle` filled in.
absl::StatusOr<v1::JobOutput> RunSettle(WorkerContext& ctx) {
  TAILOR_ASSIGN_OR_RETURN(Inputs in, LoadInputs(ctx));
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* search, Input(ctx, methods::jobs::kSearch));
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* measure, Input(ctx, methods::jobs::kMeasure));
  const std::optional<ac::SearchResult> searched = DetailOf<ac::SearchResult>(*search);
  const std::optional<v1::MeasureResult> measured = DetailOf<v1::MeasureResult>(*measure);
  if (!searched.has_value() || !measured.has_value()) {
    return absl::FailedPreconditionError(
        "settle: the search or measure job's result is missing its detail");
  }
  ac::SearchResult result = *searched;
  ac::Settle& settle = *result.mutable_settle();
  if (settle.rungs_size() == 0 || settle.rungs_size() != measured->measured_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("settle: the search named ", settle.rungs_size(), " rungs, measure measured ",
                     measured->measured_size()));
  }
  const std::vector<v1::ModelCosts> figures = KeepServedRungs(*search, *measured, settle);
  // The rungs choose in the ladders' space (0 fine steps: a search that predates them).
  const autocompress::SearchSpace space =
      autocompress::RefineSpace(in.space, settle.fine_steps());
  std::vector<autocompress::MeasuredRung> rungs;
  for (int i = 0; i < settle.rungs_size(); ++i) {
    rungs.push_back({PredictionOf(settle.rungs(i).predicted()), PredictionOf(figures[i]),
                     settle.rungs(i).ladder(), settle.rungs(i).step()});
  }
  autocompress::SettleDecision d =
      autocompress::ChooseRung(rungs, ContractBudgets(ctx.contract().budget()), settle.margin());
  if (d.picks.size() > 1) {
    TAILOR_ASSIGN_OR_RETURN(std::vector<double> kd, PickLosses(ctx, in, space, settle, d.picks));
    autocompress::ChooseAmongPicks(kd, d);
    for (size_t k = 0; k < d.picks.size(); ++k) {
      settle.mutable_rungs(d.picks[k])->set_kd_loss(kd[k]);
    }
  }
  for (int i = 0; i < settle.rungs_size(); ++i) {
    ac::SettleRung& r = *settle.mutable_rungs(i);
    *r.mutable_measured() = figures[i];
    *r.mutable_corrected() = CostsOf(d.corrected[i]);
    r.set_fits(d.fits[i]);
  }
  settle.set_chosen(d.chosen);
  settle.set_latency_scale(d.latency_scale);
  settle.set_memory_scale(d.memory_scale);
  settle.set_throughput_scale(d.throughput_scale);
  settle.set_reason(d.reason);
  settle.mutable_host_scales()->CopyFrom(measured->host_scales());
  settle.set_kept_attempt(measured->kept_attempt());
  settle.set_slow_host_bound(measured->slow_host_bound());
  settle.set_slow_host_pause_s(measured->slow_host_pause_s());

  const ac::SettleRung& chosen = settle.rungs(d.chosen);
  autocompress::RepairResult student;
  student.indices.assign(chosen.indices().begin(), chosen.indices().end());
  TAILOR_ASSIGN_OR_RETURN(
      model::HybridConfig config,
      autocompress::ChildConfig(in.teacher->config(), space, student.indices));
  TAILOR_ASSIGN_OR_RETURN(student.predicted, in.cost_model->Predict(config));
  v1::JobOutput output;
  output.set_world_size(ctx.env.world_size);
  if (search->has_kd_loss()) output.set_kd_loss(search->kd_loss());
  if (ctx.is_rank0()) {
    TAILOR_RETURN_IF_ERROR(UploadStudent(ctx, in, space, student, output).status());
  }
  SetDetail(output, result);
  ctx.Progress(1.0, Clip(absl::StrFormat("settled on rung %d of %d (%s): %s", d.chosen + 1,
                                         settle.rungs_size(), d.reason,
                                         autocompress::DescribeArchitecture(config))));
  return output;
}

absl::StatusOr<v1::JobOutput> RunBaselineUniform(WorkerContext& ctx) {
  TAILOR_ASSIGN_OR_RETURN(Inputs in, LoadInputs(ctx));
  if (ctx.contract().data().has_eval()) {  // collective, before rank 0 goes on alone
    TAILOR_ASSIGN_OR_RETURN(in.eval, FetchJobDataset(ctx, "eval"));
  }
  const costmodel::CostModel& cost_model = *in.cost_model;
  const model::HybridConfig& config = in.teacher->config();

  v1::JobOutput output;
  ac::UniformBaselineResult result;
  output.set_world_size(ctx.env.world_size);
  *result.mutable_planning() = in.planning;
  // Pricing a grid and scoring a few candidates is rank 0's work alone; the other ranks
  // were only needed for the collective fetches above.
  if (!ctx.is_rank0()) {
    SetDetail(output, result);
    return output;
  }

  TAILOR_ASSIGN_OR_RETURN(std::vector<at::Tensor> eval, HeldOutBatches(ctx, in));
  ctx.Progress(0.2, "pricing the uniform grid and scoring the largest fitting candidates");
  absl::Status reachable =
      autocompress::CheckBudgetsReachable(config, in.space, cost_model, in.budgets);
  absl::StatusOr<autocompress::UniformResult> selected =
      reachable.ok()
          ? autocompress::SelectUniform(in.teacher, in.space, cost_model, in.budgets, eval)
          : absl::StatusOr<autocompress::UniformResult>(reachable);
  if (absl::IsFailedPrecondition(selected.status())) {
    // The baseline is a comparison, not the product: a budget no uniform model meets (it
    // cannot remove layers, AutoCompress can) is a finding for the report, not a failed
    // campaign. Its distill and verify jobs see `feasible: false` and skip.
    output.set_feasible(false);
    output.set_reason(std::string(selected.status().message()));
    SetDetail(output, result);
    ctx.Progress(1.0, Clip(absl::StrCat("no uniform baseline: ", selected.status().message())));
    return output;
  }
  TAILOR_ASSIGN_OR_RETURN(autocompress::UniformResult u, std::move(selected));
  output.set_feasible(true);

  TAILOR_ASSIGN_OR_RETURN(autocompress::Student student,
                          autocompress::ExtractStudent(in.teacher, in.space, u.best.indices));
  ctx.Progress(0.9, "uploading the uniform student");
  TAILOR_ASSIGN_OR_RETURN(v1::Artifact art,
                          UploadModel(ctx, student.model, "student_initial", "baseline-initial"));
  output.set_student_digest(art.digest());
  output.set_teacher_digest(in.teacher_digest);
  SetPredicted(output, u.best.predicted);
  SetArchitecture(output, student.config);
  result.set_search_tokens(u.eval_tokens);
  result.set_steps_run(0);
  result.set_converged(true);
  result.set_min_top(1.0);
  result.set_repaired(false);
  output.set_kd_loss(u.best.kd_loss);
  result.set_levels(u.best.levels);
  result.set_grid_size(u.grid_size);
  result.set_fitting(u.fitting);
  for (const autocompress::UniformCandidate& c : u.scored) {
    ac::UniformCandidate& cand = *result.add_candidates();
    cand.set_levels(c.levels);
    cand.set_parameters(c.parameters);
    cand.set_kd_loss(c.kd_loss);
    cand.set_latency_ms(c.predicted.latency_ms);
    cand.set_memory_mib(c.predicted.memory_mib);
    cand.set_throughput_tokens_per_s(c.predicted.throughput_tokens_per_s);
  }
  SetDetail(output, result);
  ctx.Progress(1.0, Clip(absl::StrFormat("uniform baseline %s (kd %.4f, %d of %d fit): %s",
                                         u.best.levels, u.best.kd_loss, u.fitting, u.grid_size,
                                         autocompress::DescribeArchitecture(student.config))));
  return output;
}

}  // namespace

void RegisterSearchJobs() {
  RegisterWorkerHandler(methods::jobs::kSearch, RunSearchJob);
  RegisterWorkerHandler(methods::jobs::kBaselineUniform, RunBaselineUniform);
  RegisterWorkerHandler(methods::jobs::kSettle, RunSettle);
}

}  // namespace tailor::worker
