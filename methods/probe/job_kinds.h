#ifndef TAILOR_METHODS_PROBE_JOB_KINDS_H_
#define TAILOR_METHODS_PROBE_JOB_KINDS_H_

namespace tailor::methods::jobs {

// Agent: reports the device (and measures bandwidth / matrix throughput for probe.duration_ms).
inline constexpr char kProbe[] = "probe";

}  // namespace tailor::methods::jobs

#endif  // TAILOR_METHODS_PROBE_JOB_KINDS_H_
