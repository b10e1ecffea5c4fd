#ifndef TAILOR_COMPRESSION_MODEL_KV_CACHE_LAYOUT_H_
#define TAILOR_COMPRESSION_MODEL_KV_CACHE_LAYOUT_H_

namespace tailor::model {

// How an engine's file layout sizes the attention KV cache (C's attention part of
// M = W + C + P + R + eps).
enum class KvCacheLayout {
  // Every attention layer caches K and V rows for its own KV heads: the built-in engine and
  // llama.cpp's layouts with one width per kind.
  kPerLayer,
  // llama.cpp's `deci` (3.21.1, measured): a block per parent layer that keeps its attention
  // or its FFN (layers alternate attention, MLP); each block caches K rows for its own KV
  // heads (1 for the zero attention a first block without one gets) and V rows for the widest
  // block's, a block without attention included. A config that does not alternate so is
  // priced per layer.
  kDeciBlocks,
};

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_KV_CACHE_LAYOUT_H_
