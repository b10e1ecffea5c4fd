#ifndef TAILOR_COMPRESSION_ENGINE_WORKLOAD_H_
#define TAILOR_COMPRESSION_ENGINE_WORKLOAD_H_

// The engine's identity, precisions and the request shape it serves. No LibTorch here, so
// the cost model's formulas and tables can use these without pulling in torch headers.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tailor::engine {

inline constexpr char kEngineName[] = "tailor-builtin";
// Version 1: eager LibTorch, one intra-op thread on CPU, KV cache preallocated to
// prefix + input + output positions, last-position-only prefill logits.
inline constexpr char kEngineVersion[] = "1";

// The version an agent registers for the built-in engine on `cpu_threads` intra-op threads:
// kEngineVersion on one, "1+threadsN" otherwise. The thread count moves every per-layer cost,
// so it is part of the serving stack a contract names (and a changed one is engine drift).
inline std::string BuiltinEngineVersion(int cpu_threads) {
  return cpu_threads == 1 ? std::string(kEngineVersion)
                          : std::string(kEngineVersion) + "+threads" + std::to_string(cpu_threads);
}

enum class Precision { kFp32, kBf16, kFp16 };

absl::string_view PrecisionName(Precision precision);  // "FP32", "BF16", "FP16"
// Accepts the contract's enum names ("FP32", "BF16", "FP16").
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
int64_t PrecisionBytes(Precision precision);

struct Workload {
  int64_t batch_size = 1;
  int64_t input_tokens = 1;
  int64_t output_tokens = 1;
  int64_t cached_prefix_tokens = 0;

  // Positions the cache must hold: prefix + input + output.
  int64_t cache_positions() const {
    return cached_prefix_tokens + input_tokens + output_tokens;
  }
  bool operator==(const Workload& o) const {
    return batch_size == o.batch_size && input_tokens == o.input_tokens &&
           output_tokens == o.output_tokens && cached_prefix_tokens == o.cached_prefix_tokens;
  }
};

// INVALID_ARGUMENT naming the field: batch, input and output >= 1, prefix >= 0.
absl::Status ValidateWorkload(const Workload& workload);

// Median of timing samples (mean of the middle two for an even count; 0 for none). Timing on a
// shared host is summarised by medians everywhere: a preemption moves a mean, not a median.
double Median(std::vector<double> v);

// The p-th percentile (p in [0, 100], clamped) of timing samples by nearest rank: the
// smallest sample with at least p% of the samples <= it (the smallest sample for p = 0; 0
// for no samples). Always one of the samples, never an interpolation: a tail latency that
// was actually observed.
double Percentile(std::vector<double> samples, double p);

}  // namespace tailor::engine

#endif  // TAILOR_COMPRESSION_ENGINE_WORKLOAD_H_
