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
#include "compression/model/hybrid_lm.h"
#include "nlohmann/json.hpp"
#include "methods/api/job_kinds.h"
#include "methods/block_removal/block_removal_results.pb.h"
#include "methods/block_removal/job_kinds.h"
#include "tailor/v1/job_output.pb.h"
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

Calibration CalibrationShare(const WorkerContext& ctx) {
  const v1::DeploymentContract& c = ctx.contract();
  Calibration cal;
  cal.total = c.block_removal().has_calibration_samples()
                  ? c.block_removal().calibration_samples()
                  : 128;
  const int world = ctx.env.world_size, rank = ctx.env.rank;
  // Every rank draws the same stream and keeps rows [rank*m/W, (rank+1)*m/W).
  const auto all = blockremoval::CalibrationSamples(c.seed() ^ kCalibrationSalt, cal.total,
                                                    tasks::Split::kTrain);
  cal.lo = rank * cal.total / world;
  const int64_t hi = (rank + 1) * cal.total / world;
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
        "parent.path: gate_gradients needs a parent directory (config.json + model.safetensors)");
  }
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM parent, model::LoadHybridLM(c.parent().path()));
  const std::vector<int> layers = blockremoval::PresentLayers(parent->config());
  if (layers.empty()) return absl::InvalidArgumentError("parent has no present blocks");
  const int world = ctx.env.world_size;
  const Calibration cal = CalibrationShare(ctx);
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

absl::StatusOr<v1::JobOutput> RunSolve(WorkerContext& ctx) {
  const v1::DeploymentContract& c = ctx.contract();
  const v1::BlockRemovalParams& br = c.block_removal();
  std::optional<costmodel::CostModel> cost_model;
  if (ctx.assignment.inputs().contains(methods::jobs::kProfile)) {
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
  }
  v1::JobOutput output;
  if (!ctx.is_rank0()) return output;  // solving takes milliseconds: rank 0 alone

  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* grads, Input(ctx, methods::jobs::kGateGradients));
  const results::GateGradientsResult gradients =
      DetailOf<results::GateGradientsResult>(*grads).value_or(results::GateGradientsResult());
  TAILOR_ASSIGN_OR_RETURN(const std::string fisher_digest,
                          NonEmpty(methods::jobs::kGateGradients, "fisher_digest",
                                   gradients.fisher_digest()));
  TAILOR_ASSIGN_OR_RETURN(const std::string teacher_digest,
                          NonEmpty(methods::jobs::kGateGradients, "teacher_digest",
                                   grads->teacher_digest()));
  std::vector<int> layers;
  TAILOR_ASSIGN_OR_RETURN(blockremoval::Qubo q, FetchFisher(ctx, fisher_digest, layers));
  if (gradients.block_influence().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job input '", methods::jobs::kGateGradients, "' has no 'block_influence' in its output"));
  }
  const std::vector<double> influence(gradients.block_influence().begin(),
                                      gradients.block_influence().end());
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig parent_config,
                          model::ReadHybridConfig(c.parent().path() + "/config.json"));

  blockremoval::SolveOptions o;
  o.k = br.has_candidates() ? br.candidates() : 8;
  o.seed = c.seed() + 1;
  std::vector<blockremoval::State> states;
  std::vector<std::optional<costmodel::Prediction>> predicted;
  std::string solver_name;
  double solve_seconds = 0;
  auto solve = [&](int m) -> absl::Status {
    o.m = m;
    const auto solver = blockremoval::MakeSolver(KindOf(br.solver()), q, m);
    solver_name = std::string(solver->name());
    const auto t0 = std::chrono::steady_clock::now();
    TAILOR_ASSIGN_OR_RETURN(states, solver->Solve(q, o));
    solve_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    predicted.assign(states.size(), std::nullopt);
    if (!cost_model) return absl::OkStatus();
    for (size_t i = 0; i < states.size(); ++i) {
      TAILOR_ASSIGN_OR_RETURN(model::HybridConfig child,
                              blockremoval::RemoveBlocks(parent_config,
                                                         LayersOf(states[i].removed, layers)));
      TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction p, cost_model->Predict(child));
      predicted[i] = p;
    }
    return absl::OkStatus();
  };

  int m = 0;
  // Staged removal (stages > 1, fixed M only): this job solves the first stage's share;
  // evaluate_candidates picks among its states and runs the later stages.
  const int stages = br.has_stages() ? std::max(1, br.stages()) : 1;
  int stage_m = 0;
  std::optional<blockremoval::State> ground;  // at M, kept or not (budget-driven may drop it)
  results::SolveResult result;
  if (br.has_blocks_to_remove()) {
    m = br.blocks_to_remove();
    if (m >= q.n) {
      return absl::InvalidArgumentError(absl::StrCat("block_removal.blocks_to_remove: ", m,
                                                     " would remove every one of the ", q.n,
                                                     " blocks"));
    }
    if (stages > m) {
      return absl::InvalidArgumentError(absl::StrCat(
          "block_removal.stages: at most block_removal.blocks_to_remove (", m, "), got ", stages));
    }
    stage_m = FirstStageBlocks(m, stages);
    TAILOR_RETURN_IF_ERROR(solve(stage_m));
  } else {
    if (!cost_model) {
      return absl::FailedPreconditionError("a budget-driven block removal needs the profile job");
    }
    // The smallest M for which one of the k lowest states meets every budget; only states
    // that meet it are kept as candidates.
    TAILOR_ASSIGN_OR_RETURN(
        blockremoval::BudgetedSolve b,
        blockremoval::SolveForBudget(q, layers, parent_config, *cost_model, LimitsOf(c.budget()),
                                     KindOf(br.solver()), o));
    m = b.m;
    stage_m = m;
    states = std::move(b.states);
    predicted.assign(b.predicted.begin(), b.predicted.end());
    solver_name = b.solver;
    solve_seconds = b.solve_seconds;
    ground = b.ground;
    // Why this M: every smaller M and how close its best state came (the report shows it).
    for (const blockremoval::MTrial& t : b.trials) {
      results::MTrial& trial = *result.add_m_search();
      trial.set_m(t.m);
      trial.set_states(t.states);
      trial.set_fitting(t.fitting);
      trial.set_min_latency_ms(t.min_latency_ms);
      trial.set_min_memory_mib(t.min_memory_mib);
    }
  }

  result.set_blocks_to_remove(m);
  result.set_blocks(q.n);
  result.set_stages(stages);
  result.set_stage_blocks(stage_m);  // what the spectrum's states remove
  result.set_solver(solver_name);
  result.set_solve_seconds(solve_seconds);
  result.set_states_total(blockremoval::Binomial(q.n, stage_m));
  result.set_budget_driven(!br.has_blocks_to_remove());
  result.set_fisher_digest(fisher_digest);
  output.set_teacher_digest(teacher_digest);
  Assign(layers, result.mutable_layers());
  Assign(influence, result.mutable_block_influence());
  for (size_t i = 0; i < states.size(); ++i) {
    results::SpectrumState& s = *result.add_spectrum();
    s.set_level(static_cast<int>(i));  // 0 = lowest kept state
    s.set_energy(states[i].energy);
    Assign(LayersOf(states[i].removed, layers), s.mutable_removed_layers());
    if (predicted[i]) SetPredicted(*predicted[i], s.mutable_predicted());
  }
  if (predicted[0]) SetPredicted(*predicted[0], output.mutable_predicted());
  if (!ground) ground = states[0];
  result.set_ground_energy(ground->energy);
  Assign(LayersOf(ground->removed, layers), result.mutable_ground_removed_layers());
  // The Block Influence choice at the same M, with its energy under the same H.
  const std::vector<int> bi_vars = blockremoval::LowestInfluence(influence, m);
  results::Baseline& baseline = *result.mutable_baseline();
  baseline.set_method("block_influence");
  Assign(LayersOf(bi_vars, layers), baseline.mutable_removed_layers());
  baseline.set_energy(blockremoval::Energy(q, bi_vars));
  SetDetail(output, result);
  ctx.Progress(1.0, absl::StrFormat("%s: M=%d (first stage %d of %d), %d states kept, ground "
                                    "energy %.4g",
                                    solver_name, m, stage_m, stages, states.size(),
                                    states[0].energy));
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
  const Calibration cal = CalibrationShare(ctx);
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
    o.k = br.has_candidates() ? br.candidates() : 8;
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

absl::StatusOr<v1::JobOutput> RunEvaluateCandidates(WorkerContext& ctx) {
  TAILOR_ASSIGN_OR_RETURN(const v1::JobOutput* solve_output, Input(ctx, methods::jobs::kSolve));
  TAILOR_ASSIGN_OR_RETURN(const std::string teacher_digest,
                          NonEmpty(methods::jobs::kSolve, "teacher_digest",
                                   solve_output->teacher_digest()));
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM parent, FetchModel(ctx, teacher_digest, "parent"));
  const std::optional<results::SolveResult> solve = DetailOf<results::SolveResult>(*solve_output);
  if (!solve || solve->spectrum().empty()) {
    return absl::FailedPreconditionError("job input 'solve' has no spectrum");
  }
  if (!solve->has_baseline()) {
    return absl::FailedPreconditionError("job input 'solve' has no baseline");
  }
  std::vector<std::vector<int>> removed;
  std::vector<double> energies;
  for (const results::SpectrumState& s : solve->spectrum()) {
    removed.push_back(ToInts(s.removed_layers()));
    energies.push_back(s.energy());
  }
  const results::Baseline& baseline = solve->baseline();
  removed.push_back(ToInts(baseline.removed_layers()));  // last: the Block Influence baseline

  const auto held_out = blockremoval::CalibrationSamples(
      ctx.contract().seed() ^ kHeldOutSalt, kHeldOutSamples, tasks::Split::kEval);
  // Candidates round-robin over ranks; the loss vector is summed (each entry has one owner).
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
  int64_t best = 0;
  for (int64_t i = 1; i + 1 < count; ++i) {
    if (losses[i].item<double>() < losses[best].item<double>()) best = i;
  }

  v1::JobOutput output;
  results::EvaluateCandidatesResult result;
  // The removal this job delivers and its loss: the best first-stage state, extended by the
  // later stages when there are any.
  std::vector<int> final_removed = removed[best];
  double final_loss = losses[best].item<double>();
  // An older solve without `stages` solved in one stage.
  const int stages = solve->has_stages() ? solve->stages() : 1;
  if (stages > 1) {
    const int m = solve->blocks_to_remove();
    results::StageRow& first = *result.add_stages();
    first.set_stage(1);
    Assign(final_removed, first.mutable_added_layers());
    Assign(final_removed, first.mutable_removed_layers());
    first.set_energy(energies[best]);
    first.set_candidates(static_cast<int>(count - 1));
    first.set_loss(final_loss);
    TAILOR_RETURN_IF_ERROR(RunLaterStages(ctx, parent, held_out, m, stages, &final_removed,
                                          &final_loss, result.mutable_stages()));
  }
  for (int64_t i = 0; i + 1 < count; ++i) {
    results::Candidate& s = *result.add_candidates();
    s.set_level(static_cast<int>(i));
    s.set_energy(energies[i]);
    s.set_loss(losses[i].item<double>());
    Assign(removed[i], s.mutable_removed_layers());
  }
  result.set_chosen_level(static_cast<int>(best));
  result.set_chosen_energy(energies[best]);
  result.set_loss(final_loss);
  result.set_ground_state_loss(losses[0].item<double>());
  result.set_parent_loss(losses[count].item<double>());
  Assign(final_removed, result.mutable_removed_layers());
  result.set_held_out_samples(kHeldOutSamples);
  *result.mutable_baseline() = baseline;
  result.mutable_baseline()->set_loss(losses[count - 1].item<double>());
  result.set_beats_baseline(final_loss <= losses[count - 1].item<double>());
  SetDetail(output, result);
  if (!ctx.is_rank0()) return output;

  TAILOR_ASSIGN_OR_RETURN(model::HybridLM student,
                          blockremoval::WithoutBlocks(parent, final_removed));
  const model::HybridConfig& config = student->config();
  output.set_architecture(autocompress::DescribeArchitecture(config));
  for (const std::string& l : autocompress::DescribeLayers(config)) output.add_layers(l);
  output.set_parameters(config.ParameterCount());
  TAILOR_ASSIGN_OR_RETURN(v1::Artifact art,
                          UploadModel(ctx, student, "student_initial", "student"));
  output.set_student_digest(art.digest());
  output.set_model_digest(art.digest());  // what verify reads without distill
  output.set_teacher_digest(teacher_digest);
  ctx.Progress(1.0, absl::StrFormat("chose level %d%s (loss %.4f; Block Influence %.4f)", best,
                                    stages > 1 ? absl::StrCat(" then ", stages - 1,
                                                              " more stages")
                                               : "",
                                    final_loss, losses[count - 1].item<double>()));
  return output;
}

}  // namespace

void RegisterBlockRemovalJobs() {
  RegisterWorkerHandler(methods::jobs::kGateGradients, RunGateGradients);
  RegisterWorkerHandler(methods::jobs::kSolve, RunSolve);
  RegisterWorkerHandler(methods::jobs::kEvaluateCandidates, RunEvaluateCandidates);
}

}  // namespace tailor::worker
