// AutoCompress importance ranking: the Minitron score formula on known activations, and
// the central property of the ranked parent: a prefix slice of the permuted parent computes
// the same function as slicing the unpermuted parent by the ranked indices.

#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/autocompress/ranking.h"
#include "compression/model/hybrid_lm.h"
#include "gtest/gtest.h"

namespace tailor::autocompress {
namespace {

using model::ActivationSite;
using model::HybridConfig;
using model::HybridLM;
using model::LayerSpec;
using model::Site;

HybridConfig MixedConfig() {
  HybridConfig c;
  c.vocab = 50;
  c.hidden = 32;
  c.max_seq = 40;
  c.layers = {LayerSpec::Attention(6, 2, 8), LayerSpec::Mamba(4, 8, 8, 4, 5),
              LayerSpec::Moe(4, 2, 16, 16), LayerSpec::Mlp(48), LayerSpec::Mlp(0)};
  return c;
}

// Unit-gain weights so every block moves the logits O(1) (the default init makes tiny
// logits against which a tolerance would hide bugs).
HybridLM MakeModel(const HybridConfig& c, uint64_t seed) {
  absl::StatusOr<HybridLM> m = model::CreateHybridLM(c, seed);
  EXPECT_TRUE(m.ok()) << m.status();
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed + 100);
  for (auto& p : (*m)->parameters()) {
    if (p.dim() >= 2) p.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(p.size(-1))));
  }
  return *m;
}

HybridLM Clone(const HybridLM& m) {
  absl::StatusOr<HybridLM> c = model::CreateHybridLM(m->config(), 0);
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE((*c)->LoadStateDict(m->StateDict(), "clone").ok());
  return *c;
}

TEST(ImportanceObserverTest, MinitronFormulaOnKnownActivations) {
  const HybridConfig c = MixedConfig();
  ImportanceObserver obs(c);
  // a[b, t, c] for the MLP down-projection input of layer 3 (48 neurons), two batches.
  at::Tensor a1 = torch::randn({2, 3, 48}, torch::kDouble);
  at::Tensor a2 = torch::randn({3, 5, 48}, torch::kDouble);
  obs.Observe({Site::kMlpFfn, 3}, a1);
  obs.Observe({Site::kMlpFfn, 3}, a2);
  // Expert 1 of layer 2: two routed tokens with output norms 5 and 13 -> mean 9.
  at::Tensor y = torch::zeros({2, 32}, torch::kDouble);
  y[0][0] = 3.0;
  y[0][1] = 4.0;
  y[1][2] = 5.0;
  y[1][3] = 12.0;
  obs.Observe({Site::kExpertOutput, 2, 1}, y);
  // Heads of layer 0: head score = L2 norm over head_dim of the channel scores.
  at::Tensor h = torch::randn({2, 4, 6, 8}, torch::kDouble);
  obs.Observe({Site::kAttentionHeads, 0}, h);
  const Importance imp = obs.Result();

  ASSERT_EQ(imp.layers[3].mlp_ffn.size(), 48u);
  for (int64_t ch = 0; ch < 48; ++ch) {
    double sum = 0.0;
    for (const at::Tensor& a : {a1, a2}) {
      for (int64_t b = 0; b < a.size(0); ++b) {
        double mean = 0.0;
        for (int64_t t = 0; t < a.size(1); ++t) mean += std::abs(a[b][t][ch].item<double>());
        mean /= static_cast<double>(a.size(1));
        sum += mean * mean;
      }
    }
    EXPECT_NEAR(imp.layers[3].mlp_ffn[ch], std::sqrt(sum), 1e-12) << ch;
  }
  ASSERT_EQ(imp.layers[2].experts.size(), 4u);
  EXPECT_DOUBLE_EQ(imp.layers[2].experts[1], 9.0);
  EXPECT_DOUBLE_EQ(imp.layers[2].experts[0], 0.0);  // never routed
  ASSERT_EQ(imp.layers[0].attention_heads.size(), 6u);
  for (int64_t head = 0; head < 6; ++head) {
    double sq = 0.0;
    for (int64_t d = 0; d < 8; ++d) {
      double s = 0.0;
      for (int64_t b = 0; b < 2; ++b) {
        const double m = h[b].select(1, head).select(1, d).abs().mean().item<double>();
        s += m * m;
      }
      sq += s;  // (sqrt(s))^2
    }
    EXPECT_NEAR(imp.layers[0].attention_heads[head], std::sqrt(sq), 1e-12) << head;
  }
}

TEST(RankingTest, DescendingOrderIsStable) {
  EXPECT_EQ(DescendingOrder({1.0, 3.0, 2.0, 3.0}), (std::vector<int64_t>{1, 3, 2, 0}));
}

// Slices `parent` (unpermuted) by explicit old-index lists, in the given order: an
// implementation independent of the permutation code, from the weight names of
// docs/model.md.
struct IndexSlice {
  std::vector<int64_t> hidden;
  std::vector<int64_t> attention_heads, attention_kv;  // layer 0
  std::vector<int64_t> mamba_heads;                    // layer 1
  std::vector<int64_t> experts;                        // layer 2, new order of old ids
  std::vector<std::vector<int64_t>> expert_ffn;        // by OLD expert id
  std::vector<int64_t> shared_ffn;                     // layer 2
  std::vector<int64_t> mlp_ffn;                        // layer 3
};

at::Tensor Idx(const std::vector<int64_t>& v) { return torch::tensor(v, torch::kLong); }

model::TensorMap SliceByIndex(const model::TensorMap& p, const IndexSlice& s, int64_t head_dim,
                              int64_t mamba_head_dim) {
  const at::Tensor h = Idx(s.hidden);
  model::TensorMap out;
  auto sel = [](const at::Tensor& t, int64_t dim, const at::Tensor& idx) {
    return t.index_select(dim, idx);
  };
  out["embed"] = sel(p.at("embed"), 1, h);
  out["lm_head"] = sel(p.at("lm_head"), 1, h);
  out["final_norm"] = sel(p.at("final_norm"), 0, h);
  for (int i = 0; i < 4; ++i)
    out[absl::StrCat("layers.", i, ".norm")] = sel(p.at(absl::StrCat("layers.", i, ".norm")), 0, h);
  const at::Tensor q = model::ExpandUnits(Idx(s.attention_heads), head_dim);
  const at::Tensor kv = model::ExpandUnits(Idx(s.attention_kv), head_dim);
  out["layers.0.attention.q_proj"] = sel(sel(p.at("layers.0.attention.q_proj"), 0, q), 1, h);
  out["layers.0.attention.k_proj"] = sel(sel(p.at("layers.0.attention.k_proj"), 0, kv), 1, h);
  out["layers.0.attention.v_proj"] = sel(sel(p.at("layers.0.attention.v_proj"), 0, kv), 1, h);
  out["layers.0.attention.o_proj"] = sel(sel(p.at("layers.0.attention.o_proj"), 1, q), 0, h);
  const at::Tensor mh = Idx(s.mamba_heads);
  const at::Tensor mi = model::ExpandUnits(mh, mamba_head_dim);
  const std::string m = "layers.1.mamba.";
  out[m + "z_proj"] = sel(sel(p.at(m + "z_proj"), 0, mi), 1, h);
  out[m + "x_proj"] = sel(sel(p.at(m + "x_proj"), 0, mi), 1, h);
  out[m + "bc_proj"] = sel(p.at(m + "bc_proj"), 1, h);
  out[m + "dt_proj"] = sel(sel(p.at(m + "dt_proj"), 0, mh), 1, h);
  for (const char* n : {"dt_bias", "a_log", "d"}) out[m + n] = sel(p.at(m + n), 0, mh);
  out[m + "conv_x"] = sel(p.at(m + "conv_x"), 0, mi);
  out[m + "conv_x_bias"] = sel(p.at(m + "conv_x_bias"), 0, mi);
  out[m + "conv_bc"] = p.at(m + "conv_bc");
  out[m + "conv_bc_bias"] = p.at(m + "conv_bc_bias");
  out[m + "norm"] = sel(p.at(m + "norm"), 0, mi);
  out[m + "out_proj"] = sel(sel(p.at(m + "out_proj"), 1, mi), 0, h);
  const std::string e = "layers.2.moe.";
  std::vector<at::Tensor> gate, up, down;
  for (int64_t old : s.experts) {
    const at::Tensor f = Idx(s.expert_ffn[old]);
    gate.push_back(sel(sel(p.at(e + "w_gate")[old], 0, f), 1, h));
    up.push_back(sel(sel(p.at(e + "w_up")[old], 0, f), 1, h));
    down.push_back(sel(sel(p.at(e + "w_down")[old], 1, f), 0, h));
  }
  out[e + "router"] = sel(sel(p.at(e + "router"), 0, Idx(s.experts)), 1, h);
  out[e + "w_gate"] = torch::stack(gate);
  out[e + "w_up"] = torch::stack(up);
  out[e + "w_down"] = torch::stack(down);
  const at::Tensor sf = Idx(s.shared_ffn);
  out[e + "shared_gate"] = sel(sel(p.at(e + "shared_gate"), 0, sf), 1, h);
  out[e + "shared_up"] = sel(sel(p.at(e + "shared_up"), 0, sf), 1, h);
  out[e + "shared_down"] = sel(sel(p.at(e + "shared_down"), 1, sf), 0, h);
  const at::Tensor mf = Idx(s.mlp_ffn);
  out["layers.3.mlp.w_gate"] = sel(sel(p.at("layers.3.mlp.w_gate"), 0, mf), 1, h);
  out["layers.3.mlp.w_up"] = sel(sel(p.at("layers.3.mlp.w_up"), 0, mf), 1, h);
  out["layers.3.mlp.w_down"] = sel(sel(p.at("layers.3.mlp.w_down"), 1, mf), 0, h);
  return out;
}

std::vector<int64_t> Head(const std::vector<int64_t>& v, size_t n) {
  return std::vector<int64_t>(v.begin(), v.begin() + n);
}

TEST(RankingTest, PrefixOfRankedParentEqualsIndexSliceOfParent) {
  const HybridConfig pc = MixedConfig();
  HybridLM parent = MakeModel(pc, 3);
  torch::manual_seed(7);
  std::vector<at::Tensor> calib = {torch::randint(0, pc.vocab, {3, 16}, torch::kLong),
                                   torch::randint(0, pc.vocab, {2, 16}, torch::kLong)};
  absl::StatusOr<Importance> imp = RankImportance(parent, calib);
  ASSERT_TRUE(imp.ok()) << imp.status();
  absl::StatusOr<model::Permutation> perm = RankedPermutation(pc, *imp);
  ASSERT_TRUE(perm.ok()) << perm.status();
  // Real activations give distinct scores, so the ranking is not the identity.
  EXPECT_NE(perm->hidden, DescendingOrder(std::vector<double>(pc.hidden, 0.0)));

  HybridLM ranked = Clone(parent);
  ASSERT_TRUE(PermuteModel(ranked, *imp).ok());

  // Child: hidden 20, 2 of 3 query heads per group (both KV groups), 2 Mamba heads, 3
  // experts of width 10, shared 8, MLP 30.
  HybridConfig cc = pc;
  cc.hidden = 20;
  cc.layers[0] = LayerSpec::Attention(4, 2, 8);
  cc.layers[1].mamba.heads = 2;
  cc.layers[2] = LayerSpec::Moe(3, 2, 10, 8);
  cc.layers[3] = LayerSpec::Mlp(30);
  absl::StatusOr<HybridLM> student = model::SliceHybridLM(ranked, cc);
  ASSERT_TRUE(student.ok()) << student.status();

  const model::LayerPermutation& l0 = perm->layers[0];
  IndexSlice s;
  s.hidden = Head(perm->hidden, 20);
  s.attention_kv = l0.attention_kv_heads;
  for (int64_t grp = 0; grp < 2; ++grp) {  // first 2 ranked heads of each ranked group
    for (int64_t j = 0; j < 2; ++j) s.attention_heads.push_back(l0.attention_heads[grp * 3 + j]);
  }
  s.mamba_heads = Head(perm->layers[1].mamba_heads, 2);
  s.experts = Head(perm->layers[2].experts, 3);
  for (const auto& f : perm->layers[2].expert_ffn) s.expert_ffn.push_back(Head(f, 10));
  s.shared_ffn = Head(perm->layers[2].shared_ffn, 8);
  s.mlp_ffn = Head(perm->layers[3].mlp_ffn, 30);
  absl::StatusOr<HybridLM> reference = model::CreateHybridLM(cc, 0);
  ASSERT_TRUE(reference.ok());
  ASSERT_TRUE((*reference)->LoadStateDict(SliceByIndex(parent->StateDict(), s, 8, 8), "ref").ok());

  // Same float weights in both; compute in double so only the function is compared.
  (*student)->to(torch::kDouble);
  (*reference)->to(torch::kDouble);
  parent->to(torch::kDouble);
  ranked->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  at::Tensor tokens = torch::randint(0, pc.vocab, {2, 14}, torch::kLong);
  at::Tensor got = (*student)->Forward(tokens)->logits;
  at::Tensor want = (*reference)->Forward(tokens)->logits;
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-5);
  EXPECT_GT(want.abs().max().item<double>(), 0.1);  // not trivially zero
  // The permutation alone leaves the parent's function unchanged.
  at::Tensor full = parent->Forward(tokens)->logits;
  EXPECT_LT((ranked->Forward(tokens)->logits - full).abs().max().item<double>(), 1e-9);
}

}  // namespace
}  // namespace tailor::autocompress
