#ifndef TAILOR_COMPRESSION_COSTMODEL_COST_TABLE_PROTO_H_
#define TAILOR_COMPRESSION_COSTMODEL_COST_TABLE_PROTO_H_

// CostTableData <-> v1::CostTable (built only where protobuf is, i.e. not TAILOR_ML_ONLY).
//
// memory_model (google.protobuf.Struct) holds the calibrated memory terms:
//   formula          "M = W + C + P + R + eps"
//   element_bytes    bytes per weight/cache element at the table's precision
//   eps_mib          measured minus modelled, median over the profiling models
//   eps_spread_mib   largest deviation of one profiling model's eps from that median
//   weights_scale, attention_cache_scale, mamba_cache_scale, runtime_scale
//                    engine calibrations of W, C and R (cost_table.h); written only when not
//                    1, and 1 when absent, so built-in tables are as before
//   parent {w_mib, c_mib, p_mib, r_mib, eps_mib, total_mib}   the parent under this table
//   memory_max_error, latency_within_5, latency_within_10     validation details the proto
//                                                              has no field for
//   latency_interaction {reference: [4], prefill: [5][4], decode: [5][4]}
//                    the latency interaction correction (interaction.h): memory_model is the
//                    table's only free-form field, so the latency coefficients live here too
// The proto's validation fields are fractions (0.032 = 3.2%).

#include "absl/status/statusor.h"
#include "compression/costmodel/cost_table.h"
#include "compression/engine/workload.h"
#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::costmodel {

v1::CostTable ToProto(const CostTableData& table);
// INVALID_ARGUMENT for a precision the engine does not serve or a malformed memory model.
absl::StatusOr<CostTableData> FromProto(const v1::CostTable& table);

absl::StatusOr<engine::Precision> PrecisionFromProto(v1::Precision precision);
v1::Precision PrecisionToProto(engine::Precision precision);
engine::Workload WorkloadFromProto(const v1::Workload& workload);
v1::Workload WorkloadToProto(const engine::Workload& workload);

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_COST_TABLE_PROTO_H_
