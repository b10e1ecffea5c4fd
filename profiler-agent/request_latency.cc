#include "profiler-agent/request_latency.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/relative_budget.h"
#include "common/status_macros.h"

namespace tailor::profiler {

void SetWholeRequestLatency(const std::vector<double>& request_ms, const engine::Workload& w,
                            v1::LatencyPercentile percentile, v1::ModelCosts& c) {
  const double latency = engine::Percentile(request_ms, PercentileOf(percentile));
  c.set_latency_ms(latency);
  c.set_latency_statistic(absl::StrCat("p", PercentileOf(percentile), " of ",
                                       request_ms.size(), " whole requests"));
  c.set_throughput_tokens_per_s(
      latency > 0 ? static_cast<double>(w.batch_size * w.output_tokens) * 1000.0 / latency : 0);
  c.set_request_p50_ms(engine::Percentile(request_ms, 50));
  c.set_request_p90_ms(engine::Percentile(request_ms, 90));
  c.set_request_p99_ms(engine::Percentile(request_ms, 99));
  c.set_median_request_ms(engine::Median(request_ms));
  c.set_repetitions(static_cast<int>(request_ms.size()));
}

absl::StatusOr<v1::ModelCosts> MeasureUntilCalm(
    const std::function<absl::StatusOr<VerifyRun>()>& serve,
    const costmodel::CalmServingOptions& options) {
  std::vector<v1::ModelCosts> runs;
  auto serve_once = [&]() -> absl::StatusOr<costmodel::ServedModel> {
    absl::StatusOr<VerifyRun> run = serve();
    if (!run.ok()) return run.status();
    runs.push_back(std::move(run->costs));
    return std::move(run->served);
  };
  absl::StatusOr<costmodel::CalmServed> served = costmodel::ServeUntilCalm(serve_once, options);
  if (!served.ok()) return served.status();
  v1::ModelCosts c = runs[served->kept_try];
  const costmodel::Disturbance& d = served->disturbance;
  c.set_request_spread(d.spread);
  if (d.thread_utilization > 0) c.set_thread_utilization(d.thread_utilization);
  c.set_remeasures(served->remeasures);
  c.set_disturbed(d.disturbed);
  c.set_disturbance(d.why);
  if (served->remeasures > 0) {
    absl::StrAppend(c.mutable_latency_statistic(), ", the calmest of ", runs.size(), " runs");
  }
  if (d.disturbed) absl::StrAppend(c.mutable_latency_statistic(), " (disturbed: ", d.why, ")");
  return c;
}

absl::StatusOr<v1::ModelCosts> MedianServe(const std::vector<v1::ModelCosts>& serves,
                                           absl::string_view what) {
  if (serves.empty()) return absl::InvalidArgumentError("MedianServe: no serves");
  std::vector<const v1::ModelCosts*> sorted;
  for (const v1::ModelCosts& s : serves) sorted.push_back(&s);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const v1::ModelCosts* a, const v1::ModelCosts* b) {
                     return a->latency_ms() < b->latency_ms();
                   });
  v1::ModelCosts m = *sorted[sorted.size() / 2];
  m.clear_serve_latency_ms();
  int remeasures = 0;
  std::vector<std::string> each;
  for (const v1::ModelCosts& s : serves) {
    m.add_serve_latency_ms(s.latency_ms());
    remeasures += s.remeasures();
    each.push_back(absl::StrFormat("%.2f", s.latency_ms()));
  }
  m.set_remeasures(remeasures);
  if (serves.size() > 1) {
    absl::StrAppend(m.mutable_latency_statistic(), "; the median of ", serves.size(), " ", what,
                    " (", absl::StrJoin(each, ", "), " ms)");
  }
  return m;
}

bool CloseToBudget(const v1::ModelCosts& m, const v1::Budget& budget, double band) {
  auto near = [band](double value, double bound) {
    return bound > 0 && value > 0 && std::abs(value - bound) <= band * bound;
  };
  return (budget.has_latency_ms_max() && near(m.latency_ms(), budget.latency_ms_max())) ||
         (budget.has_throughput_tokens_per_s_min() &&
          near(m.throughput_tokens_per_s(), budget.throughput_tokens_per_s_min()));
}

namespace {

// The groups the extra serves come in: at least one, at most one per serve.
int GroupCount(const CloseCalls& close) {
  return std::clamp(close.groups, 1, std::max(close.extra_serves, 1));
}

// Serves close.extra_serves more in close.groups groups, each after close.pause:
// `serve_n(n)` serves n more.
absl::Status ServeCloseCallGroups(const CloseCalls& close,
                                  const std::function<absl::Status(int)>& serve_n) {
  const int groups = GroupCount(close);
  for (int g = 0; g < groups; ++g) {
    if (close.pause > absl::ZeroDuration()) {
      if (!close.wait) {
        absl::SleepFor(close.pause);
      } else if (!close.wait(close.pause)) {
        return absl::CancelledError("cancelled while pausing between close-call serves");
      }
    }
    // Group sizes differ by at most one, the larger ones first.
    const int n = close.extra_serves / groups + (g < close.extra_serves % groups ? 1 : 0);
    TAILOR_RETURN_IF_ERROR(serve_n(n));
  }
  return absl::OkStatus();
}

// " in 2 groups after pauses of 1m" when the extra serves were spread, else "".
std::string GroupsNote(const CloseCalls& close) {
  const int groups = GroupCount(close);
  if (groups == 1 && close.pause <= absl::ZeroDuration()) return "";
  return absl::StrCat(" in ", groups, groups == 1 ? " group" : " groups", " after pauses of ",
                      absl::FormatDuration(close.pause));
}

// Marks `median` as judged over close.extra_serves more serves after the first `first`.
void NoteCloseCall(const CloseCalls& close, size_t first, v1::ModelCosts& median) {
  median.set_close_call_serves(close.extra_serves);
  absl::StrAppend(median.mutable_latency_statistic(), ", the last ", close.extra_serves,
                  GroupsNote(close),
                  absl::StrFormat(" because the first %d's median was within %.0f%% of a budget",
                                  first, 100 * close.band));
}

}  // namespace

absl::StatusOr<v1::ModelCosts> MeasureServes(
    int serves, const std::function<absl::StatusOr<v1::ModelCosts>()>& serve,
    const v1::Budget* budget, const CloseCalls& close) {
  std::vector<v1::ModelCosts> runs;
  auto serve_more = [&](int n) -> absl::Status {
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<v1::ModelCosts> run = serve();
      if (!run.ok()) return run.status();
      runs.push_back(*std::move(run));
    }
    return absl::OkStatus();
  };
  TAILOR_RETURN_IF_ERROR(serve_more(std::max(serves, 1)));
  TAILOR_ASSIGN_OR_RETURN(v1::ModelCosts median, MedianServe(runs, "serves"));
  if (budget == nullptr || close.extra_serves <= 0 ||
      !CloseToBudget(median, *budget, close.band)) {
    return median;
  }
  const size_t first = runs.size();
  TAILOR_RETURN_IF_ERROR(ServeCloseCallGroups(close, serve_more));
  TAILOR_ASSIGN_OR_RETURN(median, MedianServe(runs, "serves"));
  NoteCloseCall(close, first, median);
  return median;
}

absl::StatusOr<BesideParent> MeasureServesBesideParent(
    int serves, const std::function<absl::StatusOr<v1::ModelCosts>()>& serve_model,
    const std::function<absl::StatusOr<v1::ModelCosts>()>& serve_parent,
    const v1::Budget& budget, const CloseCalls& close) {
  std::vector<v1::ModelCosts> model_runs, parent_runs;
  auto serve_pairs = [&](int n) -> absl::Status {
    for (int i = 0; i < n; ++i) {
      TAILOR_ASSIGN_OR_RETURN(v1::ModelCosts m, serve_model());
      model_runs.push_back(std::move(m));
      TAILOR_ASSIGN_OR_RETURN(v1::ModelCosts p, serve_parent());
      parent_runs.push_back(std::move(p));
    }
    return absl::OkStatus();
  };
  auto judge = [&]() -> absl::StatusOr<BesideParent> {
    BesideParent out;
    TAILOR_ASSIGN_OR_RETURN(out.model, MedianServe(model_runs, "serves"));
    TAILOR_ASSIGN_OR_RETURN(out.parent,
                            MedianServe(parent_runs, "serves of the parent, alternating"));
    TAILOR_ASSIGN_OR_RETURN(out.budget, ResolveRelativeBudgets(budget, out.parent));
    return out;
  };
  TAILOR_RETURN_IF_ERROR(serve_pairs(std::max(serves, 1)));
  TAILOR_ASSIGN_OR_RETURN(BesideParent out, judge());
  if (close.extra_serves <= 0 || !CloseToBudget(out.model, out.budget, close.band)) return out;
  const size_t first = model_runs.size();
  TAILOR_RETURN_IF_ERROR(ServeCloseCallGroups(close, serve_pairs));
  TAILOR_ASSIGN_OR_RETURN(out, judge());
  NoteCloseCall(close, first, out.model);
  NoteCloseCall(close, first, out.parent);
  return out;
}

namespace {

// The median over the candidates of measured / predicted latency (1 when none has both).
double HostScale(const std::vector<v1::ModelCosts>& medians,
                 const std::vector<double>& predicted_ms) {
  std::vector<double> ratios;
  for (size_t i = 0; i < medians.size() && i < predicted_ms.size(); ++i) {
    if (predicted_ms[i] > 0 && medians[i].latency_ms() > 0) {
      ratios.push_back(medians[i].latency_ms() / predicted_ms[i]);
    }
  }
  if (ratios.empty()) return 1;
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  return n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
}

bool ChecksSlowHost(const SlowHostCheck& c, size_t candidates) {
  if (c.bound <= 0 || c.predicted_ms.size() != candidates) return false;
  return std::all_of(c.predicted_ms.begin(), c.predicted_ms.end(),
                     [](double p) { return p > 0; });
}

}  // namespace

double AnchorScale(const ParentAnchor& anchor, const std::vector<v1::ModelCosts>& medians) {
  if (!anchor.index.has_value() || *anchor.index >= medians.size() || anchor.reference_ms <= 0) {
    return 1;
  }
  const double now = medians[*anchor.index].latency_ms();
  return now > 0 ? anchor.reference_ms / now : 1;
}

v1::Budget BudgetAtScale(const v1::Budget& budget, double scale) {
  v1::Budget out = budget;
  if (scale <= 0) return out;
  if (out.has_latency_ms_max()) out.set_latency_ms_max(out.latency_ms_max() / scale);
  if (out.has_throughput_tokens_per_s_min()) {
    out.set_throughput_tokens_per_s_min(out.throughput_tokens_per_s_min() * scale);
  }
  return out;
}

absl::StatusOr<RoundsMeasured> MeasureInRounds(size_t candidates, int rounds,
                                               const v1::Budget& budget, const CloseCalls& close,
                                               const ServeRoundFn& serve_round,
                                               const SlowHostCheck& slow_host,
                                               const ParentAnchor& anchor) {
  using Serves = std::vector<std::vector<v1::ModelCosts>>;
  // Rounds first + 1 .. first + n of `total` of the candidates `which`, into `into`.
  auto serve = [&](const std::vector<size_t>& which, int first, int n, int total,
                   const std::string& what, Serves& into) {
    for (int round = first; round < first + n; ++round) {
      TAILOR_ASSIGN_OR_RETURN(
          std::vector<v1::ModelCosts> measured,
          serve_round(which, absl::StrCat(what, " ", round + 1, " of ", total)));
      if (measured.size() != which.size()) {
        return absl::InternalError(absl::StrCat("MeasureInRounds: ", which.size(),
                                                " candidates served, ", measured.size(),
                                                " measurements"));
      }
      for (size_t k = 0; k < which.size(); ++k) into[which[k]].push_back(std::move(measured[k]));
    }
    return absl::OkStatus();
  };
  auto medians_of = [&](const Serves& s) -> absl::StatusOr<std::vector<v1::ModelCosts>> {
    std::vector<v1::ModelCosts> out;
    for (size_t i = 0; i < candidates; ++i) {
      TAILOR_ASSIGN_OR_RETURN(v1::ModelCosts m, MedianServe(s[i], "interleaved rounds"));
      out.push_back(std::move(m));
    }
    return out;
  };
  std::vector<size_t> all(candidates);
  for (size_t i = 0; i < candidates; ++i) all[i] = i;
  const int n = std::max(rounds, 1);
  const bool check = ChecksSlowHost(slow_host, candidates);
  RoundsMeasured out;
  Serves serves;
  for (int attempt = 0;; ++attempt) {
    Serves attempt_serves(candidates);
    TAILOR_RETURN_IF_ERROR(serve(all, 0, n, n, attempt == 0 ? "round" : "round (again)",
                                 attempt_serves));
    TAILOR_ASSIGN_OR_RETURN(std::vector<v1::ModelCosts> medians, medians_of(attempt_serves));
    const double scale = check ? HostScale(medians, slow_host.predicted_ms) : 1;
    if (check) out.host_scales.push_back(scale);
    if (attempt == 0 || scale < out.host_scales[out.kept_attempt]) {
      out.kept_attempt = attempt;
      serves = std::move(attempt_serves);
      out.medians = std::move(medians);
    }
    if (!check || scale <= 1 + slow_host.bound || attempt >= slow_host.remeasures) break;
    if (slow_host.pause > absl::ZeroDuration()) {
      if (!slow_host.wait) {
        absl::SleepFor(slow_host.pause);
      } else if (!slow_host.wait(slow_host.pause)) {
        return absl::CancelledError("cancelled while pausing for a slow host");
      }
    }
  }
  std::vector<size_t> near;
  const v1::Budget judged = BudgetAtScale(budget, AnchorScale(anchor, out.medians));
  for (size_t i = 0; i < candidates; ++i) {
    if (close.extra_serves > 0 && anchor.index != i &&
        CloseToBudget(out.medians[i], judged, close.band)) {
      near.push_back(i);
    }
  }
  if (near.empty()) return out;
  out.close_calls = static_cast<int>(near.size());
  // The anchor is served in the close-call rounds too (last, as in every round): the close
  // calls' medians then span minutes its own spans, and the one figure every timed budget of
  // the pass is scaled by is measured as often as the figures it decides (a quickstart on
  // 2026-12-07 chose a rung on an anchor of 3 serves, 4% slow, against close calls of 9, and
  // verify measured it 0.2% over its budget).
  if (anchor.index.has_value()) near.push_back(*anchor.index);
  int served = 0;
  TAILOR_RETURN_IF_ERROR(ServeCloseCallGroups(close, [&](int k) {
    const absl::Status s = serve(near, served, k, close.extra_serves, "close-call round", serves);
    served += k;
    return s;
  }));
  for (size_t i : near) {
    TAILOR_ASSIGN_OR_RETURN(out.medians[i], MedianServe(serves[i], "interleaved rounds"));
    if (anchor.index != i) out.medians[i].set_close_call_serves(close.extra_serves);
  }
  return out;
}

costmodel::CalmServingOptions RequestCalmOptions(int threads) {
  costmodel::CalmServingOptions o;
  o.spread_quantile = 0.75;
  // Quiet 15-request runs of a ~55 ms llama.cpp model spread 7-16% interquartile on this
  // 2-vCPU host (docs/benchmarks.md, "Verify under interference"): 10% re-served half of them.
  o.max_spread = 0.25;
  o.threads = std::max(threads, 1);
  if (threads == 0) o.min_thread_utilization = 0;
  return o;
}

}  // namespace tailor::profiler
