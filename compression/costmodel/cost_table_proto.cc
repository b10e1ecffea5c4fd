#include "compression/costmodel/cost_table_proto.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/struct_values.h"
#include "compression/costmodel/cost_model.h"

namespace tailor::costmodel {

namespace {

using ::tailor::struct_values::Num;

using google::protobuf::Struct;
using google::protobuf::Value;

Value Row(const KindCounts& row) {
  Value out;
  for (double v : row) *out.mutable_list_value()->add_values() = Num(v);
  return out;
}

Value Rows(const GammaRows& rows) {
  Value out;
  for (const KindCounts& r : rows) *out.mutable_list_value()->add_values() = Row(r);
  return out;
}

absl::Status ReadRow(const Value& v, KindCounts& row, const std::string& what) {
  if (!v.has_list_value() || v.list_value().values_size() != kKinds) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost table memory_model.latency_interaction.", what, ": want a list of ",
                     kKinds, " numbers"));
  }
  for (int j = 0; j < kKinds; ++j) row[j] = v.list_value().values(j).number_value();
  return absl::OkStatus();
}

absl::Status ReadRows(const Value& v, GammaRows& rows, const std::string& what) {
  if (!v.has_list_value() || v.list_value().values_size() != kKinds + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost table memory_model.latency_interaction.", what, ": want ",
                     kKinds + 1, " rows"));
  }
  for (int r = 0; r <= kKinds; ++r) {
    TAILOR_RETURN_IF_ERROR(
        ReadRow(v.list_value().values(r), rows[r], absl::StrCat(what, "[", r, "]")));
  }
  return absl::OkStatus();
}

double NumberOr(const Struct& s, const std::string& key, double fallback) {
  const auto it = s.fields().find(key);
  return it != s.fields().end() && it->second.has_number_value() ? it->second.number_value()
                                                                 : fallback;
}

}  // namespace

absl::StatusOr<engine::Precision> PrecisionFromProto(v1::Precision p) {
  switch (p) {
    case v1::FP32:
      return engine::Precision::kFp32;
    case v1::BF16:
      return engine::Precision::kBf16;
    case v1::FP16:
      return engine::Precision::kFp16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("precision: ", v1::Precision_Name(p),
                       " is not served by the built-in engine (FP32, BF16, FP16)"));
  }
}

v1::Precision PrecisionToProto(engine::Precision p) {
  switch (p) {
    case engine::Precision::kFp32:
      return v1::FP32;
    case engine::Precision::kBf16:
      return v1::BF16;
    case engine::Precision::kFp16:
      return v1::FP16;
  }
  return v1::FP32;
}

engine::Workload WorkloadFromProto(const v1::Workload& w) {
  engine::Workload out;
  out.batch_size = w.has_batch_size() ? w.batch_size() : 1;
  out.input_tokens = w.has_input_tokens() ? w.input_tokens() : 1;
  out.output_tokens = w.has_output_tokens() ? w.output_tokens() : 1;
  out.cached_prefix_tokens = w.has_cached_prefix_tokens() ? w.cached_prefix_tokens() : 0;
  return out;
}

v1::Workload WorkloadToProto(const engine::Workload& w) {
  v1::Workload out;
  out.set_batch_size(static_cast<int32_t>(w.batch_size));
  out.set_input_tokens(static_cast<int32_t>(w.input_tokens));
  out.set_output_tokens(static_cast<int32_t>(w.output_tokens));
  out.set_cached_prefix_tokens(static_cast<int32_t>(w.cached_prefix_tokens));
  return out;
}

v1::CostTable ToProto(const CostTableData& t) {
  v1::CostTable out;
  out.set_device_kind(t.device_kind);
  out.set_engine(t.engine);
  out.set_engine_version(t.engine_version);
  out.set_precision(PrecisionToProto(t.precision));
  *out.mutable_workload() = WorkloadToProto(t.workload);
  out.set_layer_family_version(t.layer_family_version);
  out.set_t0_ms(t.t0_ms);
  for (const CostEntryData& e : t.entries) {
    v1::CostEntry* p = out.add_entries();
    p->set_layer_kind(e.layer_kind);
    p->set_config(e.config);
    p->set_phase(e.phase);
    p->set_time_ms(e.time_ms);
    p->set_memory_mib(e.memory_mib);
    for (const auto& [k, v] : e.params) (*p->mutable_params())[k] = v;
  }
  out.set_latency_mape(t.validation.latency_mape);
  out.set_latency_max_error(t.validation.latency_max_error);
  out.set_memory_mape(t.validation.memory_mape);
  out.set_validated_architectures(t.validation.architectures);

  auto& f = *out.mutable_memory_model()->mutable_fields();
  f["formula"].set_string_value("M = W + C + P + R + eps");
  f["element_bytes"] = Num(static_cast<double>(t.memory.element_bytes));
  f["eps_mib"] = Num(t.memory.eps_mib);
  f["eps_spread_mib"] = Num(t.memory.eps_spread_mib);
  f["vocab"] = Num(static_cast<double>(t.vocab));
  // Engine calibrations (whole_model_profiler.h): written only when set, so built-in tables'
  // protos stay as they were; absent reads back as 1.
  const std::pair<const char*, double> scales[] = {
      {"weights_scale", t.memory.weights_scale},
      {"attention_cache_scale", t.memory.attention_cache_scale},
      {"mamba_cache_scale", t.memory.mamba_cache_scale},
      {"runtime_scale", t.memory.runtime_scale}};
  for (const auto& [key, value] : scales) {
    if (value != 1.0) f[key] = Num(value);
  }
  auto& parent = *f["parent"].mutable_struct_value()->mutable_fields();
  parent["w_mib"] = Num(t.memory.parent_w_mib);
  parent["c_mib"] = Num(t.memory.parent_c_mib);
  parent["p_mib"] = Num(t.memory.parent_p_mib);
  parent["r_mib"] = Num(t.memory.parent_r_mib);
  parent["eps_mib"] = Num(t.memory.eps_mib);
  parent["total_mib"] = Num(t.memory.parent_total_mib);
  auto& li = *f["latency_interaction"].mutable_struct_value()->mutable_fields();
  li["reference"] = Row(t.interaction.reference);
  li["prefill"] = Rows(t.interaction.prefill);
  li["decode"] = Rows(t.interaction.decode);
  f["memory_max_error"] = Num(t.validation.memory_max_error);
  f["latency_within_5"] = Num(t.validation.latency_within_5);
  f["latency_within_10"] = Num(t.validation.latency_within_10);
  return out;
}

absl::StatusOr<CostTableData> FromProto(const v1::CostTable& p) {
  CostTableData t;
  t.device_kind = p.device_kind();
  t.engine = p.engine();
  t.engine_version = p.engine_version();
  TAILOR_ASSIGN_OR_RETURN(t.precision, PrecisionFromProto(p.precision()));
  t.workload = WorkloadFromProto(p.workload());
  t.layer_family_version = p.layer_family_version();
  t.t0_ms = p.t0_ms();
  for (const v1::CostEntry& e : p.entries()) {
    CostEntryData d{e.layer_kind(), e.config(), e.phase(), e.time_ms(), e.memory_mib(), {}};
    for (const auto& [k, v] : e.params()) d.params[k] = v;
    t.entries.push_back(std::move(d));
  }
  const Struct& m = p.memory_model();
  const double bytes = NumberOr(m, "element_bytes", 0);
  if (bytes != 2 && bytes != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost table memory_model.element_bytes: want 2 or 4, got ", bytes));
  }
  t.memory.element_bytes = static_cast<int64_t>(bytes);
  t.memory.eps_mib = NumberOr(m, "eps_mib", 0);
  t.memory.eps_spread_mib = NumberOr(m, "eps_spread_mib", 0);
  t.vocab = static_cast<int64_t>(NumberOr(m, "vocab", 0));
  t.memory.weights_scale = NumberOr(m, "weights_scale", 1);
  t.memory.attention_cache_scale = NumberOr(m, "attention_cache_scale", 1);
  t.memory.mamba_cache_scale = NumberOr(m, "mamba_cache_scale", 1);
  t.memory.runtime_scale = NumberOr(m, "runtime_scale", 1);
  if (const auto it = m.fields().find("parent");
      it != m.fields().end() && it->second.has_struct_value()) {
    const Struct& parent = it->second.struct_value();
    t.memory.parent_w_mib = NumberOr(parent, "w_mib", 0);
    t.memory.parent_c_mib = NumberOr(parent, "c_mib", 0);
    t.memory.parent_p_mib = NumberOr(parent, "p_mib", 0);
    t.memory.parent_r_mib = NumberOr(parent, "r_mib", 0);
    t.memory.parent_total_mib = NumberOr(parent, "total_mib", 0);
  }
  if (const auto it = m.fields().find("latency_interaction"); it != m.fields().end()) {
    if (!it->second.has_struct_value()) {
      return absl::InvalidArgumentError(
          "cost table memory_model.latency_interaction: want a struct");
    }
    const auto& li = it->second.struct_value().fields();
    const Value none;
    auto field = [&](const char* k) -> const Value& {
      const auto f = li.find(k);
      return f == li.end() ? none : f->second;
    };
    TAILOR_RETURN_IF_ERROR(ReadRow(field("reference"), t.interaction.reference, "reference"));
    TAILOR_RETURN_IF_ERROR(ReadRows(field("prefill"), t.interaction.prefill, "prefill"));
    TAILOR_RETURN_IF_ERROR(ReadRows(field("decode"), t.interaction.decode, "decode"));
  }
  t.validation.architectures = p.validated_architectures();
  t.validation.latency_mape = p.latency_mape();
  t.validation.latency_max_error = p.latency_max_error();
  t.validation.memory_mape = p.memory_mape();
  t.validation.memory_max_error = NumberOr(m, "memory_max_error", 0);
  t.validation.latency_within_5 = NumberOr(m, "latency_within_5", 0);
  t.validation.latency_within_10 = NumberOr(m, "latency_within_10", 0);
  return t;
}

absl::StatusOr<CostModel> CostModel::FromTable(const v1::CostTable& table) {
  TAILOR_ASSIGN_OR_RETURN(CostTableData data, FromProto(table));
  return FromData(std::move(data));
}

}  // namespace tailor::costmodel
