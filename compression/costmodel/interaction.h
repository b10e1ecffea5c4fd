#ifndef TAILOR_COMPRESSION_COSTMODEL_INTERACTION_H_
#define TAILOR_COMPRESSION_COSTMODEL_INTERACTION_H_

// The cost model's interaction correction: a layer's time depends on which other layers run
// in the same step, not only on its own configuration. On the development CPU an attention
// layer ran ~15% slower next to two Mamba layers than next to none, and a Mamba layer ~15%
// faster when a second one ran in the same step: every eager op goes through the same
// dispatcher, and what else ran since decides how warm its code and branch history are.
//
// Model (per phase): the time of a layer of kind k in an architecture is
//   t = base(config) * exp( sum_j gamma[k][j] * (n_j - reference_j) )
// where n_j counts the present layers of kind j (attention, mamba, moe, mlp) and reference
// is the mean count over the profiling models, so base() is the time in an average context.
// Row 4 applies the same form to the fixed cost T0. base and gamma are fitted together by
// alternating least squares on log times from the profiling models, whose layers are drawn
// with random removals so that contexts vary (docs/costmodel.md).

#include <array>
#include <map>
#include <string>
#include <vector>

#include "compression/model/config.h"

namespace tailor::costmodel {

inline constexpr int kKinds = 4;        // attention, mamba, moe, mlp (LayerKind order)
inline constexpr int kFixedRow = kKinds;  // the fixed cost's row
using KindCounts = std::array<double, kKinds>;
using GammaRows = std::array<KindCounts, kKinds + 1>;

// Present layers per kind.
KindCounts PresentCounts(const model::HybridConfig& config);

struct InteractionModel {
  KindCounts reference{};
  GammaRows prefill{};  // all zero: no correction
  GammaRows decode{};

  double Factor(int row, bool decode_phase, const KindCounts& counts) const;
  bool empty() const;
};

// One measured time: `row` is the layer's kind (or kFixedRow), `key` its configuration
// (the fixed cost's key names its hidden width).
struct InteractionSample {
  int row = 0;
  std::string key;
  KindCounts counts{};
  double value = 0;
};

struct InteractionFit {
  std::map<std::string, double> base;  // by key, at the reference context
  GammaRows gamma{};
};

// Alternating least squares: base = median of value / factor per key; each row of gamma =
// ridge regression of log(value / base) on counts - reference over the samples of keys
// measured in at least two different contexts (a key seen once carries no information
// about its context). Non-positive values are kept for the base but not regressed.
InteractionFit FitInteraction(const std::vector<InteractionSample>& samples,
                              const KindCounts& reference, double ridge = 0.5,
                              int iterations = 8);

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_INTERACTION_H_
