// The BLOCK_REMOVAL jobs (spec §2, CBO; docs/blockremoval.md):
//
// gate_gradients: per-sample gradients of the answer loss w.r.t. the block gates (batch 1),
//   calibration samples split across ranks, rows gathered by an all-reduce of a zero-padded
//   [m, N] matrix; rank 0 stores H = AᵀA/m as an artifact (so re-solving with another M needs
//   no model run), uploads the parent once as a model archive (the teacher of later jobs) and
//   reports the Block Influence scores of the same samples.
// solve: the k lowest states of E(x) = xᵀHx with sum x = M (M from the contract, or the
//   smallest M with a state meeting the budget under the profiled cost model).
// evaluate_candidates: the real held-out loss of every kept state and of the Block Influence
//   choice at the same M; the best state's model (blocks made absent) is uploaded.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/job_output.h"
#include "common/status_macros.h"
#include "compression/autocompress/uniform.h"
#include "compression/blockremoval/budget.h"
#include "compression/blockremoval/gates.h"
#include "compression/blockremoval/qubo.h"
#include "compression/costmodel/cost_model.h"
#include "compression/hf/hf_import.h"
#include "compression/model/hybrid_lm.h"
#include "nlohmann/json.hpp"
#include "methods/api/job_kinds.h"
#include "methods/block_removal/block_removal_results.pb.h"
#include "methods/block_removal/job_kinds.h"
#include "tailor/v1/job_output.pb.h"
#include "worker/job_data.h"
#include "worker/job_io.h"
#include "worker/worker_context.h"

namespace tailor::worker {
namespace {

namespace results = v1::block_removal;  // the jobs' JobOutput.detail messages

// Seed salts: calibration (gradients, Block Influence) and held-out evaluation streams.
constexpr uint64_t kCalibrationSalt = 0x6361626f00000000ULL;  // "cbo"
constexpr uint64_t kHeldOutSalt = 0x686f6c646f757400ULL;      // "holdout"
// Held-out samples per candidate: enough answer tokens (~600) for losses of candidates that
// differ by a block to separate, small enough that evaluating 8 candidates takes seconds.
constexpr int64_t kHeldOutSamples = 96;
constexpr char kFisherFormat[] = "tailor-block-fisher-v1";

// Replaces the repeated field `*out` with `v`.
template <typename T, typename Field>
void Assign(const std::vector<T>& v, Field* out) {
  out->Assign(v.begin(), v.end());
}

template <typename Field>
std::vector<int> ToInts(const Field& v) {
  return std::vector<int>(v.begin(), v.end());
}

std::vector<int> LayersOf(const std::vector<int>& vars, const std::vector<int>& layers) {
  std::vector<int> out;
  for (int v : vars) out.push_back(layers[v]);
  return out;
}

// Blocks removed by stage `stage` (0-based) of `stages` when `m` are removed in all: the
// remainder split evenly, later stages taking the extra ones (12 in 2: 6, 6; 5 in 2: 2, 3).
int StageBlocks(int m, int stages, int stage, int removed_so_far) {
  return (m - removed_so_far) / (stages - stage);
}
int FirstStageBlocks(int m, int stages) { return StageBlocks(m, stages, 0, 0); }

// ---------------------------------------------------------------------------------------

// The contract's calibration samples and this rank's share of them. GatheredGateGradients
// builds A ([samples, layers]: each rank fills its rows, the rest stay zero, and the ranks sum),
// so A is the same matrix for any world size; its progress reports run from `progress_from`
// to `progress_to`.
struct Calibration {
  std::vector<tasks::Sample> mine;
  int64_t total = 0, lo = 0;
};

// `count` full sequences of a contract dataset as samples whose "answer" is every token after
// the first (so the answer loss is the language-modelling loss), from `reader`; with
// `at_most`, fewer when the data holds fewer (but one at least).
absl::StatusOr<std::vector<tasks::Sample>> DataSamples(data::TextDatasetReader& reader,
                                                       int64_t count, int64_t length,
                                                       const std::string& role,
                                                       bool at_most = false) {
  std::vector<tasks::Sample> samples;
  while (static_cast<int64_t>(samples.size()) < count) {
    TAILOR_ASSIGN_OR_RETURN(std::optional<data::TokenSequence> s, reader.Next());
    if (!s.has_value() && at_most && !samples.empty()) break;
    if (!s.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.", role, ": ", samples.size(), " sequences of ", length, " tokens where ",
          count, " are needed (more data, or fewer block_removal.calibration_samples)"));
    }
    if (static_cast<int64_t>(s->tokens.size()) != length) continue;
    tasks::Sample sample;
    sample.tokens.assign(s->tokens.begin(), s->tokens.end());
    sample.answer_begin = 1;
    samples.push_back(std::move(sample));
  }
  return samples;
}

// Sequence length of block removal's samples from a contract dataset.
int64_t DataSampleLength(const WorkerContext& ctx, const model::HybridConfig& parent) {
  const v1::DatasetRef& ref = ctx.contract().data().calibration();
  return std::min<int64_t>(ref.has_sequence_tokens() ? ref.sequence_tokens() : 64,
                           parent.max_seq);
}

// Collective. With data.calibration each rank reads its own documents for its rows.
absl::StatusOr<Calibration> CalibrationShare(WorkerContext& ctx,
                                             const model::HybridConfig& parent) {
  const v1::DeploymentContract& c = ctx.contract();
  Calibration cal;
  cal.total = c.block_removal().calibration_samples();
  const int world = ctx.env.world_size, rank = ctx.env.rank;
  cal.lo = rank * cal.total / world;
  const int64_t hi = (rank + 1) * cal.total / world;
  if (c.data().has_calibration()) {
    TAILOR_ASSIGN_OR_RETURN(data::ParentVocabulary vocab, JobParentVocabulary(ctx, parent));
    TAILOR_ASSIGN_OR_RETURN(JobDataset d, FetchJobDataset(ctx, "calibration"));
    const int64_t length = DataSampleLength(ctx, parent);
    TAILOR_ASSIGN_OR_RETURN(
        std::unique_ptr<data::TextDatasetReader> reader,
        OpenJobReader(d, vocab, {.sequence_tokens = length, .rank = rank, .world_size = world}));
    TAILOR_ASSIGN_OR_RETURN(cal.mine, DataSamples(*reader, hi - cal.lo, length, "calibration"));
    return cal;
  }
  // Every rank draws the same stream and keeps rows [rank*m/W, (rank+1)*m/W).
  const auto all = blockremoval::CalibrationSamples(c.seed() ^ kCalibrationSalt, cal.total,
                                                    tasks::Split::kTrain);
  cal.mine.assign(all.begin() + cal.lo, all.begin() + hi);
  return cal;
}

absl::StatusOr<at::Tensor> GatheredGateGradients(WorkerContext& ctx, model::HybridLM& model,
                                                 const std::vector<int>& layers,
                                                 const Calibration& cal, double progress_from,
                                                 double progress_to) {
  at::Tensor a = torch::zeros({cal.total, static_cast<int64_t>(layers.size())}, torch::kFloat64);
  for (size_t s = 0; s < cal.mine.size(); ++s) {
    TAILOR_ASSIGN_OR_RETURN(at::Tensor row,
                            blockremoval::GateGradients(model, {cal.mine[s]}, layers));
    a[cal.lo + static_cast<int64_t>(s)] = row[0];
    if (ctx.Cancelled()) return absl::CancelledError("block removal cancelled");
    if (s % 8 == 0) {
      ctx.Progress(progress_from + (progress_to - progress_from) * static_cast<double>(s) /
                                       cal.mine.size(),
                   absl::StrCat("gate gradients: sample ", s + 1, "/", cal.mine.size(),
                                " on rank 0"),
                   s + 1, static_cast<int64_t>(cal.mine.size()));
    }
  }
  if (ctx.env.world_size > 1) TAILOR_RETURN_IF_ERROR(ctx.dist->AllReduceSum(a));
  return a;
}

absl::StatusOr<v1::JobOutput> RunGateGradients(WorkerContext& ctx) {
  const v1::DeploymentContract& c = ctx.contract();
  if (c.parent().path().empty()) {
    return absl::InvalidArgumentError(
        "parent.path: gate_gradients needs a parent directory (tailor's config.json + "
        "model.safetensors, or a Hugging Face checkpoint)");
  }
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM parent, hf::LoadModelDir(c.parent().path(), c.parent().format()));
  const std::vector<int> layers = blockremoval::PresentLayers(parent->config());
  if (layers.empty()) return absl::InvalidArgumentError("parent has no present blocks");
  const int world = ctx.env.world_size;
  TAILOR_ASSIGN_OR_RETURN(const Calibration cal, CalibrationShare(ctx, parent->config()));
  const int64_t total = cal.total;
  ctx.Progress(0.05, absl::StrCat("gate gradients of ", layers.size(), " blocks on ", total,
                                  " samples over ", world, " ranks"));
  TAILOR_ASSIGN_OR_RETURN(at::Tensor a,
                          GatheredGateGradients(ctx, parent, layers, cal, 0.05, 0.75));
  TAILOR_ASSIGN_OR_RETURN(blockremoval::InfluenceSums bi,
                          blockremoval::BlockInfluence(parent, cal.mine));
  std::vector<double> bi_flat = bi.sum;
  bi_flat.push_back(bi.tokens);
  at::Tensor bi_t = torch::tensor(bi_flat, torch::kFloat64);
  if (world > 1) TAILOR_RETURN_IF_ERROR(ctx.dist->AllReduceSum(bi_t));
  const double tokens = bi_t[-1].item<double>();
  std::vector<double> influence;
  for (int l : layers) influence.push_back(bi_t[l].item<double>() / std::max(1.0, tokens));

  v1::JobOutput output;
  output.set_world_size(world);
  results::GateGradientsResult result;
  result.set_calibration_samples(total);
  result.set_blocks(static_cast<int>(layers.size()));
  Assign(layers, result.mutable_layers());
  Assign(influence, result.mutable_block_influence());
  if (!ctx.is_rank0()) {
    SetDetail(output, result);
    return output;
  }

  TAILOR_ASSIGN_OR_RETURN(blockremoval::Qubo q, blockremoval::FisherQubo(a));
  nlohmann::json j;
  j["format"] = kFisherFormat;
  j["n"] = q.n;
  j["rows"] = total;
  j["layers"] = layers;
  j["h"] = q.h;
  TAILOR_ASSIGN_OR_RETURN(v1::Artifact fisher,
                          ctx.job->UploadArtifactBytes("block_fisher", "fisher.json", j.dump()));
  result.set_fisher_digest(fisher.digest());
  for (int i = 0; i < q.n; ++i) result.add_fisher_diagonal(q.at(i, i));
  ctx.Progress(0.8, "uploading the parent (teacher of the removed-block student)");
  TAILOR_ASSIGN_OR_RETURN(v1::Artifact art, UploadModel(ctx, parent, "parent", "parent"));
  output.set_teacher_digest(art.digest());
  SetDetail(output, result);
  ctx.Progress(1.0, absl::StrFormat("H (%dx%d) from %d samples stored", q.n, q.n, total));
  return output;
}

// ---------------------------------------------------------------------------------------

absl::StatusOr<blockremoval::Qubo> FetchFisher(WorkerContext& ctx, const std::string& digest,
                                               std::vector<int>& layers) {
  const std::string path = absl::StrCat(ctx.work_dir, "/fisher.json");
  TAILOR_RETURN_IF_ERROR(ctx.job->DownloadArtifact(digest, path));
  TAILOR_ASSIGN_OR_RETURN(std::string text, model::ReadFileToString(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != kFisherFormat) {
    return absl::InvalidArgumentError(absl::StrCat("artifact ", digest, ": not a ", kFisherFormat));
  }
  blockremoval::Qubo q;
  try {
    q.n = j.at("n").get<int>();
    q.h = j.at("h").get<std::vector<double>>();
    layers = j.at("layers").get<std::vector<int>>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("artifact ", digest, ": ", e.what()));
  }
  if (static_cast<int>(layers.size()) != q.n) {
    return absl::InvalidArgumentError(absl::StrCat("artifact ", digest, ": layers != n"));
  }
  TAILOR_RETURN_IF_ERROR(blockremoval::ValidateQubo(q));
  return q;
}

blockremoval::SolverKind KindOf(v1::QuboSolver s) {
  switch (s) {
    case v1::EXACT:
      return blockremoval::SolverKind::kExact;
    case v1::SIMULATED_ANNEALING:
      return blockremoval::SolverKind::kAnnealing;
    case v1::TABU:
      return blockremoval::SolverKind::kTabu;
    default:
      return blockremoval::SolverKind::kAuto;
  }
}

blockremoval::BudgetLimits LimitsOf(const v1::Budget& b) {
  blockremoval::BudgetLimits l;
  if (b.has_latency_ms_max()) l.latency_ms_max = b.latency_ms_max();
  if (b.has_memory_mib_max()) l.memory_mib_max = b.memory_mib_max();
  if (b.has_throughput_tokens_per_s_min()) {
    l.throughput_tokens_per_s_min = b.throughput_tokens_per_s_min();
  }
  return l;
}

void SetPredicted(const costmodel::Prediction& p, v1::ModelCosts* out) {
  out->set_latency_ms(p.latency_ms);
  out->set_throughput_tokens_per_s(p.throughput_tokens_per_s);
  out->set_memory_mib(p.memory_mib);
}

// The profiled cost model when the plan has a profile job (a budget-driven M), else none.
// Collective: every rank fetches the cost table, so every rank calls this.
absl::StatusOr<std::optional<costmodel::CostModel>> ProfiledCostModel(WorkerContext& ctx) {
  std::optional<costmodel::CostModel> cost_model;
  if (!ctx.assignment.inputs().contains(methods::jobs::kProfile)) return cost_model;
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* profile, Input(ctx, methods::jobs::kProfile));
  const std::optional<v1::ProfileResult> table_ref = DetailOf<v1::ProfileResult>(*profile);
  TAILOR_ASSIGN_OR_RETURN(
      const std::string table_id,
      NonEmpty(methods::jobs::kProfile, "cost_table_id",
               table_ref ? table_ref->cost_table_id() : std::string()));
  TAILOR_ASSIGN_OR_RETURN(v1::CostTable table, FetchCostTable(ctx, table_id));  // collective
  absl::StatusOr<costmodel::CostModel> m = costmodel::CostModel::FromTable(table);
  if (!m.ok()) return absl::FailedPreconditionError(m.status().message());
  cost_model.emplace(*std::move(m));
  return cost_model;
}

// What the solve job works on: the gate_gradients job's H and Block Influence scores, and
// the parent's config (the cost model predicts children of it).
struct SolveInputs {
  std::string fisher_digest, teacher_digest;
  blockremoval::Qubo q;
  std::vector<int> layers;        // variable -> layer
  std::vector<double> influence;  // per variable
  model::HybridConfig parent_config;
};

absl::StatusOr<SolveInputs> ReadSolveInputs(WorkerContext& ctx) {
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* grads, Input(ctx, methods::jobs::kGateGradients));
  const results::GateGradientsResult gradients =
      DetailOf<results::GateGradientsResult>(*grads).value_or(results::GateGradientsResult());
  SolveInputs in;
  TAILOR_ASSIGN_OR_RETURN(in.fisher_digest,
                          NonEmpty(methods::jobs::kGateGradients, "fisher_digest",
                                   gradients.fisher_digest()));
  TAILOR_ASSIGN_OR_RETURN(in.teacher_digest,
                          NonEmpty(methods::jobs::kGateGradients, "teacher_digest",
                                   grads->teacher_digest()));
  TAILOR_ASSIGN_OR_RETURN(in.q, FetchFisher(ctx, in.fisher_digest, in.layers));
  if (gradients.block_influence().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job input '", methods::jobs::kGateGradients, "' has no 'block_influence' in its output"));
  }
  in.influence.assign(gradients.block_influence().begin(), gradients.block_influence().end());
  TAILOR_ASSIGN_OR_RETURN(in.parent_config,
                          hf::ReadModelConfig(ctx.contract().parent().path(),
                                              ctx.contract().parent().format()));
  return in;
}

// The solver's answer: the kept states (ascending energy) with their predicted costs when
// there is a cost model, and the M they were solved for.
struct Spectrum {
  int m = 0;        // blocks removed in all
  int stage_m = 0;  // blocks the states remove (the first stage's share of m)
  std::vector<blockremoval::State> states;
  std::vector<std::optional<costmodel::Prediction>> predicted;  // per state
  std::optional<blockremoval::State> ground;   // at M, kept or not (budget-driven may drop it)
  std::vector<blockremoval::MTrial> m_search;  // budget-driven only
  std::string solver_name;
  double solve_seconds = 0;
};

// Fixed M: the k lowest states removing the first stage's share of `m` blocks, each priced
// by the cost model when there is one.
absl::StatusOr<Spectrum> SolveFixedM(const SolveInputs& in,
                                     const std::optional<costmodel::CostModel>& cost_model,
                                     v1::QuboSolver solver_kind, blockremoval::SolveOptions o,
                                     int m, int stages) {
  const blockremoval::Qubo& q = in.q;
  if (m >= q.n) {
    return absl::InvalidArgumentError(absl::StrCat("block_removal.blocks_to_remove: ", m,
                                                   " would remove every one of the ", q.n,
                                                   " blocks"));
  }
  if (stages > m) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block_removal.stages: at most block_removal.blocks_to_remove (", m, "), got ", stages));
  }
  Spectrum sp;
  sp.m = m;
  sp.stage_m = FirstStageBlocks(m, stages);
  o.m = sp.stage_m;
  const auto solver = blockremoval::MakeSolver(KindOf(solver_kind), q, o.m);
  sp.solver_name = std::string(solver->name());
  const auto t0 = std::chrono::steady_clock::now();
  TAILOR_ASSIGN_OR_RETURN(sp.states, solver->Solve(q, o));
  sp.solve_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sp.predicted.assign(sp.states.size(), std::nullopt);
  if (!cost_model) return sp;
  for (size_t i = 0; i < sp.states.size(); ++i) {
    TAILOR_ASSIGN_OR_RETURN(model::HybridConfig child,
                            blockremoval::RemoveBlocks(in.parent_config,
                                                       LayersOf(sp.states[i].removed, in.layers)));
    TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction p, cost_model->Predict(child));
    sp.predicted[i] = p;
  }
  return sp;
}

// Budget-driven M: the smallest M for which one of the k lowest states meets every budget;
// only states that meet it are kept as candidates.
absl::StatusOr<Spectrum> SolveBudgetDriven(const SolveInputs& in,
                                           const std::optional<costmodel::CostModel>& cost_model,
                                           const v1::DeploymentContract& c,
                                           const blockremoval::SolveOptions& o) {
  if (!cost_model) {
    return absl::FailedPreconditionError("a budget-driven block removal needs the profile job");
  }
  TAILOR_ASSIGN_OR_RETURN(
      blockremoval::BudgetedSolve b,
      blockremoval::SolveForBudget(in.q, in.layers, in.parent_config, *cost_model,
                                   LimitsOf(c.budget()), KindOf(c.block_removal().solver()), o));
  Spectrum sp;
  sp.m = b.m;
  sp.stage_m = b.m;
  sp.states = std::move(b.states);
  sp.predicted.assign(b.predicted.begin(), b.predicted.end());
  sp.solver_name = b.solver;
  sp.solve_seconds = b.solve_seconds;
  sp.ground = b.ground;
  sp.m_search = std::move(b.trials);
  return sp;
}

// The Block Influence choice at the same M, with its energy under the same H.
results::Baseline BlockInfluenceBaseline(const SolveInputs& in, int m) {
  const std::vector<int> bi_vars = blockremoval::LowestInfluence(in.influence, m);
  results::Baseline baseline;
  baseline.set_method("block_influence");
  Assign(LayersOf(bi_vars, in.layers), baseline.mutable_removed_layers());
  baseline.set_energy(blockremoval::Energy(in.q, bi_vars));
  return baseline;
}

results::SolveResult SolveResultOf(const SolveInputs& in, const Spectrum& sp, int stages,
                                   bool budget_driven) {
  results::SolveResult result;
  // Why this M: every smaller M and how close its best state came (the report shows it).
  for (const blockremoval::MTrial& t : sp.m_search) {
    results::MTrial& trial = *result.add_m_search();
    trial.set_m(t.m);
    trial.set_states(t.states);
    trial.set_fitting(t.fitting);
    trial.set_min_latency_ms(t.min_latency_ms);
    trial.set_min_memory_mib(t.min_memory_mib);
  }
  result.set_blocks_to_remove(sp.m);
  result.set_blocks(in.q.n);
  result.set_stages(stages);
  result.set_stage_blocks(sp.stage_m);  // what the spectrum's states remove
  result.set_solver(sp.solver_name);
  result.set_solve_seconds(sp.solve_seconds);
  result.set_states_total(blockremoval::Binomial(in.q.n, sp.stage_m));
  result.set_budget_driven(budget_driven);
  result.set_fisher_digest(in.fisher_digest);
  Assign(in.layers, result.mutable_layers());
  Assign(in.influence, result.mutable_block_influence());
  for (size_t i = 0; i < sp.states.size(); ++i) {
    results::SpectrumState& s = *result.add_spectrum();
    s.set_level(static_cast<int>(i));  // 0 = lowest kept state
    s.set_energy(sp.states[i].energy);
    Assign(LayersOf(sp.states[i].removed, in.layers), s.mutable_removed_layers());
    if (sp.predicted[i]) SetPredicted(*sp.predicted[i], s.mutable_predicted());
  }
  const blockremoval::State& ground = sp.ground ? *sp.ground : sp.states[0];
  result.set_ground_energy(ground.energy);
  Assign(LayersOf(ground.removed, in.layers), result.mutable_ground_removed_layers());
  *result.mutable_baseline() = BlockInfluenceBaseline(in, sp.m);
  return result;
}

absl::StatusOr<v1::JobOutput> RunSolve(WorkerContext& ctx) {
  const v1::DeploymentContract& c = ctx.contract();
  const v1::BlockRemovalParams& br = c.block_removal();
  TAILOR_ASSIGN_OR_RETURN(std::optional<costmodel::CostModel> cost_model,
                          ProfiledCostModel(ctx));  // collective
  v1::JobOutput output;
  if (!ctx.is_rank0()) return output;  // solving takes milliseconds: rank 0 alone

  TAILOR_ASSIGN_OR_RETURN(const SolveInputs in, ReadSolveInputs(ctx));
  blockremoval::SolveOptions o;
  o.k = br.candidates();
  o.seed = c.seed() + 1;
  // Staged removal (stages > 1, fixed M only): this job solves the first stage's share;
  // evaluate_candidates picks among its states and runs the later stages.
  const int stages = std::max(1, br.stages());
  Spectrum sp;
  if (br.has_blocks_to_remove()) {
    TAILOR_ASSIGN_OR_RETURN(
        sp, SolveFixedM(in, cost_model, br.solver(), o, br.blocks_to_remove(), stages));
  } else {
    TAILOR_ASSIGN_OR_RETURN(sp, SolveBudgetDriven(in, cost_model, c, o));
  }

  SetDetail(output, SolveResultOf(in, sp, stages, !br.has_blocks_to_remove()));
  output.set_teacher_digest(in.teacher_digest);
  if (sp.predicted[0]) SetPredicted(*sp.predicted[0], output.mutable_predicted());
  ctx.Progress(1.0, absl::StrFormat("%s: M=%d (first stage %d of %d), %d states kept, ground "
                                    "energy %.4g",
                                    sp.solver_name, sp.m, sp.stage_m, stages, sp.states.size(),
                                    sp.states[0].energy));
  return output;
}

// ---------------------------------------------------------------------------------------

// Stages 2..S of a staged removal (block_removal.stages): around the model without
// `*removed`, the gate gradients and H are computed again (every rank its share of the
// calibration samples), the next share of M is solved for its k lowest states, and the one
// with the lowest held-out loss (candidates round-robin over ranks) is added. Every rank runs
// the same deterministic solve, so they agree without a broadcast. Appends one row per stage.
absl::Status RunLaterStages(WorkerContext& ctx, const model::HybridLM& parent,
                            const std::vector<tasks::Sample>& held_out, int m, int stages,
                            std::vector<int>* removed, double* loss,
                            google::protobuf::RepeatedPtrField<results::StageRow>* rows) {
  const v1::BlockRemovalParams& br = ctx.contract().block_removal();
  TAILOR_ASSIGN_OR_RETURN(const Calibration cal, CalibrationShare(ctx, parent->config()));
  const int world = ctx.env.world_size;
  for (int stage = 1; stage < stages; ++stage) {
    const int step = StageBlocks(m, stages, stage, static_cast<int>(removed->size()));
    TAILOR_ASSIGN_OR_RETURN(model::HybridLM current, blockremoval::WithoutBlocks(parent, *removed));
    const std::vector<int> present = blockremoval::PresentLayers(current->config());
    const double from = 0.5 + 0.4 * (stage - 1) / (stages - 1);
    const double to = 0.5 + 0.4 * stage / (stages - 1);
    TAILOR_ASSIGN_OR_RETURN(at::Tensor a, GatheredGateGradients(ctx, current, present, cal, from,
                                                                from + 0.6 * (to - from)));
    TAILOR_ASSIGN_OR_RETURN(blockremoval::Qubo q, blockremoval::FisherQubo(a));
    blockremoval::SolveOptions o;
    o.m = step;
    o.k = br.candidates();
    o.seed = ctx.contract().seed() + 1 + stage;
    o.threads = 1;  // the same answer on every rank, and the ranks already share the cores
    TAILOR_ASSIGN_OR_RETURN(std::vector<blockremoval::State> states,
                            blockremoval::MakeSolver(KindOf(br.solver()), q, step)->Solve(q, o));
    const int64_t count = static_cast<int64_t>(states.size());
    at::Tensor losses = torch::zeros({count}, torch::kFloat64);
    std::vector<std::vector<int>> sets;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<int> all = *removed;
      for (int v : states[i].removed) all.push_back(present[v]);
      std::sort(all.begin(), all.end());
      sets.push_back(std::move(all));
      if (i % world != ctx.env.rank) continue;
      TAILOR_ASSIGN_OR_RETURN(model::HybridLM candidate,
                              blockremoval::WithoutBlocks(parent, sets.back()));
      TAILOR_ASSIGN_OR_RETURN(double l, blockremoval::HeldOutLoss(candidate, held_out));
      losses[i] = l;
    }
    if (world > 1) TAILOR_RETURN_IF_ERROR(ctx.dist->AllReduceSum(losses));
    int64_t best = 0;
    for (int64_t i = 1; i < count; ++i) {
      if (losses[i].item<double>() < losses[best].item<double>()) best = i;
    }
    std::vector<int> added;
    for (int v : states[best].removed) added.push_back(present[v]);
    std::sort(added.begin(), added.end());
    *removed = sets[best];
    *loss = losses[best].item<double>();
    results::StageRow& row = *rows->Add();
    row.set_stage(stage + 1);
    Assign(added, row.mutable_added_layers());
    Assign(*removed, row.mutable_removed_layers());
    row.set_energy(states[best].energy);
    row.set_candidates(static_cast<int>(count));
    row.set_loss(*loss);
    ctx.Progress(to, absl::StrFormat("stage %d/%d: removed %s, loss %.4f", stage + 1, stages,
                                     absl::StrJoin(*removed, ","), *loss));
  }
  return absl::OkStatus();
}

// What evaluate_candidates compares: the solve job's kept states (levels 0..k-1) and, last,
// the Block Influence baseline at the same M.
struct Candidates {
  std::vector<std::vector<int>> removed;  // per level, then the baseline
  std::vector<double> energies;           // per level
  results::Baseline baseline;
  int m = 0;       // blocks removed in all
  int stages = 1;  // > 1: the later stages extend the best first-stage state
};

absl::StatusOr<Candidates> CandidatesOf(const std::optional<results::SolveResult>& solve) {
  if (!solve || solve->spectrum().empty()) {
    return absl::FailedPreconditionError("job input 'solve' has no spectrum");
  }
  if (!solve->has_baseline()) {
    return absl::FailedPreconditionError("job input 'solve' has no baseline");
  }
  Candidates cands;
  for (const results::SpectrumState& s : solve->spectrum()) {
    cands.removed.push_back(ToInts(s.removed_layers()));
    cands.energies.push_back(s.energy());
  }
  cands.baseline = solve->baseline();
  cands.removed.push_back(ToInts(cands.baseline.removed_layers()));  // last: the baseline
  cands.m = solve->blocks_to_remove();
  // An older solve without `stages` solved in one stage.
  cands.stages = solve->has_stages() ? solve->stages() : 1;
  return cands;
}

// The held-out loss of every candidate and, last, of the parent. Collective: candidates go
// round-robin over ranks and the loss vector is summed (each entry has one owner).
absl::StatusOr<at::Tensor> HeldOutLosses(WorkerContext& ctx, model::HybridLM& parent,
                                         const std::vector<std::vector<int>>& removed,
                                         const std::vector<tasks::Sample>& held_out) {
  const int world = ctx.env.world_size;
  const int64_t count = static_cast<int64_t>(removed.size());
  at::Tensor losses = torch::zeros({count + 1}, torch::kFloat64);  // + the parent
  for (int64_t i = 0; i <= count; ++i) {
    if (i % world != ctx.env.rank) continue;
    double loss = 0;
    if (i == count) {
      TAILOR_ASSIGN_OR_RETURN(loss, blockremoval::HeldOutLoss(parent, held_out));
    } else {
      TAILOR_ASSIGN_OR_RETURN(model::HybridLM m, blockremoval::WithoutBlocks(parent, removed[i]));
      TAILOR_ASSIGN_OR_RETURN(loss, blockremoval::HeldOutLoss(m, held_out));
    }
    losses[i] = loss;
    ctx.Progress(0.05 + 0.8 * static_cast<double>(i + 1) / (count + 1),
                 absl::StrCat("candidate ", i + 1, "/", count + 1, " loss ", loss));
  }
  if (world > 1) TAILOR_RETURN_IF_ERROR(ctx.dist->AllReduceSum(losses));
  return losses;
}

// The kept state with the lowest held-out loss (the baseline, the last candidate, is not one).
int64_t BestLevel(const at::Tensor& losses, int64_t count) {
  int64_t best = 0;
  for (int64_t i = 1; i + 1 < count; ++i) {
    if (losses[i].item<double>() < losses[best].item<double>()) best = i;
  }
  return best;
}

// The removal this job delivers and its held-out loss.
struct Removal {
  std::vector<int> removed;
  double loss = 0;
};

// The best first-stage state, extended by the later stages when there are any (then every
// stage, the first included, gets a row in `result`). Collective when staged.
absl::StatusOr<Removal> StagedRemoval(WorkerContext& ctx, const model::HybridLM& parent,
                                      const std::vector<tasks::Sample>& held_out,
                                      const Candidates& cands, int64_t best, double best_loss,
                                      results::EvaluateCandidatesResult& result) {
  Removal r{cands.removed[best], best_loss};
  if (cands.stages <= 1) return r;
  results::StageRow& first = *result.add_stages();
  first.set_stage(1);
  Assign(r.removed, first.mutable_added_layers());
  Assign(r.removed, first.mutable_removed_layers());
  first.set_energy(cands.energies[best]);
  first.set_candidates(static_cast<int>(cands.removed.size() - 1));
  first.set_loss(r.loss);
  TAILOR_RETURN_IF_ERROR(RunLaterStages(ctx, parent, held_out, cands.m, cands.stages, &r.removed,
                                        &r.loss, result.mutable_stages()));
  return r;
}

// Every kept state's loss, the choice, and how it compares with the parent and the baseline.
void SetCandidateLosses(const Candidates& cands, const at::Tensor& losses, int64_t best,
                        const Removal& chosen, results::EvaluateCandidatesResult& result) {
  const int64_t count = static_cast<int64_t>(cands.removed.size());
  for (int64_t i = 0; i + 1 < count; ++i) {
    results::Candidate& s = *result.add_candidates();
    s.set_level(static_cast<int>(i));
    s.set_energy(cands.energies[i]);
    s.set_loss(losses[i].item<double>());
    Assign(cands.removed[i], s.mutable_removed_layers());
  }
  result.set_chosen_level(static_cast<int>(best));
  result.set_chosen_energy(cands.energies[best]);
  result.set_loss(chosen.loss);
  result.set_ground_state_loss(losses[0].item<double>());
  result.set_parent_loss(losses[count].item<double>());
  Assign(chosen.removed, result.mutable_removed_layers());
  result.set_held_out_samples(kHeldOutSamples);
  *result.mutable_baseline() = cands.baseline;
  result.mutable_baseline()->set_loss(losses[count - 1].item<double>());
  result.set_beats_baseline(chosen.loss <= losses[count - 1].item<double>());
}

// Rank 0: the parent with the chosen blocks made absent, uploaded as the student (and as the
// model verify reads when there is no distillation).
absl::Status UploadStudent(WorkerContext& ctx, const model::HybridLM& parent,
                           const std::vector<int>& removed, const std::string& teacher_digest,
                           v1::JobOutput& output) {
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM student, blockremoval::WithoutBlocks(parent, removed));
  const model::HybridConfig& config = student->config();
  output.set_architecture(autocompress::DescribeArchitecture(config));
  for (const std::string& l : autocompress::DescribeLayers(config)) output.add_layers(l);
  output.set_parameters(config.ParameterCount());
  TAILOR_ASSIGN_OR_RETURN(v1::Artifact art,
                          UploadModel(ctx, student, "student_initial", "student"));
  output.set_student_digest(art.digest());
  output.set_model_digest(art.digest());  // what verify reads without distill
  output.set_teacher_digest(teacher_digest);
  return absl::OkStatus();
}

// Collective. The held-out samples every rank scores candidates on: kHeldOutSamples of
// data.eval (else data.calibration) read whole by each rank, or of the task suites' eval split.
absl::StatusOr<std::vector<tasks::Sample>> HeldOut(WorkerContext& ctx,
                                                   const model::HybridLM& parent) {
  const v1::DataParams& data = ctx.contract().data();
  if (!data.has_eval() && !data.has_calibration()) {
    return blockremoval::CalibrationSamples(ctx.contract().seed() ^ kHeldOutSalt,
                                            kHeldOutSamples, tasks::Split::kEval);
  }
  const std::string role = data.has_eval() ? "eval" : "calibration";
  TAILOR_ASSIGN_OR_RETURN(data::ParentVocabulary vocab,
                          JobParentVocabulary(ctx, parent->config()));
  TAILOR_ASSIGN_OR_RETURN(JobDataset d, FetchJobDataset(ctx, role));
  const int64_t length = DataSampleLength(ctx, parent->config());
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<data::TextDatasetReader> reader,
                          OpenJobReader(d, vocab, {.sequence_tokens = length}));
  return DataSamples(*reader, kHeldOutSamples, length, role, /*at_most=*/true);
}

absl::StatusOr<v1::JobOutput> RunEvaluateCandidates(WorkerContext& ctx) {
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* solve_output, Input(ctx, methods::jobs::kSolve));
  TAILOR_ASSIGN_OR_RETURN(const std::string teacher_digest,
                          NonEmpty(methods::jobs::kSolve, "teacher_digest",
                                   solve_output->teacher_digest()));
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM parent, FetchModel(ctx, teacher_digest, "parent"));
  TAILOR_ASSIGN_OR_RETURN(const Candidates cands,
                          CandidatesOf(DetailOf<results::SolveResult>(*solve_output)));

  TAILOR_ASSIGN_OR_RETURN(const std::vector<tasks::Sample> held_out, HeldOut(ctx, parent));
  TAILOR_ASSIGN_OR_RETURN(const at::Tensor losses,
                          HeldOutLosses(ctx, parent, cands.removed, held_out));
  const int64_t count = static_cast<int64_t>(cands.removed.size());
  const int64_t best = BestLevel(losses, count);

  v1::JobOutput output;
  results::EvaluateCandidatesResult result;
  TAILOR_ASSIGN_OR_RETURN(const Removal chosen,
                          StagedRemoval(ctx, parent, held_out, cands, best,
                                        losses[best].item<double>(), result));
  SetCandidateLosses(cands, losses, best, chosen, result);
  SetDetail(output, result);
  if (!ctx.is_rank0()) return output;

  TAILOR_RETURN_IF_ERROR(UploadStudent(ctx, parent, chosen.removed, teacher_digest, output));
  const int stages = cands.stages;
  ctx.Progress(1.0, absl::StrFormat("chose level %d%s (loss %.4f; Block Influence %.4f)", best,
                                    stages > 1 ? absl::StrCat(" then ", stages - 1,
                                                              " more stages")
                                               : "",
                                    chosen.loss, losses[count - 1].item<double>()));
  return output;
}

}  // namespace

void RegisterBlockRemovalJobs() {
  RegisterWorkerHandler(methods::jobs::kGateGradients, RunGateGradients);
  RegisterWorkerHandler(methods::jobs::kSolve, RunSolve);
  RegisterWorkerHandler(methods::jobs::kEvaluateCandidates, RunEvaluateCandidates);
}

}  // namespace tailor::worker
