#ifndef TAILOR_TESTS_UNIT_COMPRESSION_SYNTHETIC_COST_TABLE_H_
#define TAILOR_TESTS_UNIT_COMPRESSION_SYNTHETIC_COST_TABLE_H_

// Test support: a cost table with made-up but structured numbers for any parent config, so
// cost-model consumers (the differentiable predictor, the uniform baseline) are tested
// without profiling anything.

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/costmodel/cost_table.h"
#include "compression/costmodel/search_space.h"
#include "compression/model/config.h"

namespace tailor::autocompress::test_support {

using costmodel::CostTableData;
using model::HybridConfig;
using model::LayerKind;
using model::LayerSpec;

// A table over two nodes per axis of every class the parent's space touches. Times and
// workspaces differ by kind so that the largest workspace moves between layers and the fixed
// part as the widths change.
inline CostTableData SyntheticTable(const HybridConfig& parent) {
  CostTableData t;
  t.workload.batch_size = 2;
  t.workload.input_tokens = 16;
  t.workload.output_tokens = 4;
  t.vocab = parent.vocab;
  t.memory.eps_mib = 0.125;
  const std::vector<int64_t> hs = {std::max<int64_t>(parent.hidden / 4, 1), parent.hidden};
  auto add = [&](const LayerSpec& l, int64_t h) {
    std::map<std::string, double> p = costmodel::LayerParams(l, h);
    const int kind = static_cast<int>(l.kind);
    double time = 0.02 * (kind + 1) + 0.0007 * h;
    for (const auto& [k, v] : p) time += 0.003 * (kind + 2) * v;
    p[costmodel::kWorkspaceParam] = 0.01 * time * h / (kind + 1);
    const std::string name(model::LayerKindName(l.kind));
    t.entries.push_back({name, costmodel::LayerKey(l, h), costmodel::kPrefill, time, 0, p});
    t.entries.push_back(
        {name, costmodel::LayerKey(l, h), costmodel::kDecode, 1.7 * time + 0.001 * h, 0, p});
  };
  int64_t max_e = 0, max_f = 0, max_s = 0, max_mlp = 0, max_mh = 0;
  std::vector<int64_t> top_ks;
  const LayerSpec* attention = nullptr;
  const LayerSpec* mamba = nullptr;
  for (const LayerSpec& l : parent.layers) {
    if (l.kind == LayerKind::kAttention) attention = &l;
    if (l.kind == LayerKind::kMamba) {
      mamba = &l;
      max_mh = std::max(max_mh, l.mamba.heads);
    }
    if (l.kind == LayerKind::kMoe) {
      max_e = std::max(max_e, l.moe.experts);
      max_f = std::max(max_f, l.moe.expert_ffn);
      max_s = std::max(max_s, l.moe.shared_ffn);
      if (l.moe.top_k > 0 && std::find(top_ks.begin(), top_ks.end(), l.moe.top_k) == top_ks.end()) {
        top_ks.push_back(l.moe.top_k);
      }
    }
    if (l.kind == LayerKind::kMlp) max_mlp = std::max(max_mlp, l.mlp.ffn);
  }
  for (int64_t h : hs) {
    if (attention != nullptr) {
      const int64_t kv = attention->attention.kv_heads;
      const int64_t g = attention->attention.heads / kv;
      // kv or g of 1 gives a repeated node, which the interpolator averages away.
      for (int64_t k : {int64_t{1}, kv}) {
        for (int64_t q : {int64_t{1}, g}) {
          add(LayerSpec::Attention(k * q, k, attention->attention.head_dim), h);
        }
      }
    }
    if (mamba != nullptr) {
      for (int64_t heads : {int64_t{1}, max_mh}) {
        add(LayerSpec::Mamba(heads, mamba->mamba.head_dim, mamba->mamba.state,
                             mamba->mamba.conv_kernel, mamba->mamba.chunk),
            h);
      }
    }
    for (int64_t k : top_ks) {
      for (int64_t e : {k, max_e}) {
        for (int64_t f : {int64_t{8}, max_f}) {
          for (int64_t s : {int64_t{0}, int64_t{8}, max_s}) {
            if (max_s == 0 && s > 0) continue;
            add(LayerSpec::Moe(e, k, f, s), h);
          }
        }
      }
    }
    if (max_s > 0) {
      for (int64_t s : {int64_t{8}, max_s}) add(LayerSpec::Moe(0, 0, 0, s), h);
    }
    if (max_mlp > 0) {
      for (int64_t f : {int64_t{8}, max_mlp}) add(LayerSpec::Mlp(f), h);
    }
    std::map<std::string, double> fp = {{"hidden", static_cast<double>(h)},
                                        {costmodel::kWorkspaceParam, 0.05 + 0.004 * h}};
    const std::string key = absl::StrCat("hidden=", h);
    t.entries.push_back({costmodel::kFixedKind, key, costmodel::kPrefill, 0.4 + 0.001 * h, 0, fp});
    t.entries.push_back({costmodel::kFixedKind, key, costmodel::kDecode, 1.1 + 0.002 * h, 0, fp});
  }
  return t;
}

}  // namespace tailor::autocompress::test_support

#endif  // TAILOR_TESTS_UNIT_COMPRESSION_SYNTHETIC_COST_TABLE_H_
