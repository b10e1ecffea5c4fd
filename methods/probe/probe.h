#ifndef TAILOR_METHODS_PROBE_PROBE_H_
#define TAILOR_METHODS_PROBE_PROBE_H_

#include <memory>

#include "methods/api/method.h"

namespace tailor::methods {

// PROBE: one agent job that reports what the target device really is and delivers.
std::unique_ptr<Method> MakeProbeMethod();

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_PROBE_PROBE_H_
