#include "methods/block_removal/report.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/job_output.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/struct.pb.h"
#include "methods/block_removal/block_removal_results.pb.h"
#include "methods/block_removal/job_kinds.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::methods {
namespace {

namespace results = v1::block_removal;  // the jobs' JobOutput.detail messages

using google::protobuf::FieldDescriptor;
using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

// Removal sets are compared as layer lists (jobs write them ascending), which identifies a
// state across jobs whatever its index in each job's list.
template <typename Field>
std::vector<int> Layers(const Field& layers) {
  std::vector<int> out(layers.begin(), layers.end());
  std::sort(out.begin(), out.end());
  return out;
}

Value IntList(const std::vector<int>& v) {
  Value out;
  for (int x : v) out.mutable_list_value()->add_values()->set_number_value(x);
  return out;
}

void SetNumber(Struct& s, const std::string& key, double v) {
  (*s.mutable_fields())[key].set_number_value(v);
}

// The costs a cost table predicted, keyed by ModelCosts field name: only the fields set, as
// the report showed the job's own record of them.
Struct CostsStruct(const v1::ModelCosts& costs) {
  Struct out;
  std::vector<const FieldDescriptor*> set;
  costs.GetReflection()->ListFields(costs, &set);
  for (const FieldDescriptor* f : set) {
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_DOUBLE:
        SetNumber(out, f->name(), costs.GetReflection()->GetDouble(costs, f));
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        SetNumber(out, f->name(), costs.GetReflection()->GetInt32(costs, f));
        break;
      default:
        break;  // ModelCosts holds numbers only
    }
  }
  return out;
}

Value TrialValue(const results::MTrial& t) {
  Value v;
  Struct& s = *v.mutable_struct_value();
  SetNumber(s, "m", t.m());
  SetNumber(s, "states", t.states());
  SetNumber(s, "fitting", t.fitting());
  SetNumber(s, "min_latency_ms", t.min_latency_ms());
  SetNumber(s, "min_memory_mib", t.min_memory_mib());
  return v;
}

Value StageValue(const results::StageRow& r) {
  Value v;
  Struct& s = *v.mutable_struct_value();
  SetNumber(s, "stage", r.stage());
  (*s.mutable_fields())["added_layers"] =
      IntList(std::vector<int>(r.added_layers().begin(), r.added_layers().end()));
  (*s.mutable_fields())["removed_layers"] =
      IntList(std::vector<int>(r.removed_layers().begin(), r.removed_layers().end()));
  SetNumber(s, "energy", r.energy());
  SetNumber(s, "candidates", r.candidates());
  SetNumber(s, "loss", r.loss());
  return v;
}

struct Candidate {
  int level = 0;
  std::vector<int> removed;
  double energy = 0;
  const v1::ModelCosts* predicted = nullptr;
};

// The evaluate_candidates job once it ran: its output (architecture) and its detail.
struct Evaluation {
  const v1::JobOutput* output = nullptr;
  results::EvaluateCandidatesResult detail;
};

// Assembles details["block_removal"] from the solve result and, once it ran, the
// evaluate_candidates result. One method per part of the summary, in the order they appear.
class SummaryBuilder {
 public:
  SummaryBuilder(const results::SolveResult& solve, const Evaluation* eval)
      : solve_(solve), eval_(eval) {}

  Struct Build(const v1::Budget& budget, v1::CampaignReport& report);

 private:
  void AddChoiceOfM(const v1::Budget& budget);
  void ReadStates();
  void ReadLosses();
  void AddGroundState();
  void AddSpectrum();
  void AddStages();
  void AddBaseline();
  void AddComparison(v1::CampaignReport& report);

  std::optional<double> LossOf(const std::vector<int>& removed) const {
    auto it = loss_of_.find(removed);
    return it == loss_of_.end() ? std::nullopt : std::optional<double>(it->second);
  }
  Struct& Sub(const char* key) { return *(*out_.mutable_fields())[key].mutable_struct_value(); }

  const results::SolveResult& solve_;
  const Evaluation* eval_;  // null before evaluate_candidates ran
  Struct out_;
  std::vector<Candidate> states_;               // sorted by energy, rank 0 lowest
  std::map<std::vector<int>, double> loss_of_;  // real losses by removal set
  double ground_energy_ = 0;
  std::vector<int> chosen_removed_;               // evaluate_candidates' final set
  const results::Baseline* baseline_ = nullptr;  // the Block Influence choice at the same M
};

Struct SummaryBuilder::Build(const v1::Budget& budget, v1::CampaignReport& report) {
  AddChoiceOfM(budget);
  ReadStates();
  ReadLosses();
  AddGroundState();
  if (eval_ != nullptr) chosen_removed_ = Layers(eval_->detail.removed_layers());
  AddSpectrum();
  AddStages();
  AddBaseline();
  AddComparison(report);
  return std::move(out_);
}

void SummaryBuilder::AddChoiceOfM(const v1::Budget& b) {
  const double blocks = solve_.blocks();
  const double m = solve_.blocks_to_remove();
  SetNumber(out_, "blocks", blocks);
  SetNumber(out_, "blocks_to_remove", m);
  SetNumber(out_, "removed_fraction", blocks > 0 ? m / blocks : 0);
  const bool by_budget = solve_.budget_driven();
  (*out_.mutable_fields())["m_source"].set_string_value(by_budget ? "budget" : "contract");
  if (by_budget) {
    // A budget-driven solve lists every M it tried, 1 up to the chosen one.
    ListValue& trials = *(*out_.mutable_fields())["m_search"].mutable_list_value();
    for (const results::MTrial& t : solve_.m_search()) *trials.add_values() = TrialValue(t);
    Struct& budget = Sub("budget");
    if (b.has_latency_ms_max()) SetNumber(budget, "latency_ms_max", b.latency_ms_max());
    if (b.has_memory_mib_max()) SetNumber(budget, "memory_mib_max", b.memory_mib_max());
    if (b.has_throughput_tokens_per_s_min()) {
      SetNumber(budget, "throughput_tokens_per_s_min", b.throughput_tokens_per_s_min());
    }
  }
  (*out_.mutable_fields())["solver"].set_string_value(solve_.solver());
  SetNumber(out_, "solve_seconds", solve_.solve_seconds());
  SetNumber(out_, "states_total", solve_.states_total());
}

void SummaryBuilder::ReadStates() {
  for (const results::SpectrumState& s : solve_.spectrum()) {
    states_.push_back({s.level(), Layers(s.removed_layers()), s.energy(),
                       s.has_predicted() ? &s.predicted() : nullptr});
  }
  // Sorted by energy whatever order the job wrote (ties by level), so rank 0 is the lowest.
  std::stable_sort(states_.begin(), states_.end(), [](const Candidate& a, const Candidate& b) {
    return a.energy != b.energy ? a.energy < b.energy : a.level < b.level;
  });
}

void SummaryBuilder::ReadLosses() {
  if (eval_ == nullptr) return;
  for (const results::Candidate& c : eval_->detail.candidates()) {
    loss_of_[Layers(c.removed_layers())] = c.loss();
  }
}

void SummaryBuilder::AddGroundState() {
  // The ground state at M: solve reports it separately because a budget-driven M keeps only
  // the states that fit, which need not include it.
  Struct& ground = Sub("ground_state");
  ground_energy_ = solve_.has_ground_energy() ? solve_.ground_energy() : states_.front().energy;
  std::vector<int> ground_removed = Layers(solve_.ground_removed_layers());
  if (ground_removed.empty()) ground_removed = states_.front().removed;
  SetNumber(ground, "energy", ground_energy_);
  (*ground.mutable_fields())["removed_layers"] = IntList(ground_removed);
  if (auto l = LossOf(ground_removed)) SetNumber(ground, "loss", *l);
}

void SummaryBuilder::AddSpectrum() {
  // The spectrum row to mark: the chosen state, or with stages the first stage's pick (the
  // final set is not a state of this spectrum).
  std::vector<int> pick = chosen_removed_;
  if (eval_ != nullptr && !eval_->detail.stages().empty()) {
    pick = Layers(eval_->detail.stages(0).removed_layers());
  }
  ListValue& rows = *(*out_.mutable_fields())["spectrum"].mutable_list_value();
  for (size_t i = 0; i < states_.size(); ++i) {
    const Candidate& c = states_[i];
    Struct& row = *rows.add_values()->mutable_struct_value();
    SetNumber(row, "rank", static_cast<double>(i));
    SetNumber(row, "level", c.level);
    (*row.mutable_fields())["removed_layers"] = IntList(c.removed);
    SetNumber(row, "energy", c.energy);
    SetNumber(row, "gap_to_ground", c.energy - ground_energy_);
    if (auto l = LossOf(c.removed)) SetNumber(row, "loss", *l);
    const bool chosen = !pick.empty() && c.removed == pick;
    (*row.mutable_fields())["chosen"].set_bool_value(chosen);
    if (c.predicted != nullptr) {
      *(*row.mutable_fields())["predicted"].mutable_struct_value() = CostsStruct(*c.predicted);
    }
    if (chosen) {
      Struct& ch = Sub("chosen");
      ch = row;
      ch.mutable_fields()->erase("chosen");
    }
  }
}

void SummaryBuilder::AddStages() {
  // Staged removal: the spectrum is the first stage's; the later stages and the final set
  // come from evaluate_candidates. A solve without `stages` solved in one.
  SetNumber(out_, "stages", solve_.has_stages() ? solve_.stages() : 1);
  if (eval_ == nullptr || eval_->detail.stages().empty()) return;
  ListValue& detail = *(*out_.mutable_fields())["stages_detail"].mutable_list_value();
  for (const results::StageRow& r : eval_->detail.stages()) *detail.add_values() = StageValue(r);
  SetNumber(out_, "stage_blocks", solve_.stage_blocks());
  Struct& ch = Sub("chosen");
  ch.Clear();
  (*ch.mutable_fields())["removed_layers"] = IntList(chosen_removed_);
  SetNumber(ch, "loss", eval_->detail.loss());
  SetNumber(ch, "stages", static_cast<double>(eval_->detail.stages_size()));
}

void SummaryBuilder::AddBaseline() {
  // evaluate_candidates' copy of the Block Influence choice carries its loss.
  if (eval_ != nullptr && eval_->detail.has_baseline()) {
    baseline_ = &eval_->detail.baseline();
  } else if (solve_.has_baseline()) {
    baseline_ = &solve_.baseline();
  }
  if (baseline_ == nullptr) return;
  Struct& b = Sub("baseline");
  (*b.mutable_fields())["method"].set_string_value(baseline_->method());
  const std::vector<int> removed = Layers(baseline_->removed_layers());
  (*b.mutable_fields())["removed_layers"] = IntList(removed);
  const double energy = baseline_->energy();
  SetNumber(b, "energy", energy);
  SetNumber(b, "gap_to_ground", energy - ground_energy_);
  if (baseline_->has_loss()) SetNumber(b, "loss", baseline_->loss());
  if (!chosen_removed_.empty()) {
    (*b.mutable_fields())["same_as_chosen"].set_bool_value(removed == chosen_removed_);
  }
}

void SummaryBuilder::AddComparison(v1::CampaignReport& report) {
  if (eval_ == nullptr) return;
  const results::EvaluateCandidatesResult& eval = eval_->detail;
  SetNumber(out_, "parent_loss", eval.parent_loss());
  SetNumber(out_, "held_out_samples", static_cast<double>(eval.held_out_samples()));
  if (baseline_ != nullptr && baseline_->has_loss()) {
    const double cbo = eval.loss(), bi = baseline_->loss();
    Struct& cmp = Sub("comparison");
    SetNumber(cmp, "cbo_loss", cbo);
    SetNumber(cmp, "baseline_loss", bi);
    SetNumber(cmp, "loss_difference", bi - cbo);
    (*cmp.mutable_fields())["beats_baseline"].set_bool_value(cbo <= bi);
  }
  // The student's architecture: solve chose nothing yet, evaluate_candidates built it.
  if (!report.architecture().fields().empty()) return;
  const v1::JobOutput& student = *eval_->output;
  if (student.architecture().empty()) return;
  auto& a = *report.mutable_architecture()->mutable_fields();
  a["description"].set_string_value(student.architecture());
  if (student.layers_size() > 0) {
    ListValue& layers = *a["layers"].mutable_list_value();
    for (const std::string& l : student.layers()) layers.add_values()->set_string_value(l);
  }
  if (student.parameters() != 0) {
    a["parameters"].set_number_value(static_cast<double>(student.parameters()));
  }
}

}  // namespace

void AddBlockRemovalReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                           v1::CampaignReport& report) {
  // Only jobs that finished with their detail count (a pending job has no output yet).
  std::optional<results::SolveResult> solve;
  std::optional<Evaluation> eval;
  for (const v1::Job& j : jobs) {
    if (!j.has_output()) continue;
    if (j.key() == jobs::kSolve) {
      if (auto d = DetailOf<results::SolveResult>(j.output())) solve = std::move(d);
    }
    if (j.key() == jobs::kEvaluateCandidates) {
      if (auto d = DetailOf<results::EvaluateCandidatesResult>(j.output())) {
        eval = Evaluation{&j.output(), *std::move(d)};
      }
    }
  }
  if (!solve || solve->spectrum().empty()) return;
  Struct out = SummaryBuilder(*solve, eval ? &*eval : nullptr)
                   .Build(campaign.contract().budget(), report);
  *(*report.mutable_details()->mutable_fields())["block_removal"].mutable_struct_value() =
      std::move(out);
}

}  // namespace tailor::methods
