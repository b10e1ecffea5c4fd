#include "compression/model/architecture_key.h"

#include "common/sha256.h"
#include "common/status_macros.h"

namespace tailor::model {

std::string ArchitectureKey(const HybridConfig& config) {
  // Settings that do not change a layer's cost are reset, so changing them keeps the key.
  HybridConfig shape = config;
  const HybridConfig defaults;
  shape.max_seq = defaults.max_seq;
  shape.rope_theta = defaults.rope_theta;
  shape.norm_eps = defaults.norm_eps;
  shape.rope_scaling = defaults.rope_scaling;
  return Sha256::Hex(HybridConfigToJson(shape));
}

absl::StatusOr<std::string> ArchitectureKeyOfConfigJson(absl::string_view json_text) {
  TAILOR_ASSIGN_OR_RETURN(HybridConfig config, ParseHybridConfigJson(json_text));
  return ArchitectureKey(config);
}

}  // namespace tailor::model
