// The profiling job end to end on a tiny parent and workload (structure only: no timing
// assertions), the profile grid, and the cost table's proto round trip.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compression/costmodel/cost_model.h"
#include "compression/costmodel/memory_model.h"
#include "compression/costmodel/profiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#ifdef TAILOR_TEST_COSTMODEL_PROTO
#include "compression/costmodel/cost_table_proto.h"
#endif

namespace tailor::costmodel {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;
using model::LayerSpec;

model::HybridConfig TinyParent() {
  model::HybridConfig c;
  c.vocab = 32;
  c.hidden = 32;
  c.max_seq = 16;
  c.layers = {LayerSpec::Attention(2, 1, 8), LayerSpec::Mamba(2, 8, 4, 4, 4),
              LayerSpec::Moe(2, 1, 16, 16), LayerSpec::Mlp(32)};
  return c;
}

ProfileOptions TinyOptions() {
  ProfileOptions o;
  o.workload.input_tokens = 6;
  o.workload.output_tokens = 3;
  o.workload.cached_prefix_tokens = 2;
  o.space.hidden_steps = 2;
  o.space.width_steps = 2;
  o.warmup_rounds = 0;
  o.rounds = 2;
  o.validation_architectures = 3;
  return o;
}

TEST(ProfilerTest, AxisPointsKeepBothEnds) {
  EXPECT_EQ(SelectAxisPoints({1, 2, 3, 4}, 2), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(SelectAxisPoints({1, 2, 3, 4}, 3), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(SelectAxisPoints({32, 64}, 3), (std::vector<int64_t>{32, 64}));
  EXPECT_TRUE(SelectAxisPoints({}, 3).empty());
}

TEST(ProfilerTest, GridCoversEveryClassAtBothHiddenWidths) {
  absl::StatusOr<SearchSpace> space = SearchSpace::FromParent(TinyParent(), TinyOptions().space);
  ASSERT_TRUE(space.ok());
  const std::vector<ProfilePoint> grid = ProfileGrid(*space, TinyOptions());
  std::set<std::string> keys;
  for (const ProfilePoint& p : grid) {
    EXPECT_TRUE(p.spec.present());
    EXPECT_EQ(p.spec.kind, TinyParent().layers[p.position].kind);
    keys.insert(LayerKey(p.spec, p.hidden));
  }
  EXPECT_EQ(keys.size(), grid.size());  // no duplicates
  // hidden {16, 32} x (attention kv 1 x groups {1, 2} + mamba heads {1, 2} + moe: top_k 1
  // experts {1, 2} x ffn {8, 16} x shared {0, 8, 16} + shared-only {8, 16} + mlp {16, 32})
  EXPECT_EQ(grid.size(), 2u * (2 + 2 + 12 + 2 + 2));
  EXPECT_TRUE(keys.count("hidden=16,experts=2,top_k=1,expert_ffn=8,shared_ffn=0"));
  EXPECT_TRUE(keys.count("hidden=32,heads=1,kv=1,head_dim=8"));
}

TEST(ProfilerTest, ProfilesValidatesAndPredicts) {
  ProfileOptions options = TinyOptions();
  std::vector<double> fractions;
  options.progress = [&](double f, const std::string&, const std::map<std::string, double>&) {
    fractions.push_back(f);
    return true;
  };
  absl::StatusOr<ProfileResult> r = ProfileCostTable(TinyParent(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  const CostTableData& t = r->table;
  EXPECT_EQ(t.engine, "tailor-builtin");
  EXPECT_EQ(t.engine_version, "1");
  EXPECT_EQ(t.layer_family_version, "hybrid-v1");
  EXPECT_EQ(r->profiled_configs, 40);
  // Both phases of every grid node plus the fixed cost at both widths.
  EXPECT_EQ(t.entries.size(), 2u * (40 + 2));
  for (const CostEntryData& e : t.entries) {
    EXPECT_GE(e.time_ms, 0.0) << e.config;
    EXPECT_TRUE(e.params.count(kWorkspaceParam)) << e.config;
  }
  ASSERT_EQ(r->validation.size(), 3u);
  EXPECT_EQ(t.validation.architectures, 3);
  for (const ArchitectureMeasurement& m : r->validation) {
    EXPECT_GT(m.measured_latency_ms, 0);
    EXPECT_GT(m.predicted_latency_ms, 0);
    EXPECT_GT(m.measured_memory_mib, 0);
    EXPECT_GT(m.parameters, 0);
  }
  EXPECT_GE(t.validation.latency_max_error, t.validation.latency_mape);
  EXPECT_FALSE(r->profiling_models.empty());
  ASSERT_FALSE(fractions.empty());
  EXPECT_TRUE(std::is_sorted(fractions.begin(), fractions.end()));
  EXPECT_LT(fractions.back(), 1.0);

  // The table predicts the parent; memory terms are the formulas plus the calibration.
  absl::StatusOr<CostModel> m = CostModel::FromData(t);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Prediction> p = m->Predict(TinyParent());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GT(p->latency_ms, 0);
  EXPECT_NEAR(p->memory.weights_mib, ToMiB(TinyParent().ParameterCount() * 4), 1e-12);
  EXPECT_NEAR(t.memory.parent_total_mib, p->memory_mib, 1e-12);
}

TEST(ProfilerTest, CancelsAndRejectsBadOptions) {
  ProfileOptions options = TinyOptions();
  options.progress = [](double, const std::string&, const std::map<std::string, double>&) {
    return false;
  };
  EXPECT_THAT(ProfileCostTable(TinyParent(), options).status(),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  options = TinyOptions();
  options.rounds = 0;
  EXPECT_THAT(ProfileCostTable(TinyParent(), options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rounds >= 1")));
  options = TinyOptions();
  options.workload.batch_size = 0;
  EXPECT_THAT(ProfileCostTable(TinyParent(), options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch_size")));
}

TEST(ProfilerTest, RequestFlopsByHand) {
  model::HybridConfig c;
  c.vocab = 10;
  c.hidden = 4;
  c.max_seq = 16;
  c.layers = {LayerSpec::Mlp(8)};
  engine::Workload w;
  w.input_tokens = 3;
  w.output_tokens = 2;  // 3 prompt tokens + 1 decode step through the layer
  // 2 x (3 x 8 x 4 MLP weights + 4 norm weights) x 4 tokens
  // + LM head 2 x 10 x 4 x (1 prompt position + 1 decode step)
  EXPECT_DOUBLE_EQ(RequestFlops(c, w), 2.0 * 100 * 4 + 2.0 * 40 * 2);
}

#ifdef TAILOR_TEST_COSTMODEL_PROTO
TEST(CostTableProtoTest, RoundTripsAndValidates) {
  CostTableData t;
  t.device_kind = "cpu";
  t.precision = engine::Precision::kBf16;
  t.workload = {2, 128, 32, 16};
  t.vocab = 64;
  t.t0_ms = 1.5;
  t.entries.push_back({"mlp", "hidden=32,ffn=64", kDecode, 2.5, 0.1,
                       {{"hidden", 32}, {"ffn", 64}, {kWorkspaceParam, 0.01}}});
  t.memory.element_bytes = 2;
  t.memory.eps_mib = 0.125;
  t.memory.parent_total_mib = 4.5;
  t.interaction.reference = {1, 2, 3, 4};
  t.interaction.decode[1] = {0.1, -0.2, 0.3, 0.0};
  t.validation = {9, 0.032, 0.07, 0.004, 0.009, 0.8, 1.0};
  const v1::CostTable p = ToProto(t);
  EXPECT_EQ(p.engine(), "tailor-builtin");
  EXPECT_EQ(p.precision(), v1::BF16);
  EXPECT_EQ(p.workload().cached_prefix_tokens(), 16);
  EXPECT_DOUBLE_EQ(p.latency_mape(), 0.032);
  EXPECT_EQ(p.validated_architectures(), 9);
  absl::StatusOr<CostTableData> back = FromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->workload, t.workload);
  EXPECT_EQ(back->entries.size(), 1u);
  EXPECT_EQ(back->entries[0].params.at("ffn"), 64);
  EXPECT_EQ(back->memory.eps_mib, 0.125);
  EXPECT_EQ(back->vocab, 64);
  EXPECT_EQ(back->interaction.reference, t.interaction.reference);
  EXPECT_EQ(back->interaction.decode[1], t.interaction.decode[1]);
  EXPECT_EQ(back->validation.latency_within_5, 0.8);
  EXPECT_EQ(back->validation.memory_max_error, 0.009);

  v1::CostTable bad = p;
  (*bad.mutable_memory_model()->mutable_fields())["element_bytes"].set_number_value(3);
  EXPECT_THAT(FromProto(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("element_bytes")));
  bad = p;
  bad.set_precision(v1::INT4);
  EXPECT_THAT(CostModel::FromTable(bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("INT4")));
}
#endif

}  // namespace
}  // namespace tailor::costmodel
