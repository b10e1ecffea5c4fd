#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_SEARCH_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_SEARCH_H_

// The differentiable architecture search loop (spec §1 Step 3). Per step:
//   1. the router emits logits per axis; S architectures are sampled with Gumbel-softmax
//      under the annealing schedule;
//   2. the batch is split evenly across them (sequence i gets architecture i * S / B) and
//      the supernet runs once with per-sequence soft masks;
//   3. L = KL(parent || supernet) over all tokens
//          + alpha * mean_s sum_r BudgetPenalty(rho_{s,r}),
//      rho from a differentiable cost predictor called on each sample's soft choices;
//   4. router (Adam) and supernet (Adam, optional) update jointly.
// It stops after `steps` or, when asked, once every gate's top probability reaches the
// extraction threshold. Extraction itself (ExtractStudent) slices the RANKED parent.
//
// Data parallelism (one RunSearch per rank): each rank passes its slice of the global batch
// (SearchOptions::global_batch, row_offset). Every rank draws the same S architectures from
// the same seeded generator and assigns them by GLOBAL row index, so the union of the ranks'
// rows is exactly the single-process step; the penalty is computed identically everywhere.
// SearchHooks::after_backward averages the gradients (equal slices: the mean of the local
// KD means is the global KD mean) and reduce_mean turns the reported KD loss global.
//
// Checkpoints (SearchOptions::checkpoint_dir): every checkpoint_every steps, and when the
// search ends (converged or last step, so a retry after a later failure skips the search),
// the router, the supernet (when trained), both Adam states, the step, the last step's
// metrics and the Gumbel generator state are written to DIR/step-N/ (first as
// DIR/step-N.tmp, then renamed), and only then the meta file DIR/search.meta ("digest=...",
// "step=N", "state=step-N") is replaced atomically: the meta file is the commit point, so a
// crash at any moment leaves the previous checkpoint usable. RunSearch resumes from DIR when
// the meta file's digest (SearchDigest: parent, space, budgets and every option that shapes
// the trajectory) equals this run's; a checkpoint of another search is ignored (and later
// overwritten), never loaded. Batches must be a pure function of the step (BatchSource) for
// a resumed run to equal an uninterrupted one.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/autocompress/extract.h"
#include "compression/autocompress/gumbel.h"
#include "compression/autocompress/router.h"
#include "compression/autocompress/space.h"
#include "compression/model/hybrid_lm.h"

namespace tailor::autocompress {

// Predicted cost of one architecture; undefined tensors mean "not predicted". Scalars,
// differentiable in the soft choices they were computed from.
struct CostPrediction {
  at::Tensor latency_ms;
  at::Tensor memory_mib;
  at::Tensor throughput;  // tokens/s
};

// (soft choices, one vector per axis) -> predicted cost. Supplied by the cost model.
using CostPredictor =
    std::function<absl::StatusOr<CostPrediction>(const std::vector<at::Tensor>& choices)>;

// The deployment contract's budgets; unset ones are not penalised.
struct Budgets {
  std::optional<double> latency_ms;  // ceiling
  std::optional<double> memory_mib;  // ceiling
  std::optional<double> throughput;  // floor
  // Whether the lower side of the dead zone (capacity left unused) is penalised per resource.
  // The worker turns it off for a budget the parent itself stays clear of: no architecture
  // can reach the band there, and the lower side would only pull every choice toward the
  // parent against the budgets that do bind.
  bool slack_latency = true;
  bool slack_memory = true;
  bool slack_throughput = true;
};

// rho per budgeted resource (ceilings: cost / budget; floor: budget / cost, so rho > 1
// always means "violates"), summed through BudgetPenalty.
absl::StatusOr<at::Tensor> BudgetLoss(const CostPrediction& cost, const Budgets& budgets,
                                      double delta);

struct SearchOptions {
  GumbelSchedule schedule;   // schedule.steps is the number of steps
  int64_t samples = 32;      // architectures per batch (capped at the batch size)
  double alpha = 0.3;        // penalty weight (paper: 0.3 on H100, 1 for tight budgets)
  double delta = 0.02;       // dead zone
  RouterOptions router;      // hidden 256, lr 2e-3
  double supernet_lr = 0.0;  // 0: supernet weights frozen (router-only search)
  double extract_threshold = kExtractThreshold;
  bool stop_when_converged = true;
  // With stop_when_converged: a converged decision ends the search only when this accepts it
  // (null accepts all). The worker accepts only an argmax architecture whose hard predicted
  // cost meets the budgets: gates can saturate early while the penalty still pushes, and
  // stopping there would hand a violating architecture to the repair. Must be deterministic
  // (every rank decides alike).
  std::function<bool(const ExtractionDecision&)> accept_extraction;
  uint64_t seed = 0;  // Gumbel noise

  // This rank's rows are [row_offset, row_offset + B) of a global batch of global_batch
  // rows (B = the batch source's rows). 0: the local batch is the whole batch.
  int64_t global_batch = 0;
  int64_t row_offset = 0;

  std::string checkpoint_dir;     // empty: no checkpoints, no resume
  int64_t checkpoint_every = 0;   // steps between checkpoints; 0: only resume
  bool write_checkpoints = true;  // false: resume from checkpoint_dir but never write it
};

// Calls into the caller's process group (all optional). Every rank calls them in the same
// order, once per step.
struct SearchHooks {
  // After loss.backward(), before the optimizers step, with every trained parameter (the
  // router's, plus the supernet's when supernet_lr > 0): e.g. Dist::AverageGradients.
  std::function<absl::Status(const std::vector<at::Tensor>& params)> after_backward;
  // Replaces a one-element float64 tensor by its mean over ranks (the reported KD loss).
  std::function<absl::Status(at::Tensor& scalar)> reduce_mean;
};

struct StepReport {
  int64_t step = 0;
  double kd_loss = 0.0;  // global mean (after SearchHooks::reduce_mean)
  double penalty = 0.0;  // mean over samples, before alpha
  double logit_scale = 0.0;
  double temperature = 0.0;
  ExtractionDecision decision;  // from the router's current (noise-free) probabilities
};

struct SearchResult {
  ExtractionDecision decision;              // at the last step run
  int64_t steps_run = 0;                    // including the steps of the run resumed from
  int64_t resumed_from = 0;                 // steps restored from a checkpoint (0: fresh start)
  bool ignored_foreign_checkpoint = false;  // a checkpoint with another digest was present
  double kd_loss = 0.0;                     // of the last step run (0 when none ran in this call)
  double penalty = 0.0;
  std::vector<at::Tensor> probabilities;  // per axis, detached
};

// Token batches [B, T] by step (calibration / distillation data).
using BatchSource = std::function<absl::StatusOr<at::Tensor>(int64_t step)>;
// Called after each step; returning false stops the search.
using ProgressCallback = std::function<bool(const StepReport&)>;

// `parent` is the frozen teacher (ranked); `supernet` starts as a copy of it and is the
// only model updated. Both must have the config the space was built from.
absl::StatusOr<SearchResult> RunSearch(model::HybridLM& parent, model::HybridLM& supernet,
                                       const SearchSpace& space, ArchRouter& router,
                                       const BatchSource& batches, const CostPredictor& cost,
                                       const Budgets& budgets, const SearchOptions& options,
                                       const ProgressCallback& progress = nullptr,
                                       const SearchHooks& hooks = {});

// Hex digest guarding checkpoints: parent config, space, budgets and the options that shape
// the trajectory (not row_offset, which differs per rank, nor the checkpoint settings).
std::string SearchDigest(const model::HybridConfig& parent, const SearchSpace& space,
                         const Budgets& budgets, const SearchOptions& options);

// The step a usable checkpoint in `dir` would resume from for `digest`; 0 when there is none
// (or it belongs to another search).
int64_t CheckpointStep(const std::string& dir, const std::string& digest);

// A checkpoint directory's committed files as one blob, so that ranks without the writer's
// file system can resume from it: empty when `dir` holds no committed checkpoint.
absl::StatusOr<std::string> PackCheckpoint(const std::string& dir);
// Writes a PackCheckpoint blob into `dir` (created); an empty blob writes nothing.
absl::Status UnpackCheckpoint(const std::string& blob, const std::string& dir);

// Forward KL(p || q) per token from logits [..., V], averaged over tokens.
at::Tensor ForwardKl(const at::Tensor& teacher_logits, const at::Tensor& student_logits);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_SEARCH_H_
