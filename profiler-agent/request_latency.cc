#include "profiler-agent/request_latency.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tailor::profiler {

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

void SetWholeRequestLatency(const std::vector<double>& request_ms, const engine::Workload& w,
                            v1::LatencyPercentile percentile, v1::ModelCosts& c) {
  const double latency = engine::Percentile(request_ms, PercentileOf(percentile));
  c.set_latency_ms(latency);
  c.set_latency_statistic(absl::StrCat("p", PercentileOf(percentile), " of ",
                                       request_ms.size(), " whole requests"));
  c.set_throughput_tokens_per_s(
      latency > 0 ? static_cast<double>(w.batch_size * w.output_tokens) * 1000.0 / latency : 0);
  c.set_request_p50_ms(engine::Percentile(request_ms, 50));
  c.set_request_p90_ms(engine::Percentile(request_ms, 90));
  c.set_request_p99_ms(engine::Percentile(request_ms, 99));
  c.set_median_request_ms(engine::Median(request_ms));
  c.set_repetitions(static_cast<int>(request_ms.size()));
}

absl::StatusOr<v1::ModelCosts> MeasureUntilCalm(
    const std::function<absl::StatusOr<VerifyRun>()>& serve,
    const costmodel::CalmServingOptions& options) {
  std::vector<v1::ModelCosts> runs;
  auto serve_once = [&]() -> absl::StatusOr<costmodel::ServedModel> {
    absl::StatusOr<VerifyRun> run = serve();
    if (!run.ok()) return run.status();
    runs.push_back(std::move(run->costs));
    return std::move(run->served);
  };
  absl::StatusOr<costmodel::CalmServed> served = costmodel::ServeUntilCalm(serve_once, options);
  if (!served.ok()) return served.status();
  v1::ModelCosts c = runs[served->kept_try];
  const costmodel::Disturbance& d = served->disturbance;
  c.set_request_spread(d.spread);
  if (d.thread_utilization > 0) c.set_thread_utilization(d.thread_utilization);
  c.set_remeasures(served->remeasures);
  c.set_disturbed(d.disturbed);
  c.set_disturbance(d.why);
  if (served->remeasures > 0) {
    absl::StrAppend(c.mutable_latency_statistic(), ", the calmest of ", runs.size(), " runs");
  }
  if (d.disturbed) absl::StrAppend(c.mutable_latency_statistic(), " (disturbed: ", d.why, ")");
  return c;
}

absl::StatusOr<v1::ModelCosts> MedianServe(const std::vector<v1::ModelCosts>& serves,
                                           absl::string_view what) {
  if (serves.empty()) return absl::InvalidArgumentError("MedianServe: no serves");
  std::vector<const v1::ModelCosts*> sorted;
  for (const v1::ModelCosts& s : serves) sorted.push_back(&s);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const v1::ModelCosts* a, const v1::ModelCosts* b) {
                     return a->latency_ms() < b->latency_ms();
                   });
  v1::ModelCosts m = *sorted[sorted.size() / 2];
  m.clear_serve_latency_ms();
  int remeasures = 0;
  std::vector<std::string> each;
  for (const v1::ModelCosts& s : serves) {
    m.add_serve_latency_ms(s.latency_ms());
    remeasures += s.remeasures();
    each.push_back(absl::StrFormat("%.2f", s.latency_ms()));
  }
  m.set_remeasures(remeasures);
  if (serves.size() > 1) {
    absl::StrAppend(m.mutable_latency_statistic(), "; the median of ", serves.size(), " ", what,
                    " (", absl::StrJoin(each, ", "), " ms)");
  }
  return m;
}

absl::StatusOr<v1::ModelCosts> MeasureServes(
    int serves, const std::function<absl::StatusOr<v1::ModelCosts>()>& serve) {
  std::vector<v1::ModelCosts> runs;
  for (int i = 0; i < std::max(serves, 1); ++i) {
    absl::StatusOr<v1::ModelCosts> run = serve();
    if (!run.ok()) return run.status();
    runs.push_back(*std::move(run));
  }
  return MedianServe(runs, "serves");
}

costmodel::CalmServingOptions RequestCalmOptions(int threads) {
  costmodel::CalmServingOptions o;
  o.spread_quantile = 0.75;
  // Quiet 15-request runs of a ~55 ms llama.cpp model spread 7-16% interquartile on this
  // 2-vCPU host (docs/benchmarks.md, "Verify under interference"): 10% re-served half of them.
  o.max_spread = 0.25;
  o.threads = std::max(threads, 1);
  if (threads == 0) o.min_thread_utilization = 0;
  return o;
}

}  // namespace tailor::profiler
