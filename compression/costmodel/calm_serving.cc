#include "compression/costmodel/calm_serving.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "compression/engine/workload.h"

namespace tailor::costmodel {

double RequestSpread(const ServedModel& served, double quantile) {
  if (served.requests.size() < 2) return 0;
  std::vector<double> t;
  for (const ServedRequest& r : served.requests) t.push_back(r.request_ms);
  const double hi = engine::Percentile(t, 100 * quantile);
  const double lo = engine::Percentile(t, 100 * (1 - quantile));
  return (hi - lo) / std::max(1e-12, engine::Median(t));
}

Disturbance JudgeDisturbance(const ServedModel& served, const CalmServingOptions& options) {
  Disturbance d;
  d.spread = RequestSpread(served, options.spread_quantile);
  std::vector<double> use;
  for (const ServedRequest& r : served.requests) {
    if (r.cpu_ms > 0 && r.request_ms > 0) use.push_back(r.cpu_ms / r.request_ms);
  }
  if (!use.empty()) d.thread_utilization = engine::Median(use) / std::max(1, options.threads);
  if (d.spread > options.max_spread) {
    d.disturbed = true;
    d.why = absl::StrFormat("request times spread %.0f%% (max %.0f%%)", 100 * d.spread,
                            100 * options.max_spread);
  }
  if (options.min_thread_utilization > 0 && !use.empty() &&
      d.thread_utilization < options.min_thread_utilization) {
    d.disturbed = true;
    if (!d.why.empty()) d.why += "; ";
    d.why += absl::StrFormat("the engine used %.0f%% of its %d threads (min %.0f%%)",
                             100 * d.thread_utilization, options.threads,
                             100 * options.min_thread_utilization);
  }
  return d;
}

absl::StatusOr<CalmServed> ServeUntilCalm(const std::function<absl::StatusOr<ServedModel>()>& serve,
                                          const CalmServingOptions& options) {
  CalmServed out;
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<ServedModel> s = serve();
    if (!s.ok()) return s.status();
    if (s->requests.empty()) {
      return absl::FailedPreconditionError("the engine timed no request");
    }
    Disturbance d = JudgeDisturbance(*s, options);
    // A calm try wins; among disturbed ones the least spread (the fewest preemptions).
    const bool keep = attempt == 0 || !d.disturbed ||
                      (out.disturbance.disturbed && d.spread < out.disturbance.spread);
    if (keep) {
      out.served = *std::move(s);
      out.disturbance = std::move(d);
      out.kept_try = attempt;
    }
    if (!out.disturbance.disturbed || attempt >= options.max_remeasures) return out;
    ++out.remeasures;
  }
}

absl::Status ValidateCalmServingOptions(const CalmServingOptions& o) {
  if (o.threads < 1 || o.max_remeasures < 0 || !(o.max_spread > 0) ||
      !(o.min_thread_utilization >= 0) || !(o.spread_quantile > 0.5 && o.spread_quantile <= 1)) {
    return absl::InvalidArgumentError(
        "calm serving options: threads >= 1, max_remeasures >= 0, max_spread > 0, "
        "min_thread_utilization >= 0, 0.5 < spread_quantile <= 1");
  }
  return absl::OkStatus();
}

}  // namespace tailor::costmodel
