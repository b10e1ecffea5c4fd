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

namespace tailor::coordinator {
namespace {

using v1::DeploymentContract;

constexpr char kAgent[] = "agent";
constexpr char kLauncher[] = "launcher";

// Appends jobs while keeping the graph's invariants in one place: unique keys, and every
// dependency already present (which makes the list topologically ordered by construction).
class GraphBuilder {
 public:
  explicit GraphBuilder(const DeploymentContract& c) : contract_(c) {}

  // A job pulled by the profiler agent of the target's device kind. Agents are single
  // processes, so nodes and ranks are 1 whatever the block says.
  void Agent(std::string key, std::string kind, const v1::ResourceRequest& block,
             std::vector<std::string> deps) {
    v1::ResourceSpec spec = Spec(block, kAgent);
    spec.set_device_kind(contract_.target().device_kind());
    spec.set_nodes(1);
    spec.set_ranks_per_node(1);
    Push(std::move(key), std::move(kind), std::move(spec), std::move(deps));
  }

  // A job the coordinator's launcher starts (local processes or Slurm); it needs no agent.
  void Launcher(std::string key, std::string kind, const v1::ResourceRequest& block,
                std::vector<std::string> deps) {
    Push(std::move(key), std::move(kind), Spec(block, kLauncher), std::move(deps));
  }

  absl::StatusOr<std::vector<PlannedJob>> Finish() && {
    if (!error_.ok()) return error_;
    return std::move(jobs_);
  }

 private:
  v1::ResourceSpec Spec(const v1::ResourceRequest& r, const char* placement) const {
    v1::ResourceSpec spec;
    spec.set_nodes(r.nodes());
    spec.set_ranks_per_node(r.ranks_per_node());
    spec.set_gpus_per_node(r.gpus_per_node());
    spec.set_gpu_type(r.gpu_type());
    spec.set_memory_mib(r.memory_mib());
    spec.set_time_limit_s(r.time_limit_s());
    spec.set_max_attempts(r.max_attempts());
    spec.set_priority(contract_.priority());
    spec.set_placement(placement);
    return spec;
  }

  void Push(std::string key, std::string kind, v1::ResourceSpec spec,
            std::vector<std::string> deps) {
    // A planner bug must fail the submission, not write a graph that can never finish.
    for (const PlannedJob& job : jobs_) {
      if (job.key == key) error_ = absl::InternalError(absl::StrCat("duplicate job key ", key));
    }
    for (const std::string& dep : deps) {
      bool found = false;
      for (const PlannedJob& job : jobs_) found |= job.key == dep;
      if (!found) {
        error_ = absl::InternalError(absl::StrCat("job ", key, " depends on unplanned ", dep));
      }
    }
    jobs_.push_back({std::move(key), std::move(kind), std::move(deps), std::move(spec)});
  }

  const DeploymentContract& contract_;
  std::vector<PlannedJob> jobs_;
  absl::Status error_;
};

// Optional packaging step after a verified AUTOCOMPRESS / BLOCK_REMOVAL model: tune the codes
// on the target, select under the weight budget, verify the packaged model on the target.
void AddEntropyTail(const DeploymentContract& c, const std::string& after, GraphBuilder& g) {
  if (!c.package().entropy_code()) return;
  const v1::ResourceRequest& block = c.resources().entropy();
  g.Agent("entropy_autotune", "autotune", block, {after});
  g.Launcher("entropy_select", "select", block, {"entropy_autotune"});
  g.Agent("entropy_verify", "verify", c.resources().verify(), {"entropy_select"});
}

void PlanAutocompress(const DeploymentContract& c, GraphBuilder& g) {
  const v1::Resources& r = c.resources();
  g.Agent("profile", "profile", r.profile(), {});
  g.Launcher("rank", "rank", r.rank(), {});
  g.Launcher("search", "search", r.search(), {"profile", "rank"});
  g.Launcher("distill", "distill", r.distill(), {"search"});
  g.Agent("verify", "verify", r.verify(), {"distill"});
  AddEntropyTail(c, "verify", g);
  if (c.compare_uniform_baseline()) {
    // The homogeneous baseline uses the same cost table and ranked supernet, so the comparison
    // isolates the search itself.
    g.Launcher("baseline_uniform", "baseline_uniform", r.search(), {"profile", "rank"});
    g.Launcher("distill_baseline", "distill", r.distill(), {"baseline_uniform"});
    g.Agent("verify_baseline", "verify", r.verify(), {"distill_baseline"});
  }
}

void PlanBlockRemoval(const DeploymentContract& c, GraphBuilder& g) {
  const v1::Resources& r = c.resources();
  // With a fixed M the solver needs no cost model; a budget-driven M needs the cost table to
  // find the smallest M that fits.
  bool budget_driven = !c.block_removal().has_blocks_to_remove();
  if (budget_driven) g.Agent("profile", "profile", r.profile(), {});
  g.Launcher("gate_gradients", "gate_gradients", r.block_select(), {});
  std::vector<std::string> solve_deps = {"gate_gradients"};
  if (budget_driven) solve_deps.push_back("profile");
  g.Launcher("solve", "solve", r.block_select(), std::move(solve_deps));
  g.Launcher("evaluate_candidates", "evaluate_candidates", r.block_select(), {"solve"});
  std::string before_verify = "evaluate_candidates";
  if (c.block_removal().distill()) {
    g.Launcher("distill", "distill", r.distill(), {"evaluate_candidates"});
    before_verify = "distill";
  }
  g.Agent("verify", "verify", r.verify(), {before_verify});
  AddEntropyTail(c, "verify", g);
}

void PlanEntropyCode(const DeploymentContract& c, GraphBuilder& g) {
  const v1::Resources& r = c.resources();
  g.Agent("autotune", "autotune", r.entropy(), {});
  g.Launcher("select", "select", r.entropy(), {"autotune"});
  g.Agent("verify", "verify", r.verify(), {"select"});
}

}  // namespace

absl::StatusOr<std::vector<PlannedJob>> PlanCampaign(const DeploymentContract& contract) {
  // Planning is cheap, so re-check here: callers that skipped validation get the same
  // precise errors instead of a graph built from nonsense.
  TAILOR_RETURN_IF_ERROR(ValidateContract(contract));
  const DeploymentContract c = WithDefaults(contract);
  GraphBuilder g(c);
  switch (c.method()) {
    case v1::PROBE:
      // Probing measures the device like profiling does, so it shares that resource block.
      g.Agent("probe", "probe", c.resources().profile(), {});
      break;
    case v1::AUTOCOMPRESS:
      PlanAutocompress(c, g);
      break;
    case v1::BLOCK_REMOVAL:
      PlanBlockRemoval(c, g);
      break;
    case v1::ENTROPY_CODE:
      PlanEntropyCode(c, g);
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("invalid contract: method: no plan for ", c.method()));
  }
  return std::move(g).Finish();
}

std::string TargetFingerprint(const DeploymentContract& contract) {
  // Defaults first, so "engine unset" and "engine: tailor-builtin" share cost tables.
  const DeploymentContract c = WithDefaults(contract);
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
  return Sha256::Hex(absl::StrJoin(lines, "\n"));
}

}  // namespace tailor::coordinator
