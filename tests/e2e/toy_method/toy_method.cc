#include "tests/e2e/toy_method/toy_method.h"

#include "common/struct_values.h"

namespace tailor::toy {
namespace {

using google::protobuf::Struct;

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

  void Plan(const v1::DeploymentContract& c, methods::GraphBuilder& g) const override {
    g.Agent(kToyMeasure, kToyMeasure, c.resources().profile(), {});
    g.Launcher(kToyTransform, kToyTransform, c.resources().search(), {kToyMeasure});
  }

  void AddReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                 v1::CampaignReport& report) const override {
    const Struct* measured = nullptr;
    const Struct* transformed = nullptr;
    for (const v1::Job& j : jobs) {
      if (j.key() == kToyMeasure) measured = &j.result();
      if (j.key() == kToyTransform) transformed = &j.result();
    }
    Struct toy;
    auto& f = *toy.mutable_fields();
    f["measured"].set_number_value(struct_values::NumberAt(measured, "value").value_or(-1));
    f["rank_sum"].set_number_value(struct_values::NumberAt(transformed, "rank_sum").value_or(-1));
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
