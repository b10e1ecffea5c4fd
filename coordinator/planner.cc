#include "coordinator/planner.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "coordinator/contract_validation.h"
#include "coordinator/relative_budget.h"
#include "methods/api/job_kinds.h"
#include "methods/registry.h"

namespace tailor::coordinator {

using v1::DeploymentContract;

namespace {

// `c` carries its defaults.
std::string FingerprintOfDefaulted(const DeploymentContract& c) {
  const v1::Target& t = c.target();
  const v1::Workload& w = c.workload();
  // Labelled lines: the device kind cannot contain '\n' (validation rejects control
  // characters), so the encoding is unambiguous. Changing this text invalidates every cost
  // table, exactly like a new layer-family version does.
  std::vector<std::string> lines = {
      "tailor-target-fingerprint-v1",
      absl::StrCat("device_kind=", t.device_kind()),
      absl::StrCat("engine=", t.engine()),
      absl::StrCat("engine_version=", t.engine_version()),
      absl::StrCat("precision=", v1::Precision_Name(t.precision())),
      absl::StrCat("batch_size=", w.batch_size()),
      absl::StrCat("input_tokens=", w.input_tokens()),
      absl::StrCat("output_tokens=", w.output_tokens()),
      absl::StrCat("cached_prefix_tokens=", w.cached_prefix_tokens()),
      absl::StrCat("layer_family_version=", kLayerFamilyVersion),
  };
  // llama.cpp's requests are timed by tailor's native loop since 2026-12-07 (docs/costmodel.md,
  // "The serving harness"); tables timed through node-llama-cpp's loop before it predict
  // other milliseconds and must not be found for a new campaign.
  if (t.engine() == "llama.cpp") lines.push_back("request_timing=native-loop");
  return Sha256::Hex(absl::StrJoin(lines, "\n"));
}

// A budget relative to the parent resolves against the parent as a profile job measures it
// in the target engine; a plan without one could never resolve it.
absl::Status CheckRelativeBudgetsPlanned(const DeploymentContract& c,
                                         const std::vector<PlannedJob>& plan) {
  if (!HasRelativeBudget(c.budget())) return absl::OkStatus();
  for (const PlannedJob& job : plan) {
    if (job.kind == methods::jobs::kProfile) return absl::OkStatus();
  }
  const v1::Budget& b = c.budget();
  const char* field = b.has_latency_vs_parent_max()     ? "latency_vs_parent_max"
                      : b.has_throughput_vs_parent_min() ? "throughput_vs_parent_min"
                                                         : "memory_vs_parent_max";
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid contract: budget.", field, ": a budget relative to the parent needs the parent "
      "measured in the target engine by a profile job, and this ", v1::Method_Name(c.method()),
      " campaign plans none (it profiles only to search for a size, e.g. BLOCK_REMOVAL "
      "without block_removal.blocks_to_remove); state the budget in absolute units"));
}

}  // namespace

absl::StatusOr<std::vector<PlannedJob>> PlanCampaign(const ValidatedContract& contract) {
  const DeploymentContract& c = contract.contract();
  const methods::Method* method = methods::BuiltinMethods().Find(c.method());
  if (method == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid contract: method: no plan for ", c.method()));
  }
  methods::GraphBuilder g(c);
  method->Plan(c, g);
  TAILOR_ASSIGN_OR_RETURN(std::vector<PlannedJob> plan, std::move(g).Finish());
  TAILOR_RETURN_IF_ERROR(CheckRelativeBudgetsPlanned(c, plan));
  return plan;
}

absl::StatusOr<std::vector<PlannedJob>> WithDriftCheck(const DeploymentContract& contract,
                                                       std::vector<PlannedJob> plan) {
  bool verifies = false;
  for (const PlannedJob& job : plan) verifies |= job.kind == methods::jobs::kVerify;
  if (!verifies) return plan;  // nothing measured in the engine: nothing can drift
  methods::GraphBuilder g(contract);
  g.Add(methods::jobs::kDriftCheck, methods::jobs::kDriftCheck, contract.resources().verify(),
        {});
  TAILOR_ASSIGN_OR_RETURN(std::vector<PlannedJob> out, std::move(g).Finish());
  for (PlannedJob& job : plan) {
    if (job.depends_on.empty()) job.depends_on.push_back(methods::jobs::kDriftCheck);
    out.push_back(std::move(job));
  }
  return out;
}

absl::StatusOr<std::vector<PlannedJob>> PlanCampaign(const DeploymentContract& contract) {
  TAILOR_ASSIGN_OR_RETURN(ValidatedContract validated, ValidatedContract::From(contract));
  return PlanCampaign(validated);
}

std::string TargetFingerprint(const ValidatedContract& contract) {
  return FingerprintOfDefaulted(contract.contract());
}

std::string TargetFingerprint(const DeploymentContract& contract) {
  return FingerprintOfDefaulted(WithDefaults(contract));
}

}  // namespace tailor::coordinator
