#include "methods/block_removal/block_removal.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "methods/api/job_kinds.h"
#include "methods/block_removal/block_removal_results.pb.h"
#include "methods/block_removal/job_kinds.h"
#include "methods/block_removal/render.h"
#include "methods/block_removal/report.h"
#include "methods/entropy_code/entropy_code.h"
#include "methods/entropy_code/report.h"

namespace tailor::methods {
namespace {

void CheckBlockRemovalParams(const v1::DeploymentContract& c, ContractChecker& k) {
  const v1::BlockRemovalParams& b = c.block_removal();
  if (b.has_blocks_to_remove()) {
    k.Int("block_removal.blocks_to_remove", b.blocks_to_remove(), 1, 4096);
  }
  if (b.has_calibration_samples()) {
    k.Int("block_removal.calibration_samples", b.calibration_samples(), 1, 100000);
  }
  if (b.has_candidates()) k.Int("block_removal.candidates", b.candidates(), 1, 1000);
  if (b.has_stages() && k.Int("block_removal.stages", b.stages(), 1, 8)) {
    // A budget-driven M is found by solving once; stages need M up front.
    if (b.stages() > 1 && !b.has_blocks_to_remove()) {
      k.Add("block_removal.stages",
            absl::StrCat(b.stages(), " stages need block_removal.blocks_to_remove (a "
                                     "budget-driven M is chosen in one stage)"));
    } else if (b.has_blocks_to_remove() && b.stages() > b.blocks_to_remove()) {
      k.Add("block_removal.stages",
            absl::StrCat("at most block_removal.blocks_to_remove (", b.blocks_to_remove(),
                         "), got ", b.stages()));
    }
  }
  if (!v1::QuboSolver_IsValid(b.solver())) {
    k.Add("block_removal.solver",
          absl::StrCat("must be one of QUBO_SOLVER_UNSPECIFIED, EXACT, SIMULATED_ANNEALING, "
                       "TABU, got ",
                       b.solver()));
  }
}

class BlockRemovalMethod : public Method {
 public:
  v1::Method id() const override { return v1::BLOCK_REMOVAL; }

  MethodTraits traits() const override {
    MethodTraits t;
    t.packageable = true;
    t.reads_calibration = true;
    return t;
  }

  bool Distills(const v1::DeploymentContract& c) const override {
    return c.block_removal().distill();
  }

  void CheckChosen(const v1::DeploymentContract& c, ContractChecker& k) const override {
    if (!IsSearchBudgetSet(c.budget()) && !c.block_removal().has_blocks_to_remove()) {
      k.Add("budget", absl::StrCat("at least one of ", kSearchBudgets,
                                   " is required for BLOCK_REMOVAL unless "
                                   "block_removal.blocks_to_remove is set"));
    }
  }

  std::vector<ParamsSection> ParamsSections() const override {
    return {{v1::DeploymentContract::kBlockRemovalFieldNumber, CheckBlockRemovalParams}};
  }

  void ApplyDefaults(v1::DeploymentContract& c) const override {
    // blocks_to_remove stays unset on purpose: unset means "smallest M that meets the budget".
    v1::BlockRemovalParams* b = c.mutable_block_removal();
    if (!b->has_calibration_samples()) b->set_calibration_samples(128);
    if (!b->has_candidates()) b->set_candidates(8);
    if (!b->has_stages()) b->set_stages(1);
  }

  void Plan(const v1::DeploymentContract& c, GraphBuilder& g) const override;

  std::vector<JobKind> JobKinds() const override {
    namespace br = v1::block_removal;
    std::vector<JobKind> kinds = {
        {jobs::kGateGradients, Placement::kLauncher, br::GateGradientsResult::descriptor()},
        {jobs::kSolve, Placement::kLauncher, br::SolveResult::descriptor()},
        {jobs::kEvaluateCandidates, Placement::kLauncher,
         br::EvaluateCandidatesResult::descriptor()}};
    // packageable: the entropy tail's jobs (package.entropy_code) are planned by this method.
    for (const JobKind& k : EntropyTailJobKinds()) kinds.push_back(k);
    return kinds;
  }

  absl::string_view chooser_job(const v1::DeploymentContract&) const override {
    return jobs::kSolve;
  }

  void AddReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                 v1::CampaignReport& report) const override {
    AddBlockRemovalReport(campaign, jobs, report);
    AddEntropyReport(campaign, jobs, report);
  }

  std::string RenderReport(const v1::CampaignReport& report,
                           const cli::RenderOptions& options) const override {
    return RenderBlockRemoval(report, options);
  }
};

void BlockRemovalMethod::Plan(const v1::DeploymentContract& c, GraphBuilder& g) const {
  const v1::Resources& r = c.resources();
  // With a fixed M the solver needs no cost model; a budget-driven M needs the cost table to
  // find the smallest M that fits.
  const bool budget_driven = !c.block_removal().has_blocks_to_remove();
  if (budget_driven) g.Add(jobs::kProfile, jobs::kProfile, r.profile(), {});
  g.Add(jobs::kGateGradients, jobs::kGateGradients, r.block_select(), {});
  std::vector<std::string> solve_deps = {jobs::kGateGradients};
  if (budget_driven) solve_deps.push_back(jobs::kProfile);
  g.Add(jobs::kSolve, jobs::kSolve, r.block_select(), std::move(solve_deps));
  g.Add(jobs::kEvaluateCandidates, jobs::kEvaluateCandidates, r.block_select(),
             {jobs::kSolve});
  std::string before_verify = jobs::kEvaluateCandidates;
  if (c.block_removal().distill()) {
    g.Add(jobs::kDistill, jobs::kDistill, r.distill(), {jobs::kEvaluateCandidates});
    before_verify = jobs::kDistill;
  }
  g.Add(jobs::kVerify, jobs::kVerify, r.verify(), {before_verify});
  PlanEntropyTail(c, jobs::kVerify, g);
}

}  // namespace

std::unique_ptr<Method> MakeBlockRemovalMethod() {
  return std::make_unique<BlockRemovalMethod>();
}

}  // namespace tailor::methods
