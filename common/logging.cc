#include "common/logging.h"

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace tailor {

absl::Status InitLogging(const std::string& process_name, const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level: unknown level '", level, "'; use trace, debug, info, warn, error or off"));
  }
  auto logger = spdlog::stderr_color_mt(process_name);
  spdlog::set_default_logger(logger);
  spdlog::set_level(parsed);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%n %P] %v");
  spdlog::flush_on(spdlog::level::info);
  return absl::OkStatus();
}

}  // namespace tailor
