#include "methods/entropy_code/report.h"

#include <cmath>
#include <string>

#include "methods/api/job_kinds.h"
#include "methods/entropy_code/job_kinds.h"

namespace tailor::methods {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

const v1::Job* JobByKey(const std::vector<v1::Job>& jobs, const std::string& key) {
  for (const v1::Job& j : jobs) {
    if (j.key() == key) return &j;
  }
  return nullptr;
}

const Struct* Sub(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it != s.fields().end() && it->second.has_struct_value() ? &it->second.struct_value()
                                                                 : nullptr;
}

void Copy(const Struct& from, const std::string& key, Struct& to, const std::string& as = "") {
  auto it = from.fields().find(key);
  if (it != from.fields().end()) (*to.mutable_fields())[as.empty() ? key : as] = it->second;
}

}  // namespace

void AddEntropyReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                      v1::CampaignReport& report) {
  const bool tail = campaign.contract().method() != v1::ENTROPY_CODE;
  const v1::Job* select = JobByKey(jobs, tail ? jobs::kTailSelect : jobs::kSelect);
  const v1::Job* verify = JobByKey(jobs, tail ? jobs::kTailVerify : jobs::kVerify);
  const v1::Job* autotune = JobByKey(jobs, tail ? jobs::kTailAutotune : jobs::kAutotune);
  if (select == nullptr && autotune == nullptr) return;
  Struct e;
  auto& f = *e.mutable_fields();
  if (autotune != nullptr && autotune->has_result()) {
    Copy(autotune->result(), "autotune_seconds", e);
    Copy(autotune->result(), "frontiers_digest", e);
  }
  if (select != nullptr && select->has_result()) {
    const Struct& s = select->result();
    for (const char* k : {"weight_format", "package_digest", "bits_per_weight",
                          "entropy_bits_per_weight", "resident_bytes", "dense_bytes",
                          "coded_tensors", "dense_tensors", "budget_mib", "exact"}) {
      Copy(s, k, e);
    }
    Copy(s, "gemv_batch1_us", e, "predicted_gemv_batch1_us");
    Copy(s, "dense_gemv_batch1_us", e, "predicted_dense_gemv_batch1_us");
  }
  const Struct* measured = nullptr;
  if (verify != nullptr && verify->has_result()) {
    if (const Struct* v = Sub(verify->result(), "entropy")) {
      for (const auto& [k, val] : v->fields()) f[k] = val;  // per tensor rows and totals
    }
    measured = Sub(verify->result(), "measured");
  }
  if (f.empty()) return;
  (*report.mutable_details()->mutable_fields())["entropy"].mutable_struct_value()->Swap(&e);

  // The tail's package has its own weight memory: report it next to the student's.
  const v1::Budget& b = campaign.contract().budget();
  if (tail && b.has_weight_memory_mib_max()) {
    v1::BudgetResult* r = report.add_budgets();
    r->set_resource("weight_memory_mib (package)");
    r->set_budget(b.weight_memory_mib_max());
    double predicted = NAN;
    if (select != nullptr) {
      if (const Struct* p = Sub(select->result(), "predicted")) {
        auto it = p->fields().find("weight_memory_mib");
        if (it != p->fields().end()) predicted = it->second.number_value();
      }
    }
    r->set_predicted(predicted);
    const auto it = measured ? measured->fields().find("weight_memory_mib")
                             : google::protobuf::Map<std::string, Value>::const_iterator();
    const bool has = measured != nullptr && it != measured->fields().end();
    r->set_has_measured(has);
    r->set_measured(has ? it->second.number_value() : NAN);
    r->set_met(has && it->second.number_value() <= b.weight_memory_mib_max());
  }
}

}  // namespace tailor::methods
