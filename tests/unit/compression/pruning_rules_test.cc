// The pruning rules of the imported block variants (docs/model.md, "Pruning rules"), each
// with exact values: Mamba heads are kept, masked, ranked and searched inside their B/C
// groups; experts with routing groups are ranked inside their group and every group keeps
// its first k (sliced, masked, searched and accounted alike); every
// search-space option and profiled grid node keeps its parent's block variant (RoPE off,
// relu2, sigmoid routing, per-group norm) while only widths change, and so does a block
// that block removal makes absent.
#include <torch/torch.h>

#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/autocompress/ranking.h"
#include "compression/autocompress/space.h"
#include "compression/autocompress/supernet.h"
#include "compression/blockremoval/gates.h"
#include "compression/costmodel/memory_model.h"
#include "compression/costmodel/profiler.h"
#include "compression/costmodel/search_space.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"
#include "compression/model/moe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor {
namespace {

using model::HybridConfig;
using model::LayerSpec;
using ::testing::HasSubstr;

LayerSpec GroupedMamba(int64_t heads, int64_t groups) {
  LayerSpec l = LayerSpec::Mamba(heads, 4, 6, 4, 5);
  l.mamba.groups = groups;
  l.mamba.norm = model::MambaNorm::kPerGroup;
  return l;
}

// The tiny Nemotron-H shape: Mamba-2 with 2 B/C groups, attention without RoPE, a relu2
// MLP and a sigmoid-routed relu2 MoE with a score bias and a shared expert.
HybridConfig NemotronLike(int64_t mamba_heads = 6) {
  HybridConfig c;
  c.vocab = 40;
  c.hidden = 16;
  c.max_seq = 32;
  LayerSpec attention = LayerSpec::Attention(4, 2, 4);
  attention.attention.rope = false;
  LayerSpec mlp = LayerSpec::Mlp(24);
  mlp.mlp.activation = model::FfnActivation::kReluSquared;
  LayerSpec moe = LayerSpec::Moe(4, 2, 8, 12);
  moe.moe.router = model::MoeRouter::kSigmoid;
  moe.moe.score_bias = true;
  moe.moe.scale = 2.5;
  moe.moe.activation = model::FfnActivation::kReluSquared;
  c.layers = {GroupedMamba(mamba_heads, 2), attention, mlp, moe};
  return c;
}

// NemotronLike with 8 routed experts in 2 routing groups of 4.
HybridConfig GroupedMoeLike(int64_t top_k = 2, int64_t top_groups = 1) {
  HybridConfig c = NemotronLike(4);
  c.layers[3].moe.experts = 8;
  c.layers[3].moe.top_k = top_k;
  c.layers[3].moe.groups = 2;
  c.layers[3].moe.top_groups = top_groups;
  return c;
}

std::vector<float> Values(const at::Tensor& t) {
  at::Tensor c = t.to(torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// --- model: KeptMambaHeads, MambaHeadMultiple, PrefixMask ---------------------------------

// The parent under `mask` computes the sliced child's logits to within `tolerance`.
void ExpectMaskedParentIsTheSlice(model::HybridLM& parent, const model::ArchMask& mask,
                                  model::HybridLM& sliced, double tolerance) {
  torch::manual_seed(7);
  const at::Tensor tokens =
      torch::randint(0, parent->config().vocab, {2, 10}, torch::kLong);
  model::ForwardOptions masked;
  masked.mask = &mask;
  TAILOR_ASSERT_OK_AND_ASSIGN(model::ForwardOutput a, parent->Forward(tokens, masked));
  TAILOR_ASSERT_OK_AND_ASSIGN(model::ForwardOutput b, sliced->Forward(tokens));
  EXPECT_LT((a.logits - b.logits).abs().max().item<double>(), tolerance);
}

TEST(PruningRulesTest, KeptMambaHeadsAreWholeGroupsAtLeastOnePerGroup) {
  const model::MambaSpec m = GroupedMamba(4, 2).mamba;
  EXPECT_EQ(model::KeptMambaHeads(m, 4), 4);
  EXPECT_EQ(model::KeptMambaHeads(m, 3), 2);  // rounded down to a multiple of the groups
  EXPECT_EQ(model::KeptMambaHeads(m, 1), 2);  // one head per group at least
  EXPECT_EQ(model::KeptMambaHeads(m, 8), 4);  // at most the layer's own
  EXPECT_EQ(model::KeptMambaHeads(GroupedMamba(4, 1).mamba, 3), 3);
  EXPECT_EQ(model::KeptMambaHeads(LayerSpec::Mamba(0, 0, 0, 0, 0).mamba, 3), 0);
  HybridConfig c = NemotronLike();
  EXPECT_EQ(model::MambaHeadMultiple(c), 2);
  c.layers.push_back(GroupedMamba(6, 3));
  EXPECT_EQ(model::MambaHeadMultiple(c), 6);
  c.layers = {LayerSpec::Mlp(8)};
  EXPECT_EQ(model::MambaHeadMultiple(c), 1);
}

TEST(PruningRulesTest, PrefixMaskKeepsTheFirstHeadsOfEachGroup) {
  HybridConfig parent = NemotronLike(4);
  HybridConfig child = parent;
  child.layers[0].mamba.heads = 2;
  TAILOR_ASSERT_OK_AND_ASSIGN(model::ArchMask mask, model::PrefixMask(parent, child));
  EXPECT_EQ(Values(mask.layers[0].mamba_heads), (std::vector<float>{1, 0, 1, 0}));
  parent = NemotronLike(6);
  child = parent;
  child.layers[0].mamba.heads = 4;
  TAILOR_ASSERT_OK_AND_ASSIGN(mask, model::PrefixMask(parent, child));
  EXPECT_EQ(Values(mask.layers[0].mamba_heads), (std::vector<float>{1, 1, 0, 1, 1, 0}));
  // Groups 1 (the demo family): a plain leading mask, as before.
  parent.layers[0].mamba.groups = 1;
  parent.layers[0].mamba.norm = model::MambaNorm::kPerHead;
  child.layers[0] = parent.layers[0];
  child.layers[0].mamba.heads = 4;
  TAILOR_ASSERT_OK_AND_ASSIGN(mask, model::PrefixMask(parent, child));
  EXPECT_EQ(Values(mask.layers[0].mamba_heads), (std::vector<float>{1, 1, 1, 1, 0, 0}));
  // Other groups in the child: refused, naming the field.
  child.layers[0].mamba.groups = 2;
  EXPECT_THAT(model::PrefixMask(parent, child).status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("layers[0].mamba.groups: child 2, parent 1")));
}

// The mask of a child equals the child sliced from the parent, for every variant at once.
TEST(PruningRulesTest, PrefixMaskEqualsSliceOnEveryVariant) {
  const HybridConfig parent_config = NemotronLike(6);
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM parent, model::CreateHybridLM(parent_config, 3));
  HybridConfig child = parent_config;
  child.hidden = 12;
  child.layers[0].mamba.heads = 4;               // 2 of 3 heads in each of the 2 groups
  child.layers[1].attention.heads = 2;           // 1 query head per KV head
  child.layers[2].mlp.ffn = 10;                  // relu2 neurons
  child.layers[3].moe.expert_ffn = 5;            // relu2 expert neurons
  child.layers[3].moe.shared_ffn = 7;
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM sliced, model::SliceHybridLM(parent, child));
  TAILOR_ASSERT_OK_AND_ASSIGN(model::ArchMask mask, model::PrefixMask(parent_config, child));
  ExpectMaskedParentIsTheSlice(parent, mask, sliced, 1e-5);
}

TEST(PruningRulesTest, KeptExpertsAreTheFirstOfEachRoutingGroup) {
  const model::MoeSpec m = GroupedMoeLike().layers[3].moe;
  EXPECT_EQ(model::KeptExperts(m, 4), (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(model::KeptExperts(m, 6), (std::vector<int64_t>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(model::KeptExperts(m, 8), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(model::KeptExperts(m, 0), (std::vector<int64_t>{}));
  // Groups 1: a plain prefix, as before.
  EXPECT_EQ(model::KeptExperts(NemotronLike().layers[3].moe, 3), (std::vector<int64_t>{0, 1, 2}));
}

// The slice of a grouped layer takes experts {0, 1, 4, 5} of 8 for 2 per group: router rows,
// score bias and expert weights, in that order.
TEST(PruningRulesTest, SliceKeepsTheFirstExpertsOfEachRoutingGroup) {
  const HybridConfig parent_config = GroupedMoeLike();
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM parent, model::CreateHybridLM(parent_config, 3));
  HybridConfig child = parent_config;
  child.layers[3].moe.experts = 4;
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM sliced, model::SliceHybridLM(parent, child));
  EXPECT_EQ(sliced->config().layers[3].moe.groups, 2);
  const auto pd = parent->StateDict();
  const auto sd = sliced->StateDict();
  const at::Tensor kept = torch::tensor({0, 1, 4, 5}, torch::kLong);
  for (const char* name : {"router", "score_bias", "w_up", "w_down"}) {
    const std::string key = absl::StrCat("layers.3.moe.", name);
    EXPECT_TRUE(torch::equal(sd.at(key), pd.at(key).index_select(0, kept))) << name;
  }
}

// With the dropped experts' score bias far below the others they are never routed to, so the
// masked parent (a masked expert otherwise keeps its routing slot) must equal the child.
TEST(PruningRulesTest, PrefixMaskEqualsSliceWithRoutingGroups) {
  const HybridConfig parent_config = GroupedMoeLike();
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM parent, model::CreateHybridLM(parent_config, 3));
  {
    torch::NoGradGuard no_grad;
    at::Tensor bias = parent->StateDict().at("layers.3.moe.score_bias");
    bias.copy_(torch::tensor({0.1f, 0.2f, -10.0f, -10.0f, 0.3f, 0.0f, -10.0f, -10.0f}));
  }
  HybridConfig child = parent_config;
  child.hidden = 12;
  child.layers[0].mamba.heads = 2;
  child.layers[3].moe.experts = 4;  // 2 of 4 in each of the 2 routing groups
  child.layers[3].moe.expert_ffn = 5;
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM sliced, model::SliceHybridLM(parent, child));
  TAILOR_ASSERT_OK_AND_ASSIGN(model::ArchMask mask, model::PrefixMask(parent_config, child));
  EXPECT_EQ(Values(mask.layers[3].experts), (std::vector<float>{1, 1, 0, 0, 1, 1, 0, 0}));
  ExpectMaskedParentIsTheSlice(parent, mask, sliced, 1e-6);
}

TEST(PruningRulesTest, GroupedExpertChildrenOutsideTheRuleAreRefused) {
  const HybridConfig parent_config = GroupedMoeLike(/*top_k=*/3);
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM parent, model::CreateHybridLM(parent_config, 3));
  HybridConfig child = parent_config;
  child.layers[3].moe.experts = 4;  // 2 per group, top_groups 1: 2 experts reachable < 3
  const std::string want =
      "layers[3].moe.top_k: must be <= the experts of top_groups groups (2), got 3";
  EXPECT_EQ(model::SliceHybridLM(parent, child).status().message(), want);
  EXPECT_EQ(model::PrefixMask(parent_config, child).status().message(), want);
  // Other routing groups than the parent's.
  child.layers[3].moe.top_k = 2;
  child.layers[3].moe.groups = 1;
  EXPECT_THAT(model::PrefixMask(parent_config, child).status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("layers[3].moe.groups: child 1, parent 2")));
  // A layer built on its own (no config validation) is checked by the slice itself.
  model::MixerInit init;
  init.hidden = parent_config.hidden;
  const at::Tensor hidden = torch::arange(parent_config.hidden, torch::kLong);
  const model::Mixer& parent_moe = *parent->mixer(3);
  model::MoeSpec spec = parent_config.layers[3].moe;
  spec.experts = 4;
  model::MoeImpl too_many_k(spec, init);
  EXPECT_THAT(too_many_k.CopyPrefixFrom(parent_moe, hidden),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::Eq("moe.top_k: 3 must be <= top_groups * experts "
                                              "per group (1 * 2 = 2)")));
  spec.experts = 2;
  spec.top_k = 1;
  model::MoeImpl one_per_group(spec, init);
  EXPECT_THAT(one_per_group.CopyPrefixFrom(parent_moe, hidden),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::Eq("moe.experts: 2 must be a multiple of groups "
                                              "(2) keeping >= 2 experts per group (a group's "
                                              "score is the sum of its two best)")));
}

// --- ranking ------------------------------------------------------------------------------

TEST(PruningRulesTest, GroupedDescendingOrderStaysInsideGroups) {
  EXPECT_EQ(autocompress::GroupedDescendingOrder({1, 3, 4, 2}, 2),
            (std::vector<int64_t>{1, 0, 2, 3}));
  EXPECT_EQ(autocompress::GroupedDescendingOrder({1, 3, 4, 2}, 1),
            (std::vector<int64_t>{2, 1, 3, 0}));
  EXPECT_EQ(autocompress::GroupedDescendingOrder({0, 5, 1, 9, 2, 4}, 3),
            (std::vector<int64_t>{1, 0, 3, 2, 5, 4}));
}

// Mamba heads are ranked inside their B/C group (the best head of the whole layer is in
// group 1 and stays there), experts per layer and inside their routing group, relu2 MLP
// neurons by their own scores; the permuted model computes the same logits.
TEST(PruningRulesTest, RankingPermutesInsideGroupsAndKeepsLogits) {
  HybridConfig config = NemotronLike(6);
  config.layers[3].moe.groups = 2;  // 2 routing groups of 2 experts
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM m, model::CreateHybridLM(config, 5));
  autocompress::Importance imp;
  for (int64_t c = 0; c < config.hidden; ++c) imp.hidden.push_back(static_cast<double>(c % 5));
  imp.layers.resize(4);
  imp.layers[0].mamba_heads = {1, 2, 3, 9, 8, 7};
  imp.layers[1].attention_heads = {1, 2, 3, 4};
  imp.layers[2].mlp_ffn.resize(24);
  for (int64_t f = 0; f < 24; ++f) imp.layers[2].mlp_ffn[f] = static_cast<double>(f);
  imp.layers[3].experts = {1, 2, 4, 3};
  imp.layers[3].expert_ffn.assign(4, std::vector<double>(8, 1.0));
  imp.layers[3].shared_ffn.assign(12, 1.0);
  TAILOR_ASSERT_OK_AND_ASSIGN(model::Permutation perm,
                              autocompress::RankedPermutation(config, imp));
  EXPECT_EQ(perm.layers[0].mamba_heads, (std::vector<int64_t>{2, 1, 0, 3, 4, 5}));
  EXPECT_EQ(perm.layers[3].experts, (std::vector<int64_t>{1, 0, 2, 3}));
  EXPECT_EQ(perm.layers[2].mlp_ffn.front(), 23);
  torch::manual_seed(11);
  const at::Tensor tokens = torch::randint(0, config.vocab, {2, 9}, torch::kLong);
  TAILOR_ASSERT_OK_AND_ASSIGN(model::ForwardOutput before, m->Forward(tokens));
  TAILOR_ASSERT_OK(model::PermuteHybridLM(m, perm));
  TAILOR_ASSERT_OK_AND_ASSIGN(model::ForwardOutput after, m->Forward(tokens));
  EXPECT_LT((before.logits - after.logits).abs().max().item<double>(), 1e-5);
}

// Ranked inside their routing group, the best expert of the layer (5, in group 1) stays in
// group 1, and a child of 2 per group takes the best 2 of each: parent experts {3, 2, 4, 5}.
TEST(PruningRulesTest, RankedGroupedExpertsSliceTheBestOfEachGroup) {
  const HybridConfig config = GroupedMoeLike();
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM m, model::CreateHybridLM(config, 5));
  const at::Tensor router = m->StateDict().at("layers.3.moe.router").clone();
  autocompress::Importance imp;
  imp.hidden.assign(config.hidden, 1.0);
  imp.layers.resize(4);
  imp.layers[0].mamba_heads = {1, 2, 3, 4};
  imp.layers[1].attention_heads = {1, 2, 3, 4};
  imp.layers[2].mlp_ffn.assign(24, 1.0);
  imp.layers[3].experts = {1, 2, 3, 4, 9, 8, 7, 6};
  imp.layers[3].expert_ffn.assign(8, std::vector<double>(8, 1.0));
  imp.layers[3].shared_ffn.assign(12, 1.0);
  TAILOR_ASSERT_OK_AND_ASSIGN(model::Permutation perm,
                              autocompress::RankedPermutation(config, imp));
  EXPECT_EQ(perm.layers[3].experts, (std::vector<int64_t>{3, 2, 1, 0, 4, 5, 6, 7}));
  TAILOR_ASSERT_OK(model::PermuteHybridLM(m, perm));
  HybridConfig child = config;
  child.layers[3].moe.experts = 4;
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM sliced, model::SliceHybridLM(m, child));
  at::Tensor want = router.index_select(0, torch::tensor({3, 2, 4, 5}, torch::kLong));
  if (!perm.hidden.empty()) want = want.index_select(1, torch::tensor(perm.hidden, torch::kLong));
  EXPECT_TRUE(torch::equal(sliced->StateDict().at("layers.3.moe.router"), want));
}

// --- AutoCompress search space and supernet -------------------------------------------------

TEST(PruningRulesTest, AutocompressMambaChoicesAreMultiplesOfGroups) {
  HybridConfig parent = NemotronLike(8);
  TAILOR_ASSERT_OK_AND_ASSIGN(autocompress::SearchSpace space,
                              autocompress::BuildSearchSpace(parent));
  ASSERT_EQ(space.axes[1].name, "mamba_heads");
  EXPECT_EQ(space.axes[1].widths, (std::vector<int64_t>{2, 4, 6, 8}));
  parent = NemotronLike(4);
  TAILOR_ASSERT_OK_AND_ASSIGN(space, autocompress::BuildSearchSpace(parent));
  EXPECT_EQ(space.axes[1].widths, (std::vector<int64_t>{2, 4}));
  // Experts with 2 routing groups of 2: each keeps >= 2, so all of them or none.
  parent.layers[3].moe.groups = 2;
  TAILOR_ASSERT_OK_AND_ASSIGN(space, autocompress::BuildSearchSpace(parent));
  for (const autocompress::ChoiceAxis& axis : space.axes) {
    if (axis.kind == autocompress::AxisKind::kExperts) {
      EXPECT_EQ(axis.widths, (std::vector<int64_t>{0, 4}));
    }
  }
}

// The expert axis of 8 experts in 2 groups: k of each group, k >= 2 and top_groups * k >=
// top_k (the supernet child keeps the parent's top_k).
std::vector<int64_t> GroupedExpertWidths(const HybridConfig& parent) {
  absl::StatusOr<autocompress::SearchSpace> space = autocompress::BuildSearchSpace(parent);
  if (!space.ok()) return {-1};
  for (const autocompress::ChoiceAxis& axis : space->axes) {
    if (axis.kind == autocompress::AxisKind::kExperts) return axis.widths;
  }
  return {};
}

TEST(PruningRulesTest, AutocompressExpertChoicesKeepEveryRoutingGroup) {
  EXPECT_EQ(GroupedExpertWidths(GroupedMoeLike(2, 1)), (std::vector<int64_t>{0, 4, 6, 8}));
  EXPECT_EQ(GroupedExpertWidths(GroupedMoeLike(3, 1)), (std::vector<int64_t>{0, 6, 8}));
  EXPECT_EQ(GroupedExpertWidths(GroupedMoeLike(4, 1)), (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(GroupedExpertWidths(GroupedMoeLike(4, 2)), (std::vector<int64_t>{0, 4, 6, 8}));
  HybridConfig three = GroupedMoeLike();
  three.layers[3].moe.experts = 12;  // 3 groups of 4
  three.layers[3].moe.groups = 3;
  EXPECT_EQ(GroupedExpertWidths(three), (std::vector<int64_t>{0, 6, 9, 12}));
}

// Every choice of a grouped expert axis gives a valid child (same groups, parent's top_k)
// whose prefix mask is the supernet's one-hot mask.
TEST(PruningRulesTest, AutocompressGroupedExpertSoftMasksAreThePrefixMasks) {
  const HybridConfig parent = GroupedMoeLike();
  TAILOR_ASSERT_OK_AND_ASSIGN(autocompress::SearchSpace space,
                              autocompress::BuildSearchSpace(parent));
  int experts_axis = -1;
  std::vector<int> idx(space.axes.size());
  for (size_t a = 0; a < idx.size(); ++a) {
    idx[a] = static_cast<int>(space.axes[a].widths.size()) - 1;
    if (space.axes[a].kind == autocompress::AxisKind::kExperts) experts_axis = static_cast<int>(a);
  }
  ASSERT_GE(experts_axis, 0);
  const std::vector<std::vector<float>> want = {{0, 0, 0, 0, 0, 0, 0, 0},
                                                {1, 1, 0, 0, 1, 1, 0, 0},
                                                {1, 1, 1, 0, 1, 1, 1, 0},
                                                {1, 1, 1, 1, 1, 1, 1, 1}};
  ASSERT_EQ(space.axes[experts_axis].widths.size(), want.size());
  for (int j = 0; j < 4; ++j) {
    idx[experts_axis] = j;
    TAILOR_ASSERT_OK_AND_ASSIGN(HybridConfig child, autocompress::ChildConfig(parent, space, idx));
    EXPECT_EQ(child.layers[3].moe.experts, space.axes[experts_axis].widths[j]);
    EXPECT_EQ(child.layers[3].moe.top_k, j == 0 ? 0 : 2);
    EXPECT_TRUE(child.layers[3].moe.SameVariant(parent.layers[3].moe));
    TAILOR_ASSERT_OK_AND_ASSIGN(model::ArchMask hard, model::PrefixMask(parent, child));
    TAILOR_ASSERT_OK_AND_ASSIGN(model::ArchMask soft, autocompress::SoftArchMask(
                                                          parent, space,
                                                          autocompress::OneHotChoices(space, idx)));
    EXPECT_EQ(Values(hard.layers[3].experts), want[j]) << j;
    EXPECT_EQ(Values(soft.layers[3].experts), want[j]) << j;
  }
}

// Every choice of the Mamba axis gives a valid child whose mask is the supernet's one-hot
// mask, and the child keeps every variant of its parent.
TEST(PruningRulesTest, AutocompressChildrenAndSoftMasksFollowTheGroups) {
  const HybridConfig parent = NemotronLike(6);
  TAILOR_ASSERT_OK_AND_ASSIGN(autocompress::SearchSpace space,
                              autocompress::BuildSearchSpace(parent));
  EXPECT_EQ(space.axes[1].widths, (std::vector<int64_t>{2, 4, 6}));
  std::vector<int> idx(space.axes.size());
  for (size_t a = 0; a < idx.size(); ++a) {
    idx[a] = static_cast<int>(space.axes[a].widths.size()) - 1;
  }
  for (int j = 0; j < 3; ++j) {
    idx[1] = j;
    TAILOR_ASSERT_OK_AND_ASSIGN(HybridConfig child, autocompress::ChildConfig(parent, space, idx));
    EXPECT_EQ(child.layers[0].mamba.heads, 2 * (j + 1));
    EXPECT_EQ(child.layers[0].mamba.groups, 2);
    EXPECT_FALSE(child.layers[1].attention.rope);
    EXPECT_EQ(child.layers[2].mlp.activation, model::FfnActivation::kReluSquared);
    EXPECT_TRUE(child.layers[3].moe.SameVariant(parent.layers[3].moe));
    TAILOR_ASSERT_OK_AND_ASSIGN(model::ArchMask hard, model::PrefixMask(parent, child));
    TAILOR_ASSERT_OK_AND_ASSIGN(model::ArchMask soft, autocompress::SoftArchMask(
                                                          parent, space,
                                                          autocompress::OneHotChoices(space, idx)));
    EXPECT_EQ(Values(soft.layers[0].mamba_heads), Values(hard.layers[0].mamba_heads)) << j;
  }
}

// --- cost model search space and profiler grid ----------------------------------------------

TEST(PruningRulesTest, StepChoicesWithAMultiple) {
  EXPECT_EQ(costmodel::StepChoices(4, 4), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(costmodel::StepChoices(4, 4, 2), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(costmodel::StepChoices(8, 4, 2), (std::vector<int64_t>{2, 4, 6, 8}));
  EXPECT_EQ(costmodel::StepChoices(6, 4, 2), (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(costmodel::StepChoices(3, 4, 6), (std::vector<int64_t>{3}));  // never above n
}

TEST(PruningRulesTest, CostSpaceOptionsKeepVariantsAndGroups) {
  const HybridConfig parent = NemotronLike(6);
  TAILOR_ASSERT_OK_AND_ASSIGN(costmodel::SearchSpace space,
                              costmodel::SearchSpace::FromParent(parent));
  EXPECT_EQ(space.mamba_head_choices(), (std::vector<int64_t>{2, 4, 6}));
  for (const costmodel::LayerOption& o : space.layer_options(1)) {
    EXPECT_FALSE(o.spec.attention.rope) << o.label;
  }
  for (const costmodel::LayerOption& o : space.layer_options(2)) {
    EXPECT_EQ(o.spec.mlp.activation, model::FfnActivation::kReluSquared) << o.label;
  }
  for (const costmodel::LayerOption& o : space.layer_options(3)) {
    EXPECT_TRUE(o.spec.moe.SameVariant(parent.layers[3].moe)) << o.label;
  }
  EXPECT_EQ(space.Materialize(space.ParentArchitecture()).value(), parent);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 50; ++i) {
    TAILOR_ASSERT_OK_AND_ASSIGN(HybridConfig c, space.Materialize(space.Sample(rng)));
    EXPECT_EQ(c.layers[0].mamba.heads % 2, 0) << c.layers[0].mamba.heads;
  }
  HybridConfig grouped = parent;
  grouped.layers[3].moe.groups = 2;
  EXPECT_EQ(costmodel::ExpertChoices(grouped.layers[3].moe, 4), (std::vector<int64_t>{4}));
  EXPECT_EQ(costmodel::ExpertChoices(parent.layers[3].moe, 4),
            (std::vector<int64_t>{1, 2, 3, 4}));
  // top_k follows the experts kept (and, with groups, those top_groups groups reach).
  EXPECT_EQ(costmodel::MoeOf(parent.layers[3], 1, 8, 0).moe.top_k, 1);
}

// Grouped expert counts in the cost model's space: k >= 2 of every group, top_k clamped to
// what top_groups groups of k reach, every option a valid config of the parent's variant.
TEST(PruningRulesTest, CostSpaceGroupedExpertChoicesKeepEveryGroup) {
  const HybridConfig parent = GroupedMoeLike(/*top_k=*/4, /*top_groups=*/1);
  const model::MoeSpec& m = parent.layers[3].moe;
  EXPECT_EQ(costmodel::ExpertChoices(m, 4), (std::vector<int64_t>{4, 6, 8}));
  EXPECT_EQ(costmodel::ExpertChoices(m, 2), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(costmodel::MoeOf(parent.layers[3], 4, 8, 0).moe.top_k, 2);
  EXPECT_EQ(costmodel::MoeOf(parent.layers[3], 6, 8, 0).moe.top_k, 3);
  EXPECT_EQ(costmodel::MoeOf(parent.layers[3], 8, 8, 0).moe.top_k, 4);
  TAILOR_ASSERT_OK_AND_ASSIGN(costmodel::SearchSpace space,
                              costmodel::SearchSpace::FromParent(parent));
  std::vector<int64_t> experts;
  for (const costmodel::LayerOption& o : space.layer_options(3)) {
    EXPECT_TRUE(o.spec.moe.SameVariant(m)) << o.label;
    HybridConfig one = parent;
    one.layers = {o.spec};
    EXPECT_TRUE(model::ValidateHybridConfig(one).ok()) << o.label;
    if (experts.empty() || experts.back() != o.spec.moe.experts) {
      experts.push_back(o.spec.moe.experts);
    }
  }
  EXPECT_EQ(experts, (std::vector<int64_t>{0, 4, 6, 8}));
  // The profiler measures the same counts, each with its own top_k.
  std::set<std::pair<int64_t, int64_t>> profiled;
  for (const costmodel::ProfilePoint& p : costmodel::ProfileGrid(space, {})) {
    if (p.spec.kind == model::LayerKind::kMoe && p.spec.moe.experts > 0) {
      profiled.insert({p.spec.moe.experts, p.spec.moe.top_k});
    }
  }
  EXPECT_EQ(profiled, (std::set<std::pair<int64_t, int64_t>>{{4, 2}, {6, 3}, {8, 4}}));
}

TEST(PruningRulesTest, ProfileGridNodesAreTheParentsVariant) {
  const HybridConfig parent = NemotronLike(6);
  TAILOR_ASSERT_OK_AND_ASSIGN(costmodel::SearchSpace space,
                              costmodel::SearchSpace::FromParent(parent));
  const std::vector<costmodel::ProfilePoint> grid = costmodel::ProfileGrid(space, {});
  ASSERT_FALSE(grid.empty());
  for (const costmodel::ProfilePoint& p : grid) {
    const LayerSpec& from = parent.layers[p.position];
    ASSERT_EQ(p.spec.kind, from.kind);
    HybridConfig one = parent;
    one.hidden = p.hidden;
    one.layers = {p.spec};
    EXPECT_TRUE(model::ValidateHybridConfig(one).ok()) << costmodel::LayerKey(p.spec, p.hidden);
    switch (from.kind) {
      case model::LayerKind::kAttention:
        EXPECT_FALSE(p.spec.attention.rope);
        break;
      case model::LayerKind::kMamba:
        EXPECT_EQ(p.spec.mamba.groups, 2);
        EXPECT_EQ(p.spec.mamba.norm, model::MambaNorm::kPerGroup);
        EXPECT_EQ(p.spec.mamba.heads % 2, 0);
        break;
      case model::LayerKind::kMoe:
        EXPECT_TRUE(p.spec.moe.SameVariant(from.moe));
        break;
      case model::LayerKind::kMlp:
        EXPECT_EQ(p.spec.mlp.activation, model::FfnActivation::kReluSquared);
        break;
    }
  }
}

// The memory model keeps the variants too: the Mamba cache holds every B/C group's conv
// state ([B, heads*head_dim + 2*groups*state, K-1] plus the SSM state [B, heads, head_dim,
// state]), and tied embeddings are one table, as HybridConfig::ParameterCount counts them.
TEST(PruningRulesTest, MemoryModelCountsGroupsAndTiedEmbeddings) {
  engine::Workload w;
  w.batch_size = 2;
  const LayerSpec m = GroupedMamba(6, 2);  // head_dim 4, state 6, conv_kernel 4
  const int64_t conv = 2 * (6 * 4 + 2 * 2 * 6) * 3, ssm = 2 * 6 * 4 * 6;
  EXPECT_EQ(costmodel::LayerCacheBytes(m, w, 4), (conv + ssm) * 4);
  EXPECT_EQ(costmodel::FixedParameterCount(40, 16, /*tied_embeddings=*/true), 40 * 16 + 16);
  EXPECT_EQ(costmodel::FixedParameterCount(40, 16), 2 * 40 * 16 + 16);
  HybridConfig tied = NemotronLike(6);
  tied.tie_embeddings = true;
  int64_t sum = costmodel::FixedParameterCount(tied.vocab, tied.hidden, true);
  for (const LayerSpec& l : tied.layers) sum += costmodel::LayerParameterCount(l, tied.hidden);
  EXPECT_EQ(sum, tied.ParameterCount());
}

// --- block removal --------------------------------------------------------------------------

// A removed block keeps its variant (the child still reads as the parent's family, and its
// config.json round-trips).
TEST(PruningRulesTest, RemovedBlocksKeepTheirVariant) {
  const HybridConfig parent = NemotronLike(6);
  TAILOR_ASSERT_OK_AND_ASSIGN(HybridConfig child,
                              blockremoval::RemoveBlocks(parent, {0, 1, 2, 3}));
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(child.layers[i].present()) << i;
    EXPECT_EQ(child.layers[i], LayerSpec::AbsentLike(parent.layers[i])) << i;
  }
  EXPECT_EQ(child.layers[0].mamba.groups, 2);
  EXPECT_FALSE(child.layers[1].attention.rope);
  EXPECT_EQ(child.layers[2].mlp.activation, model::FfnActivation::kReluSquared);
  EXPECT_TRUE(child.layers[3].moe.SameVariant(parent.layers[3].moe));
  TAILOR_ASSERT_OK_AND_ASSIGN(HybridConfig back,
                              model::ParseHybridConfigJson(model::HybridConfigToJson(child)));
  EXPECT_EQ(back, child);
}

}  // namespace
}  // namespace tailor
