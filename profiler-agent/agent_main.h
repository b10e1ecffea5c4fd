#ifndef TAILOR_PROFILER_AGENT_AGENT_MAIN_H_
#define TAILOR_PROFILER_AGENT_AGENT_MAIN_H_

#include <functional>

#include "common/agent_runtime.h"

namespace tailor::profiler {

// tailor-profiler-agent's whole command line: registers one target device with the
// coordinator and runs the jobs that need exactly that device kind (probe; profile, verify
// and autotune in builds with LibTorch) until SIGTERM/SIGINT. `register_more`, when set,
// registers further handlers after the built-in ones (a test binary's test-only job kinds).
//
// Exit codes: 0 after a clean stop, 1 on a local runtime failure, 2 on usage errors (bad
// flags, or cuda:N in a build without CUDA). The coordinator being down is never a reason to
// exit: the runtime reconnects with backoff.
int AgentMain(int argc, char** argv,
              const std::function<void(AgentRuntime&)>& register_more = nullptr);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_AGENT_MAIN_H_
