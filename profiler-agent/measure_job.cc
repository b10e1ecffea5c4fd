#include "profiler-agent/measure_job.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/relative_budget.h"
#include "common/status_macros.h"
#include "compression/autocompress/settle.h"
#include "compression/costmodel/cost_model.h"
#include "methods/autocompress/contract_budgets.h"

namespace tailor::profiler {
namespace {

using methods::ContractBudgets;

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
                                             ContractBudgets(contract.budget()),
                                             contract.search().settle_margin(), cap)) {
      out.push_back(begin + k);
    }
    begin = end;
  }
  return out;
}

// Rounds over the candidates `subset` (indices into all of them), through `serve_round`; with
// `reference_ms`, the subset's last is the parent, anchoring the rest (ParentAnchor).
absl::StatusOr<RoundsMeasured> MeasureSubset(const std::vector<size_t>& subset,
                                             const v1::Budget& budget, const CloseCalls& close,
                                             const SlowHostCheck& slow_host,
                                             const ServeRoundFn& serve_round,
                                             std::optional<double> reference_ms) {
  ServeRoundFn round = [&](const std::vector<size_t>& which, const std::string& label) {
    std::vector<size_t> global;
    for (size_t k : which) global.push_back(subset[k]);
    return serve_round(global, label);
  };
  ParentAnchor anchor;
  if (reference_ms.has_value()) anchor = {subset.size() - 1, *reference_ms};
  return MeasureInRounds(subset.size(), kMeasureRounds, budget, close, round, slow_host, anchor);
}

// `c`'s timed figures times `scale` (throughput over it), the statistic saying why.
void ScaleTimed(double scale, double parent_ms, double reference_ms, v1::ModelCosts& c) {
  auto times = [scale](double v) { return v * scale; };
  if (c.has_latency_ms()) c.set_latency_ms(times(c.latency_ms()));
  if (c.has_request_p50_ms()) c.set_request_p50_ms(times(c.request_p50_ms()));
  if (c.has_request_p90_ms()) c.set_request_p90_ms(times(c.request_p90_ms()));
  if (c.has_request_p99_ms()) c.set_request_p99_ms(times(c.request_p99_ms()));
  if (c.has_median_request_ms()) c.set_median_request_ms(times(c.median_request_ms()));
  if (c.has_prefill_ms()) c.set_prefill_ms(times(c.prefill_ms()));
  if (c.has_decode_ms()) c.set_decode_ms(times(c.decode_ms()));
  if (c.has_throughput_tokens_per_s() && scale > 0) {
    c.set_throughput_tokens_per_s(c.throughput_tokens_per_s() / scale);
  }
  for (double& v : *c.mutable_serve_latency_ms()) v = times(v);
  absl::StrAppend(c.mutable_latency_statistic(),
                  absl::StrFormat("; x%.3f to the footing the budgets were resolved at (the "
                                  "parent served alongside at %.2f ms, %.2f ms then)",
                                  scale, parent_ms, reference_ms));
}

// A pass's medians with the parent served among them (the last) put on the budgets' footing;
// the parent's own figure is removed and recorded in `r`.
void AnchorPass(double reference_ms, RoundsMeasured& m, v1::MeasureResult& r) {
  const ParentAnchor anchor{m.medians.size() - 1, reference_ms};
  const double scale = AnchorScale(anchor, m.medians);
  const double parent_ms = m.medians.back().latency_ms();
  m.medians.pop_back();
  for (v1::ModelCosts& c : m.medians) ScaleTimed(scale, parent_ms, reference_ms, c);
  r.add_parent_beside_ms(parent_ms);
}

// `values` each as `format` shows one, joined by ", ".
std::string Figures(const google::protobuf::RepeatedField<double>& values,
                    const absl::FormatSpec<double>& format) {
  return absl::StrJoin(values, ", ", [&format](std::string* s, double v) {
    absl::StrAppend(s, absl::StrFormat(format, v));
  });
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

std::optional<double> ParentReferenceMs(const v1::DeploymentContract& contract) {
  const v1::Budget& b = contract.budget();
  const bool absolute_latency = b.has_latency_ms_max() && !b.has_latency_vs_parent_max();
  const bool absolute_throughput =
      b.has_throughput_tokens_per_s_min() && !b.has_throughput_vs_parent_min();
  if (!HasTimedRelativeBudget(b) || absolute_latency || absolute_throughput) return {};
  if (b.has_latency_vs_parent_max()) {
    if (!b.has_latency_ms_max() || b.latency_vs_parent_max() <= 0) return {};
    return b.latency_ms_max() / b.latency_vs_parent_max();
  }
  // Tokens per request are fixed by the workload: the parent's throughput is its latency.
  const double tokens = static_cast<double>(contract.workload().batch_size()) *
                        contract.workload().output_tokens();
  if (!b.has_throughput_tokens_per_s_min() || b.throughput_tokens_per_s_min() <= 0 ||
      tokens <= 0) {
    return {};
  }
  return tokens * 1000.0 * b.throughput_vs_parent_min() / b.throughput_tokens_per_s_min();
}

absl::StatusOr<v1::MeasureResult> MeasureCandidates(const Candidates& candidates,
                                                    const v1::DeploymentContract& contract,
                                                    const CloseCalls& close,
                                                    const SlowHostCheck& slow_host,
                                                    const ServeRoundFn& serve_round,
                                                    bool parent_alongside) {
  const size_t n = candidates.architectures.size();
  const std::optional<double> reference =
      parent_alongside ? ParentReferenceMs(contract) : std::nullopt;
  // With the parent alongside, it is served in every pass as candidate n, after the rest.
  auto with_parent = [&](std::vector<size_t> subset) {
    if (reference.has_value()) subset.push_back(n);
    return subset;
  };
  v1::MeasureResult r;
  if (reference.has_value()) r.set_parent_reference_ms(*reference);
  std::vector<size_t> first;
  for (size_t i = 0; i < n; ++i) {
    if (!candidates.on_demand[i]) first.push_back(i);
  }
  if (first.empty()) {  // nothing to refine between: every candidate in one pass
    for (size_t i = 0; i < n; ++i) first.push_back(i);
  }
  SlowHostCheck check = slow_host;
  for (size_t i : first) check.predicted_ms.push_back(candidates.predicted_ms[i]);
  if (reference.has_value()) {
    check.predicted_ms.push_back(*reference);
    // The parent alongside already puts a slow pass on the budgets' footing: serving it
    // again after a pause would buy nothing (the scale is still recorded).
    check.remeasures = 0;
  }
  TAILOR_ASSIGN_OR_RETURN(RoundsMeasured m,
                          MeasureSubset(with_parent(first), contract.budget(), close, check,
                                        serve_round, reference));
  if (reference.has_value()) AnchorPass(*reference, m, r);
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
                            MeasureSubset(with_parent(refine), contract.budget(), close, {},
                                          serve_round, reference));
    if (reference.has_value()) AnchorPass(*reference, more, r);
    for (size_t k = 0; k < refine.size(); ++k) {
      measured[refine[k]] = std::move(more.medians[k]);
      served[refine[k]] = true;
    }
    close_calls += more.close_calls;
    refined += static_cast<int>(refine.size());
  }
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
                    Figures(r.host_scales(), "x%.3f"),
                    absl::StrFormat(" against a bound of x%.3f; kept pass %d)",
                                    1 + r.slow_host_bound(), r.kept_attempt() + 1));
  }
  if (close_calls > 0) {
    absl::StrAppend(&out, ", ", close_calls, " of them ", r.close_call_rounds(),
                    " times more (close calls)");
  }
  if (r.parent_beside_ms_size() > 0) {
    absl::StrAppend(&out, "; timed against the parent served alongside (",
                    Figures(r.parent_beside_ms(), "%.2f"),
                    absl::StrFormat(" ms; the budgets resolved at %.2f ms)",
                                    r.parent_reference_ms()));
  }
  return out;
}

}  // namespace tailor::profiler
