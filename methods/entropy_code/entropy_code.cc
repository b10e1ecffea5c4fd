#include "methods/entropy_code/entropy_code.h"

#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "methods/api/job_kinds.h"
#include "methods/entropy_code/entropy_code_results.pb.h"
#include "methods/entropy_code/job_kinds.h"
#include "methods/entropy_code/render.h"
#include "methods/entropy_code/report.h"

namespace tailor::methods {
namespace {

void CheckCandidateList(const std::string& field,
                        const google::protobuf::RepeatedField<int32_t>& values, int64_t lo,
                        int64_t hi, ContractChecker& k) {
  if (values.size() > kMaxCandidates) {
    k.Add(field, absl::StrCat("at most ", kMaxCandidates, " entries, got ", values.size()));
    return;
  }
  for (int i = 0; i < values.size(); ++i) {
    std::string item = absl::StrCat(field, "[", i, "]");
    if (!k.Int(item, values[i], lo, hi)) continue;
    for (int j = 0; j < i; ++j) {
      if (values[j] == values[i]) {
        k.Add(item, absl::StrCat("duplicate of ", field, "[", j, "] (", values[i], ")"));
        break;
      }
    }
  }
}

void CheckEntropyParams(const v1::DeploymentContract& c, ContractChecker& k) {
  const v1::EntropyParams& e = c.entropy();
  if (!v1::WeightFormat_IsValid(e.weight_format())) {
    k.Add("entropy.weight_format",
          absl::StrCat("must be one of WEIGHT_FORMAT_UNSPECIFIED, WEIGHT_BF16, WEIGHT_FP8, "
                       "WEIGHT_INT8, WEIGHT_INT4, got ",
                       e.weight_format()));
  }
  CheckCandidateList("entropy.symbols_per_codeword", e.symbols_per_codeword(), 1, 4, k);
  CheckCandidateList("entropy.table_log", e.table_log(), 8, 16, k);
  CheckCandidateList("entropy.chunk_width", e.chunk_width(), 64, 65536, k);
}

void SetDefaultList(google::protobuf::RepeatedField<int32_t>* list,
                    std::initializer_list<int32_t> values) {
  if (list->empty()) list->Add(values.begin(), values.end());
}

class EntropyCodeMethod : public Method {
 public:
  v1::Method id() const override { return v1::ENTROPY_CODE; }

  MethodTraits traits() const override {
    MethodTraits t;
    t.low_precision_targets = true;
    return t;
  }

  void CheckChosen(const v1::DeploymentContract& c, ContractChecker& k) const override {
    const v1::Budget& b = c.budget();
    if (!b.has_weight_memory_mib_max() && !b.has_memory_mib_max()) {
      k.Add("budget", "weight_memory_mib_max or memory_mib_max is required for ENTROPY_CODE");
    }
  }

  std::vector<ParamsSection> ParamsSections() const override {
    return {{v1::DeploymentContract::kEntropyFieldNumber, CheckEntropyParams}};
  }

  void ApplyDefaults(v1::DeploymentContract& c) const override {
    v1::EntropyParams* e = c.mutable_entropy();
    SetDefaultList(e->mutable_symbols_per_codeword(), {1, 2});
    SetDefaultList(e->mutable_table_log(), {10, 12});
    SetDefaultList(e->mutable_chunk_width(), {1024, 4096});
  }

  void Plan(const v1::DeploymentContract& c, GraphBuilder& g) const override {
    const v1::Resources& r = c.resources();
    g.Add(jobs::kAutotune, jobs::kAutotune, r.entropy(), {});
    g.Add(jobs::kSelect, jobs::kSelect, r.entropy(), {jobs::kAutotune});
    g.Add(jobs::kVerify, jobs::kVerify, r.verify(), {jobs::kSelect});
  }

  std::vector<JobKind> JobKinds() const override { return EntropyTailJobKinds(); }

  absl::string_view chooser_job(const v1::DeploymentContract&) const override {
    return jobs::kSelect;
  }

  void AddReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                 v1::CampaignReport& report) const override {
    AddEntropyReport(campaign, jobs, report);
  }

  std::string RenderReport(const v1::CampaignReport& report,
                           const cli::RenderOptions& options) const override {
    return RenderEntropy(report, options);
  }
};

}  // namespace

std::unique_ptr<Method> MakeEntropyCodeMethod() { return std::make_unique<EntropyCodeMethod>(); }

std::vector<JobKind> EntropyTailJobKinds() {
  namespace ec = v1::entropy_code;
  return {{jobs::kAutotune, Placement::kAgent, ec::AutotuneResult::descriptor()},
          {jobs::kSelect, Placement::kLauncher, ec::SelectResult::descriptor()},
          {jobs::kVerify, Placement::kAgent, ec::PackageVerifyResult::descriptor()}};
}

void PlanEntropyTail(const v1::DeploymentContract& c, const std::string& after, GraphBuilder& g) {
  if (!c.package().entropy_code()) return;
  const v1::ResourceRequest& block = c.resources().entropy();
  g.Add(jobs::kTailAutotune, jobs::kAutotune, block, {after});
  g.Add(jobs::kTailSelect, jobs::kSelect, block, {jobs::kTailAutotune});
  g.Add(jobs::kTailVerify, jobs::kVerify, c.resources().verify(), {jobs::kTailSelect});
}

}  // namespace tailor::methods
