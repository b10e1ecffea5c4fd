#include "compression/costmodel/interaction.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "compression/engine/workload.h"

namespace tailor::costmodel {

namespace {

using engine::Median;

double Dot(const KindCounts& g, const KindCounts& counts, const KindCounts& reference) {
  double s = 0;
  for (int j = 0; j < kKinds; ++j) s += g[j] * (counts[j] - reference[j]);
  return s;
}

// Solves the kKinds x kKinds system a x = b by Gaussian elimination with partial pivoting
// (a is symmetric positive definite thanks to the ridge term).
KindCounts Solve(std::array<KindCounts, kKinds> a, KindCounts b) {
  for (int c = 0; c < kKinds; ++c) {
    int p = c;
    for (int r = c + 1; r < kKinds; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    }
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    for (int r = 0; r < kKinds; ++r) {
      if (r == c || a[c][c] == 0) continue;
      const double f = a[r][c] / a[c][c];
      for (int k = 0; k < kKinds; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  KindCounts x{};
  for (int i = 0; i < kKinds; ++i) x[i] = a[i][i] != 0 ? b[i] / a[i][i] : 0;
  return x;
}

}  // namespace

KindCounts PresentCounts(const model::HybridConfig& config) {
  KindCounts n{};
  for (const model::LayerSpec& l : config.layers) {
    if (l.present()) n[static_cast<int>(l.kind)] += 1;
  }
  return n;
}

double InteractionModel::Factor(int row, bool decode_phase, const KindCounts& counts) const {
  const GammaRows& g = decode_phase ? decode : prefill;
  return std::exp(Dot(g[row], counts, reference));
}

bool InteractionModel::empty() const {
  for (const GammaRows* rows : {&prefill, &decode}) {
    for (const KindCounts& r : *rows) {
      for (double v : r) {
        if (v != 0) return false;
      }
    }
  }
  return true;
}

InteractionFit FitInteraction(const std::vector<InteractionSample>& samples,
                              const KindCounts& reference, double ridge, int iterations) {
  InteractionFit fit;
  // Keys seen in at least two contexts inform gamma.
  std::map<std::string, std::set<KindCounts>> contexts;
  for (const InteractionSample& s : samples) contexts[s.key].insert(s.counts);
  for (int it = 0; it <= iterations; ++it) {
    std::map<std::string, std::vector<double>> scaled;
    for (const InteractionSample& s : samples) {
      scaled[s.key].push_back(s.value / std::exp(Dot(fit.gamma[s.row], s.counts, reference)));
    }
    for (auto& [key, v] : scaled) fit.base[key] = Median(std::move(v));
    if (it == iterations) break;
    for (int row = 0; row <= kFixedRow; ++row) {
      std::array<KindCounts, kKinds> a{};
      KindCounts b{};
      for (int j = 0; j < kKinds; ++j) a[j][j] = ridge;
      for (const InteractionSample& s : samples) {
        if (s.row != row || contexts[s.key].size() < 2) continue;
        const double base = fit.base[s.key];
        if (!(s.value > 0) || !(base > 0)) continue;
        // Weighted by the base time, so that the layers that make up most of a request
        // decide the fit rather than the tiny ones.
        const double w = base;
        const double y = std::log(s.value / base);
        KindCounts x{};
        for (int j = 0; j < kKinds; ++j) x[j] = s.counts[j] - reference[j];
        for (int i = 0; i < kKinds; ++i) {
          b[i] += w * x[i] * y;
          for (int j = 0; j < kKinds; ++j) a[i][j] += w * x[i] * x[j];
        }
      }
      // base is the time at the reference context, so log(value / base) is the whole
      // context term gamma . (counts - reference).
      fit.gamma[row] = Solve(a, b);
    }
  }
  return fit;
}

}  // namespace tailor::costmodel
