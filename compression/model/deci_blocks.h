#ifndef TAILOR_COMPRESSION_MODEL_DECI_BLOCKS_H_
#define TAILOR_COMPRESSION_MODEL_DECI_BLOCKS_H_

// The blocks of llama.cpp's `deci` file of a Llama-family config, one rule for the GGUF export
// (gguf::ExportStudentToGguf) and the cost model's KV cache (model::KvCacheLayout).

#include <cstdint>
#include <vector>

#include "compression/model/config.h"

namespace tailor::model {

// Whether `config`'s layers pair up (attention, MLP), as `deci` blocks do.
bool PairsAsDeciBlocks(const HybridConfig& config);

// One block of the file: parent layer pair `pair` (layers 2 pair and 2 pair + 1).
struct DeciBlockSlot {
  int64_t pair = 0;
  // llama.cpp aborts on a first block without attention: the file gets an exact zero 1-head
  // attention there instead.
  bool zero_attention = false;
};

// The blocks of a config that PairsAsDeciBlocks: one per pair that keeps its attention or its
// MLP, in order.
std::vector<DeciBlockSlot> DeciBlockSlots(const HybridConfig& config);

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_DECI_BLOCKS_H_
