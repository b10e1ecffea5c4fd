#include "methods/entropy_code/report.h"

#include <cmath>
#include <optional>
#include <string>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/struct.pb.h"
#include "common/job_output.h"
#include "common/struct_values.h"
#include "methods/api/job_kinds.h"
#include "methods/api/report_parts.h"
#include "methods/entropy_code/entropy_code_results.pb.h"
#include "methods/entropy_code/job_kinds.h"

namespace tailor::methods {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::Struct;
using google::protobuf::Value;
using struct_values::Num;
using v1::entropy_code::AutotuneResult;
using v1::entropy_code::PackageVerifyResult;
using v1::entropy_code::SelectResult;

Struct ToStruct(const Message& m);

// Element `index` of repeated field `f` of `m`, or its value when `index` is -1. Integers
// become numbers, as in the Struct results the report details were first built from.
Value FieldValue(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  Value v;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      v.set_number_value(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      v.set_number_value(
          static_cast<double>(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f)));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      v.set_number_value(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      v.set_number_value(
          static_cast<double>(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f)));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      v.set_number_value(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      v.set_number_value(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      v.set_bool_value(rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f));
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      v.set_string_value(rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f));
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      v.set_string_value(rep ? r->GetRepeatedEnum(m, f, index)->name() : r->GetEnum(m, f)->name());
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      *v.mutable_struct_value() =
          ToStruct(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
      break;
  }
  return v;
}

// `m` as a report details Struct keyed by field name: every field, including a proto3 scalar
// at its default (the job wrote each of them: a 0 or false is a result), optional fields only
// when set, repeated fields as lists.
Struct ToStruct(const Message& m) {
  Struct s;
  auto& out = *s.mutable_fields();
  const Reflection* r = m.GetReflection();
  for (int i = 0; i < m.GetDescriptor()->field_count(); ++i) {
    const FieldDescriptor* f = m.GetDescriptor()->field(i);
    if (f->is_repeated()) {
      auto& list = *out[f->name()].mutable_list_value();
      for (int j = 0; j < r->FieldSize(m, f); ++j) *list.add_values() = FieldValue(m, f, j);
    } else if (!f->has_presence() || r->HasField(m, f)) {
      out[f->name()] = FieldValue(m, f, -1);
    }
  }
  return s;
}

}  // namespace

void AddEntropyReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                      v1::CampaignReport& report) {
  const bool tail = campaign.contract().method() != v1::ENTROPY_CODE;
  const v1::JobOutput* select = OutputOfJob(jobs, tail ? jobs::kTailSelect : jobs::kSelect);
  const v1::JobOutput* verify = OutputOfJob(jobs, tail ? jobs::kTailVerify : jobs::kVerify);
  const v1::JobOutput* autotune =
      OutputOfJob(jobs, tail ? jobs::kTailAutotune : jobs::kAutotune);
  if (select == nullptr && autotune == nullptr) return;
  Struct e;
  auto& f = *e.mutable_fields();
  if (autotune != nullptr) {
    if (std::optional<AutotuneResult> a = DetailOf<AutotuneResult>(*autotune)) {
      f["autotune_seconds"] = Num(a->autotune_seconds());
      f["frontiers_digest"].set_string_value(a->frontiers_digest());
    }
  }
  if (select != nullptr) {
    if (std::optional<SelectResult> s = DetailOf<SelectResult>(*select)) {
      f["weight_format"].set_string_value(s->weight_format());
      f["package_digest"].set_string_value(select->package_digest());
      f["bits_per_weight"] = Num(s->bits_per_weight());
      f["entropy_bits_per_weight"] = Num(s->entropy_bits_per_weight());
      f["resident_bytes"] = Num(static_cast<double>(s->resident_bytes()));
      f["dense_bytes"] = Num(static_cast<double>(s->dense_bytes()));
      f["coded_tensors"] = Num(static_cast<double>(s->coded_tensors()));
      f["dense_tensors"] = Num(static_cast<double>(s->dense_tensors()));
      if (s->has_budget_mib()) f["budget_mib"] = Num(s->budget_mib());
      f["exact"].set_bool_value(s->exact());
      f["predicted_gemv_batch1_us"] = Num(s->gemv_batch1_us());
      f["predicted_dense_gemv_batch1_us"] = Num(s->dense_gemv_batch1_us());
    }
  }
  const v1::ModelCosts* measured = nullptr;
  if (verify != nullptr) {
    if (std::optional<PackageVerifyResult> v = DetailOf<PackageVerifyResult>(*verify);
        v.has_value() && v->has_entropy()) {
      // Per tensor rows and totals; the package's measurements overwrite select's predictions.
      Struct serving = ToStruct(v->entropy());
      for (auto& [k, val] : *serving.mutable_fields()) f[k] = std::move(val);
    }
    if (verify->has_measured()) measured = &verify->measured();
  }
  if (f.empty()) return;
  (*report.mutable_details()->mutable_fields())["entropy"].mutable_struct_value()->Swap(&e);

  // The tail's package has its own weight memory: report it next to the student's.
  const v1::Budget& b = campaign.contract().budget();
  if (tail && b.has_weight_memory_mib_max()) {
    v1::BudgetResult* r = report.add_budgets();
    r->set_resource("weight_memory_mib (package)");
    r->set_budget(b.weight_memory_mib_max());
    r->set_predicted(select != nullptr && select->predicted().has_weight_memory_mib()
                         ? select->predicted().weight_memory_mib()
                         : NAN);
    const bool has = measured != nullptr && measured->has_weight_memory_mib();
    r->set_has_measured(has);
    r->set_measured(has ? measured->weight_memory_mib() : NAN);
    r->set_met(has && measured->weight_memory_mib() <= b.weight_memory_mib_max());
  }
}

}  // namespace tailor::methods
