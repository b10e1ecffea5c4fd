#ifndef TAILOR_COMMON_LOGGING_H_
#define TAILOR_COMMON_LOGGING_H_

#include <string>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"

namespace tailor {

// Sets the default spdlog logger's level ("trace".."critical", "off") and a pattern with
// time, level and process name. Returns INVALID_ARGUMENT for an unknown level.
absl::Status InitLogging(const std::string& process_name, const std::string& level);

}  // namespace tailor

#endif  // TAILOR_COMMON_LOGGING_H_
