// The pruning rules of the imported block variants (docs/model.md, "Pruning rules"), each
// with exact values: Mamba heads are kept, masked, ranked and searched inside their B/C
// groups; experts with routing groups are ranked inside their group and kept whole; every
// search-space option and profiled grid node keeps its parent's block variant (RoPE off,
// relu2, sigmoid routing, per-group norm) while only widths change, and so does a block
// that block removal makes absent.
#include <torch/torch.h>

#include <random>
#include <vector>

#include "compression/autocompress/ranking.h"
#include "compression/autocompress/space.h"
#include "compression/autocompress/supernet.h"
#include "compression/blockremoval/gates.h"
#include "compression/costmodel/memory_model.h"
#include "compression/costmodel/profiler.h"
#include "compression/costmodel/search_space.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"
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

std::vector<float> Values(const at::Tensor& t) {
  at::Tensor c = t.to(torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// --- model: KeptMambaHeads, MambaHeadMultiple, PrefixMask ---------------------------------

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
  torch::manual_seed(7);
  const at::Tensor tokens = torch::randint(0, parent_config.vocab, {2, 10}, torch::kLong);
  model::ForwardOptions masked;
  masked.mask = &mask;
  TAILOR_ASSERT_OK_AND_ASSIGN(model::ForwardOutput a, parent->Forward(tokens, masked));
  TAILOR_ASSERT_OK_AND_ASSIGN(model::ForwardOutput b, sliced->Forward(tokens));
  EXPECT_LT((a.logits - b.logits).abs().max().item<double>(), 1e-5);
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
  // Experts with routing groups: all of them or none.
  parent.layers[3].moe.groups = 2;
  TAILOR_ASSERT_OK_AND_ASSIGN(space, autocompress::BuildSearchSpace(parent));
  for (const autocompress::ChoiceAxis& axis : space.axes) {
    if (axis.kind == autocompress::AxisKind::kExperts) {
      EXPECT_EQ(axis.widths, (std::vector<int64_t>{0, 4}));
    }
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
