#include "compression/costmodel/memory_model.h"

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
