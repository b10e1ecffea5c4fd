#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_SETTLE_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_SETTLE_H_

// The measured settle (docs/autocompress.md, "measure and settle"): the search plans against
// the contract's budgets less the cost table's held-out error, so its student lands where
// the table's error for that architecture puts it, typically 5-15% short of the budget, and
// sometimes over. The settle measures instead of trusting: a growth ladder from the search's
// choice toward the budgets (GrowthLadder, uniform.h) is served in the target engine, rung by
// rung, and the student is the largest rung the measurements place within the budgets.
//
// One measurement carries the machine's noise (about +-5% for a ~20 ms request on a shared
// 2-vCPU host), and the table's error is not one factor: on the quickstart's parent, adding
// back a removed attention layer was predicted at +2.7 ms and measured at +0.6 ms, while its
// MLP steps were predicted within 1-3%. So the rungs are judged on their measurements, not on
// a rescaled table: each resource's measurements are made monotone along the ladder (a wider
// rung never costs less; pool-adjacent-violators, so one lucky low measurement is averaged
// with the rung below it), and a rung fits when that fitted value is within each budget (the
// timed ones less `margin`; memory, which does not move from serve to serve, takes none) AND
// its own measurement is within the budget. The median measured / predicted
// ratio over the rungs is kept as a diagnostic (how far the table is off around the choice).
//
// One ladder grows one axis step at a time, so a big global step (the hidden width) can stop
// it well short of the budget; branch ladders (BranchLadders, uniform.h) take that step and
// give back elsewhere. Rungs of different ladders are not nested, so "largest" does not
// order them: each ladder's largest fitting rung is a pick, and between picks the settle
// job takes the lowest held-out KD loss (HeldOutKd, as the uniform baseline ranks its
// candidates).
//
// No LibTorch here.

#include <string>
#include <vector>

#include "compression/autocompress/search.h"
#include "compression/costmodel/cost_model.h"

namespace tailor::autocompress {

// Which of a ladder of `ladder_size` rungs to measure when at most `max_rungs` may be:
// evenly spaced, the first (the search's choice) and the last always included, ascending.
std::vector<int> RungsToMeasure(int ladder_size, int max_rungs);

// The measure job's second pass over one ladder of `served.size()` rungs, ascending:
// `served[i]` says rung i was served in the first pass, with figures `measured[i]`. Where the
// budgets fall between two served rungs, only the rungs between them can use more of it: the
// unserved rungs strictly between the largest served rung whose own measurement is within
// every budget (the timed ones less `margin`, as ChooseRung) and the next served rung (which
// is not), at most `cap` of them, splitting the span between those two into equal parts
// (every rung of a gap of `cap` or fewer), ascending; the measure job calls it again after
// each pass. None when the ladder's top is within, no served rung is, or the gap is empty.
std::vector<int> RungsToRefine(const std::vector<bool>& served,
                               const std::vector<costmodel::Prediction>& measured,
                               const Budgets& budgets, double margin, int cap);

// `changes` ("layers[2].mlp_ffn 64 -> 80", ...) joined with ", ", the steps of one axis merged
// into one at the place of its first ("layers[2].mlp_ffn 64 -> 128" for four fine steps), so
// a rung that stands for many unserved fine steps reads as the widths it changed; a change of
// another form ("... (grown back)", a branch's jump) is kept as written.
std::string JoinSteps(const std::vector<std::string>& changes);

struct MeasuredRung {
  costmodel::Prediction predicted;
  // What the engine measured (latency_ms at the contract's percentile, memory_mib,
  // throughput_tokens_per_s); a resource the contract does not budget may be 0.
  costmodel::Prediction measured;
  int ladder = 0;  // 0: the search's own ladder; k > 0: its k-th branch
  int step = 0;    // on the search's ladder: steps above its choice (negative below)
};

struct SettleDecision {
  int chosen = 0;  // index into the measured rungs
  // Median measured / predicted over the rungs, per resource (1 when unmeasured).
  double latency_scale = 1, memory_scale = 1, throughput_scale = 1;
  // Per rung: the measurements made monotone along the ladder (0 where unmeasured).
  std::vector<costmodel::Prediction> corrected;
  std::vector<bool> fits;                        // per rung
  // Per ladder that has one, ascending by ladder: its largest fitting rung.
  std::vector<int> picks;
  std::string reason;
};

// `rungs` grouped by ladder, each ladder ascending in size; `budgets` are the CONTRACT's (not
// the planning budgets); `margin` in [0, 1). Fitted per ladder; a rung without a measurement
// of a budgeted resource never fits. The chosen rung is the search's ladder's pick; without
// one, the first pick of a branch; without any, rung 0 (the smallest measured: the search's
// own choice or the bottom of the descent below it, which verification then judges). With
// several picks, ChooseAmongPicks decides.
SettleDecision ChooseRung(const std::vector<MeasuredRung>& rungs, const Budgets& budgets,
                          double margin);

// `kd_loss[i]` is pick i's held-out KD loss: the lowest wins (ties: the earlier ladder), and
// the reason says so. Nothing changes unless there is one loss per pick and two picks or more.
void ChooseAmongPicks(const std::vector<double>& kd_loss, SettleDecision& d);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_SETTLE_H_
