#include "tests/e2e/toy_method/toy_method.h"

#include "common/job_output.h"
#include "methods/api/report_parts.h"

namespace tailor::toy {
namespace {

using google::protobuf::Struct;

// The detail of the job keyed `key`, when it finished with one.
template <typename T>
std::optional<T> DetailOfJob(const std::vector<v1::Job>& jobs, const char* key) {
  const v1::JobOutput* output = methods::OutputOfJob(jobs, key);
  return output != nullptr ? DetailOf<T>(*output) : std::nullopt;
}

class ToyMethod : public methods::Method {
 public:
  v1::Method id() const override { return kToyMethod; }
  std::string name() const override { return "TOY"; }

  methods::MethodTraits traits() const override {
    methods::MethodTraits t;
    t.needs_parent = false;
    t.needs_workload = false;
    return t;
  }

  // A rule of its own, reported in field order like the built-in ones.
  void CheckChosen(const v1::DeploymentContract& c, methods::ContractChecker& k) const override {
    if (!c.budget().has_latency_ms_max()) k.Add("budget", "latency_ms_max is required for TOY");
  }

  std::vector<methods::JobKind> JobKinds() const override {
    return {{kToyMeasure, methods::Placement::kAgent, ToyMeasureResult::descriptor()},
            {kToyTransform, methods::Placement::kLauncher, ToyTransformResult::descriptor()}};
  }

  void Plan(const v1::DeploymentContract& c, methods::GraphBuilder& g) const override {
    g.Add(kToyMeasure, kToyMeasure, c.resources().profile(), {});
    g.Add(kToyTransform, kToyTransform, c.resources().search(), {kToyMeasure});
  }

  void AddReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                 v1::CampaignReport& report) const override {
    const auto measured = DetailOfJob<ToyMeasureResult>(jobs, kToyMeasure);
    const auto transformed = DetailOfJob<ToyTransformResult>(jobs, kToyTransform);
    Struct toy;
    auto& f = *toy.mutable_fields();
    f["measured"].set_number_value(measured ? measured->value() : -1);
    f["rank_sum"].set_number_value(transformed ? transformed->rank_sum() : -1);
    *(*report.mutable_details()->mutable_fields())["toy"].mutable_struct_value() = std::move(toy);
  }

  std::string RenderReport(const v1::CampaignReport& report,
                           const cli::RenderOptions& options) const override {
    return report.details().fields().contains("toy") ? "\ntoy section\n" : "";
  }
};

}  // namespace

std::unique_ptr<methods::Method> MakeToyMethod() { return std::make_unique<ToyMethod>(); }

}  // namespace tailor::toy
