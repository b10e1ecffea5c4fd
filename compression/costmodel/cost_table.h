#ifndef TAILOR_COMPRESSION_COSTMODEL_COST_TABLE_H_
#define TAILOR_COMPRESSION_COSTMODEL_COST_TABLE_H_

// A cost table in plain C++ (the proto v1::CostTable minus the coordinator's bookkeeping),
// so the profiler, the cost model and the benches work without protobuf. cost_table_proto.h
// converts to and from the proto.
//
// Entries:
//   layer_kind attention|mamba|moe|mlp, config = LayerKey(spec, hidden), phase prefill|decode:
//     time_ms     the layer's median time in that phase of one request (decode: all steps)
//     memory_mib  what the layer adds to W + C (its weights and cache), from the formulas
//     params      LayerParams(spec, hidden) plus "workspace_mib": the measured peak the layer
//                 allocates above what was live when it began (P candidate)
//   layer_kind "fixed", config "hidden=H", both phases: time outside every layer (T0 split
//     by phase), memory_mib = embedding + head + final norm weights, params hidden and
//     workspace_mib (peak outside layers).
// Times are at the interaction model's reference context (interaction.h).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compression/costmodel/interaction.h"
#include "compression/engine/workload.h"

namespace tailor::costmodel {

// The held-out latency MAPE a cost table is trusted at: AutoCompress's bar (<= 5%). A
// llama.cpp profile serves every model again while its table is over it
// (WholeModelProfileOptions::target_latency_mape), and the report calls a table over it rough.
inline constexpr double kTrustedLatencyMape = 0.05;

// Must equal coordinator/planner.h's kLayerFamilyVersion: it is part of the fingerprint.
inline constexpr char kLayerFamilyVersion[] = "hybrid-v1";
inline constexpr char kPrefill[] = "prefill";
inline constexpr char kDecode[] = "decode";
inline constexpr char kFixedKind[] = "fixed";
inline constexpr char kWorkspaceParam[] = "workspace_mib";

struct CostEntryData {
  std::string layer_kind;
  std::string config;
  std::string phase;
  double time_ms = 0;
  double memory_mib = 0;
  std::map<std::string, double> params;
};

// Calibrated parts of M = W + C + P + R + eps (the rest are formulas in memory_model.h).
struct MemoryModelData {
  int64_t element_bytes = 4;
  double eps_mib = 0;         // median over profiling models of measured - modelled
  double eps_spread_mib = 0;  // largest |eps_i - eps_mib| among them
  // Engines whose allocations differ from the formulas by a factor (llama.cpp: weights
  // mostly at 16 bits with f32 norms, the KV cache at f16 over a padded context, the
  // recurrent state at f32, no runtime buffers of ours) have it fitted per term by the
  // whole-model profiler; 1 (the built-in engine) leaves the formulas as they are.
  double weights_scale = 1;          // W
  double attention_cache_scale = 1;  // attention K/V part of C
  double mamba_cache_scale = 1;      // Mamba conv + SSM state part of C
  double runtime_scale = 1;          // R
  // The parent under this table, for display: each term and the total.
  double parent_w_mib = 0, parent_c_mib = 0, parent_p_mib = 0, parent_r_mib = 0;
  double parent_total_mib = 0;
};

struct ValidationSummary {
  int architectures = 0;
  double latency_mape = 0;       // fractions: 0.032 = 3.2%
  double latency_max_error = 0;
  double memory_mape = 0;
  double memory_max_error = 0;
  double latency_within_5 = 0;   // share of architectures within +-5%
  double latency_within_10 = 0;
};

struct CostTableData {
  std::string device_kind = "cpu";
  std::string engine = engine::kEngineName;
  std::string engine_version = engine::kEngineVersion;
  engine::Precision precision = engine::Precision::kFp32;
  engine::Workload workload;
  std::string layer_family_version = kLayerFamilyVersion;
  int64_t vocab = 0;      // of the parent the table was profiled for
  double t0_ms = 0;       // fixed cost of the parent (its hidden width and context)
  std::vector<CostEntryData> entries;
  InteractionModel interaction;
  MemoryModelData memory;
  ValidationSummary validation;
};

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_COST_TABLE_H_
