#include "compression/entropy/autotune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/entropy/gemv.h"

namespace tailor::entropy {
namespace {

template <typename Fn>
absl::StatusOr<double> MedianMicros(int reps, Fn fn) {
  TAILOR_RETURN_IF_ERROR(fn());  // warm-up: caches, page faults, thread start-up paths
  std::vector<double> us;
  for (int i = 0; i < std::max(1, reps); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    TAILOR_RETURN_IF_ERROR(fn());
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

// Lagrangian pick for multiplier lambda: per item argmin latency + lambda * bytes, ties to
// fewer bytes.
std::vector<int> PickForLambda(const std::vector<std::vector<Option>>& items, double lambda) {
  std::vector<int> pick(items.size(), 0);
  for (size_t i = 0; i < items.size(); ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < items[i].size(); ++j) {
      const double v = items[i][j].latency + lambda * static_cast<double>(items[i][j].bytes);
      if (v < best || (v == best && items[i][j].bytes < items[i][pick[i]].bytes)) {
        best = v;
        pick[i] = static_cast<int>(j);
      }
    }
  }
  return pick;
}

Selection Summarise(const std::vector<std::vector<Option>>& items, std::vector<int> pick,
                    bool exact) {
  Selection s;
  s.choice = std::move(pick);
  for (size_t i = 0; i < items.size(); ++i) {
    s.total_bytes += items[i][s.choice[i]].bytes;
    s.total_latency += items[i][s.choice[i]].latency;
  }
  s.exact = exact;
  return s;
}

// INVALID_ARGUMENT for an item without options, RESOURCE_EXHAUSTED when even the smallest
// option of every item overshoots the budget.
absl::Status CheckFeasible(const std::vector<std::vector<Option>>& items, int64_t budget) {
  int64_t min_total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("item ", i, " has no options"));
    }
    int64_t m = std::numeric_limits<int64_t>::max();
    for (const Option& o : items[i]) m = std::min(m, o.bytes);
    min_total += m;
  }
  if (min_total > budget) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "weight budget ", budget, " bytes is below the smallest encoding (", min_total, " bytes)"));
  }
  return absl::OkStatus();
}

// Exact: dynamic programme over items keeping only Pareto-optimal partial sums. nullopt when
// a Pareto set grows past `max_states`.
std::optional<std::vector<int>> ExactPick(const std::vector<std::vector<Option>>& items,
                                          int64_t budget, size_t max_states) {
  struct State {
    int64_t bytes;
    double latency;
    int32_t prev;    // index into the previous layer
    int32_t option;  // option taken for this item
  };
  std::vector<std::vector<State>> layers;
  std::vector<State> cur = {{0, 0.0, -1, -1}};
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<State> next;
    for (size_t s = 0; s < cur.size(); ++s) {
      for (size_t j = 0; j < items[i].size(); ++j) {
        const int64_t b = cur[s].bytes + items[i][j].bytes;
        if (b <= budget) {
          next.push_back({b, cur[s].latency + items[i][j].latency, static_cast<int32_t>(s),
                          static_cast<int32_t>(j)});
        }
      }
    }
    std::sort(next.begin(), next.end(), [](const State& a, const State& b) {
      return a.bytes != b.bytes ? a.bytes < b.bytes : a.latency < b.latency;
    });
    std::vector<State> pareto;
    for (const State& st : next) {
      if (pareto.empty() || st.latency < pareto.back().latency) pareto.push_back(st);
    }
    if (pareto.size() > max_states) return std::nullopt;
    layers.push_back(cur);
    cur = std::move(pareto);
  }
  // The last Pareto state has the lowest latency among all feasible totals.
  std::vector<int> pick(items.size());
  int32_t s = static_cast<int32_t>(cur.size()) - 1;
  for (size_t i = items.size(); i-- > 0;) {
    const State& st = i + 1 == items.size() ? cur[s] : layers[i + 1][s];
    pick[i] = st.option;
    s = st.prev;
  }
  return pick;
}

int64_t BytesOf(const std::vector<std::vector<Option>>& items, const std::vector<int>& pick) {
  int64_t b = 0;
  for (size_t i = 0; i < items.size(); ++i) b += items[i][pick[i]].bytes;
  return b;
}

// Spends the budget left by `pick` greedily, each time on the upgrade with the best latency
// saved per extra byte (free upgrades first), until none fits.
void GreedyFill(const std::vector<std::vector<Option>>& items, int64_t budget,
                std::vector<int>& pick) {
  int64_t slack = budget - BytesOf(items, pick);
  while (true) {
    double best_rate = 0;
    int bi = -1, bj = -1;
    for (size_t i = 0; i < items.size(); ++i) {
      const Option& c = items[i][pick[i]];
      for (size_t j = 0; j < items[i].size(); ++j) {
        const Option& o = items[i][j];
        const int64_t extra = o.bytes - c.bytes;
        const double saved = c.latency - o.latency;
        if (saved <= 0 || extra > slack) continue;
        const double rate = extra <= 0 ? std::numeric_limits<double>::infinity() : saved / extra;
        if (rate > best_rate) {
          best_rate = rate;
          bi = static_cast<int>(i);
          bj = static_cast<int>(j);
        }
      }
    }
    if (bi < 0) return;
    slack -= items[bi][bj].bytes - items[bi][pick[bi]].bytes;
    pick[bi] = bj;
  }
}

// Lagrangian: the smallest multiplier whose per-item picks fit, by bisection, then spend
// the leftover budget greedily on the upgrade with the best latency saved per byte.
std::vector<int> LagrangianPick(const std::vector<std::vector<Option>>& items, int64_t budget) {
  std::vector<int> pick = PickForLambda(items, 0.0);
  if (BytesOf(items, pick) <= budget) return pick;
  double lo = 0, hi = 1e-9;
  while (BytesOf(items, PickForLambda(items, hi)) > budget) hi *= 2;
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi);
    (BytesOf(items, PickForLambda(items, mid)) > budget ? lo : hi) = mid;
  }
  pick = PickForLambda(items, hi);
  GreedyFill(items, budget, pick);
  return pick;
}

}  // namespace

std::vector<ConfigPoint> ParetoFrontier(std::vector<ConfigPoint> points) {
  points.erase(std::remove_if(points.begin(), points.end(),
                              [](const ConfigPoint& p) { return p.pruned; }),
               points.end());
  std::sort(points.begin(), points.end(), [](const ConfigPoint& a, const ConfigPoint& b) {
    return a.bytes != b.bytes ? a.bytes < b.bytes : a.latency_us < b.latency_us;
  });
  std::vector<ConfigPoint> out;
  for (const ConfigPoint& p : points) {
    if (out.empty() || p.latency_us < out.back().latency_us) out.push_back(p);
  }
  return out;
}

absl::StatusOr<TensorFrontier> AutotuneTensor(const std::string& name, const TensorView& view,
                                              const TuneSpace& space, const TuneOptions& options) {
  TAILOR_RETURN_IF_ERROR(ValidateView(view));
  TensorFrontier f;
  f.name = name;
  f.dtype = view.dtype;
  f.rows = view.rows;
  f.cols = view.cols;
  f.dense_bytes = DenseBytes(view.dtype, view.rows, view.cols);
  f.entropy_bits_per_weight = EmpiricalBitsPerWeight(view, 1);

  // The activation only affects timing through its values' cost, so a fixed pattern is fine.
  std::vector<float> x(view.cols), y(view.rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);

  ConfigPoint dense;
  dense.dense = true;
  dense.bytes = dense.predicted_bytes = f.dense_bytes;
  TAILOR_ASSIGN_OR_RETURN(dense.latency_us, MedianMicros(options.reps, [&] {
    return DenseGemv(view, x.data(), nullptr, y.data(), options.threads);
  }));
  f.candidates.push_back(dense);

  for (int k : space.symbols_per_codeword) {
    for (int tl : space.table_log) {
      for (int cw : space.chunk_width) {
        ConfigPoint p;
        p.config.symbols_per_codeword = k;
        p.config.table_log = tl;
        p.config.chunk_width = cw;
        if (!ValidateConfig(view.dtype, p.config).ok()) continue;  // e.g. k=3 on byte planes
        p.predicted_bytes = PredictEncodedBytes(view, p.config);
        if (p.predicted_bytes >= options.prune_ratio * f.dense_bytes) {
          p.pruned = true;
          f.candidates.push_back(p);
          continue;
        }
        TAILOR_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Encode(view, p.config));
        TAILOR_ASSIGN_OR_RETURN(CodedTensor coded, Parse(std::move(bytes)));
        p.bytes = coded.size_bytes();
        TAILOR_ASSIGN_OR_RETURN(p.latency_us, MedianMicros(options.reps, [&] {
          return FusedGemv(coded, x.data(), nullptr, y.data(), options.threads);
        }));
        f.candidates.push_back(p);
      }
    }
  }
  f.frontier = ParetoFrontier(f.candidates);
  return f;
}

absl::StatusOr<Selection> SelectUnderBudget(const std::vector<std::vector<Option>>& items,
                                            int64_t budget, const SelectOptions& options) {
  TAILOR_RETURN_IF_ERROR(CheckFeasible(items, budget));
  if (std::optional<std::vector<int>> pick = ExactPick(items, budget, options.max_states)) {
    return Summarise(items, *std::move(pick), true);
  }
  return Summarise(items, LagrangianPick(items, budget), false);
}

}  // namespace tailor::entropy
