#include "compression/model/deci_blocks.h"

namespace tailor::model {

bool PairsAsDeciBlocks(const HybridConfig& config) {
  if (config.layers.empty() || config.layers.size() % 2 != 0) return false;
  for (size_t i = 0; i < config.layers.size(); i += 2) {
    if (config.layers[i].kind != LayerKind::kAttention ||
        config.layers[i + 1].kind != LayerKind::kMlp) {
      return false;
    }
  }
  return true;
}

std::vector<DeciBlockSlot> DeciBlockSlots(const HybridConfig& config) {
  std::vector<DeciBlockSlot> blocks;
  for (size_t i = 0; i + 1 < config.layers.size(); i += 2) {
    const bool attention = config.layers[i].present();
    if (!attention && !config.layers[i + 1].present()) continue;
    blocks.push_back({static_cast<int64_t>(i / 2), blocks.empty() && !attention});
  }
  return blocks;
}

}  // namespace tailor::model
