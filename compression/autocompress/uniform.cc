#include "compression/autocompress/uniform.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "compression/autocompress/extract.h"
#include "compression/autocompress/settle.h"

namespace tailor::autocompress {
namespace {

using model::HybridConfig;
using model::LayerKind;
using model::LayerSpec;

std::string Num(double v) { return absl::StrFormat("%.6g", v); }

// rho per set budget, named by its contract field (> 1 always means "violated").
struct Rho {
  const char* budget;
  double rho;
};
std::vector<Rho> Rhos(const costmodel::Prediction& p, const Budgets& b) {
  std::vector<Rho> out;
  if (b.latency_ms) out.push_back({"latency_ms_max", p.latency_ms / *b.latency_ms});
  if (b.memory_mib) out.push_back({"memory_mib_max", p.memory_mib / *b.memory_mib});
  if (b.throughput) {
    out.push_back({"throughput_tokens_per_s_min", p.throughput_tokens_per_s > 0
                                                      ? *b.throughput / p.throughput_tokens_per_s
                                                      : std::numeric_limits<double>::infinity()});
  }
  return out;
}

absl::StatusOr<costmodel::Prediction> PredictChild(const HybridConfig& parent,
                                                   const SearchSpace& space,
                                                   const costmodel::CostModel& model,
                                                   const std::vector<int>& indices,
                                                   HybridConfig* child_out = nullptr) {
  TAILOR_ASSIGN_OR_RETURN(HybridConfig child, ChildConfig(parent, space, indices));
  TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction p, model.Predict(child));
  if (child_out != nullptr) *child_out = std::move(child);
  return p;
}

const char* KindName(AxisKind k) {
  switch (k) {
    case AxisKind::kHidden:
      return "hidden";
    case AxisKind::kMambaHeads:
      return "mamba_heads";
    case AxisKind::kAttentionHeads:
      return "attention_heads_per_group";
    case AxisKind::kExperts:
      return "experts";
    case AxisKind::kExpertFfn:
      return "expert_ffn";
    case AxisKind::kSharedFfn:
      return "shared_ffn";
    case AxisKind::kMlpFfn:
      return "mlp_ffn";
  }
  return "?";
}

// The index of the non-zero width of `axis` closest to `target` (ties to the wider).
int ClosestNonZero(const ChoiceAxis& axis, double target) {
  int best = -1;
  for (int j = 0; j < static_cast<int>(axis.widths.size()); ++j) {
    if (axis.widths[j] == 0) continue;
    if (best < 0 || std::abs(axis.widths[j] - target) <= std::abs(axis.widths[best] - target)) {
      best = j;
    }
  }
  return best;
}

double RangeSum(const std::vector<double>& v, int64_t lo, int64_t hi) {
  double s = 0;
  for (int64_t i = std::max<int64_t>(lo, 0); i < std::min<int64_t>(hi, v.size()); ++i) s += v[i];
  return s;
}

double Total(const std::vector<double>& v) { return RangeSum(v, 0, v.size()); }

// Importance of one layer's part between widths `to` and `from` (`lost`) and all of it
// (`total`), for a per-layer axis covering layer `l`.
void LayerImportanceLost(const HybridConfig& parent, const SearchSpace& space,
                         const std::vector<int>& indices, const ChoiceAxis& axis, int l,
                         int64_t from, int64_t to, const LayerImportance& li, double& lost,
                         double& total) {
  switch (axis.kind) {
    case AxisKind::kHidden:
    case AxisKind::kMambaHeads:
      break;  // global
    case AxisKind::kAttentionHeads: {
      const LayerSpec& s = parent.layers[l];
      const int64_t g = s.attention.kv_heads > 0 ? s.attention.heads / s.attention.kv_heads : 1;
      const std::vector<double>& v = li.attention_heads;
      for (size_t h = 0; h < v.size(); ++h) {
        const int64_t pos = static_cast<int64_t>(h) % g;  // rank inside its GQA group
        if (pos >= to && pos < from) lost += v[h];
        total += v[h];
      }
      break;
    }
    case AxisKind::kExperts: {
      // The ranked experts of each routing group between the kept counts (ranking is per
      // group; one group of all experts without groups).
      const model::MoeSpec& m = parent.layers[l].moe;
      const int64_t g = std::max<int64_t>(m.groups, 1), per = m.experts / g;
      for (int64_t k = 0; k < g; ++k) {
        lost += RangeSum(li.experts, k * per + to / g, k * per + from / g);
      }
      total += Total(li.experts);
      break;
    }
    case AxisKind::kExpertFfn: {
      // Only the experts currently kept (per routing group) lose FFN channels.
      const model::MoeSpec& m = parent.layers[l].moe;
      int64_t kept = m.experts;
      for (size_t b = 0; b < space.axes.size(); ++b) {
        if (space.axes[b].covers(l) && space.axes[b].kind == AxisKind::kExperts) {
          kept = space.axes[b].widths[indices[b]];
        }
      }
      std::vector<bool> is_kept(li.expert_ffn.size(), false);
      for (int64_t e : model::KeptExperts(m, kept)) {
        if (e < static_cast<int64_t>(is_kept.size())) is_kept[e] = true;
      }
      for (size_t e = 0; e < li.expert_ffn.size(); ++e) {
        if (is_kept[e]) lost += RangeSum(li.expert_ffn[e], to, from);
        total += Total(li.expert_ffn[e]);
      }
      break;
    }
    case AxisKind::kSharedFfn:
      lost += RangeSum(li.shared_ffn, to, from);
      total += Total(li.shared_ffn);
      break;
    case AxisKind::kMlpFfn:
      lost += RangeSum(li.mlp_ffn, to, from);
      total += Total(li.mlp_ffn);
      break;
  }
}

// "layers[3].mlp_ffn 256 -> 192": axis `a` moved from choice `from` to choice `to`.
std::string StepText(const SearchSpace& space, int a, int from, int to) {
  const ChoiceAxis& axis = space.axes[a];
  return absl::StrCat(axis.name, " ", axis.widths[from], " -> ", axis.widths[to]);
}

// Importance axis a loses going from choice `from_choice` to the narrower `to_choice` (see
// RepairToBudgets). With axis_kd measured: the rise in KD loss, never negative (a slice that
// measured below a wider one is noise, and a free step is still a step). Else the share of
// the axis's unit scores, summed over every layer the axis sets; without scores, the share
// of the width.
double ImportanceLost(const HybridConfig& parent, const SearchSpace& space,
                      const std::vector<int>& indices, int a, int from_choice, int to_choice,
                      const Importance* imp) {
  const ChoiceAxis& axis = space.axes[a];
  const int64_t from = axis.widths[from_choice], to = axis.widths[to_choice];
  const double width_share = static_cast<double>(from - to) /
                             static_cast<double>(std::max<int64_t>(axis.widths.back(), 1));
  if (imp == nullptr) return width_share;
  if (static_cast<size_t>(a) < imp->axis_kd.size() && !imp->axis_kd[a].empty()) {
    const std::vector<double>& kd = imp->axis_kd[a];
    return std::max(0.0, kd[to_choice] - kd[from_choice]);
  }
  double lost = 0, total = 0;
  if (axis.kind == AxisKind::kHidden) {
    lost = RangeSum(imp->hidden, to, from);
    total = Total(imp->hidden);
  }
  if (axis.kind == AxisKind::kMambaHeads) {
    for (size_t l = 0; l < parent.layers.size() && l < imp->layers.size(); ++l) {
      const LayerSpec& s = parent.layers[l];
      if (s.kind != LayerKind::kMamba || s.mamba.heads == 0) continue;
      // The ranked heads of each B/C group between the kept counts (ranking is per group).
      const std::vector<double>& v = imp->layers[l].mamba_heads;
      const int64_t g = s.mamba.groups, per = s.mamba.heads / g;
      const int64_t lo = model::KeptMambaHeads(s.mamba, to) / g;
      const int64_t hi = model::KeptMambaHeads(s.mamba, from) / g;
      for (int64_t k = 0; k < g; ++k) lost += RangeSum(v, k * per + lo, k * per + hi);
      total += Total(v);
    }
  }
  for (int l : axis.layers()) {
    if (l >= static_cast<int>(imp->layers.size())) continue;
    LayerImportanceLost(parent, space, indices, axis, l, from, to, imp->layers[l], lost, total);
  }
  return total > 0 ? lost / total : width_share;
}

// The second phase of RepairToBudgets: one big shrink can overshoot, so shrunk axes are grown
// back (never past the search's choice) while every budget stays met, most importance
// regained per unit of rho added first.
// `label` ends each change's text; `on_step`, when given, sees every step taken.
void GrowBack(const HybridConfig& parent, const SearchSpace& space,
              const costmodel::CostModel& model, const Budgets& budgets,
              const std::vector<int>& original, const Importance* importance,
              std::vector<int>& indices, RepairResult& out,
              absl::string_view label = " (grown back)",
              const std::function<void(const RepairResult&, const std::vector<int>&)>& on_step =
                  nullptr) {
  while (true) {
    const std::vector<Rho> now = Rhos(out.predicted, budgets);
    int best_axis = -1;
    double best_ratio = 0;
    costmodel::Prediction best_pred;
    for (size_t a = 0; a < space.axes.size(); ++a) {
      if (indices[a] >= original[a]) continue;
      std::vector<int> cand = indices;
      ++cand[a];
      absl::StatusOr<costmodel::Prediction> p = PredictChild(parent, space, model, cand);
      if (!p.ok() || !BudgetViolations(*p, budgets).empty()) continue;
      const std::vector<Rho> next = Rhos(*p, budgets);
      double added = 0;
      for (size_t r = 0; r < now.size(); ++r) added += next[r].rho - now[r].rho;
      const double gained =
          ImportanceLost(parent, space, cand, static_cast<int>(a), cand[a], indices[a], importance);
      // Growing for free (or cheaper) always wins.
      const double ratio = added > 0 ? gained / added : std::numeric_limits<double>::infinity();
      if (best_axis < 0 || ratio > best_ratio) {
        best_axis = static_cast<int>(a);
        best_ratio = ratio;
        best_pred = *p;
      }
    }
    if (best_axis < 0) return;
    out.changes.push_back(absl::StrCat(
        StepText(space, best_axis, indices[best_axis], indices[best_axis] + 1), label));
    ++indices[best_axis];
    out.predicted = best_pred;
    if (on_step) on_step(out, indices);
  }
}

std::string LayerText(const LayerSpec& l) {
  const std::string kind(model::LayerKindName(l.kind));
  if (!l.present()) return absl::StrCat(kind, " removed");
  switch (l.kind) {
    case LayerKind::kAttention:
      return absl::StrCat(kind, " heads=", l.attention.heads, ",kv=", l.attention.kv_heads,
                          ",head_dim=", l.attention.head_dim);
    case LayerKind::kMamba:
      return absl::StrCat(kind, " heads=", l.mamba.heads, ",head_dim=", l.mamba.head_dim,
                          ",state=", l.mamba.state);
    case LayerKind::kMoe:
      return absl::StrCat(kind, " experts=", l.moe.experts, ",top_k=", l.moe.top_k,
                          ",expert_ffn=", l.moe.expert_ffn, ",shared_ffn=", l.moe.shared_ffn);
    case LayerKind::kMlp:
      return absl::StrCat(kind, " ffn=", l.mlp.ffn);
  }
  return kind;
}

// The axes of one kind, moved together by the uniform grid; levels = most non-zero widths
// of any of them.
struct KindLevels {
  AxisKind kind;
  std::vector<int> axes;
  int levels = 0;
};

// The space's axes grouped by kind, in AxisKind order.
absl::StatusOr<std::vector<KindLevels>> KindsOf(const SearchSpace& space) {
  std::map<AxisKind, KindLevels> by_kind;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    const ChoiceAxis& axis = space.axes[a];
    KindLevels& k = by_kind[axis.kind];
    k.kind = axis.kind;
    k.axes.push_back(static_cast<int>(a));
    const int nonzero = static_cast<int>(
        std::count_if(axis.widths.begin(), axis.widths.end(), [](int64_t w) { return w > 0; }));
    k.levels = std::max(k.levels, nonzero);
  }
  std::vector<KindLevels> kinds;
  for (auto& [kind, k] : by_kind) {
    if (k.levels == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("uniform grid: no non-zero ", KindName(kind), " width"));
    }
    kinds.push_back(std::move(k));
  }
  return kinds;
}

// The choice indices at `level` (kind k at level[k] / levels of its widest width, the
// closest non-zero width on every axis), with one "kind=level/levels" per kind in `text`.
std::vector<int> UniformIndices(const SearchSpace& space, const std::vector<KindLevels>& kinds,
                                const std::vector<int>& level, std::vector<std::string>& text) {
  std::vector<int> indices(space.axes.size(), 0);
  for (size_t k = 0; k < kinds.size(); ++k) {
    const double f = static_cast<double>(level[k]) / kinds[k].levels;
    for (int a : kinds[k].axes) {
      const ChoiceAxis& axis = space.axes[a];
      indices[a] = ClosestNonZero(axis, f * static_cast<double>(axis.widths.back()));
    }
    text.push_back(absl::StrCat(KindName(kinds[k].kind), "=", level[k], "/", kinds[k].levels));
  }
  return indices;
}

// Advances the mixed-radix counter `level` (kind 0 fastest); false after the last level.
bool NextLevel(const std::vector<KindLevels>& kinds, std::vector<int>& level) {
  size_t k = 0;
  while (k < kinds.size() && level[k] == kinds[k].levels) level[k++] = 1;
  if (k == kinds.size()) return false;
  ++level[k];
  return true;
}

// The best prediction of each cost over the whole grid (not one architecture's).
struct BestCosts {
  double latency = std::numeric_limits<double>::infinity();
  double memory = std::numeric_limits<double>::infinity();
  double throughput = 0;
};

// FAILED_PRECONDITION when no uniform architecture fits: naming the budgets no grid point
// reaches, or, when each alone is reachable, all of them with the grid's best.
absl::Status NoUniformFits(int64_t grid_size, const Budgets& budgets, const BestCosts& b) {
  std::vector<std::string> unreachable, best;
  auto note = [&](const std::optional<double>& budget, const char* field, double value,
                  const char* what, bool floor) {
    if (!budget) return;
    const std::string line =
        absl::StrCat(field, " ", Num(*budget), " (", what, " predicted ", Num(value), ")");
    best.push_back(line);
    if (floor ? value < *budget : value > *budget) unreachable.push_back(line);
  };
  note(budgets.latency_ms, "latency_ms_max", b.latency, "smallest", false);
  note(budgets.memory_mib, "memory_mib_max", b.memory, "smallest", false);
  note(budgets.throughput, "throughput_tokens_per_s_min", b.throughput, "largest", true);
  if (!unreachable.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no uniform architecture of ", grid_size,
                     " meets the budget: ", absl::StrJoin(unreachable, "; ")));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no uniform architecture of ", grid_size,
      " meets all budgets together (each alone can be met): ", absl::StrJoin(best, "; ")));
}

}  // namespace

std::vector<std::string> BudgetViolations(const costmodel::Prediction& p, const Budgets& b) {
  std::vector<std::string> out;
  if (b.latency_ms && p.latency_ms > *b.latency_ms) {
    out.push_back(
        absl::StrCat("latency_ms ", Num(p.latency_ms), " > latency_ms_max ", Num(*b.latency_ms)));
  }
  if (b.memory_mib && p.memory_mib > *b.memory_mib) {
    out.push_back(
        absl::StrCat("memory_mib ", Num(p.memory_mib), " > memory_mib_max ", Num(*b.memory_mib)));
  }
  if (b.throughput && p.throughput_tokens_per_s < *b.throughput) {
    out.push_back(absl::StrCat("throughput_tokens_per_s ", Num(p.throughput_tokens_per_s),
                               " < throughput_tokens_per_s_min ", Num(*b.throughput)));
  }
  return out;
}

absl::Status CheckBudgetsReachable(const HybridConfig& parent, const SearchSpace& space,
                                   const costmodel::CostModel& model, const Budgets& budgets) {
  const std::vector<int> cheapest(space.axes.size(), 0);
  TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction p, PredictChild(parent, space, model, cheapest));
  const std::vector<std::string> v = BudgetViolations(p, budgets);
  if (v.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "no architecture in the search space meets the budget: even the cheapest one (every "
      "axis at its narrowest choice) is predicted at ",
      absl::StrJoin(v, "; ")));
}

absl::StatusOr<UniformGrid> UniformCandidates(const HybridConfig& parent, const SearchSpace& space,
                                              const costmodel::CostModel& model,
                                              const Budgets& budgets) {
  TAILOR_ASSIGN_OR_RETURN(const std::vector<KindLevels> kinds, KindsOf(space));
  UniformGrid grid;
  std::set<std::vector<int>> seen;
  BestCosts best;
  std::vector<int> level(kinds.size(), 1);  // 1..levels per kind (mixed-radix counter)
  do {
    std::vector<std::string> text;
    const std::vector<int> indices = UniformIndices(space, kinds, level, text);
    if (!seen.insert(indices).second) continue;  // another level rounds to the same widths
    UniformCandidate c;
    TAILOR_ASSIGN_OR_RETURN(c.predicted, PredictChild(parent, space, model, indices, &c.config));
    c.indices = indices;
    c.levels = absl::StrJoin(text, " ");
    c.parameters = c.config.ParameterCount();
    best.latency = std::min(best.latency, c.predicted.latency_ms);
    best.memory = std::min(best.memory, c.predicted.memory_mib);
    best.throughput = std::max(best.throughput, c.predicted.throughput_tokens_per_s);
    ++grid.grid_size;
    if (BudgetViolations(c.predicted, budgets).empty()) grid.fitting.push_back(std::move(c));
  } while (NextLevel(kinds, level));

  if (grid.fitting.empty()) return NoUniformFits(grid.grid_size, budgets, best);
  std::stable_sort(grid.fitting.begin(), grid.fitting.end(),
                   [](const UniformCandidate& a, const UniformCandidate& b) {
                     if (a.parameters != b.parameters) return a.parameters > b.parameters;
                     return a.predicted.latency_ms < b.predicted.latency_ms;
                   });
  return grid;
}

absl::StatusOr<UniformResult> SelectUniform(model::HybridLM& ranked_parent,
                                            const SearchSpace& space,
                                            const costmodel::CostModel& model,
                                            const Budgets& budgets,
                                            const std::vector<at::Tensor>& eval_batches,
                                            const UniformOptions& options) {
  if (options.keep < 1) return absl::InvalidArgumentError("SelectUniform: keep must be >= 1");
  if (eval_batches.empty()) {
    return absl::InvalidArgumentError("SelectUniform: no evaluation batches");
  }
  TAILOR_ASSIGN_OR_RETURN(UniformGrid grid,
                          UniformCandidates(ranked_parent->config(), space, model, budgets));
  UniformResult out;
  out.grid_size = grid.grid_size;
  out.fitting = static_cast<int64_t>(grid.fitting.size());
  const size_t n = std::min<size_t>(options.keep, grid.fitting.size());
  std::vector<std::vector<int>> indices;
  for (size_t i = 0; i < n; ++i) indices.push_back(grid.fitting[i].indices);
  TAILOR_ASSIGN_OR_RETURN(std::vector<double> kd,
                          HeldOutKd(ranked_parent, space, indices, eval_batches));
  int64_t tokens_per_pass = 0;
  for (const at::Tensor& b : eval_batches) tokens_per_pass += b.numel();
  for (size_t i = 0; i < n; ++i) {
    UniformCandidate c = std::move(grid.fitting[i]);
    c.kd_loss = kd[i];
    out.eval_tokens += tokens_per_pass;
    out.scored.push_back(std::move(c));
  }
  // Lowest loss; ties keep the larger (earlier) candidate.
  size_t best = 0;
  for (size_t i = 1; i < out.scored.size(); ++i) {
    if (out.scored[i].kd_loss < out.scored[best].kd_loss) best = i;
  }
  out.best = out.scored[best];
  return out;
}

// One step of the repair: the one-axis shrink of `indices` (never below `keep_at_least`)
// that gives up the least importance per unit of budget excess saved; none that lands within
// every budget of `overshoot` when given. nullopt when no shrink lowers the excess.
struct Shrink {
  int axis = -1;
  costmodel::Prediction predicted;
};
std::optional<Shrink> BestShrink(const HybridConfig& parent, const SearchSpace& space,
                                 const costmodel::CostModel& model, const Budgets& budgets,
                                 const std::vector<int>& indices,
                                 const costmodel::Prediction& predicted,
                                 const Importance* importance,
                                 const std::vector<int>* keep_at_least,
                                 const Budgets* overshoot = nullptr) {
  const std::vector<Rho> now = Rhos(predicted, budgets);
  std::optional<Shrink> best;
  double best_ratio = 0, best_saved = 0;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    if (indices[a] == 0 || (keep_at_least != nullptr && indices[a] <= (*keep_at_least)[a])) {
      continue;
    }
    std::vector<int> cand = indices;
    --cand[a];
    absl::StatusOr<costmodel::Prediction> p = PredictChild(parent, space, model, cand);
    if (!p.ok()) continue;  // not a valid child (cannot happen for prefix widths)
    if (overshoot != nullptr && BudgetViolations(*p, *overshoot).empty()) continue;
    const std::vector<Rho> next = Rhos(*p, budgets);
    double saved = 0;
    for (size_t r = 0; r < now.size(); ++r) {
      if (now[r].rho > 1.0) saved += now[r].rho - next[r].rho;
    }
    if (!(saved > 0)) continue;
    const double lost = ImportanceLost(parent, space, indices, static_cast<int>(a), indices[a],
                                       cand[a], importance);
    const double ratio = lost / saved;
    if (!best || ratio < best_ratio || (ratio == best_ratio && saved > best_saved)) {
      best = Shrink{static_cast<int>(a), *p};
      best_ratio = ratio;
      best_saved = saved;
    }
  }
  return best;
}

absl::StatusOr<RepairResult> RepairToBudgets(const HybridConfig& parent, const SearchSpace& space,
                                             const costmodel::CostModel& model,
                                             const Budgets& budgets, std::vector<int> indices,
                                             const Importance* importance,
                                             const std::vector<int>* keep_at_least) {
  RepairResult out;
  TAILOR_ASSIGN_OR_RETURN(out.predicted, PredictChild(parent, space, model, indices));
  // Every shrink lowers some index, so this bounds the loop.
  const int64_t max_moves = space.total_choices();
  const std::vector<int> original = indices;
  for (int64_t move = 0; move <= max_moves; ++move) {
    if (BudgetViolations(out.predicted, budgets).empty()) {
      if (out.repaired) GrowBack(parent, space, model, budgets, original, importance, indices, out);
      out.indices = std::move(indices);
      return out;
    }
    const std::optional<Shrink> shrink = BestShrink(parent, space, model, budgets, indices,
                                                    out.predicted, importance, keep_at_least);
    if (!shrink) {
      return absl::FailedPreconditionError(
          absl::StrCat("budget repair: no narrower choice lowers the excess any more (",
                       absl::StrJoin(BudgetViolations(out.predicted, budgets), "; "), ")"));
    }
    const int a = shrink->axis;
    out.changes.push_back(StepText(space, a, indices[a], indices[a] - 1));
    --indices[shrink->axis];
    out.predicted = shrink->predicted;
    out.repaired = true;
  }
  return absl::InternalError("budget repair did not terminate");
}

absl::StatusOr<std::vector<LadderRung>> DescentLadder(const HybridConfig& parent,
                                                      const SearchSpace& space,
                                                      const costmodel::CostModel& model,
                                                      const Budgets& target,
                                                      const Budgets& overshoot,
                                                      std::vector<int> indices,
                                                      const Importance* importance) {
  const std::vector<int> choice = indices;
  RepairResult bottom;
  TAILOR_ASSIGN_OR_RETURN(bottom.predicted, PredictChild(parent, space, model, indices));
  // The repair's shrinks from the choice, in order, until the target holds; a shrink that
  // lands within `overshoot` too only when no other lowers the excess.
  std::vector<int> shrunk;
  while (!BudgetViolations(bottom.predicted, target).empty()) {
    std::optional<Shrink> shrink = BestShrink(parent, space, model, target, indices,
                                              bottom.predicted, importance, nullptr, &overshoot);
    if (!shrink) {
      shrink = BestShrink(parent, space, model, target, indices, bottom.predicted, importance,
                          nullptr);
    }
    if (!shrink) break;  // as low as the space goes: the descent ends here
    shrunk.push_back(shrink->axis);
    --indices[shrink->axis];
    bottom.predicted = shrink->predicted;
  }
  // The shrink that crossed the target may overshoot it by far (hidden 96 -> 64 on the
  // quickstart's parent: 20-30% below the choice); what fits under the target grows back, so
  // the bottom is the largest architecture the repair finds there, not the first.
  if (!shrunk.empty() && BudgetViolations(bottom.predicted, target).empty()) {
    GrowBack(parent, space, model, target, choice, importance, indices, bottom);
  }
  // Up from the bottom to the choice one axis step per rung, the last shrink undone first.
  std::vector<LadderRung> ladder = {{indices, bottom.predicted, ""}};
  for (auto it = shrunk.rbegin(); it != shrunk.rend(); ++it) {
    const int a = *it;
    if (indices[a] >= choice[a]) continue;  // grown back already
    ++indices[a];
    TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction p, PredictChild(parent, space, model, indices));
    ladder.push_back({indices, p, StepText(space, a, indices[a] - 1, indices[a])});
  }
  return ladder;
}

absl::StatusOr<std::vector<LadderRung>> GrowthLadder(const HybridConfig& parent,
                                                     const SearchSpace& space,
                                                     const costmodel::CostModel& model,
                                                     const Budgets& ceiling,
                                                     std::vector<int> indices,
                                                     const Importance* importance) {
  RepairResult grown;
  TAILOR_ASSIGN_OR_RETURN(grown.predicted, PredictChild(parent, space, model, indices));
  std::vector<LadderRung> ladder = {{indices, grown.predicted, ""}};
  if (!BudgetViolations(grown.predicted, ceiling).empty()) return ladder;
  std::vector<int> top(space.axes.size());
  for (size_t a = 0; a < space.axes.size(); ++a) {
    top[a] = static_cast<int>(space.axes[a].widths.size()) - 1;
  }
  GrowBack(parent, space, model, ceiling, top, importance, indices, grown, "",
           [&ladder](const RepairResult& r, const std::vector<int>& now) {
             ladder.push_back({now, r.predicted, r.changes.back()});
           });
  return ladder;
}

absl::StatusOr<std::vector<Branch>> BranchLadders(const HybridConfig& parent,
                                                  const SearchSpace& space,
                                                  const costmodel::CostModel& model,
                                                  const Budgets& floor, const Budgets& ceiling,
                                                  const std::vector<int>& top_rung,
                                                  int max_branches,
                                                  const Importance* importance) {
  std::vector<Branch> out;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    if (static_cast<int>(out.size()) >= max_branches) break;
    const ChoiceAxis& axis = space.axes[a];
    const bool global = axis.layer < 0 || !axis.tied_layers.empty();
    if (!global || top_rung[a] + 1 >= static_cast<int>(axis.widths.size())) continue;
    std::vector<int> start = top_rung;
    ++start[a];
    std::vector<int> held(space.axes.size(), 0);
    held[a] = start[a];
    absl::StatusOr<RepairResult> repaired =
        RepairToBudgets(parent, space, model, floor, start, importance, &held);
    if (absl::IsFailedPrecondition(repaired.status())) continue;  // cannot get under floor
    TAILOR_RETURN_IF_ERROR(repaired.status());
    if (!repaired->repaired) continue;  // the step fits the floor: no ladder blocked on it
    TAILOR_ASSIGN_OR_RETURN(std::vector<LadderRung> ladder,
                            GrowthLadder(parent, space, model, ceiling, repaired->indices,
                                         importance));
    std::vector<std::string> changes = {
        StepText(space, static_cast<int>(a), top_rung[a], start[a])};
    for (const std::string& c : repaired->changes) changes.push_back(c);
    ladder.front().change = absl::StrJoin(changes, ", ");
    out.push_back({static_cast<int>(a), std::move(ladder)});
  }
  return out;
}

int BranchStart(const std::vector<LadderRung>& ladder, const Budgets& budgets) {
  for (int i = static_cast<int>(ladder.size()) - 1; i > 0; --i) {
    if (BudgetViolations(ladder[i].predicted, budgets).empty()) return i;
  }
  return 0;
}

namespace {

// The ranked parent's logits on each batch (what every candidate is compared with).
absl::StatusOr<std::vector<at::Tensor>> TeacherLogits(model::HybridLM& ranked_parent,
                                                      const std::vector<at::Tensor>& batches) {
  std::vector<at::Tensor> teacher;
  for (const at::Tensor& b : batches) {
    TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput t, ranked_parent->Forward(b));
    teacher.push_back(t.logits);
  }
  return teacher;
}

// Mean KL(teacher || candidate) over the batches, per candidate.
absl::StatusOr<std::vector<double>> KdAgainst(model::HybridLM& ranked_parent,
                                              const SearchSpace& space,
                                              const std::vector<std::vector<int>>& candidates,
                                              const std::vector<at::Tensor>& batches,
                                              const std::vector<at::Tensor>& teacher) {
  std::vector<double> out;
  for (const std::vector<int>& indices : candidates) {
    TAILOR_ASSIGN_OR_RETURN(Student s, ExtractStudent(ranked_parent, space, indices));
    double sum = 0;
    for (size_t b = 0; b < batches.size(); ++b) {
      TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput o, s.model->Forward(batches[b]));
      sum += ForwardKl(teacher[b], o.logits).item<double>();
    }
    out.push_back(sum / static_cast<double>(batches.size()));
  }
  return out;
}

}  // namespace

absl::Status MeasureAxisKd(model::HybridLM& ranked_parent, const SearchSpace& space,
                           const std::vector<at::Tensor>& batches, Importance& importance,
                           const AxisKdLimits& limits) {
  importance.axis_kd.clear();
  importance.axis_kd_skipped.clear();
  if (batches.empty()) return absl::InvalidArgumentError("MeasureAxisKd: no batches");
  std::vector<int> widest;
  int narrower = 0;
  for (const ChoiceAxis& axis : space.axes) {
    widest.push_back(static_cast<int>(axis.widths.size()) - 1);
    narrower += widest.back();
  }
  if (narrower > limits.max_evaluations) {
    importance.axis_kd_skipped = absl::StrCat(narrower, " axis steps, over the ",
                                              limits.max_evaluations, " measured at most");
    return absl::OkStatus();
  }
  std::vector<std::vector<int>> candidates;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    for (int i = 0; i < widest[a]; ++i) {
      candidates.push_back(widest);
      candidates.back()[a] = i;
    }
  }
  std::vector<double> kd;
  try {
    torch::NoGradGuard no_grad;
    const absl::Time start = limits.now();
    TAILOR_ASSIGN_OR_RETURN(std::vector<at::Tensor> teacher, TeacherLogits(ranked_parent, batches));
    // A sliced candidate is never larger than the parent, so the parent's own forward bounds
    // each one: a large parent on a slow host is caught before the minutes are spent.
    const absl::Duration each = limits.now() - start;
    if (each * narrower > limits.max_time) {
      importance.axis_kd_skipped = absl::StrFormat(
          "%d axis steps projected at %s (%s each, the parent's own forward), over the %s "
          "allowed",
          narrower, absl::FormatDuration(absl::Trunc(each * narrower, absl::Seconds(1))),
          absl::FormatDuration(absl::Trunc(each, absl::Milliseconds(1))),
          absl::FormatDuration(limits.max_time));
      return absl::OkStatus();
    }
    TAILOR_ASSIGN_OR_RETURN(kd, KdAgainst(ranked_parent, space, candidates, batches, teacher));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("MeasureAxisKd: ", e.what_without_backtrace()));
  }
  importance.axis_kd.assign(space.axes.size(), {});
  size_t next = 0;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    for (int i = 0; i < widest[a]; ++i) importance.axis_kd[a].push_back(kd[next++]);
    importance.axis_kd[a].push_back(0.0);  // the parent's own width
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> HeldOutKd(model::HybridLM& ranked_parent,
                                              const SearchSpace& space,
                                              const std::vector<std::vector<int>>& candidates,
                                              const std::vector<at::Tensor>& eval_batches) {
  if (eval_batches.empty()) return absl::InvalidArgumentError("HeldOutKd: no evaluation batches");
  try {
    torch::NoGradGuard no_grad;
    TAILOR_ASSIGN_OR_RETURN(std::vector<at::Tensor> teacher,
                            TeacherLogits(ranked_parent, eval_batches));
    return KdAgainst(ranked_parent, space, candidates, eval_batches, teacher);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("HeldOutKd: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<Importance> RefineImportance(const Importance& importance,
                                            const SearchSpace& coarse, const SearchSpace& fine) {
  Importance out = importance;
  if (importance.axis_kd.empty()) return out;
  if (importance.axis_kd.size() != coarse.axes.size() ||
      fine.axes.size() != coarse.axes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RefineImportance: axis_kd for ", importance.axis_kd.size(), " axes, the spaces have ",
        coarse.axes.size(), " and ", fine.axes.size()));
  }
  for (size_t a = 0; a < fine.axes.size(); ++a) {
    const std::vector<int64_t>& cw = coarse.axes[a].widths;
    const std::vector<double>& kd = importance.axis_kd[a];
    if (kd.empty()) continue;
    if (kd.size() != cw.size()) {
      return absl::InvalidArgumentError(absl::StrCat("RefineImportance: ", coarse.axes[a].name,
                                                     ": ", kd.size(), " losses for ", cw.size(),
                                                     " widths"));
    }
    std::vector<double>& refined = out.axis_kd[a];
    refined.clear();
    for (int64_t w : fine.axes[a].widths) {
      const size_t hi = std::lower_bound(cw.begin(), cw.end(), w) - cw.begin();
      if (hi == cw.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "RefineImportance: ", fine.axes[a].name, ": width ", w, " is past the search's"));
      }
      if (cw[hi] == w || hi == 0) {
        refined.push_back(kd[hi]);
        continue;
      }
      const double t = static_cast<double>(w - cw[hi - 1]) /
                       static_cast<double>(cw[hi] - cw[hi - 1]);
      refined.push_back(kd[hi - 1] + t * (kd[hi] - kd[hi - 1]));
    }
  }
  return out;
}

int ThinLadder(std::vector<LadderRung>& ladder, int keep, int max_rungs) {
  const int n = static_cast<int>(ladder.size());
  max_rungs = std::max(max_rungs, 3);
  if (n <= max_rungs) return keep;
  // The slots besides `keep`, shared by the rungs on either side in proportion.
  const int slots = max_rungs - 1;
  int below = keep == 0 ? 0
                        : std::clamp(static_cast<int>(std::lround(
                                         static_cast<double>(slots) * keep / (n - 1))),
                                     1, slots - (keep < n - 1 ? 1 : 0));
  std::vector<int> kept;
  if (keep > 0) {
    for (int k : RungsToMeasure(keep + 1, below + 1)) kept.push_back(k);  // ends at keep
  } else {
    kept.push_back(0);
  }
  if (keep < n - 1) {
    const std::vector<int> above = RungsToMeasure(n - keep, slots - below + 1);
    for (size_t k = 1; k < above.size(); ++k) kept.push_back(keep + above[k]);
  }
  std::vector<LadderRung> out;
  std::vector<std::string> pending;
  int new_keep = 0;
  size_t next = 0;
  for (int i = 0; i < n; ++i) {
    if (!ladder[i].change.empty()) pending.push_back(ladder[i].change);
    if (next == kept.size() || kept[next] != i) continue;
    ++next;
    if (i == keep) new_keep = static_cast<int>(out.size());
    out.push_back(std::move(ladder[i]));
    out.back().change = JoinSteps(pending);
    pending.clear();
  }
  ladder = std::move(out);
  return new_keep;
}

std::vector<std::string> DescribeLayers(const HybridConfig& config) {
  std::vector<std::string> out;
  for (const LayerSpec& l : config.layers) out.push_back(LayerText(l));
  return out;
}

std::string DescribeArchitecture(const HybridConfig& config) {
  std::string s = absl::StrCat("hidden=", config.hidden);
  for (size_t i = 0; i < config.layers.size(); ++i) {
    absl::StrAppend(&s, " | L", i, " ", LayerText(config.layers[i]));
  }
  return s;
}

}  // namespace tailor::autocompress
