// Fuzz target: the model config reader (config.json, compression/model/config.h). Invariants
// on every accepted config: it validates, its parameter counts are sane (UBSan catches an
// int64 overflow in them) and its JSON form reads back to the same config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "compression/model/config.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tailor::model::HybridConfig;
  auto config = tailor::model::ParseHybridConfigJson(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               config.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(tailor::model::ValidateHybridConfig(*config).ok(), "accepted but invalid");
  FUZZ_CHECK(config->num_layers() <= tailor::model::kMaxLayers, "%lld layers",
             static_cast<long long>(config->num_layers()));
  const int64_t params = config->ParameterCount();
  const int64_t active = config->ActiveParameterCount();
  FUZZ_CHECK(params > 0 && active > 0 && active <= params, "params %lld active %lld",
             static_cast<long long>(params), static_cast<long long>(active));
  for (const auto& layer : config->layers) {
    const auto name = tailor::model::LayerKindName(layer.kind);
    FUZZ_CHECK(tailor::model::ParseLayerKind(name).ok(), "kind %s", std::string(name).c_str());
  }
  const std::string json = tailor::model::HybridConfigToJson(*config);
  auto again = tailor::model::ParseHybridConfigJson(json);
  FUZZ_CHECK(again.ok(), "written config does not read back: %s\n%s",
             again.status().ToString().c_str(), json.c_str());
  FUZZ_CHECK(*again == *config, "JSON round trip changed the config:\n%s", json.c_str());
  return 0;
}
