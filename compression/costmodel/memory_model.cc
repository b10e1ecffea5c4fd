#include "compression/costmodel/memory_model.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "compression/model/deci_blocks.h"

namespace tailor::costmodel {

int64_t LayerParameterCount(const model::LayerSpec& spec, int64_t hidden) {
  if (!spec.present()) return 0;
  // A one-layer config with no vocabulary counts the layer plus the final norm (hidden).
  model::HybridConfig one;
  one.vocab = 0;
  one.hidden = hidden;
  one.layers = {spec};
  return one.ParameterCount() - hidden;
}

int64_t FixedParameterCount(int64_t vocab, int64_t hidden, bool tied_embeddings) {
  return (tied_embeddings ? 1 : 2) * vocab * hidden + hidden;
}

int64_t LayerWeightBytes(const model::LayerSpec& spec, int64_t hidden, int64_t bytes) {
  return LayerParameterCount(spec, hidden) * bytes;
}

int64_t WeightBytes(const model::HybridConfig& config, int64_t bytes) {
  return config.ParameterCount() * bytes;
}

int64_t LayerCacheBytes(const model::LayerSpec& spec, const engine::Workload& w, int64_t bytes) {
  if (!spec.present()) return 0;
  const int64_t b = w.batch_size;
  switch (spec.kind) {
    case model::LayerKind::kAttention: {
      const model::AttentionSpec& a = spec.attention;
      return 2 * b * a.kv_heads * w.cache_positions() * a.head_dim * bytes;
    }
    case model::LayerKind::kMamba: {
      const model::MambaSpec& m = spec.mamba;
      const int64_t inner = m.heads * m.head_dim;
      // The conv state holds x and every B/C group (MambaImpl::InitCache).
      const int64_t conv = b * (inner + 2 * m.groups * m.state) * (m.conv_kernel - 1);
      const int64_t ssm = b * inner * m.state;
      return (conv + ssm) * bytes;
    }
    case model::LayerKind::kMoe:
    case model::LayerKind::kMlp:
      return 0;
  }
  return 0;
}

namespace {

// KV heads of each `deci` block (1 for a zero attention, 0 without attention).
std::vector<int64_t> DeciBlockKvHeads(const model::HybridConfig& config) {
  std::vector<int64_t> kv;
  for (const model::DeciBlockSlot& b : model::DeciBlockSlots(config)) {
    const model::LayerSpec& a = config.layers[2 * b.pair];
    kv.push_back(b.zero_attention ? 1 : a.present() ? a.attention.kv_heads : 0);
  }
  return kv;
}

}  // namespace

int64_t AttentionCacheBytes(const model::HybridConfig& config, const engine::Workload& w,
                            int64_t bytes, model::KvCacheLayout layout) {
  if (layout == model::KvCacheLayout::kDeciBlocks && model::PairsAsDeciBlocks(config)) {
    int64_t head_dim = 0;  // one for the whole file (deci's attention.key_length)
    for (size_t i = 0; i < config.layers.size(); i += 2) {
      head_dim = std::max(head_dim, config.layers[i].attention.head_dim);
    }
    const std::vector<int64_t> kv = DeciBlockKvHeads(config);
    const int64_t keys = std::accumulate(kv.begin(), kv.end(), int64_t{0});
    const int64_t widest = kv.empty() ? 0 : *std::max_element(kv.begin(), kv.end());
    const int64_t values = static_cast<int64_t>(kv.size()) * widest;
    return (keys + values) * w.batch_size * w.cache_positions() * head_dim * bytes;
  }
  int64_t n = 0;
  for (const model::LayerSpec& l : config.layers) {
    if (l.kind == model::LayerKind::kAttention) n += LayerCacheBytes(l, w, bytes);
  }
  return n;
}

int64_t CacheBytes(const model::HybridConfig& config, const engine::Workload& w, int64_t bytes) {
  int64_t n = 0;
  for (const model::LayerSpec& l : config.layers) n += LayerCacheBytes(l, w, bytes);
  return n;
}

int64_t RuntimeBytes(int64_t hidden, const engine::Workload& w, int64_t bytes) {
  const int64_t ids = 8 * w.batch_size * w.cache_positions();  // prompt + output, int64
  const int64_t residual = w.batch_size * w.input_tokens * hidden * bytes;
  return ids + residual;
}

}  // namespace tailor::costmodel
