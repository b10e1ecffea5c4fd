#include "coordinator/report_block_removal.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "common/struct_values.h"

namespace tailor::coordinator {
namespace {

using struct_values::NumberAt;

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct* s, const std::string& key) {
  if (s == nullptr) return nullptr;
  auto it = s->fields().find(key);
  return it == s->fields().end() ? nullptr : &it->second;
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

}  // namespace

void AddBlockRemovalReport(const v1::Campaign& campaign, const std::vector<v1::Job>& jobs,
                           v1::CampaignReport& report) {
  const Struct* solve = nullptr;
  const Struct* eval = nullptr;
  for (const v1::Job& j : jobs) {
    if (!j.has_result() || j.result().fields_size() == 0) continue;
    if (j.key() == "solve") solve = &j.result();
    if (j.key() == "evaluate_candidates") eval = &j.result();
  }
  const ListValue* spectrum = List(solve, "spectrum");
  if (spectrum == nullptr || spectrum->values().empty()) return;

  Struct out;
  auto& f = *out.mutable_fields();
  const double blocks = NumberAt(solve, "blocks").value_or(0);
  const double m = NumberAt(solve, "blocks_to_remove").value_or(0);
  SetNumber(out, "blocks", blocks);
  SetNumber(out, "blocks_to_remove", m);
  SetNumber(out, "removed_fraction", blocks > 0 ? m / blocks : 0);
  const Value* budget_driven = Field(solve, "budget_driven");
  const bool by_budget = budget_driven != nullptr && budget_driven->bool_value();
  f["m_source"].set_string_value(by_budget ? "budget" : "contract");
  if (by_budget) {
    CopyField(solve, "m_search", out);
    const v1::Budget& b = campaign.contract().budget();
    Struct& budget = *f["budget"].mutable_struct_value();
    if (b.has_latency_ms_max()) SetNumber(budget, "latency_ms_max", b.latency_ms_max());
    if (b.has_memory_mib_max()) SetNumber(budget, "memory_mib_max", b.memory_mib_max());
    if (b.has_throughput_tokens_per_s_min()) {
      SetNumber(budget, "throughput_tokens_per_s_min", b.throughput_tokens_per_s_min());
    }
  }
  for (const char* key : {"solver", "solve_seconds", "states_total"}) CopyField(solve, key, out);

  std::vector<Candidate> states;
  for (const Value& v : spectrum->values()) {
    const Struct* s = &v.struct_value();
    states.push_back({static_cast<int>(NumberAt(s, "level").value_or(states.size())),
                      Layers(s, "removed_layers"), NumberAt(s, "energy").value_or(0),
                      SubStruct(s, "predicted")});
  }
  // Sorted by energy whatever order the job wrote (ties by level), so rank 0 is the lowest.
  std::stable_sort(states.begin(), states.end(), [](const Candidate& a, const Candidate& b) {
    return a.energy != b.energy ? a.energy < b.energy : a.level < b.level;
  });

  // Real losses by removal set, once evaluate_candidates ran.
  std::map<std::vector<int>, double> loss_of;
  if (const ListValue* cands = List(eval, "candidates")) {
    for (const Value& v : cands->values()) {
      if (auto loss = NumberAt(&v.struct_value(), "loss")) {
        loss_of[Layers(&v.struct_value(), "removed_layers")] = *loss;
      }
    }
  }
  auto loss = [&](const std::vector<int>& removed) -> std::optional<double> {
    auto it = loss_of.find(removed);
    return it == loss_of.end() ? std::nullopt : std::optional<double>(it->second);
  };

  // The ground state at M: solve reports it separately because a budget-driven M keeps only
  // the states that fit, which need not include it.
  Struct& ground = *f["ground_state"].mutable_struct_value();
  const double ground_energy = NumberAt(solve, "ground_energy").value_or(states.front().energy);
  std::vector<int> ground_removed = Layers(solve, "ground_removed_layers");
  if (ground_removed.empty()) ground_removed = states.front().removed;
  SetNumber(ground, "energy", ground_energy);
  (*ground.mutable_fields())["removed_layers"] = IntList(ground_removed);
  if (auto l = loss(ground_removed)) SetNumber(ground, "loss", *l);

  const std::vector<int> chosen_removed = eval != nullptr ? Layers(eval, "removed_layers")
                                                          : std::vector<int>{};
  // The spectrum row to mark: the chosen state, or with stages the first stage's pick (the
  // final set is not a state of this spectrum).
  std::vector<int> spectrum_pick = chosen_removed;
  if (const ListValue* stage_rows = List(eval, "stages");
      stage_rows != nullptr && !stage_rows->values().empty()) {
    spectrum_pick = Layers(&stage_rows->values(0).struct_value(), "removed_layers");
  }
  ListValue& rows = *f["spectrum"].mutable_list_value();
  for (size_t i = 0; i < states.size(); ++i) {
    const Candidate& c = states[i];
    Struct& row = *rows.add_values()->mutable_struct_value();
    SetNumber(row, "rank", static_cast<double>(i));
    SetNumber(row, "level", c.level);
    (*row.mutable_fields())["removed_layers"] = IntList(c.removed);
    SetNumber(row, "energy", c.energy);
    SetNumber(row, "gap_to_ground", c.energy - ground_energy);
    if (auto l = loss(c.removed)) SetNumber(row, "loss", *l);
    const bool chosen = !spectrum_pick.empty() && c.removed == spectrum_pick;
    (*row.mutable_fields())["chosen"].set_bool_value(chosen);
    if (c.predicted != nullptr) {
      *(*row.mutable_fields())["predicted"].mutable_struct_value() = *c.predicted;
    }
    if (chosen) {
      Struct& ch = *f["chosen"].mutable_struct_value();
      ch = row;
      ch.mutable_fields()->erase("chosen");
    }
  }

  // Staged removal: the spectrum above is the first stage's; the later stages and the final
  // set come from evaluate_candidates.
  SetNumber(out, "stages", NumberAt(solve, "stages").value_or(1));
  if (const Value* stage_rows = Field(eval, "stages");
      stage_rows != nullptr && stage_rows->has_list_value()) {
    f["stages_detail"] = *stage_rows;
    CopyField(solve, "stage_blocks", out);
    Struct& ch = *f["chosen"].mutable_struct_value();
    ch.Clear();
    (*ch.mutable_fields())["removed_layers"] = IntList(chosen_removed);
    if (auto l = NumberAt(eval, "loss")) SetNumber(ch, "loss", *l);
    SetNumber(ch, "stages", static_cast<double>(stage_rows->list_value().values_size()));
  }
  // The Block Influence choice at the same M: evaluate_candidates' copy carries its loss.
  const Struct* baseline = SubStruct(eval, "baseline");
  if (baseline == nullptr) baseline = SubStruct(solve, "baseline");
  if (baseline != nullptr) {
    Struct& b = *f["baseline"].mutable_struct_value();
    CopyField(baseline, "method", b);
    const std::vector<int> removed = Layers(baseline, "removed_layers");
    (*b.mutable_fields())["removed_layers"] = IntList(removed);
    const double energy = NumberAt(baseline, "energy").value_or(0);
    SetNumber(b, "energy", energy);
    SetNumber(b, "gap_to_ground", energy - ground_energy);
    CopyField(baseline, "loss", b);
    if (!chosen_removed.empty()) {
      (*b.mutable_fields())["same_as_chosen"].set_bool_value(removed == chosen_removed);
    }
  }

  if (eval != nullptr) {
    CopyField(eval, "parent_loss", out);
    CopyField(eval, "held_out_samples", out);
    const std::optional<double> cbo = NumberAt(eval, "loss");
    const std::optional<double> bi = NumberAt(baseline, "loss");
    if (cbo && bi) {
      Struct& cmp = *f["comparison"].mutable_struct_value();
      SetNumber(cmp, "cbo_loss", *cbo);
      SetNumber(cmp, "baseline_loss", *bi);
      SetNumber(cmp, "loss_difference", *bi - *cbo);
      (*cmp.mutable_fields())["beats_baseline"].set_bool_value(*cbo <= *bi);
    }
    // The student's architecture: solve chose nothing yet, evaluate_candidates built it.
    if (report.architecture().fields().empty()) {
      if (const Value* line = Field(eval, "architecture");
          line != nullptr && line->has_string_value()) {
        auto& a = *report.mutable_architecture()->mutable_fields();
        a["description"] = *line;
        if (const Value* layers = Field(eval, "layers")) a["layers"] = *layers;
        if (const Value* params = Field(eval, "parameters")) a["parameters"] = *params;
      }
    }
  }
  *(*report.mutable_details()->mutable_fields())["block_removal"].mutable_struct_value() =
      std::move(out);
}

}  // namespace tailor::coordinator
