#ifndef TAILOR_CLI_RENDER_OPTIONS_H_
#define TAILOR_CLI_RENDER_OPTIONS_H_

#include <cstddef>

#include "absl/time/time.h"

namespace tailor::cli {

// How the CLI's human views are drawn. Its own header so that methods/ can render their report
// sections without depending on the CLI's commands.
struct RenderOptions {
  absl::TimeZone tz = absl::UTCTimeZone();
  absl::Time now = absl::UnixEpoch();  // for ages ("3s ago") and elapsed times
  size_t width = 0;                    // terminal columns; 0 = unlimited (not a TTY)
};

}  // namespace tailor::cli

#endif  // TAILOR_CLI_RENDER_OPTIONS_H_
