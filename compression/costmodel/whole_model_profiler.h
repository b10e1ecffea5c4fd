#ifndef TAILOR_COMPRESSION_COSTMODEL_WHOLE_MODEL_PROFILER_H_
#define TAILOR_COMPRESSION_COSTMODEL_WHOLE_MODEL_PROFILER_H_

// Step 1 of hardware-guided compression for engines that time only whole requests of whole
// models (llama.cpp run as a child process): profiles the same cost table as profiler.h,
// T = T0(hidden) + sum_l t_l per phase and M = W + C + P + R + eps, from whole-model
// measurements, then validates it on held-out heterogeneous architectures exactly like the
// built-in engine's tables (docs/costmodel.md, "Whole-model profiling (llama.cpp)").
//
//  1. Profile grid: ProfileGrid (profile_grid.h), the built-in profiler's nodes.
//  2. Profiling models, per hidden width (all valid configs of the parent's search space,
//     every other layer removed): a "stack" per grid node (the node at every parent position
//     whose search-space options contain it, n positions) and "half" anchors (a node at
//     floor(n / 2) of them, one per distinct position set with n >= 2), so that T0 and every
//     node's time are identifiable: t = (T(stack) - T(half)) / (n - floor(n / 2)) is the
//     Puzzletron N-versus-2N difference. Without any n >= 2 set, one model combining a node
//     of every position set anchors T0 instead. With stack_depth D, the parent's layers are
//     tiled so that each node stands at D positions and at floor(D / 2) in two models. A
//     space with uniform_layers (layouts of one width per kind) gets models that hold every
//     layer: a base of the narrowest nodes, a stack per node over it and a half of the base's
//     blocks.
//  3. Serving: every model (profiling and held-out) once, in a shuffled order so drift of the
//     host hits all alike; its latency is the median of its requests (per phase too). A
//     disturbed measurement (spread of request times, or too little CPU time for the
//     threads) is served again, up to max_remeasures times.
//  4. Table: per (hidden, phase) a weighted least squares (relative errors) of
//     the models' times on their layer counts gives T0 and every node's base time; the
//     interaction model stays neutral. Memory: the engine's weights and state bytes against
//     the formulas give per-term scales, every node's workspace is the smallest compute
//     buffer of the models that hold it (the engine's compute buffer is a max over the
//     graph, as P = max(P0, max_l workspace_l) models it), P0 per hidden width the smallest
//     of its models', eps the median residual.
//  5. Validation: the cost model predicts every held-out architecture; errors are summarized
//     into table.validation. Above target_latency_mape, steps 3-5 again with every model's
//     requests pooled over the rounds (up to max_rounds).
//
// No LibTorch here: the engine is the injected serve function.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/costmodel/calm_serving.h"
#include "compression/costmodel/profile_grid.h"
#include "compression/costmodel/search_space.h"
#include "compression/engine/workload.h"
#include "compression/model/config.h"
#include "compression/model/kv_cache_layout.h"

namespace tailor::costmodel {

// Serves `config` with dummy weights drawn from `seed` (a fresh deployment per call) under
// the profile's workload and precision.
using ServeModelFn =
    std::function<absl::StatusOr<ServedModel>(const model::HybridConfig& config, uint64_t seed)>;

struct WholeModelProfileOptions {
  std::string engine = "llama.cpp";
  std::string engine_version;
  std::string device_kind = "cpu";
  engine::Precision precision = engine::Precision::kFp32;
  engine::Workload workload;
  SearchSpaceOptions space;
  // What the engine adds to a model that lacks a kind (CostModel::SetStandIns): the held-out
  // architectures are predicted as the engine runs them. The fit already counts the stand-ins
  // each served model reports (ServedModel::stand_in_layers).
  std::vector<model::StandInLayer> stand_ins;
  // How the engine's layout sizes the KV cache (CostModel::SetKvCacheLayout): the memory fit
  // and every prediction use it.
  model::KvCacheLayout kv_cache_layout = model::KvCacheLayout::kPerLayer;
  int max_points_per_axis = 2;
  int max_hidden_points = 4;
  int validation_architectures = 12;
  uint64_t seed = 1;
  // When a model's measurement shows interference it is served again (calm_serving.h);
  // calm.threads is the threads the engine computes with.
  CalmServingOptions calm;
  // A table whose held-out latency MAPE exceeds target_latency_mape (> 0) is fitted again
  // after another round of every model (profiling and held-out, in a new shuffled order,
  // each a fresh engine process), each model's figures then the medians of its requests
  // pooled over the rounds; at most max_rounds rounds. A node's time is the difference of
  // two whole-model times (the N-versus-2N step): one child drawn ~10% slow, which happens
  // to any child on a shared host, moves it by the whole of a layer's time; the quickstart's
  // parent was once profiled at 24.7% MAPE (worst 66.9%) in one round where the run before
  // had 2.6%. The round that ends under the target, or the last, is the table.
  double target_latency_mape = 0;
  int max_rounds = 1;
  // How deep a profiling model stacks its node (per-layer layouts). 0: at the parent
  // positions whose options hold the node (n of them, 2-3 per kind in the quickstart's
  // 8-layer parent), so every profiling model is a candidate of the space, and the node's
  // time is the difference of two whole-model times n - floor(n / 2) layers apart. D >= 2:
  // the parent's layers tiled until the node's positions number D, the node at D of them and,
  // in a second model, at floor(D / 2) (Puzzletron's N versus 2N; llama.cpp's cost of a layer
  // does not depend on its position), every other layer removed: the difference is
  // D - floor(D / 2) layers, so a child's own speed (5-25% on this host, the whole model's
  // time scaled alike) moves a node's time by less. These models are deeper than the parent, not
  // candidates. Not with space.uniform_layers (their models hold every layer).
  int stack_depth = 0;
  // Relative ridge of the time fit (times the largest diagonal of the normal equations). The
  // plan makes every node identifiable, so none is needed (it would bias exact data); raise
  // it only to damp a plan of one's own.
  double ridge = 0;
  ProgressFn progress;
};

absl::StatusOr<ProfileResult> ProfileCostTableWholeModel(const model::HybridConfig& parent,
                                                         const WholeModelProfileOptions& options,
                                                         const ServeModelFn& serve);

// --- pieces, exposed for tests and benches ---------------------------------------------

// The profiling models (step 2), in plan order, each with max_seq = max(parent's, the
// workload's cache positions).
absl::StatusOr<std::vector<model::HybridConfig>> PlanWholeModelProfiling(
    const model::HybridConfig& parent, const WholeModelProfileOptions& options);

// Solves the symmetric system a x = b (Gaussian elimination, partial pivoting); an unknown the
// data cannot tell apart from others (a pivot below 1e-12 of the largest diagonal) is left 0,
// so the identifiable sums it takes part in stay exact. The time fit's solver.
std::vector<double> SolveNormalEquations(std::vector<std::vector<double>> a,
                                         std::vector<double> b);

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_WHOLE_MODEL_PROFILER_H_
