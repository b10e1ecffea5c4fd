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

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
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
  uint64_t seed = 0;  // Gumbel noise
};

struct StepReport {
  int64_t step = 0;
  double kd_loss = 0.0;
  double penalty = 0.0;  // mean over samples, before alpha
  double logit_scale = 0.0;
  double temperature = 0.0;
  ExtractionDecision decision;  // from the router's current (noise-free) probabilities
};

struct SearchResult {
  ExtractionDecision decision;  // at the last step run
  int64_t steps_run = 0;
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
                                       const ProgressCallback& progress = nullptr);

// Forward KL(p || q) per token from logits [..., V], averaged over tokens.
at::Tensor ForwardKl(const at::Tensor& teacher_logits, const at::Tensor& student_logits);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_SEARCH_H_
