// Cost model pieces without timing: memory-term formulas against hand-computed values,
// interpolation (exact at profiled points), the search space, the interaction fit, and the
// cost model's prediction vs its per-choice form.

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/costmodel/cost_model.h"
#include "common/status_macros.h"
#include "compression/costmodel/drift_check.h"
#include "compression/costmodel/interaction.h"
#include "compression/costmodel/interpolation.h"
#include "compression/costmodel/memory_model.h"
#include "compression/costmodel/search_space.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/unit/compression/synthetic_cost_table.h"

namespace tailor::costmodel {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;
using model::LayerSpec;

model::HybridConfig Parent() {
  model::HybridConfig c;
  c.vocab = 64;
  c.hidden = 128;
  c.max_seq = 64;
  c.layers = {LayerSpec::Attention(4, 2, 32), LayerSpec::Mamba(4, 32, 16, 4, 16),
              LayerSpec::Moe(4, 2, 128, 128), LayerSpec::Mlp(256)};
  return c;
}

// --- memory terms ---------------------------------------------------------------------

TEST(MemoryModelTest, LayerParametersByHand) {
  // norm 128 + q 128x128 + k, v 64x128 each + o 128x128
  EXPECT_EQ(LayerParameterCount(LayerSpec::Attention(4, 2, 32), 128),
            128 + 16384 + 8192 + 8192 + 16384);
  // norm 128 + z, x 2x128x128 + B/C 32x128 + dt 4x128 + dt_bias, a_log, d 3x4
  // + conv_x 128x4 + bias 128 + conv_bc 32x4 + bias 32 + gated norm 128 + out 128x128
  EXPECT_EQ(LayerParameterCount(LayerSpec::Mamba(4, 32, 16, 4, 16), 128),
            128 + 32768 + 4096 + 512 + 12 + 512 + 128 + 128 + 32 + 128 + 16384);
  // norm 128 + router 4x128 + experts 4 x 3 x 128x128 + shared 3 x 128x128
  EXPECT_EQ(LayerParameterCount(LayerSpec::Moe(4, 2, 128, 128), 128),
            128 + 512 + 196608 + 49152);
  EXPECT_EQ(LayerParameterCount(LayerSpec::Mlp(256), 128), 128 + 3 * 256 * 128);
  EXPECT_EQ(LayerParameterCount(LayerSpec::Mlp(0), 128), 0);
  EXPECT_EQ(FixedParameterCount(64, 128), 2 * 64 * 128 + 128);

  const model::HybridConfig p = Parent();
  int64_t sum = FixedParameterCount(p.vocab, p.hidden);
  for (const LayerSpec& l : p.layers) sum += LayerParameterCount(l, p.hidden);
  EXPECT_EQ(sum, p.ParameterCount());
  EXPECT_EQ(WeightBytes(p, 2), 2 * p.ParameterCount());
  EXPECT_EQ(LayerWeightBytes(LayerSpec::Mlp(256), 128, 4), 4 * (128 + 3 * 256 * 128));
}

TEST(MemoryModelTest, CacheAndRuntimeByHand) {
  engine::Workload w;
  w.batch_size = 2;
  w.cached_prefix_tokens = 16;
  w.input_tokens = 32;
  w.output_tokens = 8;  // 56 positions
  // K and V: 2 x batch 2 x kv 2 x 56 positions x head_dim 32, FP32
  EXPECT_EQ(LayerCacheBytes(LayerSpec::Attention(4, 2, 32), w, 4), 2 * 2 * 2 * 56 * 32 * 4);
  // conv: batch 2 x (128 + 2 x 16) channels x 3; SSM: batch 2 x 128 x 16; BF16
  EXPECT_EQ(LayerCacheBytes(LayerSpec::Mamba(4, 32, 16, 4, 16), w, 2),
            (2 * 160 * 3 + 2 * 128 * 16) * 2);
  EXPECT_EQ(LayerCacheBytes(LayerSpec::Moe(4, 2, 128, 128), w, 4), 0);
  EXPECT_EQ(LayerCacheBytes(LayerSpec::Attention(0, 0, 0), w, 4), 0);
  EXPECT_EQ(CacheBytes(Parent(), w, 4),
            2 * 2 * 2 * 56 * 32 * 4 + (2 * 160 * 3 + 2 * 128 * 16) * 4);
  // ids: 8 bytes x batch 2 x 56; residual stream: batch 2 x input 32 x hidden 128 x 4
  EXPECT_EQ(RuntimeBytes(128, w, 4), 8 * 2 * 56 + 2 * 32 * 128 * 4);
  EXPECT_DOUBLE_EQ(ToMiB(3 * 1024 * 1024), 3.0);
}

// llama.cpp's `deci` KV cache (3.21.1, measured by the profiler's sidecar): blocks of
// (attention, MLP) with KV heads {4, 1, 2, 4, 3, 3, 4, 4} allocated 0.89 MiB at 256 f16
// cells and head_dim 32, i.e. K rows for 25 heads and V rows for 8 x 4, not 2 x 25; an MLP
// stack (a zero 1-head attention in the first block, none after) 4.48 x 32 KiB: K for 1
// head, V for 8 x 1.
TEST(MemoryModelTest, DeciBlocksCacheValuesAtTheWidestBlock) {
  engine::Workload w;
  w.input_tokens = 64;
  w.output_tokens = 16;  // 80 positions
  auto deci = [](const std::vector<int64_t>& kv, const std::vector<int64_t>& ffn) {
    model::HybridConfig c;
    c.vocab = 64;
    c.hidden = 128;
    for (size_t i = 0; i < kv.size(); ++i) {
      c.layers.push_back(kv[i] > 0 ? LayerSpec::Attention(kv[i], kv[i], 32)
                                   : LayerSpec::Attention(0, 0, 32));
      c.layers.push_back(LayerSpec::Mlp(ffn[i]));
    }
    return c;
  };
  const int64_t row = 80 * 32 * 4;  // one head's K (or V) rows, FP32
  const model::HybridConfig mixed = deci({4, 1, 2, 4, 3, 3, 4, 4}, std::vector<int64_t>(8, 64));
  EXPECT_EQ(AttentionCacheBytes(mixed, w, 4, model::KvCacheLayout::kDeciBlocks),
            (25 + 8 * 4) * row);
  EXPECT_EQ(AttentionCacheBytes(mixed, w, 4, model::KvCacheLayout::kPerLayer), 2 * 25 * row);
  EXPECT_EQ(CacheBytes(mixed, w, 4), 2 * 25 * row);
  const model::HybridConfig mlps = deci({0, 0, 0, 0, 0, 0, 0, 0}, std::vector<int64_t>(8, 64));
  EXPECT_EQ(AttentionCacheBytes(mlps, w, 4, model::KvCacheLayout::kDeciBlocks), (1 + 8) * row);
  EXPECT_EQ(AttentionCacheBytes(mlps, w, 4, model::KvCacheLayout::kPerLayer), 0);
  // A block without attention holds V rows; a block without either is not in the file.
  const model::HybridConfig gaps = deci({2, 0, 4, 0}, {64, 64, 64, 0});
  EXPECT_EQ(AttentionCacheBytes(gaps, w, 4, model::KvCacheLayout::kDeciBlocks),
            (2 + 4 + 3 * 4) * row);
  // Uniform blocks: both layouts agree.
  const model::HybridConfig uniform = deci({2, 2, 2}, {64, 64, 64});
  EXPECT_EQ(AttentionCacheBytes(uniform, w, 4, model::KvCacheLayout::kDeciBlocks),
            AttentionCacheBytes(uniform, w, 4, model::KvCacheLayout::kPerLayer));
  // Not (attention, MLP) pairs: priced per layer.
  EXPECT_EQ(AttentionCacheBytes(Parent(), w, 4, model::KvCacheLayout::kDeciBlocks),
            AttentionCacheBytes(Parent(), w, 4, model::KvCacheLayout::kPerLayer));
}

// --- interpolation ---------------------------------------------------------------------

TEST(InterpolationTest, ExactAtProfiledPointsAndMultilinearBetween) {
  std::vector<std::vector<double>> pts;
  std::vector<double> vals;
  auto f = [](double x, double y) { return 0.3 + 1.7 * x + 0.11 * y + 0.013 * x * y; };
  for (double x : {32.0, 64.0, 128.0}) {
    for (double y : {1.0, 3.0, 4.0}) {
      pts.push_back({x, y});
      vals.push_back(f(x, y) + (x == 32.0 ? 0.37 : 0.0));  // not globally bilinear
    }
  }
  absl::StatusOr<GridInterpolator> g = GridInterpolator::Build(pts, vals);
  ASSERT_TRUE(g.ok()) << g.status();
  for (size_t i = 0; i < pts.size(); ++i) EXPECT_EQ(g->Evaluate(pts[i]), vals[i]);  // exact
  // Midway between x nodes 32 and 64 at a y node: the average of the two nodes.
  EXPECT_NEAR(g->Evaluate({48, 3}), 0.5 * (f(32, 3) + 0.37 + f(64, 3)), 1e-12);
  // Inside a cell a bilinear function is reproduced.
  EXPECT_NEAR(g->Evaluate({100, 3.5}), f(100, 3.5), 1e-9);
  // Outside: linear extension of the last cell.
  EXPECT_NEAR(g->Evaluate({160, 4}), f(160, 4), 1e-9);
}

TEST(InterpolationTest, RejectsIncompleteGrids) {
  EXPECT_THAT(GridInterpolator::Build({{1, 1}, {1, 2}, {2, 1}}, {1, 2, 3}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("(2, 2)")));
  EXPECT_THAT(GridInterpolator::Build({}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0 points")));
  EXPECT_THAT(GridInterpolator::Build({{1}, {1, 2}}, {1, 2}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mixed dimensions")));
}

// --- search space ----------------------------------------------------------------------

TEST(SearchSpaceTest, ChoicesFromTheParent) {
  absl::StatusOr<SearchSpace> s = SearchSpace::FromParent(Parent());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->hidden_choices(), (std::vector<int64_t>{32, 64, 96, 128}));
  EXPECT_EQ(s->mamba_head_choices(), (std::vector<int64_t>{1, 2, 3, 4}));
  // attention: removed + kv {1, 2} x query heads per group {1, 2}
  EXPECT_EQ(s->layer_options(0).size(), 5u);
  EXPECT_EQ(s->layer_options(0)[2].label, "heads=2,kv=1");
  EXPECT_EQ(s->layer_options(1).size(), 2u);  // mamba: removed, keep
  // moe: shared-only {0 (removed), 32, 64, 96, 128} + experts {1..4} x ffn {32..128} x shared
  EXPECT_EQ(s->layer_options(2).size(), 5u + 4 * 4 * 5);
  EXPECT_EQ(s->layer_options(2)[0].label, "removed");
  EXPECT_EQ(s->layer_options(3).size(), 5u);  // mlp: removed + 4 widths
  for (int i = 0; i < s->num_layers(); ++i) {
    EXPECT_FALSE(s->layer_options(i)[0].spec.present()) << i;
  }
  EXPECT_NEAR(s->Log10Size(), std::log10(4.0 * 4 * 5 * 2 * 85 * 5), 1e-9);

  absl::StatusOr<model::HybridConfig> p = s->Materialize(s->ParentArchitecture());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, Parent());

  std::mt19937_64 rng(5);
  for (int i = 0; i < 50; ++i) {
    const Architecture a = s->Sample(rng);
    absl::StatusOr<model::HybridConfig> c = s->Materialize(a);
    ASSERT_TRUE(c.ok()) << c.status() << " " << s->Describe(a);
    EXPECT_LE(c->ParameterCount(), Parent().ParameterCount());
  }
  Architecture bad = s->ParentArchitecture();
  bad.layers[2] = 85;
  EXPECT_THAT(s->Validate(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("architecture.layers[2]: index 85")));
}

TEST(SearchSpaceTest, GlobalMambaHeadsApplyToKeptLayers) {
  absl::StatusOr<SearchSpace> s = SearchSpace::FromParent(Parent());
  ASSERT_TRUE(s.ok());
  Architecture a = s->ParentArchitecture();
  a.mamba_heads = 1;  // 2 heads
  a.hidden = 0;       // 32
  absl::StatusOr<model::HybridConfig> c = s->Materialize(a);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->hidden, 32);
  EXPECT_EQ(c->layers[1].mamba.heads, 2);
  EXPECT_EQ(s->Describe(a).substr(0, 24), "hidden=32 mamba_heads=2 ");
}

// A Qwen3-like parent for layouts of one width per kind: blocks of attention then MLP.
model::HybridConfig BlockParent() {
  model::HybridConfig c;
  c.vocab = 64;
  c.hidden = 128;
  c.max_seq = 64;
  for (int b = 0; b < 3; ++b) c.layers.insert(c.layers.end(), {LayerSpec::Attention(4, 2, 32),
                                                                LayerSpec::Mlp(256)});
  return c;
}

TEST(SearchSpaceTest, UniformLayersDrawOnePresentOptionPerKind) {
  SearchSpaceOptions o;
  o.uniform_layers = true;
  absl::StatusOr<SearchSpace> s = SearchSpace::FromParent(BlockParent(), o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layer_options(0).size(), 5u);  // the options are the usual ones
  std::mt19937_64 rng(3);
  std::set<std::pair<int, int>> seen;
  for (int i = 0; i < 200; ++i) {
    const Architecture a = s->Sample(rng);
    for (int l = 0; l < 6; ++l) {
      EXPECT_NE(a.layers[l], 0) << s->Describe(a);  // nothing removed
      EXPECT_EQ(a.layers[l], a.layers[l % 2]) << s->Describe(a);
    }
    seen.insert({a.layers[0], a.layers[1]});
  }
  EXPECT_EQ(seen.size(), 4u * 4u);  // every attention option with every MLP width
}

TEST(SearchSpaceTest, KeptHiddenAndHeadsLeaveOnlyTheParentsWidths) {
  SearchSpaceOptions o;
  o.prune_hidden_and_heads = false;
  absl::StatusOr<SearchSpace> s = SearchSpace::FromParent(BlockParent(), o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->hidden_choices(), (std::vector<int64_t>{128}));
  ASSERT_EQ(s->layer_options(0).size(), 2u);  // removed, or the parent's heads
  EXPECT_EQ(s->layer_options(0)[1].label, "heads=4,kv=2");
  EXPECT_EQ(s->layer_options(1).size(), 5u);  // the MLP still narrows
}

TEST(SearchSpaceTest, KeptSharedExpertsTieTheExpertCountAcrossMoeLayers) {
  model::HybridConfig parent = Parent();
  parent.layers.push_back(LayerSpec::Moe(4, 2, 128, 128));  // a second 'E' layer
  SearchSpaceOptions o;
  o.keep_shared_experts = true;  // `nemotron_h_moe`: one expert count for all layers
  absl::StatusOr<SearchSpace> s = SearchSpace::FromParent(parent, o);
  ASSERT_TRUE(s.ok()) << s.status();
  std::mt19937_64 rng(11);
  std::set<int64_t> counts;
  std::set<std::pair<int64_t, int64_t>> expert_widths;
  for (int i = 0; i < 300; ++i) {
    const Architecture a = s->Sample(rng);
    absl::StatusOr<model::HybridConfig> c = s->Materialize(a);
    ASSERT_TRUE(c.ok()) << c.status();
    const model::MoeSpec& first = c->layers[2].moe;
    const model::MoeSpec& second = c->layers[4].moe;
    if (first.experts > 0 && second.experts > 0) {
      EXPECT_EQ(first.experts, second.experts) << s->Describe(a);
      EXPECT_EQ(first.top_k, second.top_k) << s->Describe(a);
      counts.insert(first.experts);
      expert_widths.insert({first.expert_ffn, second.expert_ffn});
    }
  }
  EXPECT_GE(counts.size(), 2u);
  EXPECT_GE(expert_widths.size(), 8u);  // the widths stay per layer
}

TEST(SearchSpaceTest, CanonicalKeys) {
  EXPECT_EQ(LayerKey(LayerSpec::Attention(4, 2, 32), 128), "hidden=128,heads=4,kv=2,head_dim=32");
  EXPECT_EQ(LayerKey(LayerSpec::Mamba(4, 32, 16, 4, 16), 96),
            "hidden=96,heads=4,head_dim=32,state=16,conv=4,chunk=16");
  EXPECT_EQ(LayerKey(LayerSpec::Moe(4, 2, 128, 0), 64),
            "hidden=64,experts=4,top_k=2,expert_ffn=128,shared_ffn=0");
  EXPECT_EQ(LayerKey(LayerSpec::Mlp(256), 32), "hidden=32,ffn=256");
  EXPECT_EQ(LayerKey(LayerSpec::Mlp(0), 32), "removed");
  EXPECT_EQ(LayerParams(LayerSpec::Mlp(256), 32).at("ffn"), 256);
  EXPECT_EQ(StepChoices(6, 4), (std::vector<int64_t>{2, 3, 5, 6}));
  EXPECT_EQ(StepChoices(2, 4), (std::vector<int64_t>{1, 2}));
}

// --- interaction -------------------------------------------------------------------------

TEST(InteractionTest, RecoversKnownCoefficients) {
  const KindCounts reference = {2, 1, 1, 1};
  GammaRows truth{};
  truth[0] = {0.01, 0.06, 0.02, 0.0};   // attention slowed by Mamba
  truth[1] = {0.0, -0.1, 0.03, 0.0};    // Mamba faster next to another Mamba
  truth[kFixedRow] = {0.02, 0.02, 0.02, 0.02};
  std::vector<InteractionSample> samples;
  std::mt19937_64 rng(3);
  for (int m = 0; m < 60; ++m) {
    KindCounts n = {static_cast<double>(rng() % 4), static_cast<double>(rng() % 3),
                    static_cast<double>(rng() % 3), static_cast<double>(rng() % 2)};
    for (int row : {0, 1, kFixedRow}) {
      for (int key = 0; key < 3; ++key) {
        double dot = 0;
        for (int j = 0; j < kKinds; ++j) dot += truth[row][j] * (n[j] - reference[j]);
        samples.push_back({row, absl::StrCat(row, "/", key), n, (1.0 + key) * std::exp(dot)});
      }
    }
  }
  const InteractionFit fit = FitInteraction(samples, reference, /*ridge=*/1e-6, 12);
  for (int row : {0, 1, kFixedRow}) {
    for (int j = 0; j < kKinds; ++j) EXPECT_NEAR(fit.gamma[row][j], truth[row][j], 1e-4);
  }
  EXPECT_NEAR(fit.base.at("1/2"), 3.0, 1e-4);
  InteractionModel model;
  model.reference = reference;
  model.decode = fit.gamma;
  EXPECT_NEAR(model.Factor(1, true, {2, 2, 1, 1}), std::exp(-0.1), 1e-4);
  EXPECT_EQ(model.Factor(1, false, {2, 2, 1, 1}), 1.0);  // prefill rows are zero
  EXPECT_EQ(PresentCounts(Parent()), (KindCounts{1, 1, 1, 1}));
}

// --- cost model --------------------------------------------------------------------------

// A table whose times are linear in the widths (so interpolation is exact everywhere) on
// the grid a profiler with two points per axis would measure.
CostTableData LinearTable(const SearchSpace& space) {
  CostTableData t;
  t.workload.input_tokens = 16;
  t.workload.output_tokens = 4;
  t.vocab = 64;
  auto add = [&](const LayerSpec& l, int64_t h) {
    std::map<std::string, double> p = LayerParams(l, h);
    double time = 0.001 * h;
    for (const auto& [k, v] : p) time += 0.01 * v;
    p[kWorkspaceParam] = 0.001 * time;
    const std::string kind(model::LayerKindName(l.kind));
    t.entries.push_back({kind, LayerKey(l, h), kPrefill, time, 0, p});
    t.entries.push_back({kind, LayerKey(l, h), kDecode, 2 * time, 0, p});
  };
  for (int64_t h : {32, 128}) {
    for (int64_t kv : {1, 2}) {
      for (int64_t g : {1, 2}) add(LayerSpec::Attention(kv * g, kv, 32), h);
    }
    for (int64_t heads : {1, 4}) add(LayerSpec::Mamba(heads, 32, 16, 4, 16), h);
    for (int64_t s : {0, 32, 128}) {
      for (int64_t f : {32, 128}) {
        add(LayerSpec::Moe(1, 1, f, s), h);
        for (int64_t e : {2, 4}) add(LayerSpec::Moe(e, 2, f, s), h);
      }
    }
    for (int64_t s : {32, 128}) add(LayerSpec::Moe(0, 0, 0, s), h);
    for (int64_t f : {64, 256}) add(LayerSpec::Mlp(f), h);
    const std::map<std::string, double> fp = {{"hidden", static_cast<double>(h)},
                                              {kWorkspaceParam, 0.0}};
    t.entries.push_back({kFixedKind, absl::StrCat("hidden=", h), kPrefill, 0.5, 0, fp});
    t.entries.push_back({kFixedKind, absl::StrCat("hidden=", h), kDecode, 1.5, 0, fp});
  }
  (void)space;
  return t;
}

TEST(CostModelTest, ExactAtProfiledPointsAndInterpolatedBetween) {
  absl::StatusOr<SearchSpace> space = SearchSpace::FromParent(Parent());
  ASSERT_TRUE(space.ok());
  const CostTableData table = LinearTable(*space);
  absl::StatusOr<CostModel> m = CostModel::FromData(table);
  ASSERT_TRUE(m.ok()) << m.status();
  for (const CostEntryData& e : table.entries) {
    if (e.layer_kind == kFixedKind) continue;
    // Rebuild the spec from the entry's params and check the exact value comes back.
    const auto& p = e.params;
    LayerSpec l;
    if (e.layer_kind == "attention") {
      l = LayerSpec::Attention(p.at("heads"), p.at("kv"), p.at("head_dim"));
    } else if (e.layer_kind == "mamba") {
      l = LayerSpec::Mamba(p.at("heads"), 32, 16, 4, 16);
    } else if (e.layer_kind == "moe") {
      l = LayerSpec::Moe(p.at("experts"), p.at("top_k"), p.at("expert_ffn"), p.at("shared_ffn"));
    } else {
      l = LayerSpec::Mlp(p.at("ffn"));
    }
    absl::StatusOr<LayerCost> c = m->CostOfLayer(l, static_cast<int64_t>(p.at("hidden")));
    ASSERT_TRUE(c.ok()) << c.status() << " " << e.config;
    EXPECT_EQ(e.phase == kPrefill ? c->prefill_ms : c->decode_ms, e.time_ms) << e.config;
  }
  // Between profiled widths (hidden 96, ffn 192, 3 experts): linear, so exact too.
  auto linear = [](const LayerSpec& l, int64_t h) {
    double time = 0.001 * h;
    for (const auto& [k, v] : LayerParams(l, h)) time += 0.01 * v;
    return time;
  };
  for (const LayerSpec& l : {LayerSpec::Mlp(192), LayerSpec::Moe(3, 2, 96, 64),
                             LayerSpec::Mamba(3, 32, 16, 4, 16), LayerSpec::Moe(0, 0, 0, 64)}) {
    absl::StatusOr<LayerCost> c = m->CostOfLayer(l, 96);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_NEAR(c->prefill_ms, linear(l, 96), 1e-9) << LayerKey(l, 96);
    EXPECT_NEAR(c->decode_ms, 2 * linear(l, 96), 1e-9);
  }
  EXPECT_THAT(m->CostOfLayer(LayerSpec::Attention(4, 2, 64), 128).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("head_dim=64")));
}

TEST(CostModelTest, PredictMatchesPerChoiceFormAndMemoryTerms) {
  absl::StatusOr<SearchSpace> space = SearchSpace::FromParent(Parent());
  ASSERT_TRUE(space.ok());
  CostTableData table = LinearTable(*space);
  table.memory.eps_mib = 0.25;
  table.interaction.reference = {1, 1, 1, 1};
  table.interaction.decode[0] = {0.0, 0.05, 0.0, 0.0};
  table.interaction.prefill[kFixedRow] = {0.01, 0.01, 0.01, 0.01};
  absl::StatusOr<CostModel> m = CostModel::FromData(table);
  ASSERT_TRUE(m.ok()) << m.status();
  std::mt19937_64 rng(9);
  for (int i = 0; i < 20; ++i) {
    const Architecture a = space->Sample(rng);
    absl::StatusOr<model::HybridConfig> c = space->Materialize(a);
    ASSERT_TRUE(c.ok());
    absl::StatusOr<Prediction> p = m->Predict(*c);
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<ChoiceCosts> cc = m->CostsOfChoices(*space, a.hidden, a.mamba_heads);
    ASSERT_TRUE(cc.ok()) << cc.status();
    EXPECT_NEAR(LatencyOfChoices(*cc, a.layers), p->latency_ms, 1e-9);
    double mem = cc->fixed_memory_mib, ws = cc->fixed_workspace_mib;
    for (int l = 0; l < space->num_layers(); ++l) {
      mem += cc->memory_mib[l][a.layers[l]];
      ws = std::max(ws, cc->workspace_mib[l][a.layers[l]]);
    }
    EXPECT_NEAR(mem + ws, p->memory_mib, 1e-9);
    const engine::Workload& w = table.workload;
    EXPECT_NEAR(p->memory.weights_mib, ToMiB(WeightBytes(*c, 4)), 1e-12);
    EXPECT_NEAR(p->memory.cache_mib, ToMiB(CacheBytes(*c, w, 4)), 1e-12);
    EXPECT_NEAR(p->memory.runtime_mib, ToMiB(RuntimeBytes(c->hidden, w, 4)), 1e-12);
    EXPECT_EQ(p->memory.eps_mib, 0.25);
    EXPECT_NEAR(p->throughput_tokens_per_s, 4 * 1000.0 / p->latency_ms, 1e-9);
  }
  engine::Workload other = table.workload;
  other.batch_size = 8;
  EXPECT_THAT(m->Predict(Parent(), other).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tied to their contract")));
}

// The KV cache layout is the served file's (CostModel::SetKvCacheLayout): Predict's C is
// the layout's attention cache at the table's scale.
TEST(CostModelTest, PredictsTheKvCacheTheLayoutAllocates) {
  absl::StatusOr<SearchSpace> space = SearchSpace::FromParent(Parent());
  ASSERT_TRUE(space.ok());
  CostTableData table = LinearTable(*space);
  table.memory.attention_cache_scale = 0.5;  // f16
  absl::StatusOr<CostModel> m = CostModel::FromData(table);
  ASSERT_TRUE(m.ok()) << m.status();
  model::HybridConfig deci;
  deci.vocab = 64;
  deci.hidden = 128;
  deci.layers = {LayerSpec::Attention(2, 2, 32), LayerSpec::Mlp(64),
                 LayerSpec::Attention(1, 1, 32), LayerSpec::Mlp(256),
                 LayerSpec::Attention(0, 0, 32), LayerSpec::Mlp(128)};
  // The table's workload: 20 positions.
  absl::StatusOr<Prediction> per_layer = m->Predict(deci);
  ASSERT_TRUE(per_layer.ok()) << per_layer.status();
  EXPECT_NEAR(per_layer->memory.cache_mib, ToMiB(2 * 3 * 20 * 32 * 4) * 0.5, 1e-12);
  m->SetKvCacheLayout(model::KvCacheLayout::kDeciBlocks);
  absl::StatusOr<Prediction> blocks = m->Predict(deci);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  // K for 2 + 1 heads, V for 3 blocks x 2 heads.
  EXPECT_NEAR(blocks->memory.cache_mib, ToMiB((3 + 6) * 20 * 32 * 4) * 0.5, 1e-12);
  EXPECT_NEAR(blocks->memory_mib - per_layer->memory_mib, ToMiB(3 * 20 * 32 * 4) * 0.5, 1e-12);
  EXPECT_EQ(blocks->latency_ms, per_layer->latency_ms);
}

TEST(CostModelTest, RejectsBrokenTables) {
  CostTableData t;
  EXPECT_THAT(CostModel::FromData(t).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fixed-cost")));
  absl::StatusOr<SearchSpace> space = SearchSpace::FromParent(Parent());
  t = LinearTable(*space);
  t.entries.erase(t.entries.begin());  // a hole in the attention grid
  EXPECT_THAT(CostModel::FromData(t).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("attention")));
}

// --- drift check -------------------------------------------------------------------------

// An engine that serves every architecture at `factor` times what the table predicts: the
// table validated at 2% MAPE (worst 4%) holds at 1.03 and has drifted at 1.10.
TEST(DriftCheckTest, TableHoldsWithinItsOwnValidatedError) {
  CostTableData data = autocompress::test_support::SyntheticTable(Parent());
  data.validation.architectures = 8;
  data.validation.latency_mape = 0.02;
  data.validation.latency_max_error = 0.04;
  absl::StatusOr<CostModel> model = CostModel::FromData(data);
  ASSERT_TRUE(model.ok()) << model.status();
  auto recheck = [&](double factor) {
    int served = 0;
    RecheckServeFn serve = [&](const model::HybridConfig& arch,
                               uint64_t) -> absl::StatusOr<RecheckServed> {
      ++served;
      TAILOR_ASSIGN_OR_RETURN(Prediction p, model->Predict(arch));
      return RecheckServed{p.latency_ms * factor, p.memory_mib};
    };
    absl::StatusOr<RecheckResult> r = RecheckCostTable(*model, Parent(), serve, {});
    EXPECT_EQ(served, 4);
    return r;
  };
  absl::StatusOr<RecheckResult> same = recheck(1.03);
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_EQ(same->architectures.size(), 4u);
  EXPECT_NEAR(same->summary.latency_mape, 0.03 / 1.03, 1e-9);
  EXPECT_DOUBLE_EQ(same->bound, 0.04);
  EXPECT_TRUE(same->holds);
  absl::StatusOr<RecheckResult> slower = recheck(1.10);
  ASSERT_TRUE(slower.ok()) << slower.status();
  EXPECT_NEAR(slower->summary.latency_mape, 0.10 / 1.10, 1e-9);
  EXPECT_FALSE(slower->holds);
  // Fresh draws, the same ones every time: the check is reproducible.
  EXPECT_EQ(same->architectures[0].description, slower->architectures[0].description);

  // A table validated on nothing has no error range: it never holds.
  data.validation = {};
  absl::StatusOr<CostModel> unvalidated = CostModel::FromData(data);
  ASSERT_TRUE(unvalidated.ok());
  RecheckServeFn exact = [&](const model::HybridConfig& arch,
                             uint64_t) -> absl::StatusOr<RecheckServed> {
    TAILOR_ASSIGN_OR_RETURN(Prediction p, unvalidated->Predict(arch));
    return RecheckServed{p.latency_ms, p.memory_mib};
  };
  absl::StatusOr<RecheckResult> r = RecheckCostTable(*unvalidated, Parent(), exact, {});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->holds);
}

}  // namespace
}  // namespace tailor::costmodel
