#ifndef TAILOR_BENCH_COSTMODEL_ACCURACY_ACCURACY_STATS_H_
#define TAILOR_BENCH_COSTMODEL_ACCURACY_ACCURACY_STATS_H_

// What both modes of bench_costmodel_accuracy (the built-in engine and llama.cpp) summarize
// predictions with: the least-squares proxies and the error statistics.

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace tailor::bench {

// y ~ a + b x by least squares.
struct Line {
  double a = 0, b = 0;
  double operator()(double x) const { return a + b * x; }
};

inline Line FitLine(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double den = n * sxx - sx * sx;
  Line l;
  l.b = den != 0 ? (n * sxy - sx * sy) / den : 0;
  l.a = (sy - l.b * sx) / n;
  return l;
}

struct Errors {
  double mape = 0, max = 0, within5 = 0, within10 = 0;
};

inline Errors ErrorsOf(const std::vector<double>& predicted, const std::vector<double>& measured) {
  Errors e;
  for (size_t i = 0; i < predicted.size(); ++i) {
    const double err = std::abs(predicted[i] - measured[i]) / measured[i];
    e.mape += err;
    e.max = std::max(e.max, err);
    e.within5 += err <= 0.05 ? 1 : 0;
    e.within10 += err <= 0.10 ? 1 : 0;
  }
  const double n = std::max<double>(1, static_cast<double>(predicted.size()));
  e.mape /= n;
  e.within5 /= n;
  e.within10 /= n;
  return e;
}

inline nlohmann::json ErrorsJson(const Errors& e) {
  return {{"mape", e.mape}, {"max_error", e.max}, {"within_5pct", e.within5},
          {"within_10pct", e.within10}};
}

inline std::string Pct(double f) { return absl::StrFormat("%.1f%%", 100 * f); }

inline std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

}  // namespace tailor::bench

#endif  // TAILOR_BENCH_COSTMODEL_ACCURACY_ACCURACY_STATS_H_
