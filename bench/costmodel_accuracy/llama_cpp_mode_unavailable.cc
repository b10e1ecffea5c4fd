// --engine llama.cpp in a build without the profiler agent or the HF test-checkpoint writer.

#include <cstdio>

#include "bench/costmodel_accuracy/llama_cpp_mode.h"

namespace tailor::bench {

int RunLlamaCppMode(int, char**) {
  std::fprintf(stderr,
               "bench_costmodel_accuracy: --engine llama.cpp is not built here (it needs "
               "tailor_profiler_agent_lib and tests on)\n");
  return 2;
}

}  // namespace tailor::bench
