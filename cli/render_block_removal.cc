#include "cli/render_block_removal.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/table.h"

namespace tailor::cli {
namespace {

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
std::string BlocksCell(const Struct& s) {
  std::vector<std::string> out;
  if (const Value* v = Field(s, "removed_layers"); v != nullptr && v->has_list_value()) {
    for (const Value& x : v->list_value().values()) {
      out.push_back(absl::StrCat(static_cast<int64_t>(x.number_value())));
    }
  }
  return out.empty() ? "-" : absl::StrJoin(out, ",");
}

// Energies of a Fisher matrix are small and span decades: significant digits, not decimals.
std::string Energy(double e) {
  if (std::isnan(e)) return "-";
  if (e == 0) return "0";
  return absl::StrFormat("%.4g", e);
}

std::string Loss(double l) { return FormatNumber(l, 4); }

}  // namespace

std::string RenderBlockRemoval(const v1::CampaignReport& r, const RenderOptions& options) {
  const Value* d = Field(r.details(), "block_removal");
  if (d == nullptr || !d->has_struct_value()) return "";
  const Struct& br = d->struct_value();
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
  if (const Value* trials = Field(br, "m_search"); trials != nullptr && trials->has_list_value()) {
    // Why this M: each smaller M had no low-energy state within the budget.
    for (const Value& t : trials->list_value().values()) {
      const Struct& s = t.struct_value();
      absl::StrAppend(&out, "  M=", FormatNumber(Num(s, "m"), 0), ": ",
                      FormatNumber(Num(s, "fitting"), 0), "/", FormatNumber(Num(s, "states"), 0),
                      " states fit (best predicted ", FormatNumber(Num(s, "min_latency_ms")),
                      " ms, ", FormatNumber(Num(s, "min_memory_mib")), " MiB)\n");
    }
  }
  Table table({{"RANK", Align::kRight},
               {"BLOCKS REMOVED"},
               {"ENERGY", Align::kRight},
               {"GAP TO GROUND", Align::kRight},
               {"EVAL LOSS", Align::kRight},
               {"CHOSEN"}});
  if (const Value* rows = Field(br, "spectrum"); rows != nullptr && rows->has_list_value()) {
    for (const Value& v : rows->list_value().values()) {
      const Struct& s = v.struct_value();
      const double rank = Num(s, "rank");
      table.AddRow({rank == 0 ? "0 (ground)" : FormatNumber(rank, 0), BlocksCell(s),
                    Energy(Num(s, "energy")), Energy(Num(s, "gap_to_ground")),
                    Loss(Num(s, "loss")), Bool(s, "chosen") ? "*" : ""});
    }
  }
  absl::StrAppend(&out, table.Render(options.width));
  if (const Struct* g = Sub(br, "ground_state")) {
    // A budget-driven M keeps only the states that fit, which may exclude the ground state.
    bool listed = false;
    if (const Value* rows = Field(br, "spectrum"); rows != nullptr && rows->has_list_value()) {
      for (const Value& v : rows->list_value().values()) {
        listed |= BlocksCell(v.struct_value()) == BlocksCell(*g);
      }
    }
    if (!listed) {
      absl::StrAppend(&out, "ground state (not within the budget): blocks ", BlocksCell(*g),
                      ", energy ", Energy(Num(*g, "energy")), "\n");
    }
  }
  if (!std::isnan(Num(br, "parent_loss"))) {
    absl::StrAppend(&out, "parent eval loss ", Loss(Num(br, "parent_loss")), " on ",
                    FormatNumber(Num(br, "held_out_samples"), 0), " held-out samples\n");
  }
  const Struct* b = Sub(br, "baseline");
  const Struct* chosen = Sub(br, "chosen");
  const Struct* cmp = Sub(br, "comparison");
  if (b != nullptr && chosen != nullptr && cmp != nullptr) {
    const double diff = Num(*cmp, "loss_difference");
    std::string verdict;
    if (Bool(*b, "same_as_chosen")) {
      verdict = "same blocks";
    } else if (diff > 0) {
      verdict = absl::StrCat("CBO better by ", Loss(diff));
    } else if (diff < 0) {
      verdict = absl::StrCat("Block Influence better by ", Loss(-diff));
    } else {
      verdict = "tie";
    }
    absl::StrAppend(&out, "CBO (rank ", FormatNumber(Num(*chosen, "rank"), 0), ", blocks ",
                    BlocksCell(*chosen), ") eval loss ", Loss(Num(*cmp, "cbo_loss")),
                    " vs Block Influence (blocks ", BlocksCell(*b), ", energy ",
                    Energy(Num(*b, "energy")), ") eval loss ", Loss(Num(*cmp, "baseline_loss")),
                    " at M=", FormatNumber(m, 0), ": ", verdict, "\n");
  } else if (b != nullptr) {
    absl::StrAppend(&out, "Block Influence at M=", FormatNumber(m, 0), ": blocks ",
                    BlocksCell(*b), ", energy ", Energy(Num(*b, "energy")),
                    " (not evaluated yet)\n");
  }
  return out;
}

}  // namespace tailor::cli
