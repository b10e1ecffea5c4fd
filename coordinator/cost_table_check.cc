#include "coordinator/cost_table_check.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"

namespace tailor::coordinator {

namespace {

// The median request of `m`, else its judged latency; 0 when it has neither.
double MedianRequest(const v1::ModelCosts& m) {
  if (m.has_request_p50_ms()) return m.request_p50_ms();
  return m.has_latency_ms() ? m.latency_ms() : 0;
}

// The table's parent over the parent served alongside; nullopt when either is missing.
std::optional<double> HostScale(const v1::CostTable& table, const v1::ModelCosts* beside) {
  if (beside == nullptr || !table.has_parent_measured()) return std::nullopt;
  const double then = MedianRequest(table.parent_measured());
  const double now = MedianRequest(*beside);
  if (!(then > 0) || !(now > 0)) return std::nullopt;
  return then / now;
}

}  // namespace

std::optional<v1::CostTableCheck> JudgeCostTable(const v1::CostTable& table,
                                                 const v1::ModelCosts& predicted,
                                                 const v1::ModelCosts& measured,
                                                 const std::string& campaign_id,
                                                 const v1::ModelCosts* parent_beside) {
  if (!predicted.has_latency_ms()) return std::nullopt;
  const double served = MedianRequest(measured);
  if (!(served > 0)) return std::nullopt;
  const std::optional<double> scale = HostScale(table, parent_beside);
  const double m = served * scale.value_or(1);
  v1::CostTableCheck check;
  std::string footing;
  if (scale.has_value()) {
    check.set_host_scale(*scale);
    check.set_measured_as_served(served);
    footing = absl::StrFormat(
        " on the table's footing (%.2f ms as served; the parent served alongside at %.2f ms, "
        "%.2f ms when the table was profiled)",
        served, MedianRequest(*parent_beside), MedianRequest(table.parent_measured()));
  }
  check.set_cost_table_id(table.id());
  check.set_resource("latency_ms");
  check.set_predicted(predicted.latency_ms());
  check.set_measured(m);
  check.set_error(std::abs(m - predicted.latency_ms()) / m);
  check.set_validated_mape(table.latency_mape());
  check.set_validated_max_error(table.latency_max_error());
  const double bound = std::max(table.latency_max_error(), table.latency_mape());
  // A measurement the host disturbed (still, after re-serving) measured the host: it is
  // reported, and not held against the table.
  check.set_measurement_disturbed(measured.disturbed());
  if (measured.disturbed() && check.error() > bound) {
    check.set_reason(absl::StrFormat(
        "campaign %s: predicted %.2f ms, measured %.2f ms%s (%.1f%% off), but the measurement "
        "was disturbed (%s): the table is not judged on it",
        campaign_id, predicted.latency_ms(), m, footing, 100 * check.error(),
        measured.disturbance()));
    return check;
  }
  // A table validated on nothing has no error range to be outside of.
  if (table.validated_architectures() > 0 && check.error() > bound) {
    check.set_suspect(true);
    check.set_reason(absl::StrFormat(
        "campaign %s: predicted %.2f ms, measured %.2f ms%s (%.1f%% off; the table was "
        "validated at %.1f%% MAPE, worst %.1f%%, over %d held-out architectures)",
        campaign_id, predicted.latency_ms(), m, footing, 100 * check.error(),
        100 * table.latency_mape(),
        100 * table.latency_max_error(), table.validated_architectures()));
  }
  return check;
}

}  // namespace tailor::coordinator
