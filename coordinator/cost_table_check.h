#ifndef TAILOR_COORDINATOR_COST_TABLE_CHECK_H_
#define TAILOR_COORDINATOR_COST_TABLE_CHECK_H_

#include <optional>
#include <string>

#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::coordinator {

// Compares a verification with the prediction of the table that chose the model. The figure
// compared is the median whole request when the engine reports one (tables are fitted to
// medians; the judged percentile may be p90 or p99), else the judged latency. The bound is the
// table's own validation: its worst held-out architecture, and never less than its MAPE (a
// single architecture beyond the MAPE alone is ordinary: the MAPE is a mean). A measurement
// the engine reports as disturbed by interference never marks the table suspect; the check's
// reason says why. nullopt when either side carries no latency. With `parent_beside` (the
// parent served alongside the model in the verify) and the table's own parent measurement,
// the figure compared is put on the table's footing first (CostTableCheck.host_scale): on a
// host whose speed moves by 10-30% over minutes, the raw figure judges the host.
std::optional<v1::CostTableCheck> JudgeCostTable(const v1::CostTable& table,
                                                 const v1::ModelCosts& predicted,
                                                 const v1::ModelCosts& measured,
                                                 const std::string& campaign_id,
                                                 const v1::ModelCosts* parent_beside = nullptr);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_COST_TABLE_CHECK_H_
