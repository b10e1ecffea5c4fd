#include "methods/block_removal/render.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/table.h"

namespace tailor::methods {
namespace {

using cli::Align;
using cli::Column;
using cli::FormatNumber;
using cli::FormatPercent;
using cli::Table;

using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? nullptr : &it->second;
}

double Num(const Struct& s, const std::string& key) {
  const Value* v = Field(s, key);
  return v != nullptr && v->kind_case() == Value::kNumberValue ? v->number_value() : NAN;
}

const Struct* Sub(const Struct& s, const std::string& key) {
  const Value* v = Field(s, key);
  return v != nullptr && v->has_struct_value() ? &v->struct_value() : nullptr;
}

bool Bool(const Struct& s, const std::string& key) {
  const Value* v = Field(s, key);
  return v != nullptr && v->bool_value();
}

// "3,5" (layer indices as `tailor report --json` lists them).
std::string LayerList(const Struct& s, const std::string& key) {
  std::vector<std::string> out;
  if (const Value* v = Field(s, key); v != nullptr && v->has_list_value()) {
    for (const Value& x : v->list_value().values()) {
      out.push_back(absl::StrCat(static_cast<int64_t>(x.number_value())));
    }
  }
  return out.empty() ? "-" : absl::StrJoin(out, ",");
}
std::string BlocksCell(const Struct& s) { return LayerList(s, "removed_layers"); }

// Energies of a Fisher matrix are small and span decades: significant digits, not decimals.
std::string Energy(double e) {
  if (std::isnan(e)) return "-";
  if (e == 0) return "0";
  return absl::StrFormat("%.4g", e);
}

std::string Loss(double l) { return FormatNumber(l, 4); }

// "block removal: M of N blocks ..." plus, with stages, how they ran and, budget-driven,
// why this M: each smaller M had no low-energy state within the budget.
std::string Header(const Struct& br) {
  const double m = Num(br, "blocks_to_remove"), n = Num(br, "blocks");
  const bool by_budget = Field(br, "m_source") != nullptr &&
                         Field(br, "m_source")->string_value() == "budget";
  std::string out = absl::StrCat(
      "\nblock removal: ", FormatNumber(m, 0), " of ", FormatNumber(n, 0), " blocks (",
      FormatPercent(Num(br, "removed_fraction")), "), M ",
      by_budget ? "chosen by the budget" : "from the contract", "; solver ",
      Field(br, "solver") != nullptr ? Field(br, "solver")->string_value() : "-", ", ",
      FormatNumber(Num(br, "states_total"), 0), " states, ",
      absl::StrFormat("%.3g", Num(br, "solve_seconds")), " s\n");
  const Value* stages = Field(br, "stages_detail");
  if (stages != nullptr && stages->has_list_value()) {
    absl::StrAppend(&out, "in ", stages->list_value().values_size(),
                    " stages, gradients recomputed after each; the spectrum is the first "
                    "stage's (",
                    FormatNumber(Num(br, "stage_blocks"), 0),
                    Num(br, "stage_blocks") == 1 ? " block" : " blocks", " per state)\n");
  }
  if (const Value* trials = Field(br, "m_search"); trials != nullptr && trials->has_list_value()) {
    for (const Value& t : trials->list_value().values()) {
      const Struct& s = t.struct_value();
      absl::StrAppend(&out, "  M=", FormatNumber(Num(s, "m"), 0), ": ",
                      FormatNumber(Num(s, "fitting"), 0), "/", FormatNumber(Num(s, "states"), 0),
                      " states fit (best predicted ", FormatNumber(Num(s, "min_latency_ms")),
                      " ms, ", FormatNumber(Num(s, "min_memory_mib")), " MiB)\n");
    }
  }
  return out;
}

// The kept states by energy, and the ground state when the budget excluded it.
std::string Spectrum(const Struct& br, const cli::RenderOptions& options) {
  Table table({{"RANK", Align::kRight},
               {"BLOCKS REMOVED"},
               {"ENERGY", Align::kRight},
               {"GAP TO GROUND", Align::kRight},
               {"EVAL LOSS", Align::kRight},
               {"CHOSEN"}});
  const Value* rows = Field(br, "spectrum");
  const bool has_rows = rows != nullptr && rows->has_list_value();
  if (has_rows) {
    for (const Value& v : rows->list_value().values()) {
      const Struct& s = v.struct_value();
      const double rank = Num(s, "rank");
      table.AddRow({rank == 0 ? "0 (ground)" : FormatNumber(rank, 0), BlocksCell(s),
                    Energy(Num(s, "energy")), Energy(Num(s, "gap_to_ground")),
                    Loss(Num(s, "loss")), Bool(s, "chosen") ? "*" : ""});
    }
  }
  std::string out = table.Render(options.width);
  if (const Struct* g = Sub(br, "ground_state")) {
    // A budget-driven M keeps only the states that fit, which may exclude the ground state.
    bool listed = false;
    if (has_rows) {
      for (const Value& v : rows->list_value().values()) {
        listed |= BlocksCell(v.struct_value()) == BlocksCell(*g);
      }
    }
    if (!listed) {
      absl::StrAppend(&out, "ground state (not within the budget): blocks ", BlocksCell(*g),
                      ", energy ", Energy(Num(*g, "energy")), "\n");
    }
  }
  return out;
}

// One row per stage of a staged removal; empty without stages.
std::string Stages(const Struct& br, const cli::RenderOptions& options) {
  const Value* stages = Field(br, "stages_detail");
  if (stages == nullptr || !stages->has_list_value()) return "";
  Table by_stage({{"STAGE", Align::kRight},
                  {"BLOCKS ADDED"},
                  {"REMOVED SO FAR"},
                  {"EVAL LOSS", Align::kRight}});
  for (const Value& v : stages->list_value().values()) {
    const Struct& s = v.struct_value();
    by_stage.AddRow({FormatNumber(Num(s, "stage"), 0), LayerList(s, "added_layers"),
                     LayerList(s, "removed_layers"), Loss(Num(s, "loss"))});
  }
  return by_stage.Render(options.width);
}

std::string Verdict(const Struct& baseline, const Struct& comparison) {
  const double diff = Num(comparison, "loss_difference");
  if (Bool(baseline, "same_as_chosen")) return "same blocks";
  if (diff > 0) return absl::StrCat("CBO better by ", Loss(diff));
  if (diff < 0) return absl::StrCat("Block Influence better by ", Loss(-diff));
  return "tie";
}

// CBO's choice against Block Influence at the same M, once both were evaluated.
std::string Comparison(const Struct& br) {
  const double m = Num(br, "blocks_to_remove");
  const Struct* b = Sub(br, "baseline");
  const Struct* chosen = Sub(br, "chosen");
  const Struct* cmp = Sub(br, "comparison");
  if (b != nullptr && chosen != nullptr && cmp != nullptr) {
    const std::string which =
        Field(*chosen, "stages") != nullptr
            ? absl::StrCat("staged CBO (", FormatNumber(Num(*chosen, "stages"), 0), " stages")
            : absl::StrCat("CBO (rank ", FormatNumber(Num(*chosen, "rank"), 0));
    return absl::StrCat(which, ", blocks ", BlocksCell(*chosen), ") eval loss ",
                        Loss(Num(*cmp, "cbo_loss")), " vs Block Influence (blocks ",
                        BlocksCell(*b), ", energy ", Energy(Num(*b, "energy")), ") eval loss ",
                        Loss(Num(*cmp, "baseline_loss")), " at M=", FormatNumber(m, 0), ": ",
                        Verdict(*b, *cmp), "\n");
  }
  if (b != nullptr) {
    return absl::StrCat("Block Influence at M=", FormatNumber(m, 0), ": blocks ",
                        BlocksCell(*b), ", energy ", Energy(Num(*b, "energy")),
                        " (not evaluated yet)\n");
  }
  return "";
}

}  // namespace

std::string RenderBlockRemoval(const v1::CampaignReport& r, const cli::RenderOptions& options) {
  const Value* d = Field(r.details(), "block_removal");
  if (d == nullptr || !d->has_struct_value()) return "";
  const Struct& br = d->struct_value();
  std::string out = absl::StrCat(Header(br), Spectrum(br, options), Stages(br, options));
  if (!std::isnan(Num(br, "parent_loss"))) {
    absl::StrAppend(&out, "parent eval loss ", Loss(Num(br, "parent_loss")), " on ",
                    FormatNumber(Num(br, "held_out_samples"), 0), " held-out samples\n");
  }
  absl::StrAppend(&out, Comparison(br));
  return out;
}

}  // namespace tailor::methods
