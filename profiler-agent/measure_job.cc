#include "profiler-agent/measure_job.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compression/autocompress/settle.h"
#include "compression/costmodel/cost_model.h"

namespace tailor::profiler {
namespace {

autocompress::Budgets BudgetsOf(const v1::Budget& b) {
  autocompress::Budgets out;
  if (b.has_latency_ms_max()) out.latency_ms = b.latency_ms_max();
  if (b.has_memory_mib_max()) out.memory_mib = b.memory_mib_max();
  if (b.has_throughput_tokens_per_s_min()) out.throughput = b.throughput_tokens_per_s_min();
  return out;
}

costmodel::Prediction FiguresOf(const v1::ModelCosts& m) {
  costmodel::Prediction p;
  p.latency_ms = m.latency_ms();
  p.memory_mib = m.memory_mib();
  p.throughput_tokens_per_s = m.throughput_tokens_per_s();
  return p;
}

// The on-demand candidates the second pass serves, ascending: per ladder (consecutive
// candidates of one `ladder`), autocompress::RungsToRefine over what the first pass measured
// (`measured[i]`, served where `served[i]`), at most half the contract's settle_rungs over
// all ladders (at least one per ladder).
std::vector<size_t> RefinementOf(const Candidates& candidates, const std::vector<bool>& served,
                                 const std::vector<v1::ModelCosts>& measured,
                                 const v1::DeploymentContract& contract) {
  const size_t n = candidates.ladder.size();
  int ladders = 0;
  for (size_t i = 0; i < n; ++i) {
    ladders += i == 0 || candidates.ladder[i] != candidates.ladder[i - 1] ? 1 : 0;
  }
  const int cap = std::max(1, contract.search().settle_rungs() / (2 * std::max(ladders, 1)));
  std::vector<size_t> out;
  for (size_t begin = 0; begin < n;) {
    size_t end = begin;
    while (end < n && candidates.ladder[end] == candidates.ladder[begin]) ++end;
    std::vector<bool> ladder_served(served.begin() + begin, served.begin() + end);
    std::vector<costmodel::Prediction> figures;
    for (size_t i = begin; i < end; ++i) figures.push_back(FiguresOf(measured[i]));
    for (int k : autocompress::RungsToRefine(ladder_served, figures,
                                             BudgetsOf(contract.budget()),
                                             contract.search().settle_margin(), cap)) {
      out.push_back(begin + k);
    }
    begin = end;
  }
  return out;
}

// Rounds over the candidates `subset` (indices into all of them), through `serve_round`.
absl::StatusOr<RoundsMeasured> MeasureSubset(const std::vector<size_t>& subset,
                                             const v1::Budget& budget, const CloseCalls& close,
                                             const SlowHostCheck& slow_host,
                                             const ServeRoundFn& serve_round) {
  ServeRoundFn round = [&](const std::vector<size_t>& which, const std::string& label) {
    std::vector<size_t> global;
    for (size_t k : which) global.push_back(subset[k]);
    return serve_round(global, label);
  };
  return MeasureInRounds(subset.size(), kMeasureRounds, budget, close, round, slow_host);
}

}  // namespace

absl::StatusOr<Candidates> CandidatesOf(const JobContext& ctx) {
  Candidates out;
  for (const auto& [key, input] : ctx.inputs()) {
    if (input.candidates_size() == 0) continue;
    if (!out.source.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "measure: both ", out.source, " and ", key, " name candidates; measure one job's"));
    }
    out.source = key;
    out.latency_error = input.candidates_latency_error();
    for (int i = 0; i < input.candidates_size(); ++i) {
      const v1::CandidateArchitecture& c = input.candidates(i);
      absl::StatusOr<model::HybridConfig> config = model::ParseHybridConfigJson(c.config_json());
      if (!config.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "measure: ", key, ".candidates[", i, "].config_json: ", config.status().message()));
      }
      out.architectures.push_back(*std::move(config));
      out.predicted_ms.push_back(c.predicted().latency_ms());
      out.ladder.push_back(c.ladder());
      out.on_demand.push_back(c.on_demand());
    }
  }
  if (out.architectures.empty()) {
    return absl::InvalidArgumentError(
        "measure: no job it depends on names candidate architectures");
  }
  return out;
}

SlowHostCheck SlowHostCheckOf(const SlowHostCheck& agent, double latency_error) {
  if (latency_error <= 0 || agent.remeasures <= 0) return {};
  SlowHostCheck check = agent;
  check.bound = std::max(agent.bound, latency_error);
  return check;
}

absl::StatusOr<v1::MeasureResult> MeasureCandidates(const Candidates& candidates,
                                                    const v1::DeploymentContract& contract,
                                                    const CloseCalls& close,
                                                    const SlowHostCheck& slow_host,
                                                    const ServeRoundFn& serve_round) {
  const size_t n = candidates.architectures.size();
  std::vector<size_t> first;
  for (size_t i = 0; i < n; ++i) {
    if (!candidates.on_demand[i]) first.push_back(i);
  }
  if (first.empty()) {  // nothing to refine between: every candidate in one pass
    for (size_t i = 0; i < n; ++i) first.push_back(i);
  }
  SlowHostCheck check = slow_host;
  for (size_t i : first) check.predicted_ms.push_back(candidates.predicted_ms[i]);
  TAILOR_ASSIGN_OR_RETURN(RoundsMeasured m,
                          MeasureSubset(first, contract.budget(), close, check, serve_round));
  std::vector<v1::ModelCosts> measured(n);
  std::vector<bool> served(n, false);
  for (size_t k = 0; k < first.size(); ++k) {
    measured[first[k]] = std::move(m.medians[k]);
    served[first[k]] = true;
  }
  int close_calls = m.close_calls, refined = 0, passes = 0;
  // Each further pass narrows the gap the last one left, down to neighbouring rungs.
  for (; passes < kMaxRefinePasses; ++passes) {
    const std::vector<size_t> refine = RefinementOf(candidates, served, measured, contract);
    if (refine.empty()) break;
    TAILOR_ASSIGN_OR_RETURN(RoundsMeasured more,
                            MeasureSubset(refine, contract.budget(), close, {}, serve_round));
    for (size_t k = 0; k < refine.size(); ++k) {
      measured[refine[k]] = std::move(more.medians[k]);
      served[refine[k]] = true;
    }
    close_calls += more.close_calls;
    refined += static_cast<int>(refine.size());
  }
  v1::MeasureResult r;
  for (size_t i = 0; i < n; ++i) {
    *r.add_measured() = std::move(measured[i]);
    r.add_served(served[i]);
  }
  r.set_refined(refined);
  r.set_refine_passes(passes);
  r.set_rounds(kMeasureRounds);
  if (close_calls > 0) {
    r.set_close_call_rounds(close.extra_serves);
    r.set_close_call_band(close.band);
  }
  for (double scale : m.host_scales) r.add_host_scales(scale);
  if (!m.host_scales.empty()) {
    r.set_kept_attempt(m.kept_attempt);
    r.set_slow_host_bound(check.bound);
    r.set_slow_host_pause_s(absl::ToDoubleSeconds(check.pause));
  }
  return r;
}

std::string MeasureSummary(const v1::MeasureResult& r, const std::string& source) {
  int served = 0, close_calls = 0;
  for (int i = 0; i < r.measured_size(); ++i) {
    served += i < r.served_size() && r.served(i) ? 1 : 0;
    close_calls += r.measured(i).close_call_serves() > 0 ? 1 : 0;
  }
  std::string out = absl::StrCat(served, " of the ", r.measured_size(), " candidates of ",
                                 source, " measured");
  if (r.refined() > 0) {
    const int passes = std::max(r.refine_passes(), 1);  // an agent that predates the field
    absl::StrAppend(&out, ", ", r.refined(), " of them in ", passes,
                    passes == 1 ? " further pass" : " further passes",
                    " where the budgets fell between two");
  }
  if (r.host_scales_size() > 1) {
    absl::StrAppend(&out, "; served again on a slow host (measured / predicted ",
                    absl::StrJoin(r.host_scales(), ", ",
                                  [](std::string* s, double scale) {
                                    absl::StrAppend(s, absl::StrFormat("x%.3f", scale));
                                  }),
                    absl::StrFormat(" against a bound of x%.3f; kept pass %d)",
                                    1 + r.slow_host_bound(), r.kept_attempt() + 1));
  }
  if (close_calls > 0) {
    absl::StrAppend(&out, ", ", close_calls, " of them ", r.close_call_rounds(),
                    " times more (close calls)");
  }
  return out;
}

}  // namespace tailor::profiler
