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
// with the rung below it), and a rung fits when that fitted value is within each budget less
// `margin` AND its own measurement is within the budget. The median measured / predicted
// ratio over the rungs is kept as a diagnostic (how far the table is off around the choice).
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

struct MeasuredRung {
  costmodel::Prediction predicted;
  // What the engine measured (latency_ms at the contract's percentile, memory_mib,
  // throughput_tokens_per_s); a resource the contract does not budget may be 0.
  costmodel::Prediction measured;
};

struct SettleDecision {
  int chosen = 0;  // index into the measured rungs
  // Median measured / predicted over the rungs, per resource (1 when unmeasured).
  double latency_scale = 1, memory_scale = 1, throughput_scale = 1;
  // Per rung: the measurements made monotone along the ladder (0 where unmeasured).
  std::vector<costmodel::Prediction> corrected;
  std::vector<bool> fits;                        // per rung
  std::string reason;
};

// `rungs` ascending in size (a growth ladder); `budgets` are the CONTRACT's (not the
// planning budgets); `margin` in [0, 1). A rung without a measurement of a budgeted resource
// never fits. The chosen rung is the largest that fits; when none does, the first (the
// search's own choice, which verification then judges).
SettleDecision ChooseRung(const std::vector<MeasuredRung>& rungs, const Budgets& budgets,
                          double margin);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_SETTLE_H_
