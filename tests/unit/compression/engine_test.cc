// Built-in engine: greedy serving equals argmax of the full forward, the counting allocator
// sees every CPU allocation, memory accounting, per-layer split and input validation; the
// workload's timing summaries.
// No timing assertions: times are only checked to be present and consistent.

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "compression/engine/device_backend.h"
#include "compression/engine/engine.h"
#include "compression/engine/workload.h"
#include "compression/model/hybrid_lm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::engine {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;
using model::LayerSpec;

model::HybridConfig SmallConfig() {
  model::HybridConfig c;
  c.vocab = 40;
  c.hidden = 32;
  c.max_seq = 48;
  c.layers = {LayerSpec::Attention(4, 2, 8), LayerSpec::Mamba(2, 8, 8, 4, 4),
              LayerSpec::Moe(4, 2, 16, 16), LayerSpec::Mlp(32), LayerSpec::Mlp(0),
              LayerSpec::Moe(0, 0, 0, 24)};
  return c;
}

// Unit-gain weights so greedy choices are decided by clear margins, not rounding noise.
model::HybridLM MakeModel(const model::HybridConfig& c, uint64_t seed = 3) {
  absl::StatusOr<model::HybridLM> m = model::CreateHybridLM(c, seed);
  EXPECT_TRUE(m.ok()) << m.status();
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& p : (*m)->parameters()) {
    if (p.dim() >= 2) p.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(p.size(-1))));
  }
  return *m;
}

std::unique_ptr<Engine> MakeEngine(const model::HybridConfig& c,
                                   Precision precision = Precision::kFp32) {
  EngineOptions options;
  options.precision = precision;
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(MakeModel(c), options);
  EXPECT_TRUE(e.ok()) << e.status();
  return std::move(*e);
}

TEST(CountingAllocatorTest, SeesAllocationsAndFrees) {
  CountingCpuAllocator* alloc = CountingCpuAllocator::Install();
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(CountingCpuAllocator::Install(), alloc);  // idempotent
  const int64_t before = alloc->current_bytes();
  const int64_t count = alloc->allocations();
  alloc->ResetPeak();
  {
    at::Tensor t = torch::empty({1000}, torch::kFloat);
    EXPECT_EQ(alloc->current_bytes() - before, 4000);
    EXPECT_GE(alloc->allocations(), count + 1);
    at::Tensor u = torch::empty({250}, torch::kDouble);
    EXPECT_EQ(alloc->current_bytes() - before, 6000);
  }
  EXPECT_EQ(alloc->current_bytes(), before);
  EXPECT_GE(alloc->peak_bytes() - before, 6000);
  alloc->ResetPeak();
  EXPECT_EQ(alloc->peak_bytes(), alloc->current_bytes());
}

TEST(CountingAllocatorTest, RawAllocateRoundTrips) {
  CountingCpuAllocator* alloc = CountingCpuAllocator::Install();
  const int64_t before = alloc->current_bytes();
  void* p = alloc->raw_allocate(128);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(alloc->current_bytes() - before, 128);
  alloc->raw_deallocate(p);
  EXPECT_EQ(alloc->current_bytes(), before);
}

TEST(EngineTest, GreedyServeEqualsArgmaxOfFullForward) {
  const model::HybridConfig c = SmallConfig();
  std::unique_ptr<Engine> e = MakeEngine(c);
  Workload w;
  w.batch_size = 2;
  w.cached_prefix_tokens = 5;
  w.input_tokens = 9;
  w.output_tokens = 7;
  ServeOptions options;
  options.seed = 11;
  options.prompt = torch::randint(0, c.vocab, {2, 14}, torch::kLong);
  absl::StatusOr<RequestResult> r = e->Serve(w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tokens.sizes(), (std::vector<int64_t>{2, 7}));

  // Teacher-force prompt + generated tokens through the full (cache-free) forward: every
  // greedy token must be the argmax at the position before it.
  const at::Tensor full = torch::cat({options.prompt, r->tokens.narrow(1, 0, 6)}, 1);
  absl::StatusOr<model::ForwardOutput> out = e->model()->Forward(full);
  ASSERT_TRUE(out.ok()) << out.status();
  const at::Tensor expected = out->logits.narrow(1, 13, 7).argmax(-1);
  EXPECT_TRUE(torch::equal(expected, r->tokens)) << expected << "\n" << r->tokens;
}

TEST(EngineTest, GenerateMatchesServe) {
  std::unique_ptr<Engine> e = MakeEngine(SmallConfig());
  const at::Tensor prompt = torch::randint(0, 40, {1, 6}, torch::kLong);
  absl::StatusOr<at::Tensor> a = e->Generate(prompt, 5);
  absl::StatusOr<at::Tensor> b = e->Generate(prompt, 5);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(torch::equal(*a, *b));
}

TEST(EngineTest, MeasuresWeightsCacheAndPeak) {
  const model::HybridConfig c = SmallConfig();
  std::unique_ptr<Engine> e = MakeEngine(c);
  EXPECT_EQ(e->weight_bytes(), c.ParameterCount() * 4);
  Workload w;
  w.input_tokens = 16;
  w.output_tokens = 4;
  absl::StatusOr<RequestResult> r = e->Serve(w);
  ASSERT_TRUE(r.ok()) << r.status();
  // Attention K and V: 2 * kv 2 * 20 positions * head_dim 8; Mamba: conv x (16 ch) and
  // B/C (16 ch) over kernel-1 = 3, SSM state 2 * 8 * 8. All FP32, batch 1.
  const int64_t cache = 4 * (2 * 2 * 20 * 8 + 16 * 3 + 16 * 3 + 2 * 8 * 8);
  EXPECT_EQ(r->cache_bytes, cache);
  EXPECT_GE(r->request_peak_bytes, cache);
  EXPECT_EQ(r->peak_bytes, r->weight_bytes + r->request_peak_bytes);
  EXPECT_GT(r->latency_ms, 0);
  EXPECT_NEAR(r->latency_ms, r->prefill_ms + r->decode_ms, 1e-6);
  EXPECT_NEAR(r->throughput_tokens_per_s, 4 * 1000.0 / r->latency_ms, 1e-6);
}

TEST(EngineTest, ProfileSplitsAtLayerBoundaries) {
  const model::HybridConfig c = SmallConfig();
  std::unique_ptr<Engine> e = MakeEngine(c);
  Workload w;
  w.input_tokens = 12;
  w.output_tokens = 5;
  ServeOptions options;
  options.profile_layers = true;
  absl::StatusOr<RequestResult> r = e->Serve(w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->layers.size(), c.layers.size());
  double prefill = r->fixed_prefill_ms, decode = r->fixed_decode_ms;
  for (const LayerMeasurement& m : r->layers) {
    EXPECT_GE(m.prefill_ms, 0);
    EXPECT_GE(m.decode_ms, 0);
    prefill += m.prefill_ms;
    decode += m.decode_ms;
  }
  // The pieces tile each step; the request's own step marks sit a few marks apart.
  EXPECT_NEAR(prefill, r->prefill_ms, 0.01 + 0.01 * r->prefill_ms);
  EXPECT_NEAR(decode, r->decode_ms, 0.01 + 0.01 * r->decode_ms);
  ASSERT_EQ(r->fixed_step_ms.size(), 5u);
  ASSERT_EQ(r->step_ms.size(), 5u);
  for (const LayerMeasurement& m : r->layers) EXPECT_EQ(m.step_ms.size(), 5u);
  // Layers that compute allocate; the absent MLP (index 4) allocates nothing.
  EXPECT_GT(r->layers[3].prefill_workspace_bytes, 12 * 32 * 4);
  EXPECT_EQ(r->layers[4].prefill_workspace_bytes, 0);
  EXPECT_EQ(r->layers[4].decode_workspace_bytes, 0);
}

TEST(EngineTest, Bf16ServesAndHalvesWeights) {
  const model::HybridConfig c = SmallConfig();
  std::unique_ptr<Engine> e = MakeEngine(c, Precision::kBf16);
  EXPECT_EQ(e->weight_bytes(), c.ParameterCount() * 2);
  Workload w;
  w.input_tokens = 8;
  w.output_tokens = 3;
  MeasureOptions mo;
  mo.warmup = 0;
  mo.repetitions = 2;
  absl::StatusOr<Measurement> m = e->Measure(w, mo);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->repetitions, 2);
  EXPECT_GT(m->peak_bytes, e->weight_bytes());
  EXPECT_GT(m->latency_ms, 0);
  EXPECT_NEAR(m->latency_ms, m->prefill_ms + m->decode_ms, 1e-9);
  EXPECT_GT(m->median_request_ms, 0);
}

TEST(EngineTest, RobustLatencySumsPerPieceMedians) {
  // Two layers, two steps, three requests: one preempted piece per request.
  std::vector<RequestResult> results(3);
  const double layer0[3][2] = {{1, 10}, {50, 11}, {1.2, 12}};  // [request][step]
  const double layer1[3][2] = {{2, 20}, {2, 21}, {2.4, 99}};
  const double fixed[3][2] = {{0.5, 1}, {0.5, 1}, {0.7, 1}};
  for (int r = 0; r < 3; ++r) {
    results[r].layers.resize(2);
    for (int s = 0; s < 2; ++s) {
      results[r].layers[0].step_ms.push_back(layer0[r][s]);
      results[r].layers[1].step_ms.push_back(layer1[r][s]);
      results[r].fixed_step_ms.push_back(fixed[r][s]);
    }
  }
  const RobustLatency robust = RobustLatencyOf(results);
  EXPECT_DOUBLE_EQ(robust.prefill_ms, 1.2 + 2 + 0.5);
  EXPECT_DOUBLE_EQ(robust.decode_ms, 11 + 21 + 1);
  EXPECT_DOUBLE_EQ(RobustLatencyOf({}).latency_ms(), 0);
}

TEST(EngineTest, RejectsBadInput) {
  std::unique_ptr<Engine> e = MakeEngine(SmallConfig());
  Workload w;
  w.output_tokens = 0;
  EXPECT_THAT(e->Serve(w).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("workload.output_tokens")));
  w.output_tokens = 10;
  w.input_tokens = 40;
  EXPECT_THAT(e->Serve(w).status(),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("max_seq is 48")));
  EXPECT_THAT(MakeDeviceBackend("gpu").status(), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EngineOptions fp16;
  fp16.precision = Precision::kFp16;
  EXPECT_THAT(Engine::Create(MakeModel(SmallConfig()), fp16).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("CUDA only")));
  EXPECT_THAT(ParsePrecision("INT4").status(), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

// Nearest rank: the smallest sample with at least p% of the samples at or below it.
TEST(PercentileTest, NearestRankOnSortedSamples) {
  const std::vector<double> ten = {10, 3, 7, 1, 9, 2, 8, 4, 6, 5};  // 1..10, unsorted
  EXPECT_EQ(Percentile(ten, 50), 5.0);
  EXPECT_EQ(Percentile(ten, 90), 9.0);
  EXPECT_EQ(Percentile(ten, 99), 10.0);
  EXPECT_EQ(Percentile(ten, 100), 10.0);
  EXPECT_EQ(Percentile(ten, 0), 1.0);
  EXPECT_EQ(Percentile(ten, 70), 7.0);  // 0.7 * 10 is not 7 in binary: no off-by-one
  EXPECT_EQ(Percentile(ten, 51), 6.0);
  EXPECT_EQ(Percentile({42}, 50), 42.0);
  EXPECT_EQ(Percentile({42}, 90), 42.0);
  EXPECT_EQ(Percentile({42}, 99), 42.0);
  EXPECT_EQ(Percentile({}, 50), 0.0);
}

TEST(EngineTest, LoadRaisesMaxSeqAndRejectsBadFiles) {
  const std::string dir = ::testing::TempDir() + "/engine_load";
  std::filesystem::remove_all(dir);
  model::HybridLM lm = MakeModel(SmallConfig());
  ASSERT_TRUE(model::SaveHybridLM(lm, dir).ok());
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Load(dir, {}, 100);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->config().max_seq, 100);
  // Garbage weights: the safetensors reader reports corruption with the path.
  {
    std::FILE* f = std::fopen((dir + "/model.safetensors").c_str(), "wb");
    std::fputs("not a safetensors file", f);
    std::fclose(f);
  }
  EXPECT_THAT(Engine::Load(dir, {}).status(), StatusIs(absl::StatusCode::kDataLoss, ::testing::_));
}

}  // namespace
}  // namespace tailor::engine
