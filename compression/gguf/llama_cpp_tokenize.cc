#include "compression/gguf/llama_cpp_tokenize.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tailor::gguf {

using Json = nlohmann::json;

std::string DefaultTokenizeScript() {
  if (const char* env = std::getenv("TAILOR_LLAMA_TOKENIZE"); env != nullptr && *env != '\0') {
    return env;
  }
  return absl::StrCat(TAILOR_SOURCE_DIR, "/tools/llama-sidecar/tokenize.mjs");
}

absl::StatusOr<std::vector<std::vector<int32_t>>> RunLlamaCppTokenize(
    const std::string& gguf_path, const std::vector<std::string>& texts, bool parse_special,
    const SidecarOptions& options) {
  const Json request = {{"texts", texts}, {"parse_special", parse_special}};
  // The vocabulary load is most of a run; tokenizing is fast next to the timeout.
  absl::StatusOr<std::string> out =
      RunSidecarScript(DefaultTokenizeScript(), {"--model", gguf_path},
                       request.dump(-1, ' ', false, Json::error_handler_t::replace),
                       options.timeout, options);
  if (!out.ok()) return out.status();
  const Json j = Json::parse(*out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("ids") || !j["ids"].is_array() ||
      j["ids"].size() != texts.size()) {
    return absl::InternalError(absl::StrCat("llama.cpp tokenize: unexpected output for ",
                                            texts.size(), " texts: ", out->substr(0, 200)));
  }
  std::vector<std::vector<int32_t>> ids;
  for (const Json& list : j["ids"]) {
    if (!list.is_array()) return absl::InternalError("llama.cpp tokenize: ids not a list");
    ids.push_back(list.get<std::vector<int32_t>>());
  }
  return ids;
}

}  // namespace tailor::gguf
