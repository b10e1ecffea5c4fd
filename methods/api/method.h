#ifndef TAILOR_METHODS_API_METHOD_H_
#define TAILOR_METHODS_API_METHOD_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "cli/render_options.h"
#include "methods/api/contract_checker.h"
#include "methods/api/graph_builder.h"
#include "methods/api/job_kind.h"
#include "tailor/v1/campaign.pb.h"
#include "tailor/v1/contract.pb.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::methods {

// What the coordinator's shared contract rules need to know about a method.
struct MethodTraits {
  bool needs_parent = true;    // parent.path or parent.artifact_digest required
  bool needs_workload = true;  // the whole workload shape required (cost tables need it)
  // FP8 / INT8 / INT4 targets: only a method that writes its own weight formats serves them.
  bool low_precision_targets = false;
  // package.entropy_code may append the entropy-coding tail after the method's verify.
  bool packageable = false;
  // Reads data.calibration (ranking, search, block scoring) when the contract gives it.
  bool reads_calibration = false;
};

// A section of the contract a method owns (e.g. `search` for AUTOCOMPRESS), checked in
// contract field order for every submission whichever method it names: a stray section with
// a bad value is refused rather than stored.
struct ParamsSection {
  int field_number;  // the section's field number in DeploymentContract
  void (*check)(const v1::DeploymentContract& contract, ContractChecker& checker);
};

// A job kind a method plans, declared once: its name (the constant its planner and its
// handler share), where it runs, and the message its JobOutput.detail holds (null: none).
// GraphBuilder takes the placement from here; the worker and the agent refuse to register a
// handler for a kind that is not declared for them (methods/api/job_kind.h); the storage
// migration that typed schema-5 results reads the detail types (methods/legacy_results.h).
struct JobKind {
  const char* name;
  Placement placement;
  const google::protobuf::Descriptor* detail = nullptr;
};

// The torch-free half of a compression method: its contract rules and defaults, its job
// graph, its report section and the CLI's rendering of it. Coordinator, CLI, worker and agent
// reach a method only through MethodRegistry (methods/registry.h); the job handlers are the
// method's other half, registered with the worker and the agent.
class Method {
 public:
  virtual ~Method() = default;

  virtual v1::Method id() const = 0;
  // As error messages and listings name it: the enum value's name.
  virtual std::string name() const { return v1::Method_Name(id()); }
  virtual MethodTraits traits() const = 0;

  // Rules that hold only when this is the contract's method (e.g. which budgets it needs);
  // run at the budget section's place in the error order.
  virtual void CheckChosen(const v1::DeploymentContract& contract, ContractChecker& k) const {}
  virtual std::vector<ParamsSection> ParamsSections() const { return {}; }

  // Fills the documented defaults of the method's own sections. Applied for every method on
  // every submission, so the stored contract is the one source of defaults.
  virtual void ApplyDefaults(v1::DeploymentContract& contract) const {}

  // Whether the contract's plan has a distill job: it reads data.train and evaluates the
  // student on data.eval (and so the quality floors can be judged).
  virtual bool Distills(const v1::DeploymentContract& contract) const { return false; }

  // Appends the method's jobs for a validated, defaulted contract.
  virtual void Plan(const v1::DeploymentContract& contract, GraphBuilder& graph) const = 0;

  // The job kinds the method plans beyond the shared ones (SharedJobKinds: profile, distill,
  // verify), and any shared kind it gives a detail of its own (e.g. a verify of an
  // entropy-coded package).
  virtual std::vector<JobKind> JobKinds() const { return {}; }

  // Key of the job whose result holds the chosen student's predicted costs ("predicted") and
  // architecture under `contract` (whose options may add a step after the first choice);
  // empty when the method chooses none.
  virtual absl::string_view chooser_job(const v1::DeploymentContract& contract) const {
    return "";
  }

  // Training tokens the chooser job (chooser_job()) spent choosing the student, as the
  // report's search_tokens; 0 when the method spends none.
  virtual int64_t SearchTokens(const v1::JobOutput& chooser) const { return 0; }

  // Adds the method's own report section (CampaignReport.details) after the shared rows.
  virtual void AddReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                         v1::CampaignReport& report) const {}

  // The CLI's text for that section; empty when the report has none.
  virtual std::string RenderReport(const v1::CampaignReport& report,
                                   const cli::RenderOptions& options) const {
    return "";
  }
};

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_API_METHOD_H_
