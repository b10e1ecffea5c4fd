#include "coordinator/cost_table_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace tailor::coordinator {

std::optional<v1::CostTableCheck> JudgeCostTable(const v1::CostTable& table,
                                                 const v1::ModelCosts& predicted,
                                                 const v1::ModelCosts& measured,
                                                 const std::string& campaign_id) {
  if (!predicted.has_latency_ms()) return std::nullopt;
  const double m =
      measured.has_request_p50_ms() ? measured.request_p50_ms() : measured.latency_ms();
  if (!(measured.has_request_p50_ms() || measured.has_latency_ms()) || !(m > 0)) {
    return std::nullopt;
  }
  v1::CostTableCheck check;
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
        "campaign %s: predicted %.2f ms, measured %.2f ms (%.1f%% off), but the measurement "
        "was disturbed (%s): the table is not judged on it",
        campaign_id, predicted.latency_ms(), m, 100 * check.error(), measured.disturbance()));
    return check;
  }
  // A table validated on nothing has no error range to be outside of.
  if (table.validated_architectures() > 0 && check.error() > bound) {
    check.set_suspect(true);
    check.set_reason(absl::StrFormat(
        "campaign %s: predicted %.2f ms, measured %.2f ms (%.1f%% off; the table was validated "
        "at %.1f%% MAPE, worst %.1f%%, over %d held-out architectures)",
        campaign_id, predicted.latency_ms(), m, 100 * check.error(), 100 * table.latency_mape(),
        100 * table.latency_max_error(), table.validated_architectures()));
  }
  return check;
}

}  // namespace tailor::coordinator
