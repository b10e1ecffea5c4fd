#include "compression/autocompress/settle.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tailor::autocompress {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 1.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median measured / predicted over the rungs where both are positive (1 when none are).
using Resource = double costmodel::Prediction::*;

double MedianRatio(const std::vector<MeasuredRung>& rungs, Resource field) {
  std::vector<double> ratios;
  for (const MeasuredRung& r : rungs) {
    const double p = r.predicted.*field, m = r.measured.*field;
    if (p > 0 && m > 0 && std::isfinite(m / p)) ratios.push_back(m / p);
  }
  return Median(std::move(ratios));
}

// Pool adjacent violators: the non-decreasing sequence closest to `v` in least squares.
std::vector<double> NonDecreasing(const std::vector<double>& v) {
  struct Block {
    double sum;
    int n;
    double mean() const { return sum / n; }
  };
  std::vector<Block> blocks;
  for (double x : v) {
    blocks.push_back({x, 1});
    while (blocks.size() > 1 && blocks[blocks.size() - 2].mean() > blocks.back().mean()) {
      blocks[blocks.size() - 2].sum += blocks.back().sum;
      blocks[blocks.size() - 2].n += blocks.back().n;
      blocks.pop_back();
    }
  }
  std::vector<double> out;
  for (const Block& b : blocks) out.insert(out.end(), b.n, b.mean());
  return out;
}

// The measurements of one resource made monotone along the ladder (a wider rung never costs
// less; rising for a cost, falling for throughput), written into `corrected` through `field`;
// rungs without a measurement are left out of the fit and keep 0.
void MonotoneFit(const std::vector<MeasuredRung>& rungs, bool rising, Resource field,
                 std::vector<costmodel::Prediction>& corrected) {
  std::vector<size_t> at;
  std::vector<double> values;
  for (size_t i = 0; i < rungs.size(); ++i) {
    const double m = rungs[i].measured.*field;
    if (!(m > 0)) continue;
    at.push_back(i);
    values.push_back(rising ? m : -m);
  }
  const std::vector<double> fit = NonDecreasing(values);
  for (size_t k = 0; k < at.size(); ++k) corrected[at[k]].*field = rising ? fit[k] : -fit[k];
}

// Every budget met by `p` after tightening the timed ones by `margin` (the ceiling down, the
// floor up). Memory takes no margin: the engines' allocations do not move from serve to
// serve, and the measure job's figure for a rung is verify's for the student of that shape
// (2.90 MiB in both on 2026-12-05), so a margin there only threw budget away (a rung at
// 2.96 of 3.0 MiB refused for 3% of noise that memory does not have).
bool Within(const costmodel::Prediction& p, const Budgets& b, double margin) {
  if (b.latency_ms && !(p.latency_ms <= *b.latency_ms * (1.0 - margin))) return false;
  if (b.memory_mib && !(p.memory_mib <= *b.memory_mib)) return false;
  if (b.throughput && !(p.throughput_tokens_per_s >= *b.throughput * (1.0 + margin))) {
    return false;
  }
  return true;
}

// Every budgeted resource has a measurement (a missing one reads 0, which a ceiling would
// take for a fit).
bool Measured(const costmodel::Prediction& m, const Budgets& b) {
  return (!b.latency_ms || m.latency_ms > 0) && (!b.memory_mib || m.memory_mib > 0) &&
         (!b.throughput || m.throughput_tokens_per_s > 0);
}

// How far `p` is over the budgets: the largest share of a budget (a floor's: budget / value),
// 0 with no budget; unmeasured resources read as infinitely over.
double Excess(const costmodel::Prediction& p, const Budgets& b) {
  double e = 0;
  auto over = [&e](double share) { e = std::max(e, std::isfinite(share) ? share : HUGE_VAL); };
  if (b.latency_ms) over(p.latency_ms > 0 ? p.latency_ms / *b.latency_ms : HUGE_VAL);
  if (b.memory_mib) over(p.memory_mib > 0 ? p.memory_mib / *b.memory_mib : HUGE_VAL);
  if (b.throughput) {
    over(p.throughput_tokens_per_s > 0 ? *b.throughput / p.throughput_tokens_per_s : HUGE_VAL);
  }
  return e;
}

// Nothing fits: the rung of the search's own ladder (the first `own` rungs) whose fitted
// figures are least over the budgets, the largest of those tied. The fit pools rungs the
// measurements cannot tell apart (a wider rung measured no dearer than a narrower one), and
// between rungs of one cost the wider keeps more of the parent: on the quickstart's parent
// in llama.cpp (2026-12-07) the descent's bottom, every MLP at 64 of 256 units, measured
// 11.47 ms and the search's choice, MLPs at 128-192, 10.59, and the smallest rung then
// verified 15% over the budget where the choice verified at 98-100% of it.
int LeastOver(const std::vector<costmodel::Prediction>& fitted, size_t own, const Budgets& b) {
  int best = 0;
  double least = HUGE_VAL;
  for (size_t i = 0; i < own; ++i) {
    const double e = Excess(fitted[i], b);
    // Unmeasured rungs never win (with none measured, the smallest stays).
    if (std::isfinite(e) && e <= least * (1 + 1e-9)) {
      best = static_cast<int>(i);
      least = std::min(least, e);
    }
  }
  return best;
}

}  // namespace

std::vector<int> RungsToMeasure(int ladder_size, int max_rungs) {
  std::vector<int> out;
  if (ladder_size <= 0 || max_rungs <= 0) return out;
  if (max_rungs == 1) return {0};
  const int n = std::min(ladder_size, max_rungs);
  for (int i = 0; i < n; ++i) {
    // Rounded even spacing over [0, ladder_size - 1]; strictly increasing because n <= size.
    const int rung = static_cast<int>(std::lround(static_cast<double>(i) * (ladder_size - 1) /
                                                  std::max(n - 1, 1)));
    if (out.empty() || rung > out.back()) out.push_back(rung);
  }
  return out;
}

std::string JoinSteps(const std::vector<std::string>& changes) {
  struct Step {
    std::string axis;  // empty: not a plain step, `text` kept as written
    int64_t from = 0, to = 0;
    std::string text;
  };
  std::vector<Step> steps;
  for (const std::string& c : changes) {
    const std::vector<std::string> t = absl::StrSplit(c, ' ');
    Step s;
    s.text = c;
    if (t.size() == 4 && t[2] == "->" && absl::SimpleAtoi(t[1], &s.from) &&
        absl::SimpleAtoi(t[3], &s.to)) {
      s.axis = t[0];
      auto same = std::find_if(steps.begin(), steps.end(),
                               [&](const Step& o) { return o.axis == s.axis; });
      if (same != steps.end()) {
        same->to = s.to;
        continue;
      }
    }
    steps.push_back(std::move(s));
  }
  return absl::StrJoin(steps, ", ", [](std::string* out, const Step& s) {
    if (s.axis.empty()) {
      absl::StrAppend(out, s.text);
    } else {
      absl::StrAppend(out, s.axis, " ", s.from, " -> ", s.to);
    }
  });
}

std::vector<int> RungsToRefine(const std::vector<bool>& served,
                               const std::vector<costmodel::Prediction>& measured,
                               const Budgets& budgets, double margin, int cap) {
  const int n = static_cast<int>(std::min(served.size(), measured.size()));
  int below = -1;  // the largest served rung within
  for (int i = 0; i < n; ++i) {
    if (served[i] && Measured(measured[i], budgets) && Within(measured[i], budgets, margin)) {
      below = i;
    }
  }
  if (below < 0) return {};
  int above = below + 1;  // the next served rung
  while (above < n && !served[above]) ++above;
  if (above >= n) return {};  // nothing served above it: the top (or no rung) is within
  // `cap` rungs splitting [below, above] into equal parts: each pass narrows the gap by as
  // much as it can (the gap's own ends would leave most of it for the next).
  const int span = above - below;
  std::vector<int> out;
  if (cap <= 0) return out;
  const int k = std::min(cap, span - 1);
  for (int j = 1; j <= k; ++j) {
    const int rung =
        below + static_cast<int>(std::lround(static_cast<double>(span) * j / (k + 1)));
    if (rung > below && rung < above && (out.empty() || rung > out.back())) out.push_back(rung);
  }
  return out;
}

SettleDecision ChooseRung(const std::vector<MeasuredRung>& rungs, const Budgets& budgets,
                          double margin) {
  SettleDecision d;
  using costmodel::Prediction;
  d.latency_scale = MedianRatio(rungs, &Prediction::latency_ms);
  d.memory_scale = MedianRatio(rungs, &Prediction::memory_mib);
  d.throughput_scale = MedianRatio(rungs, &Prediction::throughput_tokens_per_s);
  d.corrected.assign(rungs.size(), Prediction());
  d.fits.assign(rungs.size(), false);
  int own_pick = -1;
  for (size_t begin = 0; begin < rungs.size();) {
    size_t end = begin;
    while (end < rungs.size() && rungs[end].ladder == rungs[begin].ladder) ++end;
    const std::vector<MeasuredRung> ladder(rungs.begin() + begin, rungs.begin() + end);
    std::vector<Prediction> fitted(ladder.size());
    MonotoneFit(ladder, true, &Prediction::latency_ms, fitted);
    MonotoneFit(ladder, true, &Prediction::memory_mib, fitted);
    MonotoneFit(ladder, false, &Prediction::throughput_tokens_per_s, fitted);
    int largest = -1;
    for (size_t i = begin; i < end; ++i) {
      d.corrected[i] = fitted[i - begin];
      d.fits[i] = Measured(rungs[i].measured, budgets) &&
                  Within(d.corrected[i], budgets, margin) &&
                  Within(rungs[i].measured, budgets, 0.0);
      if (d.fits[i]) largest = static_cast<int>(i);
    }
    if (largest >= 0) {
      d.picks.push_back(largest);
      if (rungs[begin].ladder == 0) own_pick = largest;
    }
    begin = end;
  }
  if (d.picks.empty()) {
    size_t own = 0;
    while (own < rungs.size() && rungs[own].ladder == rungs.front().ladder) ++own;
    d.chosen = LeastOver(d.corrected, own, budgets);
    const MeasuredRung& c = rungs.empty() ? MeasuredRung() : rungs[d.chosen];
    const std::string where = c.step == 0  ? "the search's choice"
                              : c.step < 0 ? "below the search's choice"
                                           : "above the search's choice";
    d.reason = absl::StrFormat("no measured rung fits every budget less %.1f%%: ", 100 * margin);
    if (d.chosen == 0) {
      absl::StrAppend(&d.reason, c.step == 0 ? "kept the search's choice"
                                             : "took the smallest, below the search's choice");
    } else {
      absl::StrAppend(&d.reason, "took rung ", d.chosen + 1, " (", where,
                      "), the largest of those the measurements place least over them");
    }
    return d;
  }
  d.chosen = own_pick >= 0 ? own_pick : d.picks.front();
  const int n = static_cast<int>(rungs.size());
  const bool last = d.chosen + 1 == n || rungs[d.chosen + 1].ladder != rungs[d.chosen].ladder;
  d.reason = last ? absl::StrFormat("the largest measured rung (%d of %d) fits every budget "
                                    "less %.1f%%",
                                    d.chosen + 1, n, 100 * margin)
                  : absl::StrFormat("rung %d of %d is the largest that fits every budget less "
                                    "%.1f%%; the next is over",
                                    d.chosen + 1, n, 100 * margin);
  if (rungs[d.chosen].ladder > 0) {
    absl::StrAppend(&d.reason, " (on branch ", rungs[d.chosen].ladder,
                    "; the search's own ladder has no fitting rung)");
  }
  return d;
}

void ChooseAmongPicks(const std::vector<double>& kd_loss, SettleDecision& d) {
  if (kd_loss.size() != d.picks.size() || d.picks.size() < 2) return;
  size_t best = 0;
  for (size_t i = 1; i < kd_loss.size(); ++i) {
    if (kd_loss[i] < kd_loss[best]) best = i;
  }
  d.chosen = d.picks[best];
  std::vector<std::string> losses;
  for (size_t i = 0; i < kd_loss.size(); ++i) {
    losses.push_back(absl::StrFormat("rung %d %.4f", d.picks[i] + 1, kd_loss[i]));
  }
  d.reason = absl::StrCat("the fitting rung of lowest held-out KD loss among each ladder's "
                          "largest fitting (",
                          absl::StrJoin(losses, ", "), ")");
}

}  // namespace tailor::autocompress
