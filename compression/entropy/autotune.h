#ifndef TAILOR_COMPRESSION_ENTROPY_AUTOTUNE_H_
#define TAILOR_COMPRESSION_ENTROPY_AUTOTUNE_H_

// Per-tensor autotuning of the entropy code and the budgeted selection over tensors
// (docs/entropy.md). Candidates come from EntropyParams: symbols per codeword x table_log x
// chunk width. Each is priced from the histogram first; those that cannot beat the dense
// size are pruned, the rest are encoded and their fused GEMV latency measured on this
// machine. The dense path is always a candidate.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/entropy/codec.h"

namespace tailor::entropy {

struct TuneSpace {
  std::vector<int> symbols_per_codeword = {1, 2};
  std::vector<int> table_log = {10, 12};
  std::vector<int> chunk_width = {1024, 4096};
};

struct TuneOptions {
  int threads = 1;
  int reps = 5;  // latency = median of reps (after one warm-up)
  // Pruned when predicted size >= prune_ratio * dense size: it can only be on the frontier
  // by being faster than dense, which decoding never is at equal size.
  double prune_ratio = 1.0;
};

struct ConfigPoint {
  bool dense = false;
  CodecConfig config;
  int64_t predicted_bytes = 0;
  int64_t bytes = 0;       // measured container size (dense: DenseBytes)
  double latency_us = 0;   // median batch-1 GEMV latency
  bool pruned = false;
};

struct TensorFrontier {
  std::string name;
  DType dtype = DType::kBF16;
  int64_t rows = 0, cols = 0;
  int64_t dense_bytes = 0;
  double entropy_bits_per_weight = 0;  // empirical, k = 1
  std::vector<ConfigPoint> candidates;  // everything enumerated, pruned ones included
  std::vector<ConfigPoint> frontier;    // ascending bytes, strictly descending latency
};

// Non-dominated points (ascending bytes, strictly descending latency).
std::vector<ConfigPoint> ParetoFrontier(std::vector<ConfigPoint> points);

absl::StatusOr<TensorFrontier> AutotuneTensor(const std::string& name, const TensorView& view,
                                              const TuneSpace& space, const TuneOptions& options);

// Selection under a total budget: choose one option per item minimising total latency with
// total bytes <= budget.
struct Option {
  int64_t bytes = 0;
  double latency = 0;
};
struct Selection {
  std::vector<int> choice;  // index into each item's options
  int64_t total_bytes = 0;
  double total_latency = 0;
  bool exact = false;  // true: provably optimal (Pareto dynamic programme)
};
struct SelectOptions {
  // The exact programme keeps the Pareto set of partial (bytes, latency) sums; above this
  // many states it falls back to the Lagrangian relaxation plus greedy fill.
  size_t max_states = 1 << 16;
};
absl::StatusOr<Selection> SelectUnderBudget(const std::vector<std::vector<Option>>& items,
                                            int64_t budget, const SelectOptions& options = {});

}  // namespace tailor::entropy

#endif  // TAILOR_COMPRESSION_ENTROPY_AUTOTUNE_H_
