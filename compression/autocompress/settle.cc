#include "compression/autocompress/settle.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tailor::autocompress {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 1.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median measured / predicted over the rungs where both are positive (1 when none are).
template <typename Field>
double MedianRatio(const std::vector<MeasuredRung>& rungs, Field field) {
  std::vector<double> ratios;
  for (const MeasuredRung& r : rungs) {
    const double p = field(r.predicted), m = field(r.measured);
    if (p > 0 && m > 0 && std::isfinite(m / p)) ratios.push_back(m / p);
  }
  return Median(std::move(ratios));
}

// Every budget met by `p` after tightening each by `margin` (ceilings down, the floor up).
bool Within(const costmodel::Prediction& p, const Budgets& b, double margin) {
  if (b.latency_ms && !(p.latency_ms <= *b.latency_ms * (1.0 - margin))) return false;
  if (b.memory_mib && !(p.memory_mib <= *b.memory_mib * (1.0 - margin))) return false;
  if (b.throughput && !(p.throughput_tokens_per_s >= *b.throughput * (1.0 + margin))) {
    return false;
  }
  return true;
}

}  // namespace

std::vector<int> RungsToMeasure(int ladder_size, int max_rungs) {
  std::vector<int> out;
  if (ladder_size <= 0 || max_rungs <= 0) return out;
  if (max_rungs == 1) return {0};
  const int n = std::min(ladder_size, max_rungs);
  for (int i = 0; i < n; ++i) {
    // Rounded even spacing over [0, ladder_size - 1]; strictly increasing because n <= size.
    const int rung = static_cast<int>(std::lround(static_cast<double>(i) * (ladder_size - 1) /
                                                  std::max(n - 1, 1)));
    if (out.empty() || rung > out.back()) out.push_back(rung);
  }
  return out;
}

SettleDecision ChooseRung(const std::vector<MeasuredRung>& rungs, const Budgets& budgets,
                          double margin) {
  SettleDecision d;
  d.latency_scale = MedianRatio(rungs, [](const costmodel::Prediction& p) { return p.latency_ms; });
  d.memory_scale = MedianRatio(rungs, [](const costmodel::Prediction& p) { return p.memory_mib; });
  d.throughput_scale = MedianRatio(
      rungs, [](const costmodel::Prediction& p) { return p.throughput_tokens_per_s; });
  int largest = -1;
  for (size_t i = 0; i < rungs.size(); ++i) {
    costmodel::Prediction c = rungs[i].predicted;
    c.latency_ms *= d.latency_scale;
    c.memory_mib *= d.memory_scale;
    c.throughput_tokens_per_s *= d.throughput_scale;
    const bool fits = Within(c, budgets, margin) && Within(rungs[i].measured, budgets, 0.0);
    d.corrected.push_back(c);
    d.fits.push_back(fits);
    if (fits) largest = static_cast<int>(i);
  }
  if (largest >= 0) {
    d.chosen = largest;
    d.reason = largest + 1 == static_cast<int>(rungs.size())
                   ? absl::StrFormat("the largest measured rung (%d of %d) fits every budget "
                                     "less %.1f%%",
                                     largest + 1, rungs.size(), 100 * margin)
                   : absl::StrFormat("rung %d of %d is the largest that fits every budget less "
                                     "%.1f%%; the next measured over or is corrected over",
                                     largest + 1, rungs.size(), 100 * margin);
  } else {
    d.chosen = 0;
    d.reason = absl::StrFormat("no measured rung fits every budget less %.1f%%: kept the "
                               "search's choice",
                               100 * margin);
  }
  return d;
}

}  // namespace tailor::autocompress
