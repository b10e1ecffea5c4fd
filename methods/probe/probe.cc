#include "methods/probe/probe.h"

#include "methods/probe/job_kinds.h"
#include "methods/probe/probe_results.pb.h"

namespace tailor::methods {
namespace {

void CheckProbeParams(const v1::DeploymentContract& c, ContractChecker& k) {
  if (c.probe().has_duration_ms()) {
    k.Int("probe.duration_ms", c.probe().duration_ms(), 0, 600000);
  }
}

class ProbeMethod : public Method {
 public:
  v1::Method id() const override { return v1::PROBE; }

  MethodTraits traits() const override {
    MethodTraits t;
    t.needs_parent = false;
    t.needs_workload = false;
    return t;
  }

  std::vector<ParamsSection> ParamsSections() const override {
    return {{v1::DeploymentContract::kProbeFieldNumber, CheckProbeParams}};
  }

  void ApplyDefaults(v1::DeploymentContract& c) const override {
    if (!c.probe().has_duration_ms()) c.mutable_probe()->set_duration_ms(1000);
  }

  std::vector<JobKind> JobKinds() const override {
    return {{jobs::kProbe, Placement::kAgent, v1::probe::ProbeResult::descriptor()}};
  }

  void Plan(const v1::DeploymentContract& c, GraphBuilder& g) const override {
    // Probing measures the device like profiling does, so it shares that resource block.
    g.Add(jobs::kProbe, jobs::kProbe, c.resources().profile(), {});
  }
};

}  // namespace

std::unique_ptr<Method> MakeProbeMethod() { return std::make_unique<ProbeMethod>(); }

}  // namespace tailor::methods
