// The profiler agent's llama.cpp engine (profiler-agent/llama_cpp_engine.h): the equivalence
// gate's arithmetic, repetitions per percentile, contract checks, and verify and profile
// against the real llama.cpp of node-llama-cpp (those skip, saying so, when node or the
// package is missing). No timing assertions.

#include "profiler-agent/llama_cpp_engine.h"
#include "profiler-agent/handlers.h"
#include "profiler-agent/request_latency.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/costmodel/whole_model_profiler.h"
#include "compression/hf/hf_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/llama_cpp_agreement.h"
#include "tests/testing/status_matchers.h"

namespace tailor::profiler {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

// log-softmax of `logits`.
std::vector<float> LogSoftmax(const std::vector<double>& logits) {
  double z = 0;
  for (double x : logits) z += std::exp(x);
  std::vector<float> out;
  for (double x : logits) out.push_back(static_cast<float>(x - std::log(z)));
  return out;
}

gguf::NextTokenLogprobs Theirs(const std::vector<std::vector<float>>& rows) {
  gguf::NextTokenLogprobs t;
  t.vocab_size = static_cast<int64_t>(rows[0].size());
  for (size_t i = 0; i < rows.size(); ++i) {
    t.positions.push_back(static_cast<int64_t>(i));
    t.logprobs.emplace_back(rows[i].begin(), rows[i].end());
  }
  return t;
}

TEST(LlamaCppEngineTest, IdenticalDistributionsPassTheGate) {
  const std::vector<std::vector<float>> rows = {LogSoftmax({1, 2, 3}), LogSoftmax({3, 0, 1})};
  absl::StatusOr<v1::EquivalenceCheck> e = JudgeEquivalence({rows}, {Theirs(rows)}, {});
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_EQ(e->prompts(), 1);
  EXPECT_EQ(e->positions(), 2);
  EXPECT_EQ(e->max_kl(), 0);
  EXPECT_EQ(e->argmax_agreement(), 1);
  EXPECT_EQ(e->max_kl_allowed(), 1e-3);  // the contract's defaults
  EXPECT_EQ(e->min_argmax_agreement(), 0.99);
  EXPECT_TRUE(e->passed());
}

TEST(LlamaCppEngineTest, KlAndArgmaxAreComputedPerPosition) {
  const std::vector<float> p = LogSoftmax({0, 0});           // (1/2, 1/2)
  const std::vector<float> q = LogSoftmax({std::log(3), 0});  // (3/4, 1/4)
  const std::vector<float> r = LogSoftmax({0, std::log(3)});  // (1/4, 3/4)
  // Position 0: the same; position 1: KL((3/4,1/4) || (1/4,3/4)) = (1/2) ln 3, argmax differs.
  absl::StatusOr<v1::EquivalenceCheck> e =
      JudgeEquivalence({{p, q}}, {Theirs({p, r})}, v1::EquivalenceGate());
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_NEAR(e->max_kl(), 0.5 * std::log(3.0), 1e-6);
  EXPECT_NEAR(e->mean_kl(), 0.25 * std::log(3.0), 1e-6);
  EXPECT_EQ(e->argmax_agreement(), 0.5);
  EXPECT_FALSE(e->passed());
}

TEST(LlamaCppEngineTest, GateThresholdsComeFromTheContract) {
  const std::vector<float> p = LogSoftmax({0, 0});
  const std::vector<float> q = LogSoftmax({0.01, 0});
  v1::EquivalenceGate gate;
  gate.set_max_kl(1.0);
  gate.set_min_argmax_agreement(0.0);
  absl::StatusOr<v1::EquivalenceCheck> e = JudgeEquivalence({{q}}, {Theirs({p})}, gate);
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_TRUE(e->passed());
  gate.set_max_kl(1e-9);
  e = JudgeEquivalence({{q}}, {Theirs({p})}, gate);
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_GT(e->max_kl(), 1e-9);
  EXPECT_FALSE(e->passed());
}

TEST(LlamaCppEngineTest, MassWhereLlamaCppUnderflowedIsAnInfiniteKl) {
  const std::vector<float> p = LogSoftmax({0, 0});
  gguf::NextTokenLogprobs t = Theirs({p});
  t.logprobs[0][1] = -std::numeric_limits<double>::infinity();
  absl::StatusOr<v1::EquivalenceCheck> e = JudgeEquivalence({{p}}, {t}, {});
  ASSERT_THAT(e.status(), IsOk());
  EXPECT_TRUE(std::isinf(e->max_kl()));
  EXPECT_FALSE(e->passed());
}

TEST(LlamaCppEngineTest, ShapeMismatchesAreNamed) {
  const std::vector<float> p = LogSoftmax({0, 0});
  const std::vector<float> wide = LogSoftmax({0, 0, 0});
  EXPECT_THAT(JudgeEquivalence({{p}}, {}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 prompts")));
  EXPECT_THAT(JudgeEquivalence({{p, p}}, {Theirs({p})}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 positions")));
  EXPECT_THAT(JudgeEquivalence({{wide}}, {Theirs({p})}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocabulary has 3")));
}

TEST(LlamaCppEngineTest, RepetitionsLeaveFiveSamplesAboveThePercentile) {
  EXPECT_EQ(RepetitionsFor(v1::LATENCY_P50, 15), 15);
  EXPECT_EQ(RepetitionsFor(v1::LATENCY_PERCENTILE_UNSPECIFIED, 2), 10);
  EXPECT_EQ(RepetitionsFor(v1::LATENCY_P90, 15), 50);
  EXPECT_EQ(RepetitionsFor(v1::LATENCY_P99, 15), 500);
  EXPECT_EQ(RepetitionsFor(v1::LATENCY_P99, 600), 600);
}

v1::ModelCosts Serve(double latency_ms, double memory_mib, int remeasures) {
  v1::ModelCosts c;
  c.set_latency_ms(latency_ms);
  c.set_memory_mib(memory_mib);
  c.set_remeasures(remeasures);
  c.set_latency_statistic("p50 of 10 whole requests");
  return c;
}

// The serve of median latency is judged whole (its memory with it), every serve's latency is
// kept in serve order, and re-serves add up.
TEST(LlamaCppEngineTest, SeveralServesAreJudgedOnTheMedianOne) {
  absl::StatusOr<v1::ModelCosts> m =
      MedianServe({Serve(22.3, 3.0, 1), Serve(19.2, 2.9, 0), Serve(20.4, 2.8, 2)}, "serves");
  ASSERT_THAT(m.status(), IsOk());
  EXPECT_EQ(m->latency_ms(), 20.4);
  EXPECT_EQ(m->memory_mib(), 2.8);
  EXPECT_THAT(m->serve_latency_ms(), ::testing::ElementsAre(22.3, 19.2, 20.4));
  EXPECT_EQ(m->remeasures(), 3);
  EXPECT_EQ(m->latency_statistic(),
            "p50 of 10 whole requests; the median of 3 serves (22.30, 19.20, 20.40 ms)");
  // An even count takes the upper middle: the verdict errs toward the slower serve.
  m = MedianServe({Serve(20, 1, 0), Serve(21, 1, 0)}, "interleaved rounds");
  ASSERT_THAT(m.status(), IsOk());
  EXPECT_EQ(m->latency_ms(), 21);
  // One serve is that serve, its statistic as it was.
  m = MedianServe({Serve(20, 1, 0)}, "serves");
  ASSERT_THAT(m.status(), IsOk());
  EXPECT_EQ(m->latency_statistic(), "p50 of 10 whole requests");
  EXPECT_THAT(m->serve_latency_ms(), ::testing::ElementsAre(20));
  EXPECT_THAT(MedianServe({}, "serves").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no serves")));
  // MeasureServes passes the first error on, serving no more.
  int calls = 0;
  absl::StatusOr<v1::ModelCosts> failed =
      MeasureServes(3, [&]() -> absl::StatusOr<v1::ModelCosts> {
        ++calls;
        return absl::FailedPreconditionError("llama.cpp killed by signal 6");
      });
  EXPECT_THAT(failed.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(calls, 1);
}

// --- against the real llama.cpp -------------------------------------------------------------

class LlamaCppEngineRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = testing::LlamaCppSidecarMissing();
    if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
    absl::StatusOr<EngineIdentity> id = DetectLlamaCpp({});
    ASSERT_THAT(id.status(), IsOk());
    identity_ = *id;
    parent_ = testing::NewTestDir("llama_cpp_engine_parent");
    testing::HfTestCheckpointOptions o;
    o.dtype = model::DType::kF32;
    ASSERT_THAT(testing::WriteHfTestCheckpoint(parent_, "LlamaForCausalLM", o), IsOk());
    work_ = testing::NewTestDir("llama_cpp_engine_work");
    config_.verify_repetitions = 3;
    config_.verify_task_samples = 2;
    config_.profile_rounds = 3;
    config_.profile_validation_architectures = 3;
    // These tiny models' requests spread past any threshold on node's jitter alone: a serve
    // again would only triple the profile's time (the calm rule has its own tests).
    config_.profile_remeasures = 0;
    engine_ = MakeLlamaCppEngine(config_, {}, identity_);
  }

  v1::DeploymentContract Contract() const {
    v1::DeploymentContract c;
    c.set_method(v1::AUTOCOMPRESS);
    c.mutable_parent()->set_path(parent_);
    c.mutable_target()->set_device_kind("cpu");
    c.mutable_target()->set_engine("llama.cpp");
    c.mutable_target()->set_engine_version(identity_.version);
    c.mutable_workload()->set_batch_size(2);
    c.mutable_workload()->set_input_tokens(8);
    c.mutable_workload()->set_output_tokens(4);
    c.mutable_workload()->set_cached_prefix_tokens(4);
    c.mutable_budget()->set_latency_ms_max(1e6);
    c.mutable_budget()->set_memory_mib_max(1e-3);
    return c;
  }

  EngineIdentity identity_;
  std::string parent_, work_;
  MlJobConfig config_;
  std::shared_ptr<ServingEngine> engine_;
};

TEST_F(LlamaCppEngineRealTest, IdentityIsWhatNodeLlamaCppReports) {
  EXPECT_EQ(identity_.name, "llama.cpp");
  EXPECT_EQ(identity_.version, "3.21.1");
  EXPECT_THAT(identity_.build, HasSubstr("llama.cpp "));
}

// What the agent registers: the build names the harness that times requests, and an agent
// whose native harness cannot run is refused at start-up, naming what is missing, instead of
// failing every profile and verify later.
TEST_F(LlamaCppEngineRealTest, TheAgentRegistersTheHarnessAndRefusesAMissingOne) {
  absl::StatusOr<ServingEngineChoice> native = ResolveServingEngine("llama.cpp", "", "cpu", 1);
  ASSERT_THAT(native.status(), IsOk());
  EXPECT_EQ(native->version, "3.21.1");
  EXPECT_THAT(native->build, HasSubstr("; requests timed natively (tailor-llama-serve)"));
  absl::StatusOr<ServingEngineChoice> node =
      ResolveServingEngine("llama.cpp", "", "cpu", 1, gguf::ServeHarness::kNode);
  ASSERT_THAT(node.status(), IsOk());
  EXPECT_THAT(node->build, HasSubstr("; requests timed through node-llama-cpp"));
  const std::string missing = work_ + "/no-such-harness";
  ASSERT_EQ(setenv("TAILOR_LLAMA_SERVE", missing.c_str(), 1), 0);
  absl::StatusOr<ServingEngineChoice> refused = ResolveServingEngine("llama.cpp", "", "cpu", 1);
  unsetenv("TAILOR_LLAMA_SERVE");
  EXPECT_THAT(refused.status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("the native serving harness cannot run: no " + missing)));
}

TEST_F(LlamaCppEngineRealTest, VerifyPassesTheGateThenMeasuresWholeRequests) {
  absl::StatusOr<v1::JobOutput> r = engine_->Verify(Contract(), {parent_, true}, work_, nullptr);
  ASSERT_THAT(r.status(), IsOk());
  const v1::EquivalenceCheck& e = r->equivalence();
  EXPECT_TRUE(e.passed());
  EXPECT_EQ(e.prompts(), 16);
  EXPECT_EQ(e.positions(), 16 * 32);
  EXPECT_LT(e.max_kl(), 1e-5);  // an F32 export: the same function up to rounding
  EXPECT_EQ(e.argmax_agreement(), 1.0);
  EXPECT_EQ(e.prompts_from(), "random ids");
  EXPECT_FALSE(e.has_engine_perplexity());
  EXPECT_FALSE(r->quality().has_perplexity());
  const v1::ModelCosts& m = r->measured();
  EXPECT_EQ(m.repetitions(), 10);  // p50 needs 10 (RepetitionsFor), more than configured
  EXPECT_EQ(m.latency_ms(), m.request_p50_ms());
  // Judged on the median of three llama.cpp processes (verify_serves), each served until calm.
  ASSERT_EQ(m.serve_latency_ms_size(), 3);
  std::vector<double> serves(m.serve_latency_ms().begin(), m.serve_latency_ms().end());
  std::sort(serves.begin(), serves.end());
  EXPECT_EQ(m.latency_ms(), serves[1]);
  EXPECT_THAT(m.latency_statistic(), ::testing::HasSubstr("; the median of 3 serves ("));
  EXPECT_LE(m.remeasures(), 6);
  // Served until calm: a tiny model's 2-3 ms requests spread 50-75% (node's own threads
  // and timers), so the statistic usually goes on to say it stayed disturbed.
  EXPECT_THAT(m.latency_statistic(), ::testing::StartsWith("p50 of 10 whole requests"));
  EXPECT_EQ(m.disturbed(), !m.disturbance().empty());
  EXPECT_EQ(m.disturbed(),
            m.latency_statistic().find("(disturbed: " + m.disturbance() + ")") !=
                std::string::npos);
  EXPECT_GT(m.latency_ms(), 0);
  EXPECT_NEAR(m.throughput_tokens_per_s(), 2 * 4 * 1000.0 / m.latency_ms(), 1e-9);
  EXPECT_NEAR(m.memory_mib(), m.weight_memory_mib() + m.cache_mib() + m.compute_buffer_mib(),
              1e-9);
  ASSERT_EQ(r->budgets_size(), 4);
  EXPECT_EQ(r->budgets(0).resource(), "equivalence_max_kl");
  EXPECT_TRUE(r->budgets(0).met());
  EXPECT_EQ(r->budgets(1).resource(), "equivalence_argmax_agreement");
  EXPECT_EQ(r->budgets(2).resource(), "latency_ms");
  EXPECT_TRUE(r->budgets(2).met());
  EXPECT_EQ(r->budgets(3).resource(), "memory_mib");
  EXPECT_FALSE(r->budgets(3).met());
  EXPECT_EQ(r->engine().name(), "llama.cpp");
  EXPECT_EQ(r->engine().version(), "3.21.1");
}

// Held to the parent's latency: the parent's architecture (dummy weights) served in
// llama.cpp alternately with the model, three serves each, and the budget resolved there.
TEST_F(LlamaCppEngineRealTest, VerifyBesideTheParentResolvesTheBudgetThere) {
  v1::DeploymentContract c = Contract();
  c.mutable_budget()->set_latency_vs_parent_max(1.5);
  ModelToServe model{parent_, true};
  model.parent_dir = parent_;
  absl::StatusOr<v1::JobOutput> r = engine_->Verify(c, model, work_, nullptr);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_TRUE(r->has_parent_beside());
  const v1::ModelCosts& p = r->parent_beside();
  EXPECT_EQ(p.serve_latency_ms_size(), 3);
  EXPECT_EQ(p.repetitions(), 10);
  EXPECT_THAT(p.latency_statistic(), HasSubstr("serves of the parent, alternating"));
  EXPECT_EQ(r->measured().serve_latency_ms_size(), 3);
  ASSERT_EQ(r->budgets_size(), 4);
  const v1::BudgetCheck& latency = r->budgets(2);
  EXPECT_EQ(latency.resource(), "latency_ms");
  EXPECT_DOUBLE_EQ(latency.parent(), p.request_p50_ms());
  EXPECT_DOUBLE_EQ(latency.budget(), 1.5 * p.request_p50_ms());
  EXPECT_EQ(latency.met(), r->measured().latency_ms() <= latency.budget());
  EXPECT_DOUBLE_EQ(r->budgets(3).budget(), 1e-3);
}

// With data.eval, the gate's prompts are the eval text (sequences of at least the gate's
// 32 tokens, cut to it), and both engines' perplexity over those tokens is recorded; the
// served one is llama.cpp's.
TEST_F(LlamaCppEngineRealTest, TheGateComparesOnTheEvalTextAndMeasuresPerplexity) {
  EvalSample eval;
  eval.digest = std::string(64, 'b');
  for (int s = 0; s < 4; ++s) {
    data::TokenSequence seq;
    for (int t = 0; t < (s == 1 ? 20 : 40); ++t) seq.tokens.push_back((s * 13 + t * 7) % 64);
    eval.sequences.push_back(seq);
  }
  absl::StatusOr<v1::JobOutput> r =
      engine_->Verify(Contract(), {parent_, true, &eval}, work_, nullptr);
  ASSERT_THAT(r.status(), IsOk());
  const v1::EquivalenceCheck& e = r->equivalence();
  EXPECT_EQ(e.prompts_from(), "data.eval");
  EXPECT_EQ(e.prompts(), 3);  // the 20-token sequence is shorter than the gate's prompts
  EXPECT_EQ(e.positions(), 3 * 32);
  EXPECT_TRUE(e.passed());
  ASSERT_TRUE(e.has_engine_perplexity());
  ASSERT_TRUE(e.has_tailor_perplexity());
  EXPECT_GT(e.engine_perplexity(), 1.0);
  // An F32 export: the same function up to rounding, so the same perplexity.
  EXPECT_NEAR(e.engine_perplexity(), e.tailor_perplexity(), 1e-4 * e.tailor_perplexity());
  const v1::ModelQuality& q = r->quality();
  EXPECT_EQ(q.perplexity(), e.engine_perplexity());
  EXPECT_EQ(q.eval_tokens(), 3 * 31);
  EXPECT_EQ(q.eval_sequences(), 3);
  EXPECT_EQ(q.eval_dataset_digest(), eval.digest);
}

TEST_F(LlamaCppEngineRealTest, AFailedGateMeasuresNothingAndShowsBothFigures) {
  v1::DeploymentContract c = Contract();
  c.mutable_target()->mutable_equivalence()->set_max_kl(1e-15);  // below float rounding
  absl::StatusOr<v1::JobOutput> r = engine_->Verify(c, {parent_, true}, work_, nullptr);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_FALSE(r->equivalence().passed());
  EXPECT_GT(r->equivalence().max_kl(), 1e-15);
  EXPECT_FALSE(r->has_measured());
  ASSERT_EQ(r->budgets_size(), 2);
  EXPECT_FALSE(r->budgets(0).met());
  EXPECT_TRUE(r->budgets(1).met());
  EXPECT_THAT(r->reason(), HasSubstr("equivalence gate failed"));
}

TEST_F(LlamaCppEngineRealTest, P90NeedsFiftyRequests) {
  v1::DeploymentContract c = Contract();
  c.mutable_budget()->set_latency_percentile(v1::LATENCY_P90);
  absl::StatusOr<v1::JobOutput> r = engine_->Verify(c, {parent_, true}, work_, nullptr);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->measured().repetitions(), 50);
  EXPECT_EQ(r->measured().latency_ms(), r->measured().request_p90_ms());
  EXPECT_GE(r->measured().request_p90_ms(), r->measured().request_p50_ms());
}

TEST_F(LlamaCppEngineRealTest, ContractsForAnotherEngineOrPrecisionAreRefused) {
  v1::DeploymentContract c = Contract();
  c.mutable_target()->set_engine("tailor-builtin");
  c.mutable_target()->set_engine_version("1");
  EXPECT_THAT(engine_->Verify(c, {parent_, true}, work_, nullptr).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("this agent serves llama.cpp 3.21.1")));
  c = Contract();
  c.mutable_target()->set_precision(v1::BF16);
  EXPECT_THAT(engine_->Verify(c, {parent_, true}, work_, nullptr).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("target.precision")));
}

TEST_F(LlamaCppEngineRealTest, ATailorFormatParentIsRefusedNamingTheLayout) {
  absl::StatusOr<model::HybridLM> m = hf::LoadModelDir(parent_);
  ASSERT_THAT(m.status(), IsOk());
  const std::string dir = work_ + "/tailor-format";
  ASSERT_THAT(model::SaveHybridLM(*m, dir), IsOk());
  v1::DeploymentContract c = Contract();
  c.mutable_parent()->set_path(dir);
  EXPECT_THAT(engine_->Verify(c, {dir, true}, work_, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("GGUF exports of Hugging Face checkpoints")));
}

TEST_F(LlamaCppEngineRealTest, ProfileBuildsAValidatedTableFromWholeRequests) {
  absl::StatusOr<ProfileJobOutput> out = engine_->Profile(Contract(), parent_, work_, nullptr);
  ASSERT_THAT(out.status(), IsOk());
  EXPECT_EQ(out->table.engine(), "llama.cpp");
  EXPECT_EQ(out->table.engine_version(), "3.21.1");
  EXPECT_GT(out->table.entries_size(), 0);
  EXPECT_EQ(out->result.validation.size(), 3u);
  EXPECT_EQ(out->result.table.validation.architectures, 3);
  for (const costmodel::ArchitectureMeasurement& a : out->result.validation) {
    EXPECT_GT(a.measured_latency_ms, 0) << a.description;
    EXPECT_GT(a.predicted_latency_ms, 0) << a.description;
  }
  // --profile-remeasures 0: every model served once, whatever its spread.
  EXPECT_EQ(out->result.remeasures, 0);
  EXPECT_EQ(out->result.remeasured_models, 0);
}

// Parents whose GGUF layout has one width per kind (Mixtral's `llama`; `qwen2` also keeps
// hidden width and heads): profiled on uniform models with blocks removed whole and validated
// on uniform architectures, every one of them served by llama.cpp. (`qwen3`, the same rule as
// `qwen2` less the hidden width, is profiled by e2e_llama_cpp_engine's Qwen3 campaign.)
// Profiling models deeper than the parent (WholeModelProfileOptions::stack_depth: the
// parent's layers tiled, one node at D or D / 2 positions, every other layer removed) are
// written and served like any student: `deci` with its stand-ins (a first block without
// attention, blocks without an FFN), `nemotron_h` with its zero attention or Mamba block.
// A stack and its half of each layer kind, served in llama.cpp; none may abort.
TEST_F(LlamaCppEngineRealTest, DeepStackModelsServe) {
  for (const char* arch : {"LlamaForCausalLM", "NemotronHForCausalLM"}) {
    const std::string dir = testing::NewTestDir(absl::StrCat("llama_cpp_deep_", arch));
    // Nemotron-H's Mamba, attention and MLP (`nemotron_h`; with both experts and MLPs, the
    // test checkpoint's default, llama.cpp serves no student).
    const nlohmann::json config = arch == std::string("LlamaForCausalLM")
                                      ? testing::TinyHfConfig(arch)
                                      : testing::TinyNemotronHConfig("M*-M");
    ASSERT_THAT(testing::WriteHfCheckpointFiles(
                    dir, config, testing::HfTestTensors(config, model::DType::kF32, 1)),
                IsOk());
    absl::StatusOr<hf::HfCheckpoint> hf = hf::HfCheckpoint::Open(dir);
    ASSERT_THAT(hf.status(), IsOk());
    absl::StatusOr<model::HybridConfig> parent = hf::HybridConfigFromHf(hf->config());
    ASSERT_THAT(parent.status(), IsOk());
    costmodel::WholeModelProfileOptions options;
    options.space = LlamaCppServableSpace(*hf);
    options.workload = engine::Workload{1, 8, 4, 0};
    options.max_hidden_points = 1;
    options.stack_depth = 4;
    absl::StatusOr<std::vector<model::HybridConfig>> plan =
        costmodel::PlanWholeModelProfiling(*parent, options);
    ASSERT_THAT(plan.status(), IsOk());
    gguf::ServeBenchmarkOptions serve_options;
    serve_options.input_tokens = 8;
    serve_options.output_tokens = 4;
    serve_options.warmup = 1;
    serve_options.repetitions = 3;
    const std::string scratch = absl::StrCat(work_, "/deep-", arch);
    std::filesystem::create_directories(scratch);
    const costmodel::ServeModelFn serve = LlamaCppServeModelFn(*hf, scratch, serve_options);
    std::set<model::LayerKind> kinds;
    for (size_t k = 0; k + 1 < plan->size(); k += 2) {  // a stack, then its half
      // The node's kind: what the stack holds more of than its half (`nemotron_h_moe`'s
      // expert layers cannot be removed, so both hold those alike).
      std::map<model::LayerKind, int> more;
      for (const model::LayerSpec& l : (*plan)[k].layers) more[l.kind] += l.present();
      for (const model::LayerSpec& l : (*plan)[k + 1].layers) more[l.kind] -= l.present();
      model::LayerKind kind = model::LayerKind::kMlp;
      for (const auto& [kind_of, count] : more) {
        if (count > 0) kind = kind_of;
      }
      if (!kinds.insert(kind).second) continue;
      for (size_t m : {k, k + 1}) {
        absl::StatusOr<costmodel::ServedModel> s = serve((*plan)[m], m + 1);
        ASSERT_THAT(s.status(), IsOk()) << arch << " model " << m;
        ASSERT_EQ(s->requests.size(), 3u);
        EXPECT_GT(s->requests[0].request_ms, 0) << arch << " model " << m;
      }
    }
    EXPECT_EQ(kinds.size(), arch == std::string("LlamaForCausalLM") ? 2u : 3u) << arch;
  }
}

class LlamaCppUniformProfileTest : public LlamaCppEngineRealTest,
                                   public ::testing::WithParamInterface<const char*> {};

TEST_P(LlamaCppUniformProfileTest, ProfilesOnModelsTheLayoutHolds) {
  const std::string arch = GetParam();
  const std::string dir = testing::NewTestDir(absl::StrCat("llama_cpp_uniform_", arch));
  testing::HfTestCheckpointOptions o;
  o.dtype = model::DType::kF32;
  ASSERT_THAT(testing::WriteHfTestCheckpoint(dir, arch, o), IsOk());
  v1::DeploymentContract c = Contract();
  c.mutable_parent()->set_path(dir);
  absl::StatusOr<ProfileJobOutput> out = engine_->Profile(c, dir, work_, nullptr);
  ASSERT_THAT(out.status(), IsOk());
  EXPECT_EQ(out->result.validation.size(), 3u);
  for (const costmodel::ArchitectureMeasurement& a : out->result.validation) {
    EXPECT_GT(a.measured_latency_ms, 0) << a.description;
    EXPECT_GT(a.predicted_latency_ms, 0) << a.description;
    std::map<model::LayerKind, model::LayerSpec> one;
    for (const model::LayerSpec& l : a.config.layers) {
      EXPECT_TRUE(l.present()) << a.description;
      auto [it, first] = one.emplace(l.kind, l);
      EXPECT_TRUE(first || it->second == l) << a.description;
    }
    if (arch == "Qwen2ForCausalLM") {
      EXPECT_EQ(a.config.hidden, 32) << a.description;
    }
  }
  for (const costmodel::ArchitectureMeasurement& m : out->result.profiling_models) {
    EXPECT_GT(m.measured_latency_ms, 0) << m.description;
  }
  const costmodel::ValidationSummary& v = out->result.table.validation;
  std::printf("%s: %zu profiling models, held-out latency MAPE %.1f%% (max %.1f%%), memory "
              "MAPE %.1f%%\n",
              arch.c_str(), out->result.profiling_models.size(), 100 * v.latency_mape,
              100 * v.latency_max_error, 100 * v.memory_mape);
}

INSTANTIATE_TEST_SUITE_P(Layouts, LlamaCppUniformProfileTest,
                         ::testing::Values("MixtralForCausalLM", "Qwen2ForCausalLM"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace tailor::profiler
