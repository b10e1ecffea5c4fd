#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_UNIFORM_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_UNIFORM_H_

// The Minitron-style uniform baseline (the campaign's `baseline_uniform` job) and the
// hard-architecture budget checks both AutoCompress jobs share.
//
// Uniform baseline: one width LEVEL per axis kind (hidden, Mamba heads, attention heads per
// group, experts, expert FFN, shared FFN, MLP FFN), applied to every layer. Kind k has n_k
// levels, n_k = the most non-zero widths any of its axes has; level i keeps the fraction
// i / n_k of each axis, i.e. on every axis of the kind the non-zero width closest to
// full * i / n_k (ties to the wider), so every layer takes the same relative step. Width 0
// (removing layers) is never used: a uniform baseline prunes width, not depth. The grid of
// level combinations is enumerated, every candidate priced with CostModel::Predict, those
// meeting every budget kept, the largest few (by parameter count) scored by the KD loss of
// the sliced student against the ranked parent on held-out batches (no training), and the
// lowest loss wins.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "compression/autocompress/ranking.h"
#include "compression/autocompress/search.h"
#include "compression/autocompress/space.h"
#include "compression/costmodel/cost_model.h"
#include "compression/model/hybrid_lm.h"

namespace tailor::autocompress {

// "latency_ms 12.5 > latency_ms_max 10" per violated budget; empty when all are met.
std::vector<std::string> BudgetViolations(const costmodel::Prediction& p, const Budgets& budgets);

// FAILED_PRECONDITION when the cheapest architecture of the space (the narrowest global
// widths, every per-layer axis at its first choice, i.e. removed where removal is allowed)
// violates a budget: the cost model grows with every width (up to the small interaction
// correction), so then no architecture of the space meets it. The message names the budget
// and the cheapest predicted value.
absl::Status CheckBudgetsReachable(const model::HybridConfig& parent, const SearchSpace& space,
                                   const costmodel::CostModel& model, const Budgets& budgets);

struct UniformCandidate {
  std::vector<int> indices;  // one per axis of the space
  std::string levels;        // "hidden=3/4 attention_heads=2/2 ...", for reports
  model::HybridConfig config;
  costmodel::Prediction predicted;
  int64_t parameters = 0;
  double kd_loss = 0.0;  // set by SelectUniform for scored candidates
};

struct UniformGrid {
  int64_t grid_size = 0;                  // distinct uniform architectures
  std::vector<UniformCandidate> fitting;  // meeting every budget: most parameters first
};

// FAILED_PRECONDITION when no uniform architecture meets every budget: names each budget no
// candidate meets with the smallest (largest for throughput) predicted value, or, when each
// is met by some candidate but none meets all, every budget with its best value.
absl::StatusOr<UniformGrid> UniformCandidates(const model::HybridConfig& parent,
                                              const SearchSpace& space,
                                              const costmodel::CostModel& model,
                                              const Budgets& budgets);

struct UniformOptions {
  int keep = 3;  // fitting candidates scored (the largest by parameter count)
};

struct UniformResult {
  UniformCandidate best;                 // lowest KD loss among the scored
  std::vector<UniformCandidate> scored;  // most parameters first, kd_loss set
  int64_t grid_size = 0;
  int64_t fitting = 0;
  int64_t eval_tokens = 0;  // tokens run through the scored students
};

// `ranked_parent` is the teacher and the slicing source; `eval_batches` are token batches
// [B, T] held out from training.
absl::StatusOr<UniformResult> SelectUniform(model::HybridLM& ranked_parent,
                                            const SearchSpace& space,
                                            const costmodel::CostModel& model,
                                            const Budgets& budgets,
                                            const std::vector<at::Tensor>& eval_batches,
                                            const UniformOptions& options = {});

// Greedy repair of a hard architecture that violates a budget (the search's argmax can: the
// penalty is on soft samples and has a dead zone only below the budget). Repeatedly takes
// the one-step shrink (one axis to its next narrower choice) with the smallest importance
// lost per unit of budget excess saved, until every budget is met:
//   lost  = with Importance::axis_kd measured (MeasureAxisKd): the rise in KD loss of that
//           axis's step, measured alone from the parent; else the importance of the
//           units the shrink removes / the axis's total importance (ranking scores of the
//           ranked parent; without them, the fraction of the width)
//   saved = sum over violated budgets of the drop in rho (cost / budget, budget / cost for
//           the throughput floor)
// Then, since one large shrink (say of the hidden width) can overshoot, shrunk axes are
// grown back one step at a time (never past the given choice) while every budget stays met,
// the most importance regained per unit of rho added first.
// FAILED_PRECONDITION when no shrink lowers the excess any more.
struct RepairResult {
  std::vector<int> indices;
  costmodel::Prediction predicted;
  bool repaired = false;  // at least one shrink was needed
  // In order: "layers[3].mlp_ffn 256 -> 192", "hidden 96 -> 128 (grown back)".
  std::vector<std::string> changes;
};
// `keep_at_least`, when given, is a choice index per axis the repair never shrinks below.
absl::StatusOr<RepairResult> RepairToBudgets(const model::HybridConfig& parent,
                                             const SearchSpace& space,
                                             const costmodel::CostModel& model,
                                             const Budgets& budgets, std::vector<int> indices,
                                             const Importance* importance = nullptr,
                                             const std::vector<int>* keep_at_least = nullptr);

// A growth ladder for the measured settle (settle.h): `indices` first, then each step the
// repair's grow-back would take toward the parent's widths while every budget of `ceiling`
// holds, the most importance regained per unit of rho added first; each rung is the one
// before it plus one axis step. Only the first rung when `indices` already violates
// `ceiling`. (Growing on the table's word alone was tried and dropped, docs/autocompress.md:
// the ladder's rungs are measured before one is taken.)
struct LadderRung {
  std::vector<int> indices;
  costmodel::Prediction predicted;
  std::string change;  // "layers[2].mlp_ffn 192 -> 256"; empty for the first rung
};
absl::StatusOr<std::vector<LadderRung>> GrowthLadder(const model::HybridConfig& parent,
                                                     const SearchSpace& space,
                                                     const costmodel::CostModel& model,
                                                     const Budgets& ceiling,
                                                     std::vector<int> indices,
                                                     const Importance* importance = nullptr);

// The settle's ladder below the search's choice, for a table that is optimistic there: the
// repair's shrinks from `indices` (the least importance per unit of excess first) until every
// budget of `target` holds or nothing narrower lowers the excess, then the repair's grow-back
// toward `indices` while `target` holds. A shrink that lands within every budget of
// `overshoot` (below the target) is taken only when no other lowers the excess: the bottom is
// the largest architecture the repair finds under the target, not the first big step across
// it. Returned bottom first as a ladder that grows back up to `indices` itself (its last
// rung; the only one when `indices` already meets `target`), each rung one axis step above
// the one below.
absl::StatusOr<std::vector<LadderRung>> DescentLadder(const model::HybridConfig& parent,
                                                      const SearchSpace& space,
                                                      const costmodel::CostModel& model,
                                                      const Budgets& target,
                                                      const Budgets& overshoot,
                                                      std::vector<int> indices,
                                                      const Importance* importance = nullptr);

// The ladder's steps are one axis step each, so a global axis whose next width is a big step
// (hidden 96 -> 128 on the quickstart's parent: +25% of the request's latency) blocks it well
// short of the budget. A branch takes that step anyway: from the ladder's rung BranchStart
// picks, one blocked global axis (or one tied across layers) is stepped, the other axes are
// repaired down to `floor` (RepairToBudgets, the stepped axis held at its new width), and the
// result is grown toward `ceiling` as GrowthLadder grows. Its first rung's change names the
// jump and the repair. Branches whose repair cannot reach `floor` are left out; at most
// `max_branches`, in the order of the space's axes.
//
// BranchStart: the ladder's largest rung the table places within the contract's budgets, not
// its top. A ladder grows toward budgets widened by the table's error, so it may take a
// global step only past the budget, on top of every cheaper step: on the quickstart's
// Nemotron-H parent (2026-12-06) its top stepped the Mamba heads 2 -> 4 after two MLP widths
// (predicted 23.3 ms of 22), so a branch from the top had nothing left to step. Sliced
// untrained, the Mamba heads halved with the MLPs whole cost a held-out KD loss of 2.33, the
// MLPs and attention heads halved with the Mamba heads whole 0.75, and the distilled student
// (Mamba heads halved) lost to the uniform baseline (Mamba heads whole): KD 0.349 against
// 0.021. From the largest rung within the budgets the Mamba step is a branch that pays for it
// elsewhere (there: hidden 128 -> 64, grown back to 96), and the settle compares the picks on
// held-out KD (the branch's 1.02 against the ladder's 2.40; distilled, KD 0.031).
struct Branch {
  int axis = -1;  // the stepped axis
  std::vector<LadderRung> ladder;
};
absl::StatusOr<std::vector<Branch>> BranchLadders(const model::HybridConfig& parent,
                                                  const SearchSpace& space,
                                                  const costmodel::CostModel& model,
                                                  const Budgets& floor, const Budgets& ceiling,
                                                  const std::vector<int>& top_rung,
                                                  int max_branches,
                                                  const Importance* importance = nullptr);

// The index of the last rung of `ladder` whose prediction meets every budget; 0 when none does.
int BranchStart(const std::vector<LadderRung>& ladder, const Budgets& budgets);

// Fills importance.axis_kd: for every axis and every narrower choice, the KD loss on
// `batches` (as HeldOutKd takes it) of the ranked parent with only that axis at that choice
// (the search job passes the repair's importance batches). Why: the unit scores are shares
// within one axis, so halving the Mamba heads of every Mamba layer (one global axis) weighed
// as much as halving one MLP; on the quickstart's Nemotron-H parent the repair
// then halved the Mamba heads, which cost ~3x the KD of halving MLP and attention widths
// (uniform baseline's scoring, 2026-12-06), and its student lost to the uniform baseline.
// One sliced forward per choice: skipped (axis_kd left empty, the unit scores used, the
// reason in importance.axis_kd_skipped) when the space has more than `max_evaluations`
// narrower choices, or when that many forwards, each priced at the parent's own forward over
// `batches` (timed first), would take longer than `max_time`.
struct AxisKdLimits {
  int max_evaluations = 256;
  // A bounded share of a search: the quickstart's parent needs ~2 s in all; a 1B parent on
  // a 2-core CPU would need hours, and its search is not what such a host is for anyway.
  absl::Duration max_time = absl::Minutes(10);
  std::function<absl::Time()> now = [] { return absl::Now(); };  // tests inject their own
};
absl::Status MeasureAxisKd(model::HybridLM& ranked_parent, const SearchSpace& space,
                           const std::vector<at::Tensor>& batches, Importance& importance,
                           const AxisKdLimits& limits = {});

// `importance` for the ladders of `fine` (RefineSpace of `coarse`, the space axis_kd was
// measured on): a width between two measured ones takes the linear interpolation, in width,
// of their KD losses (serving a sliced student per fine width would multiply MeasureAxisKd's
// forwards by the fine steps for a ranking that interpolation keeps). The unit scores are
// per unit and carry over as they are; so does an axis_kd that is empty.
absl::StatusOr<Importance> RefineImportance(const Importance& importance,
                                            const SearchSpace& coarse, const SearchSpace& fine);

// At most `max_rungs` of `ladder` (>= 3), evenly spaced on each side of rung `keep` (the
// search's choice), which stays with the first and last rungs; each dropped rung's change is
// joined into the next kept rung's. Returns `keep`'s index in the thinned ladder. Why: every
// rung is a candidate config in the search job's output (bounded by the coordinator's
// max_result_bytes), and a fine ladder on a deep parent can grow hundreds of rungs.
int ThinLadder(std::vector<LadderRung>& ladder, int keep, int max_rungs);

// The mean KL(teacher || student) over `eval_batches` of each architecture (choice indices)
// sliced from `ranked_parent` without training: how the uniform baseline ranks its
// candidates, and how the settle compares rungs of different ladders.
absl::StatusOr<std::vector<double>> HeldOutKd(model::HybridLM& ranked_parent,
                                              const SearchSpace& space,
                                              const std::vector<std::vector<int>>& candidates,
                                              const std::vector<at::Tensor>& eval_batches);

// One line for reports: "hidden=96 | L0 attention heads=4,kv=2 | L1 removed | ...".
std::string DescribeArchitecture(const model::HybridConfig& config);
// One string per layer, "attention heads=4,kv=2,head_dim=32" or "<kind> removed".
std::vector<std::string> DescribeLayers(const model::HybridConfig& config);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_UNIFORM_H_
