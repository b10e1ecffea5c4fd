#include "methods/block_removal/report.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "common/struct_values.h"
#include "methods/block_removal/job_kinds.h"

namespace tailor::methods {
namespace {

using struct_values::NumberAt;

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct* s, const std::string& key) {
  return struct_values::ValueAt(s, key);
}

const Struct* SubStruct(const Struct* s, const std::string& key) {
  const Value* v = Field(s, key);
  return v != nullptr && v->has_struct_value() ? &v->struct_value() : nullptr;
}

const ListValue* List(const Struct* s, const std::string& key) {
  const Value* v = Field(s, key);
  return v != nullptr && v->has_list_value() ? &v->list_value() : nullptr;
}

// Removal sets are compared as layer lists (jobs write them ascending), which identifies a
// state across jobs whatever its index in each job's list.
std::vector<int> Layers(const Struct* s, const std::string& key) {
  std::vector<int> out;
  if (const ListValue* l = List(s, key)) {
    for (const Value& v : l->values()) out.push_back(static_cast<int>(v.number_value()));
  }
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

void CopyField(const Struct* from, const std::string& key, Struct& to) {
  if (const Value* v = Field(from, key)) (*to.mutable_fields())[key] = *v;
}

struct Candidate {
  int level = 0;
  std::vector<int> removed;
  double energy = 0;
  const Struct* predicted = nullptr;
};

// Assembles details["block_removal"] from the solve result and, once it ran, the
// evaluate_candidates result. One method per part of the summary, in the order they appear.
class SummaryBuilder {
 public:
  SummaryBuilder(const Struct* solve, const Struct* eval) : solve_(solve), eval_(eval) {}

  Struct Build(const v1::Budget& budget, const ListValue& spectrum, v1::CampaignReport& report);

 private:
  void AddChoiceOfM(const v1::Budget& budget);
  void ReadStates(const ListValue& spectrum);
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

  const Struct* solve_;
  const Struct* eval_;
  Struct out_;
  std::vector<Candidate> states_;               // sorted by energy, rank 0 lowest
  std::map<std::vector<int>, double> loss_of_;  // real losses by removal set
  double ground_energy_ = 0;
  std::vector<int> chosen_removed_;   // evaluate_candidates' final set
  const Struct* baseline_ = nullptr;  // the Block Influence choice at the same M
};

Struct SummaryBuilder::Build(const v1::Budget& budget, const ListValue& spectrum,
                             v1::CampaignReport& report) {
  AddChoiceOfM(budget);
  ReadStates(spectrum);
  ReadLosses();
  AddGroundState();
  if (eval_ != nullptr) chosen_removed_ = Layers(eval_, "removed_layers");
  AddSpectrum();
  AddStages();
  AddBaseline();
  AddComparison(report);
  return std::move(out_);
}

void SummaryBuilder::AddChoiceOfM(const v1::Budget& b) {
  const double blocks = NumberAt(solve_, "blocks").value_or(0);
  const double m = NumberAt(solve_, "blocks_to_remove").value_or(0);
  SetNumber(out_, "blocks", blocks);
  SetNumber(out_, "blocks_to_remove", m);
  SetNumber(out_, "removed_fraction", blocks > 0 ? m / blocks : 0);
  const Value* budget_driven = Field(solve_, "budget_driven");
  const bool by_budget = budget_driven != nullptr && budget_driven->bool_value();
  (*out_.mutable_fields())["m_source"].set_string_value(by_budget ? "budget" : "contract");
  if (by_budget) {
    CopyField(solve_, "m_search", out_);
    Struct& budget = Sub("budget");
    if (b.has_latency_ms_max()) SetNumber(budget, "latency_ms_max", b.latency_ms_max());
    if (b.has_memory_mib_max()) SetNumber(budget, "memory_mib_max", b.memory_mib_max());
    if (b.has_throughput_tokens_per_s_min()) {
      SetNumber(budget, "throughput_tokens_per_s_min", b.throughput_tokens_per_s_min());
    }
  }
  for (const char* key : {"solver", "solve_seconds", "states_total"}) {
    CopyField(solve_, key, out_);
  }
}

void SummaryBuilder::ReadStates(const ListValue& spectrum) {
  for (const Value& v : spectrum.values()) {
    const Struct* s = &v.struct_value();
    states_.push_back({static_cast<int>(NumberAt(s, "level").value_or(states_.size())),
                       Layers(s, "removed_layers"), NumberAt(s, "energy").value_or(0),
                       SubStruct(s, "predicted")});
  }
  // Sorted by energy whatever order the job wrote (ties by level), so rank 0 is the lowest.
  std::stable_sort(states_.begin(), states_.end(), [](const Candidate& a, const Candidate& b) {
    return a.energy != b.energy ? a.energy < b.energy : a.level < b.level;
  });
}

void SummaryBuilder::ReadLosses() {
  const ListValue* cands = List(eval_, "candidates");
  if (cands == nullptr) return;
  for (const Value& v : cands->values()) {
    if (auto loss = NumberAt(&v.struct_value(), "loss")) {
      loss_of_[Layers(&v.struct_value(), "removed_layers")] = *loss;
    }
  }
}

void SummaryBuilder::AddGroundState() {
  // The ground state at M: solve reports it separately because a budget-driven M keeps only
  // the states that fit, which need not include it.
  Struct& ground = Sub("ground_state");
  ground_energy_ = NumberAt(solve_, "ground_energy").value_or(states_.front().energy);
  std::vector<int> ground_removed = Layers(solve_, "ground_removed_layers");
  if (ground_removed.empty()) ground_removed = states_.front().removed;
  SetNumber(ground, "energy", ground_energy_);
  (*ground.mutable_fields())["removed_layers"] = IntList(ground_removed);
  if (auto l = LossOf(ground_removed)) SetNumber(ground, "loss", *l);
}

void SummaryBuilder::AddSpectrum() {
  // The spectrum row to mark: the chosen state, or with stages the first stage's pick (the
  // final set is not a state of this spectrum).
  std::vector<int> pick = chosen_removed_;
  if (const ListValue* stage_rows = List(eval_, "stages");
      stage_rows != nullptr && !stage_rows->values().empty()) {
    pick = Layers(&stage_rows->values(0).struct_value(), "removed_layers");
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
      *(*row.mutable_fields())["predicted"].mutable_struct_value() = *c.predicted;
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
  // come from evaluate_candidates.
  SetNumber(out_, "stages", NumberAt(solve_, "stages").value_or(1));
  const Value* stage_rows = Field(eval_, "stages");
  if (stage_rows == nullptr || !stage_rows->has_list_value()) return;
  (*out_.mutable_fields())["stages_detail"] = *stage_rows;
  CopyField(solve_, "stage_blocks", out_);
  Struct& ch = Sub("chosen");
  ch.Clear();
  (*ch.mutable_fields())["removed_layers"] = IntList(chosen_removed_);
  if (auto l = NumberAt(eval_, "loss")) SetNumber(ch, "loss", *l);
  SetNumber(ch, "stages", static_cast<double>(stage_rows->list_value().values_size()));
}

void SummaryBuilder::AddBaseline() {
  // evaluate_candidates' copy of the Block Influence choice carries its loss.
  baseline_ = SubStruct(eval_, "baseline");
  if (baseline_ == nullptr) baseline_ = SubStruct(solve_, "baseline");
  if (baseline_ == nullptr) return;
  Struct& b = Sub("baseline");
  CopyField(baseline_, "method", b);
  const std::vector<int> removed = Layers(baseline_, "removed_layers");
  (*b.mutable_fields())["removed_layers"] = IntList(removed);
  const double energy = NumberAt(baseline_, "energy").value_or(0);
  SetNumber(b, "energy", energy);
  SetNumber(b, "gap_to_ground", energy - ground_energy_);
  CopyField(baseline_, "loss", b);
  if (!chosen_removed_.empty()) {
    (*b.mutable_fields())["same_as_chosen"].set_bool_value(removed == chosen_removed_);
  }
}

void SummaryBuilder::AddComparison(v1::CampaignReport& report) {
  if (eval_ == nullptr) return;
  CopyField(eval_, "parent_loss", out_);
  CopyField(eval_, "held_out_samples", out_);
  const std::optional<double> cbo = NumberAt(eval_, "loss");
  const std::optional<double> bi = NumberAt(baseline_, "loss");
  if (cbo && bi) {
    Struct& cmp = Sub("comparison");
    SetNumber(cmp, "cbo_loss", *cbo);
    SetNumber(cmp, "baseline_loss", *bi);
    SetNumber(cmp, "loss_difference", *bi - *cbo);
    (*cmp.mutable_fields())["beats_baseline"].set_bool_value(*cbo <= *bi);
  }
  // The student's architecture: solve chose nothing yet, evaluate_candidates built it.
  if (!report.architecture().fields().empty()) return;
  if (const Value* line = Field(eval_, "architecture");
      line != nullptr && line->has_string_value()) {
    auto& a = *report.mutable_architecture()->mutable_fields();
    a["description"] = *line;
    if (const Value* layers = Field(eval_, "layers")) a["layers"] = *layers;
    if (const Value* params = Field(eval_, "parameters")) a["parameters"] = *params;
  }
}

}  // namespace

void AddBlockRemovalReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                           v1::CampaignReport& report) {
  const Struct* solve = nullptr;
  const Struct* eval = nullptr;
  for (const v1::Job& j : jobs) {
    if (!j.has_result() || j.result().fields_size() == 0) continue;
    if (j.key() == jobs::kSolve) solve = &j.result();
    if (j.key() == jobs::kEvaluateCandidates) eval = &j.result();
  }
  const ListValue* spectrum = List(solve, "spectrum");
  if (spectrum == nullptr || spectrum->values().empty()) return;
  Struct out = SummaryBuilder(solve, eval).Build(campaign.contract().budget(), *spectrum, report);
  *(*report.mutable_details()->mutable_fields())["block_removal"].mutable_struct_value() =
      std::move(out);
}

}  // namespace tailor::methods
