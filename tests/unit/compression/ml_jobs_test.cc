// The profiler agent's profile, verify and measure jobs without a coordinator (RunProfile,
// RunVerify, RunMeasure): result shapes, budgets, engine/precision checks and bad models. No
// timing assertions.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "compression/model/hybrid_lm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profiler-agent/device.h"
#include "profiler-agent/measure_job.h"
#include "profiler-agent/ml_jobs.h"
#include "profiler-agent/request_latency.h"
#include "tailor/v1/job_output.pb.h"
#include "tests/testing/status_matchers.h"

namespace tailor::profiler {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;
using model::LayerSpec;
namespace fs = std::filesystem;

model::HybridConfig Small() {
  model::HybridConfig c;
  c.vocab = 64;  // the task tokenizer's vocabulary, so quality is evaluated
  c.hidden = 32;
  c.max_seq = 32;
  c.layers = {LayerSpec::Attention(2, 1, 16), LayerSpec::Mamba(2, 8, 4, 4, 4),
              LayerSpec::Moe(2, 1, 16, 16), LayerSpec::Mlp(32)};
  return c;
}

std::string SaveSmall(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/ml_jobs_" + name;
  fs::remove_all(dir);
  absl::StatusOr<model::HybridLM> m = model::CreateHybridLM(Small(), 1);
  EXPECT_TRUE(m.ok());
  EXPECT_TRUE(model::SaveHybridLM(*m, dir).ok());
  return dir;
}

v1::DeploymentContract Contract() {
  v1::DeploymentContract c;
  c.set_method(v1::AUTOCOMPRESS);
  c.mutable_target()->set_device_kind("cpu");
  c.mutable_target()->set_engine("tailor-builtin");
  c.mutable_target()->set_engine_version("1");
  c.mutable_target()->set_precision(v1::FP32);
  c.mutable_workload()->set_batch_size(1);
  c.mutable_workload()->set_input_tokens(40);  // past the model's max_seq: raised to fit
  c.mutable_workload()->set_output_tokens(4);
  c.mutable_workload()->set_cached_prefix_tokens(0);
  c.mutable_budget()->set_latency_ms_max(1e6);
  c.mutable_budget()->set_memory_mib_max(0.001);
  return c;
}

MlJobConfig Fast() {
  MlJobConfig c;
  c.verify_repetitions = 2;
  c.verify_task_samples = 2;
  c.profile_rounds = 1;
  c.profile_validation_architectures = 2;
  return c;
}

TEST(MlJobsTest, EngineOptionsFromTheContract) {
  v1::DeploymentContract c = Contract();
  absl::StatusOr<engine::EngineOptions> o = EngineOptionsFor(c, Fast());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->precision, engine::Precision::kFp32);
  c.mutable_target()->clear_precision();
  c.mutable_target()->clear_engine();
  c.mutable_target()->clear_engine_version();
  ASSERT_TRUE(EngineOptionsFor(c, Fast()).ok());  // defaults: built-in engine, FP32 on cpu
  c.mutable_target()->set_precision(v1::BF16);
  EXPECT_EQ(EngineOptionsFor(c, Fast())->precision, engine::Precision::kBf16);
  c.mutable_target()->set_precision(v1::FP16);
  EXPECT_THAT(EngineOptionsFor(c, Fast()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("CUDA only")));
  c.mutable_target()->set_precision(v1::INT4);
  EXPECT_THAT(EngineOptionsFor(c, Fast()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("INT4")));
  c = Contract();
  c.mutable_target()->set_engine_version("2");
  EXPECT_THAT(EngineOptionsFor(c, Fast()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("serves tailor-builtin 1, the contract asks for "
                                 "tailor-builtin 2")));
  // The thread count is part of the built-in engine's version.
  MlJobConfig two = Fast();
  two.builtin_threads = 2;
  EXPECT_THAT(EngineOptionsFor(Contract(), two).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("serves tailor-builtin 1+threads2, the contract asks for "
                                 "tailor-builtin 1")));
  c.mutable_target()->set_engine_version("1+threads2");
  o = EngineOptionsFor(c, two);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->cpu_threads, 2);
  EXPECT_EQ(BuiltinIdentity(2).version, "1+threads2");
}

// The agent's flags reach the job config; a flag left at its "default" value keeps
// MlJobConfig's own.
TEST(MlJobsTest, AgentOptionsReachTheJobConfig) {
  DeviceDescription device;
  device.device = "cpu";
  device.device_kind = "cpu";
  HandlerOptions options;
  MlJobConfig defaults = MlJobConfigOf(device, options);
  EXPECT_EQ(defaults.profile_stack_depth, 0);
  EXPECT_EQ(defaults.profile_max_rounds, 1);
  EXPECT_EQ(defaults.profile_target_latency_mape, costmodel::kTrustedLatencyMape);
  options.profile_stack_depth = 16;
  options.profile_max_rounds = 3;
  MlJobConfig set = MlJobConfigOf(device, options);
  EXPECT_EQ(set.profile_stack_depth, 16);
  EXPECT_EQ(set.profile_max_rounds, 3);
  EXPECT_EQ(set.device_kind, "cpu");
}

TEST(MlJobsTest, VerifyMeasuresEvaluatesAndChecksBudgets) {
  const std::string dir = SaveSmall("verify");
  absl::StatusOr<v1::JobOutput> r = RunVerify(Contract(), dir, Fast(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ModelCosts& measured = r->measured();
  struct Figure {
    const char* name;
    bool present;
    double value;
  };
  for (const Figure& fig : {
           Figure{"latency_ms", measured.has_latency_ms(), measured.latency_ms()},
           Figure{"throughput_tokens_per_s", measured.has_throughput_tokens_per_s(),
                  measured.throughput_tokens_per_s()},
           Figure{"memory_mib", measured.has_memory_mib(), measured.memory_mib()},
           Figure{"weight_memory_mib", measured.has_weight_memory_mib(),
                  measured.weight_memory_mib()},
           Figure{"prefill_ms", measured.has_prefill_ms(), measured.prefill_ms()},
           Figure{"decode_ms", measured.has_decode_ms(), measured.decode_ms()}}) {
    ASSERT_TRUE(fig.present) << fig.name;
    EXPECT_GT(fig.value, 0) << fig.name;
  }
  EXPECT_NEAR(measured.weight_memory_mib(), Small().ParameterCount() * 4.0 / (1 << 20), 1e-12);
  // The judged latency is the whole request's at the contract's percentile (p50 by default,
  // over the 10 requests p50 needs), served until calm; the per-piece medians stay apart.
  EXPECT_THAT(measured.latency_statistic(), ::testing::StartsWith("p50 of 10 whole requests"));
  EXPECT_EQ(measured.repetitions(), 10);
  EXPECT_EQ(measured.latency_ms(), measured.request_p50_ms());
  EXPECT_TRUE(measured.has_request_spread());
  EXPECT_TRUE(measured.has_thread_utilization());
  // Three serves (MlJobConfig.verify_serves), each re-served at most twice; the judged one is
  // their median.
  EXPECT_LE(measured.remeasures(), 6);
  ASSERT_EQ(measured.serve_latency_ms_size(), 3);
  std::vector<double> serves(measured.serve_latency_ms().begin(),
                             measured.serve_latency_ms().end());
  std::sort(serves.begin(), serves.end());
  EXPECT_EQ(measured.latency_ms(), serves[1]);
  EXPECT_THAT(measured.latency_statistic(), ::testing::HasSubstr("; the median of 3 serves ("));
  EXPECT_EQ(measured.disturbed(), !measured.disturbance().empty());
  const v1::ModelQuality& quality = r->quality();
  EXPECT_EQ(quality.parameters(), Small().ParameterCount());
  EXPECT_EQ(quality.per_task_size(), 8);
  EXPECT_TRUE(quality.has_task_accuracy());
  const auto& budgets = r->budgets();
  ASSERT_EQ(budgets.size(), 2);
  const v1::BudgetCheck& latency = budgets.Get(0);
  EXPECT_EQ(latency.resource(), "latency_ms");
  EXPECT_TRUE(latency.met());
  const v1::BudgetCheck& memory = budgets.Get(1);
  EXPECT_EQ(memory.resource(), "memory_mib");
  EXPECT_FALSE(memory.met());
  EXPECT_EQ(r->engine().precision(), "FP32");
}

// With an eval sample, verify adds the served model's perplexity over every predicted
// position, equal to a hand computation from the model's logits.
TEST(MlJobsTest, VerifyMeasuresPerplexityOnTheEvalSample) {
  const std::string dir = SaveSmall("verify_eval");
  EvalSample eval;
  eval.digest = std::string(64, 'a');
  for (int s = 0; s < 3; ++s) {
    data::TokenSequence seq;
    for (int t = 0; t < (s == 2 ? 7 : 12); ++t) seq.tokens.push_back((s * 17 + t * 5) % 64);
    eval.sequences.push_back(seq);
  }
  eval.sequences.push_back(data::TokenSequence{.tokens = {5}});  // predicts nothing
  absl::StatusOr<v1::JobOutput> r = RunVerify(Contract(), dir, Fast(), nullptr, &eval);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ModelQuality& q = r->quality();
  EXPECT_EQ(q.eval_dataset_digest(), eval.digest);
  EXPECT_EQ(q.eval_sequences(), 4);
  EXPECT_EQ(q.eval_tokens(), 11 + 11 + 6);
  ASSERT_TRUE(q.has_perplexity());

  absl::StatusOr<model::HybridLM> m = model::LoadHybridLM(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  torch::NoGradGuard no_grad;
  (*m)->eval();
  double nll = 0;
  for (int s = 0; s < 3; ++s) {
    const std::vector<int32_t>& t = eval.sequences[s].tokens;
    const at::Tensor ids = torch::tensor(std::vector<int64_t>(t.begin(), t.end())).unsqueeze(0);
    absl::StatusOr<model::ForwardOutput> out = (*m)->Forward(ids);
    ASSERT_TRUE(out.ok()) << out.status();
    const at::Tensor logp = torch::log_softmax(out->logits[0].to(torch::kFloat64), -1);
    for (size_t i = 0; i + 1 < t.size(); ++i) nll -= logp[i][t[i + 1]].item<double>();
  }
  EXPECT_NEAR(q.perplexity(), std::exp(nll / 28), 1e-4 * q.perplexity());

  // No sample, no perplexity.
  r = RunVerify(Contract(), dir, Fast(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->quality().has_perplexity());
}

// The settle's rungs: each architecture served with dummy weights as verify serves a model,
// in order, weights exactly the architecture's own (a narrower MLP weighs less); a contract
// naming another engine is refused before anything is served.
TEST(MlJobsTest, MeasureServesEachArchitectureAsVerifyDoes) {
  model::HybridConfig narrow = Small();
  narrow.layers[3].mlp.ffn = 8;
  absl::StatusOr<std::vector<v1::ModelCosts>> r =
      RunMeasure(Contract(), {Small(), narrow}, Fast(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  const model::HybridConfig configs[] = {Small(), narrow};
  for (int i = 0; i < 2; ++i) {
    const v1::ModelCosts& m = (*r)[i];
    EXPECT_GT(m.latency_ms(), 0) << i;
    EXPECT_EQ(m.latency_ms(), m.request_p50_ms()) << i;
    EXPECT_EQ(m.repetitions(), RepetitionsFor(v1::LATENCY_PERCENTILE_UNSPECIFIED, 2)) << i;
    EXPECT_GT(m.throughput_tokens_per_s(), 0) << i;
    EXPECT_NEAR(m.weight_memory_mib(), configs[i].ParameterCount() * 4.0 / (1 << 20), 1e-12)
        << i;
    EXPECT_GT(m.memory_mib(), m.weight_memory_mib()) << i;
  }
  v1::DeploymentContract other = Contract();
  other.mutable_target()->set_engine("llama.cpp");
  EXPECT_THAT(RunMeasure(other, {Small()}, Fast(), nullptr).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("llama.cpp")));
}

// Close calls: a median within the band of a budget gets more serves and is judged on all of
// them; one far from every budget, or with close calls off, is not.
v1::ModelCosts Serve(double latency_ms, double throughput = 0) {
  v1::ModelCosts c;
  c.set_latency_ms(latency_ms);
  if (throughput > 0) c.set_throughput_tokens_per_s(throughput);
  c.set_memory_mib(2.5);
  return c;
}

TEST(CloseCallsTest, AMedianNearTheBudgetIsServedMoreTimes) {
  const std::vector<double> latencies = {20, 25, 21, 22, 23, 19, 24, 18, 26};
  size_t next = 0;
  auto serve = [&]() -> absl::StatusOr<v1::ModelCosts> { return Serve(latencies[next++]); };
  v1::Budget budget;
  budget.set_latency_ms_max(22);
  absl::StatusOr<v1::ModelCosts> m = MeasureServes(3, serve, &budget, CloseCalls{6, 0.10});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(next, 9u);  // 21 (the first three's median) is within 10% of 22
  EXPECT_EQ(m->latency_ms(), 22);
  EXPECT_EQ(m->close_call_serves(), 6);
  EXPECT_EQ(m->serve_latency_ms_size(), 9);
  EXPECT_THAT(m->latency_statistic(),
              HasSubstr("the median of 9 serves (20.00, 25.00, 21.00, 22.00, 23.00, 19.00, "
                        "24.00, 18.00, 26.00 ms), the last 6 because the first 3's median was "
                        "within 10% of a budget"));

  // 21 is 16% under 25: decided by three serves.
  next = 0;
  budget.set_latency_ms_max(25);
  m = MeasureServes(3, serve, &budget, CloseCalls{6, 0.10});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(next, 3u);
  EXPECT_EQ(m->latency_ms(), 21);
  EXPECT_EQ(m->close_call_serves(), 0);
  // Off, or without a budget to be close to.
  next = 0;
  budget.set_latency_ms_max(22);
  ASSERT_TRUE(MeasureServes(3, serve, &budget, CloseCalls{0, 0.10}).ok());
  EXPECT_EQ(next, 3u);
  next = 0;
  ASSERT_TRUE(MeasureServes(3, serve).ok());
  EXPECT_EQ(next, 3u);
  // A failing extra serve fails the measurement as is.
  next = 0;
  auto failing = [&]() -> absl::StatusOr<v1::ModelCosts> {
    if (next == 4) return absl::InternalError("llama.cpp sidecar: killed by signal 6");
    return Serve(latencies[next++]);
  };
  EXPECT_THAT(MeasureServes(3, failing, &budget, CloseCalls{6, 0.10}).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("signal 6")));
}

// A model held to a budget relative to its parent: served alternately with the parent, the
// budget resolved against the parent's median serve there; a close call serves more pairs.
TEST(CloseCallsTest, BesideTheParentServesAlternatelyAndJudgesAgainstItsMedian) {
  std::vector<std::string> order;
  const std::vector<double> model_ms = {10.0, 10.9, 10.4, 11.6, 10.2, 10.5};
  const std::vector<double> parent_ms = {13.0, 14.0, 13.5, 15.0, 13.2, 13.4};
  size_t m = 0, p = 0;
  auto timed = [](double ms) {
    v1::ModelCosts c = Serve(ms, 32000 / ms);
    c.set_request_p50_ms(ms);
    c.set_repetitions(10);
    return c;
  };
  auto serve_model = [&]() -> absl::StatusOr<v1::ModelCosts> {
    order.push_back("model");
    return timed(model_ms[m++]);
  };
  auto serve_parent = [&]() -> absl::StatusOr<v1::ModelCosts> {
    order.push_back("parent");
    return timed(parent_ms[p++]);
  };
  v1::Budget budget;
  budget.set_latency_vs_parent_max(0.8);
  budget.set_latency_ms_max(9.6);  // as the profile's parent (12 ms) resolved it
  budget.set_memory_vs_parent_max(0.9);
  budget.set_memory_mib_max(2.0);
  absl::StatusOr<BesideParent> b =
      MeasureServesBesideParent(3, serve_model, serve_parent, budget, CloseCalls{2, 0.03});
  ASSERT_TRUE(b.ok()) << b.status();
  // The first three pairs: model 10.4 against 0.8 x 13.5 = 10.8, 3.7% under: not close.
  EXPECT_EQ(order, (std::vector<std::string>{"model", "parent", "model", "parent", "model",
                                             "parent"}));
  EXPECT_EQ(b->model.latency_ms(), 10.4);
  EXPECT_EQ(b->parent.latency_ms(), 13.5);
  EXPECT_DOUBLE_EQ(b->budget.latency_ms_max(), 0.8 * 13.5);
  EXPECT_DOUBLE_EQ(b->budget.memory_mib_max(), 0.9 * 2.5);
  EXPECT_THAT(b->parent.latency_statistic(),
              HasSubstr("the median of 3 serves of the parent, alternating (13.00, 14.00, "
                        "13.50 ms)"));
  // Within 5%: two more pairs, each median over five.
  order.clear();
  m = p = 0;
  b = MeasureServesBesideParent(3, serve_model, serve_parent, budget, CloseCalls{2, 0.05});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(order.size(), 10u);
  EXPECT_EQ(b->model.latency_ms(), 10.4);   // of 10.0 10.9 10.4 11.6 10.2
  EXPECT_EQ(b->parent.latency_ms(), 13.5);  // of 13.0 14.0 13.5 15.0 13.2
  EXPECT_EQ(b->model.close_call_serves(), 2);
  EXPECT_EQ(b->parent.close_call_serves(), 2);
  // A parent measured over too few requests for the percentile cannot resolve the budget.
  m = p = 0;
  auto few = [&]() -> absl::StatusOr<v1::ModelCosts> {
    v1::ModelCosts c = timed(parent_ms[p++]);
    c.set_repetitions(3);
    return c;
  };
  EXPECT_THAT(MeasureServesBesideParent(3, serve_model, few, budget).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("budget.latency_vs_parent_max: the parent was measured over 3 "
                                 "requests, too few for its p50")));
}

// The extra serves in groups, each after a pause: the host's slow minutes outlast nine serves
// back to back, so a figure taken in one is sampled again a minute later.
TEST(CloseCallsTest, GroupsOfExtraServesComeAPauseApart) {
  const std::vector<double> latencies = {20, 25, 21, 22, 23, 19, 24, 18};
  std::vector<std::string> events;
  size_t next = 0;
  auto serve = [&]() -> absl::StatusOr<v1::ModelCosts> {
    events.push_back("serve");
    return Serve(latencies[next++]);
  };
  CloseCalls close{5, 0.10, 2, absl::Seconds(60), [&](absl::Duration d) {
                     events.push_back(absl::StrCat("wait ", absl::FormatDuration(d)));
                     return true;
                   }};
  v1::Budget budget;
  budget.set_latency_ms_max(22);
  absl::StatusOr<v1::ModelCosts> m = MeasureServes(3, serve, &budget, close);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(events, (std::vector<std::string>{"serve", "serve", "serve", "wait 1m", "serve",
                                              "serve", "serve", "wait 1m", "serve", "serve"}));
  EXPECT_EQ(m->close_call_serves(), 5);
  EXPECT_EQ(m->latency_ms(), 22);  // the median of all eight
  EXPECT_THAT(m->latency_statistic(),
              HasSubstr("the last 5 in 2 groups after pauses of 1m because the first 3's "
                        "median was within 10% of a budget"));

  // More groups than serves: one serve per group.
  events.clear();
  next = 0;
  close.extra_serves = 2;
  close.groups = 5;
  ASSERT_TRUE(MeasureServes(3, serve, &budget, close).ok());
  EXPECT_EQ(events, (std::vector<std::string>{"serve", "serve", "serve", "wait 1m", "serve",
                                              "wait 1m", "serve"}));

  // A cancel during a pause ends the measurement: nothing served after it.
  events.clear();
  next = 0;
  close.wait = [&](absl::Duration) { return false; };
  EXPECT_THAT(MeasureServes(3, serve, &budget, close).status(),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("pausing")));
  EXPECT_EQ(next, 3u);
}

// The jobs' pause: reported each second with what is left, and cut short by a cancel.
TEST(CloseCallsTest, CloseCallsReportingReportsThePauseAndStopsOnCancel) {
  std::vector<std::string> messages;
  bool keep_going = true;
  MlProgressFn progress = [&](double f, const std::string& message,
                              const std::map<std::string, double>&) {
    EXPECT_EQ(f, 0.35);
    messages.push_back(message);
    return keep_going;
  };
  CloseCalls close = CloseCallsReporting(CloseCalls{6, 0.10, 2, absl::Seconds(60)}, progress,
                                         0.35);
  EXPECT_EQ(close.extra_serves, 6);
  EXPECT_EQ(close.pause, absl::Seconds(60));
  ASSERT_TRUE(close.wait);
  EXPECT_TRUE(close.wait(absl::Milliseconds(1500)));
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_THAT(messages[0], HasSubstr("pausing before more serves"));
  EXPECT_THAT(messages[0], HasSubstr("(2 s left)"));
  EXPECT_THAT(messages[1], HasSubstr("(1 s left)"));
  messages.clear();
  keep_going = false;
  EXPECT_FALSE(close.wait(absl::Seconds(60)));  // at once, not a minute later
  EXPECT_EQ(messages.size(), 1u);
}

TEST(CloseCallsTest, CloseToBudgetReadsLatencyAndThroughputNotMemory) {
  v1::Budget b;
  b.set_memory_mib_max(2.5);
  EXPECT_FALSE(CloseToBudget(Serve(20, 100), b, 0.10));  // memory is not noisy
  b.set_throughput_tokens_per_s_min(95);
  EXPECT_TRUE(CloseToBudget(Serve(20, 100), b, 0.10));   // 5% above the floor
  EXPECT_FALSE(CloseToBudget(Serve(20, 120), b, 0.10));  // 26% above
  b.set_latency_ms_max(22);
  EXPECT_TRUE(CloseToBudget(Serve(23.9, 120), b, 0.10));  // over by 8.6%: close too
  EXPECT_FALSE(CloseToBudget(Serve(24.5, 120), b, 0.10));
  EXPECT_FALSE(CloseToBudget(Serve(0, 0), b, 0.10));  // nothing measured
}

// The measure job's rounds: all candidates interleaved three times, then only the one near
// the budget six times more; each judged on the median of its own serves.
// With the parent anchoring the pass, it is served in the close-call rounds as well (last,
// never a close call itself), so its median, by which every timed figure of the pass is
// scaled, spans the minutes the close calls span: here the host slows by 10% after the first
// three rounds, and the anchor's median moves with the close call's instead of staying at
// the fast minute.
TEST(CloseCallsTest, TheAnchorIsServedInTheCloseCallRoundsToo) {
  const double base[] = {30, 8, 10};  // a rung far over, a close call, the parent
  std::vector<std::vector<size_t>> calls;
  ServeRoundFn serve_round = [&](const std::vector<size_t>& which, const std::string&)
      -> absl::StatusOr<std::vector<v1::ModelCosts>> {
    const double host = calls.size() < 3 ? 1.0 : 1.1;
    calls.push_back(which);
    std::vector<v1::ModelCosts> out;
    for (size_t i : which) out.push_back(Serve(base[i] * host));
    return out;
  };
  v1::Budget budget;  // 0.8 x the parent's 10 ms
  budget.set_latency_ms_max(8);
  budget.set_latency_vs_parent_max(0.8);
  absl::StatusOr<RoundsMeasured> r =
      MeasureInRounds(3, 3, budget, {6, 0.10}, serve_round, {}, ParentAnchor{2, 10.0});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(calls.size(), 9u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(calls[k], (std::vector<size_t>{0, 1, 2})) << k;
  for (int k = 3; k < 9; ++k) EXPECT_EQ(calls[k], (std::vector<size_t>{1, 2})) << k;
  EXPECT_EQ(r->close_calls, 1);
  EXPECT_EQ(r->medians[1].serve_latency_ms_size(), 9);
  EXPECT_EQ(r->medians[1].close_call_serves(), 6);
  EXPECT_EQ(r->medians[2].serve_latency_ms_size(), 9);
  EXPECT_EQ(r->medians[2].close_call_serves(), 0);
  // Both medians from the slow minutes (6 of 9 serves): the close call's ratio to the parent
  // is its own 0.8, where an anchor of its 3 fast serves alone made it 0.88.
  EXPECT_DOUBLE_EQ(r->medians[1].latency_ms(), 8 * 1.1);
  EXPECT_DOUBLE_EQ(r->medians[2].latency_ms(), 10 * 1.1);
  EXPECT_DOUBLE_EQ(AnchorScale(ParentAnchor{2, 10.0}, r->medians), 1 / 1.1);
}

TEST(CloseCallsTest, MeasureInRoundsServesOnlyTheCloseCandidatesAgain) {
  const double base[] = {30, 21, 10};
  std::vector<std::string> labels;
  std::vector<std::vector<size_t>> calls;
  int round = 0;
  ServeRoundFn serve_round = [&](const std::vector<size_t>& which, const std::string& label)
      -> absl::StatusOr<std::vector<v1::ModelCosts>> {
    labels.push_back(label);
    calls.push_back(which);
    std::vector<v1::ModelCosts> out;
    for (size_t i : which) out.push_back(Serve(base[i] + (round % 3) - 1));
    ++round;
    return out;
  };
  v1::Budget budget;
  budget.set_latency_ms_max(22);
  absl::StatusOr<RoundsMeasured> r = MeasureInRounds(3, 3, budget, {6, 0.10}, serve_round);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(calls.size(), 9u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(calls[k], (std::vector<size_t>{0, 1, 2})) << k;
  for (int k = 3; k < 9; ++k) EXPECT_EQ(calls[k], (std::vector<size_t>{1})) << k;
  EXPECT_EQ(labels.front(), "round 1 of 3");
  EXPECT_EQ(labels.back(), "close-call round 6 of 6");
  EXPECT_EQ(r->close_calls, 1);
  ASSERT_EQ(r->medians.size(), 3u);
  EXPECT_EQ(r->medians[0].serve_latency_ms_size(), 3);
  EXPECT_EQ(r->medians[0].latency_ms(), 30);
  EXPECT_EQ(r->medians[0].close_call_serves(), 0);
  EXPECT_EQ(r->medians[1].serve_latency_ms_size(), 9);
  EXPECT_EQ(r->medians[1].latency_ms(), 21);
  EXPECT_EQ(r->medians[1].close_call_serves(), 6);
  EXPECT_EQ(r->medians[2].serve_latency_ms_size(), 3);

  // In two groups a pause apart: the pauses fall between the rounds.
  labels.clear();
  calls.clear();
  round = 0;
  std::vector<size_t> waits_after;  // rounds served when each pause began
  CloseCalls grouped{6, 0.10, 2, absl::Seconds(60), [&](absl::Duration) {
                       waits_after.push_back(calls.size());
                       return true;
                     }};
  r = MeasureInRounds(3, 3, budget, grouped, serve_round);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(calls.size(), 9u);
  EXPECT_EQ(waits_after, (std::vector<size_t>{3, 6}));
  EXPECT_EQ(labels[3], "close-call round 1 of 6");
  EXPECT_EQ(labels[6], "close-call round 4 of 6");
  EXPECT_EQ(labels[8], "close-call round 6 of 6");
  EXPECT_EQ(r->medians[1].close_call_serves(), 6);

  // Off: three rounds only.
  calls.clear();
  r = MeasureInRounds(3, 3, budget, {0, 0.10}, serve_round);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(calls.size(), 3u);
  EXPECT_EQ(r->close_calls, 0);
  // An engine that measures fewer candidates than it was given is an error, not a skew.
  ServeRoundFn short_round = [](const std::vector<size_t>&, const std::string&)
      -> absl::StatusOr<std::vector<v1::ModelCosts>> {
    return std::vector<v1::ModelCosts>{Serve(1)};
  };
  EXPECT_THAT(MeasureInRounds(3, 3, budget, {6, 0.10}, short_round).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("3 candidates served, 1")));
}

// A slow host: the first attempt's rounds measure the candidates x1.4 of their prices as a
// set (beyond a bound of 10%), so after a pause they are served again; the second attempt
// is calm (x1.0) and its figures are kept, the slow serves set aside, not averaged in.
TEST(SlowHostTest, MeasureInRoundsServesTheRoundsAgainAfterAPause) {
  const std::vector<double> predicted = {10, 20, 30};
  std::vector<double> speed = {1.4, 1.0};  // per attempt, three rounds each
  int round = 0;
  std::vector<std::string> labels;
  ServeRoundFn serve_round = [&](const std::vector<size_t>& which, const std::string& label)
      -> absl::StatusOr<std::vector<v1::ModelCosts>> {
    labels.push_back(label);
    const double factor = speed[std::min<size_t>(round++ / 3, speed.size() - 1)];
    std::vector<v1::ModelCosts> out;
    for (size_t i : which) out.push_back(Serve(predicted[i] * factor));
    return out;
  };
  std::vector<size_t> waits_after;
  SlowHostCheck check{predicted, 0.10, 2, absl::Seconds(60), [&](absl::Duration d) {
                        EXPECT_EQ(d, absl::Seconds(60));
                        waits_after.push_back(labels.size());
                        return true;
                      }};
  v1::Budget budget;
  budget.set_latency_ms_max(100);
  absl::StatusOr<RoundsMeasured> r =
      MeasureInRounds(3, 3, budget, {0, 0.10}, serve_round, check);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(labels.size(), 6u);
  EXPECT_EQ(labels[3], "round (again) 1 of 3");
  EXPECT_EQ(waits_after, (std::vector<size_t>{3}));
  ASSERT_EQ(r->host_scales.size(), 2u);
  EXPECT_DOUBLE_EQ(r->host_scales[0], 1.4);
  EXPECT_DOUBLE_EQ(r->host_scales[1], 1.0);
  EXPECT_EQ(r->kept_attempt, 1);
  ASSERT_EQ(r->medians.size(), 3u);
  EXPECT_DOUBLE_EQ(r->medians[1].latency_ms(), 20);
  EXPECT_EQ(r->medians[1].serve_latency_ms_size(), 3);  // the kept attempt's serves only

  // Slow on every attempt: two more attempts at most, the fastest kept.
  round = 0;
  labels.clear();
  waits_after.clear();
  speed = {1.5, 1.3, 1.45};
  r = MeasureInRounds(3, 3, budget, {0, 0.10}, serve_round, check);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(labels.size(), 9u);
  EXPECT_EQ(waits_after, (std::vector<size_t>{3, 6}));
  EXPECT_EQ(r->kept_attempt, 1);
  EXPECT_DOUBLE_EQ(r->medians[2].latency_ms(), 39);

  // Faster than the table, or within the bound: measured once. No bound: no check at all.
  for (double fast : {0.6, 1.09}) {
    round = 0;
    labels.clear();
    speed = {fast, 1.0};
    r = MeasureInRounds(3, 3, budget, {0, 0.10}, serve_round, check);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(labels.size(), 3u) << fast;
    EXPECT_EQ(r->host_scales.size(), 1u) << fast;
  }
  round = 0;
  labels.clear();
  speed = {1.5, 1.0};
  r = MeasureInRounds(3, 3, budget, {0, 0.10}, serve_round);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(labels.size(), 3u);
  EXPECT_TRUE(r->host_scales.empty());

  // A cancelled pause ends the measurement.
  round = 0;
  check.wait = [](absl::Duration) { return false; };
  EXPECT_THAT(MeasureInRounds(3, 3, budget, {0, 0.10}, serve_round, check).status(),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("slow host")));
}

// Serves each candidate at its predicted latency, recording which were served per round.
ServeRoundFn ServedAsPredicted(const Candidates& c, std::vector<std::vector<size_t>>& calls) {
  return [&c, &calls](const std::vector<size_t>& which, const std::string&)
             -> absl::StatusOr<std::vector<v1::ModelCosts>> {
    calls.push_back(which);
    std::vector<v1::ModelCosts> out;
    for (size_t i : which) out.push_back(Serve(c.predicted_ms[i]));
    return out;
  };
}

// 22 ms, 8 settle rungs, a 2% margin.
v1::DeploymentContract SettleContract() {
  v1::DeploymentContract contract;
  contract.mutable_budget()->set_latency_ms_max(22);
  contract.mutable_search()->set_settle_rungs(8);
  contract.mutable_search()->set_settle_margin(0.02);
  return contract;
}

// The measure job's two passes over a ladder of 7 rungs (1 ms apart from 17 ms) and a branch
// of 3: the first serves rungs 0, 3, 6 and the branch's ends; the budget (22 less 2%) falls
// between rungs 3 (20 ms) and 6 (23), so the second serves 4 and 5 only, each three rounds;
// the branch's top fits, so nothing of it. Unserved rungs stay empty.
TEST(MeasureJobTest, TheSecondPassServesTheRungsTheBudgetFallsBetween) {
  Candidates c;
  c.source = "search";
  for (int i = 0; i < 10; ++i) {
    c.architectures.emplace_back();
    c.predicted_ms.push_back(i < 7 ? 17 + i : 15 + (i - 7));
    c.ladder.push_back(i < 7 ? 0 : 1);
    c.on_demand.push_back(!(i == 0 || i == 3 || i == 6 || i == 7 || i == 9));
  }
  std::vector<std::vector<size_t>> calls;
  const ServeRoundFn serve_round = ServedAsPredicted(c, calls);
  const v1::DeploymentContract contract = SettleContract();
  absl::StatusOr<v1::MeasureResult> r =
      MeasureCandidates(c, contract, {0, 0.10}, SlowHostCheckOf({{}, 0.10, 2}, 0.13),
                        serve_round);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls[0], (std::vector<size_t>{0, 3, 6, 7, 9}));
  EXPECT_EQ(calls[3], (std::vector<size_t>{4, 5}));
  EXPECT_EQ(r->refined(), 2);
  ASSERT_EQ(r->measured_size(), 10);
  const std::vector<bool> served(r->served().begin(), r->served().end());
  EXPECT_EQ(served, (std::vector<bool>{true, false, false, true, true, true, true, true, false,
                                       true}));
  EXPECT_EQ(r->measured(4).latency_ms(), 21);
  EXPECT_EQ(r->measured(1).latency_ms(), 0);  // not served
  // The first pass was checked for a slow host on the table's error (13% over the 10% floor).
  ASSERT_EQ(r->host_scales_size(), 1);
  EXPECT_DOUBLE_EQ(r->host_scales(0), 1.0);
  EXPECT_DOUBLE_EQ(r->slow_host_bound(), 0.13);
  EXPECT_EQ(MeasureSummary(*r, "search"),
            "7 of the 10 candidates of search measured, 2 of them in 1 further pass where the "
            "budgets fell between two");
  EXPECT_EQ(r->refine_passes(), 1);  // 4 fits and 5 does not: nothing left between them
  // No table error, no check; an agent that checks nothing, none either.
  EXPECT_EQ(SlowHostCheckOf({{}, 0.10, 2}, 0).remeasures, 0);
  EXPECT_EQ(SlowHostCheckOf({{}, 0.10, 0}, 0.13).remeasures, 0);
  EXPECT_DOUBLE_EQ(SlowHostCheckOf({{}, 0.10, 2}, 0.05).bound, 0.10);
}

// One ladder of 25 rungs 0.25 ms apart from 17 ms, rungs 0, 12 and 24 in the first pass.
Candidates FineLadder() {
  Candidates c;
  c.source = "search";
  for (int i = 0; i < 25; ++i) {
    c.architectures.emplace_back();
    c.predicted_ms.push_back(17 + 0.25 * i);
    c.ladder.push_back(0);
    c.on_demand.push_back(!(i == 0 || i == 12 || i == 24));
  }
  return c;
}

// A ladder in fine steps: 25 rungs 0.25 ms apart from 17 ms, the first pass serving 0, 12
// and 24 (17, 20, 23 ms). Each further pass splits what the last left between the largest
// rung within 22 ms less 2% (21.56) and the next one over: 14, 17, 19, 22 (20.5, 21.25,
// 21.75, 22.5 ms), then 18 (21.5), the neighbour of 19; then nothing is left between.
TEST(MeasureJobTest, FurtherPassesNarrowTheGapToNeighbouringRungs) {
  const Candidates c = FineLadder();
  std::vector<std::vector<size_t>> calls;
  const ServeRoundFn serve_round = ServedAsPredicted(c, calls);
  const v1::DeploymentContract contract = SettleContract();
  absl::StatusOr<v1::MeasureResult> r =
      MeasureCandidates(c, contract, {0, 0.10}, {}, serve_round);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(calls.size(), 9u);  // three passes of three rounds
  EXPECT_EQ(calls[0], (std::vector<size_t>{0, 12, 24}));
  EXPECT_EQ(calls[3], (std::vector<size_t>{14, 17, 19, 22}));
  EXPECT_EQ(calls[6], (std::vector<size_t>{18}));
  EXPECT_EQ(r->refined(), 5);
  EXPECT_EQ(r->refine_passes(), 2);
  EXPECT_DOUBLE_EQ(r->measured(18).latency_ms(), 21.5);
  EXPECT_EQ(MeasureSummary(*r, "search"),
            "8 of the 25 candidates of search measured, 5 of them in 2 further passes where "
            "the budgets fell between two");
}

// The same ladder held to 0.88 x the parent's latency (resolved at 25 ms: 22 ms), on a host
// x1.2 slow in the first pass, x1.0 in the second and x1.1 in the third: the parent served
// last in every pass puts each pass back on the 25 ms footing, so the passes serve what a
// steady host would have and every figure is the rung's own. Without it the slow first pass
// puts every rung but the first over the budget, and the next pass looks between 0 and 12.
TEST(MeasureJobTest, TheParentServedInEveryPassAnchorsIt) {
  const Candidates c = FineLadder();
  std::vector<std::vector<size_t>> calls;
  const std::vector<double> speed = {1.2, 1.0, 1.1};
  const ServeRoundFn serve_round = [&](const std::vector<size_t>& which, const std::string&)
      -> absl::StatusOr<std::vector<v1::ModelCosts>> {
    const double host = speed[std::min<size_t>(calls.size() / 3, 2)];
    calls.push_back(which);
    std::vector<v1::ModelCosts> out;
    for (size_t i : which) {
      v1::ModelCosts m = Serve(host * (i < 25 ? c.predicted_ms[i] : 25.0), 1000 / host);
      m.add_serve_latency_ms(m.latency_ms());
      out.push_back(std::move(m));
    }
    return out;
  };
  v1::DeploymentContract contract = SettleContract();
  contract.mutable_budget()->set_latency_vs_parent_max(0.88);
  ASSERT_EQ(ParentReferenceMs(contract), std::optional<double>(25));
  absl::StatusOr<v1::MeasureResult> r =
      MeasureCandidates(c, contract, {0, 0.10}, SlowHostCheckOf({{}, 0.10, 2}, 0.13),
                        serve_round, /*parent_alongside=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  // x1.2 is over the slow-host bound (13%), but the parent puts the pass right: not served
  // again, the scale recorded.
  ASSERT_EQ(calls.size(), 9u);
  ASSERT_EQ(r->host_scales_size(), 1);
  EXPECT_NEAR(r->host_scales(0), 1.2, 1e-9);
  EXPECT_EQ(calls[0], (std::vector<size_t>{0, 12, 24, 25}));
  EXPECT_EQ(calls[3], (std::vector<size_t>{14, 17, 19, 22, 25}));
  EXPECT_EQ(calls[6], (std::vector<size_t>{18, 25}));
  ASSERT_EQ(r->measured_size(), 25);
  EXPECT_NEAR(r->measured(12).latency_ms(), 20, 1e-9);
  EXPECT_NEAR(r->measured(18).latency_ms(), 21.5, 1e-9);
  EXPECT_NEAR(r->measured(18).serve_latency_ms(0), 21.5, 1e-9);
  EXPECT_NEAR(r->measured(18).throughput_tokens_per_s(), 1000, 1e-9);
  EXPECT_THAT(r->measured(12).latency_statistic(),
              HasSubstr("; x0.833 to the footing the budgets were resolved at (the parent "
                        "served alongside at 30.00 ms, 25.00 ms then)"));
  EXPECT_THAT(r->parent_beside_ms(),
              ::testing::ElementsAre(::testing::DoubleNear(30, 1e-9),
                                     ::testing::DoubleNear(25, 1e-9),
                                     ::testing::DoubleNear(27.5, 1e-9)));
  EXPECT_EQ(MeasureSummary(*r, "search"),
            "8 of the 25 candidates of search measured, 5 of them in 2 further passes where "
            "the budgets fell between two; timed against the parent served alongside (30.00, "
            "25.00, 27.50 ms; the budgets resolved at 25.00 ms)");

  calls.clear();
  r = MeasureCandidates(c, contract, {0, 0.10}, {}, serve_round);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(calls[3], (std::vector<size_t>{2, 5, 7, 10}));
  EXPECT_EQ(r->parent_beside_ms_size(), 0);
}

// Which contracts measure beside the parent: every timed budget relative to it.
TEST(MeasureJobTest, ParentReferenceNeedsEveryTimedBudgetRelative) {
  v1::DeploymentContract c;
  c.mutable_workload()->set_batch_size(2);
  c.mutable_workload()->set_output_tokens(16);
  c.mutable_budget()->set_latency_ms_max(22);
  EXPECT_EQ(ParentReferenceMs(c), std::nullopt);  // absolute
  c.mutable_budget()->set_memory_vs_parent_max(0.9);
  EXPECT_EQ(ParentReferenceMs(c), std::nullopt);  // memory does not move with the host
  c.mutable_budget()->set_throughput_vs_parent_min(1.25);
  c.mutable_budget()->set_throughput_tokens_per_s_min(2000);
  EXPECT_EQ(ParentReferenceMs(c), std::nullopt);  // latency still absolute
  c.mutable_budget()->clear_latency_ms_max();
  // 32 tokens a request at 2000 / 1.25 = 1600 tokens/s: 20 ms.
  EXPECT_EQ(ParentReferenceMs(c), std::optional<double>(20));
  c.mutable_budget()->set_latency_vs_parent_max(0.5);
  c.mutable_budget()->set_latency_ms_max(9);
  EXPECT_EQ(ParentReferenceMs(c), std::optional<double>(18));
}

// A real verify in the built-in engine with every median "close" (an unbounded band): the
// three serves and two more, judged on the median of five.
TEST(MlJobsTest, VerifyServesACloseCallMoreTimes) {
  const std::string dir = SaveSmall("verify_close");
  MlJobConfig config = Fast();
  config.close_calls = {2, 1e9};
  absl::StatusOr<v1::JobOutput> r = RunVerify(Contract(), dir, config, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ModelCosts& measured = r->measured();
  EXPECT_EQ(measured.serve_latency_ms_size(), 5);
  EXPECT_EQ(measured.close_call_serves(), 2);
  std::vector<double> serves(measured.serve_latency_ms().begin(),
                             measured.serve_latency_ms().end());
  std::sort(serves.begin(), serves.end());
  EXPECT_EQ(measured.latency_ms(), serves[2]);
  EXPECT_THAT(measured.latency_statistic(), HasSubstr("the median of 5 serves ("));
}

// A real verify in the built-in engine held to 0.9 x the parent's latency: the parent's
// architecture served alongside, three serves each; the latency budget is 0.9 x the parent's
// median there and names it, memory stays the profile's figure.
TEST(MlJobsTest, VerifyBesideTheParentJudgesTheTimedBudgetOnIt) {
  const std::string student = SaveSmall("verify_student");
  const std::string parent = SaveSmall("verify_parent");
  v1::DeploymentContract contract = Contract();
  contract.mutable_parent()->set_path(parent);
  contract.mutable_budget()->set_latency_vs_parent_max(0.9);
  contract.mutable_budget()->set_memory_vs_parent_max(0.5);
  // Student and parent share one architecture, so 0.9 x the parent is within the close-call
  // band at random: close calls off, three serves each.
  MlJobConfig config = Fast();
  config.close_calls = {0, 0.10};
  absl::StatusOr<v1::JobOutput> r =
      RunVerify(contract, student, config, nullptr, nullptr, parent);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_parent_beside());
  const v1::ModelCosts& p = r->parent_beside();
  EXPECT_EQ(p.serve_latency_ms_size(), 3);
  EXPECT_EQ(r->measured().serve_latency_ms_size(), 3);
  ASSERT_EQ(r->budgets_size(), 2);
  const v1::BudgetCheck& latency = r->budgets(0);
  EXPECT_EQ(latency.resource(), "latency_ms");
  EXPECT_DOUBLE_EQ(latency.parent(), p.request_p50_ms());
  EXPECT_DOUBLE_EQ(latency.budget(), 0.9 * p.request_p50_ms());
  EXPECT_EQ(latency.met(), r->measured().latency_ms() <= latency.budget());
  const v1::BudgetCheck& memory = r->budgets(1);
  EXPECT_EQ(memory.resource(), "memory_mib");
  EXPECT_DOUBLE_EQ(memory.budget(), 0.001);
  EXPECT_FALSE(memory.has_parent());
  // Without the parent's folder, the contract's figure as before.
  r = RunVerify(contract, student, Fast(), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_parent_beside());
  EXPECT_DOUBLE_EQ(r->budgets(0).budget(), 1e6);
  EXPECT_FALSE(r->budgets(0).has_parent());
}

TEST(MlJobsTest, VerifyRejectsInvalidModels) {
  const std::string dir = SaveSmall("bad");
  {
    std::FILE* f = std::fopen((dir + "/config.json").c_str(), "w");
    std::fputs("{\"vocab\": 64, \"hidden\": -3}", f);
    std::fclose(f);
  }
  EXPECT_THAT(RunVerify(Contract(), dir, Fast(), nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model failed validation")));
  EXPECT_THAT(RunVerify(Contract(), dir + "/nowhere", Fast(), nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model failed validation")));
}

TEST(MlJobsTest, ProfileBuildsAValidatedTable) {
  const std::string dir = SaveSmall("profile");
  v1::DeploymentContract c = Contract();
  c.mutable_workload()->set_input_tokens(8);
  double last = -1;
  absl::StatusOr<ProfileJobOutput> out = RunProfile(
      c, dir, Fast(),
      [&](double f, const std::string&, const std::map<std::string, double>&) {
        last = f;
        return true;
      });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(out->table.entries_size(), 0);
  EXPECT_EQ(out->table.validated_architectures(), 2);
  EXPECT_EQ(out->table.engine(), "tailor-builtin");
  EXPECT_EQ(out->table.precision(), v1::FP32);
  EXPECT_EQ(out->table.workload().input_tokens(), 8);
  EXPECT_TRUE(out->table.memory_model().fields().contains("eps_mib"));
  EXPECT_GT(last, 0);
  EXPECT_THAT(RunProfile(c, dir + "/nowhere", Fast(), nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parent model")));

  // The drift check re-measures the table on fresh architectures in the same engine: the
  // verdict follows the table's own validated error, whatever the figures on this host.
  absl::StatusOr<costmodel::RecheckResult> recheck =
      RunRecheck(c, dir, out->table, Fast(), nullptr);
  ASSERT_TRUE(recheck.ok()) << recheck.status();
  ASSERT_EQ(recheck->architectures.size(), 4u);
  for (const costmodel::ArchitectureMeasurement& a : recheck->architectures) {
    EXPECT_GT(a.measured_latency_ms, 0) << a.description;
    EXPECT_GT(a.predicted_latency_ms, 0) << a.description;
    EXPECT_GT(a.measured_memory_mib, 0) << a.description;
  }
  EXPECT_EQ(recheck->bound,
            std::max(out->table.latency_max_error(), out->table.latency_mape()));
  EXPECT_EQ(recheck->holds, recheck->summary.latency_mape <= recheck->bound);
  // Another engine's contract is refused before anything is served.
  v1::DeploymentContract other = c;
  other.mutable_target()->set_engine_version("2");
  EXPECT_THAT(RunRecheck(other, dir, out->table, Fast(), nullptr).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("target.engine")));
}

}  // namespace
}  // namespace tailor::profiler
