#include "common/latency_percentile.h"

#include <algorithm>
#include <cmath>

namespace tailor {

double PercentileOf(v1::LatencyPercentile percentile) {
  switch (percentile) {
    case v1::LATENCY_P90:
      return 90;
    case v1::LATENCY_P99:
      return 99;
    default:
      return 50;
  }
}

int RepetitionsFor(v1::LatencyPercentile percentile, int configured) {
  const double tail = 1.0 - PercentileOf(percentile) / 100.0;
  return std::max(configured, static_cast<int>(std::ceil(5.0 / tail - 1e-9)));
}

}  // namespace tailor
