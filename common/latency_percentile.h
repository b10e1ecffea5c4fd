#ifndef TAILOR_COMMON_LATENCY_PERCENTILE_H_
#define TAILOR_COMMON_LATENCY_PERCENTILE_H_

// The percentile a latency budget judges (Budget.latency_percentile) and how many whole
// requests a measurement needs for it: shared by the engines that measure (profiler-agent)
// and the coordinator that resolves budgets against a stored measurement.

#include "tailor/v1/contract.pb.h"

namespace tailor {

double PercentileOf(v1::LatencyPercentile percentile);  // 50, 90, 99 (unspecified: 50)

// Requests served for a percentile: enough that >= 5 samples lie at or above it (p50: 10,
// p90: 50, p99: 500), and never fewer than `configured`.
int RepetitionsFor(v1::LatencyPercentile percentile, int configured = 0);

}  // namespace tailor

#endif  // TAILOR_COMMON_LATENCY_PERCENTILE_H_
