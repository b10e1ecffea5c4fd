#ifndef TAILOR_BENCH_COSTMODEL_ACCURACY_LLAMA_CPP_MODE_H_
#define TAILOR_BENCH_COSTMODEL_ACCURACY_LLAMA_CPP_MODE_H_

// bench_costmodel_accuracy --engine llama.cpp: the whole-model profiler
// (costmodel::ProfileCostTableWholeModel) with llama.cpp serving every model
// (profiler::LlamaCppServeModelFn), on a Llama-layout and a Nemotron-H-layout Hugging Face
// parent written with dummy weights; per parent the held-out architectures' measured against
// predicted latency and memory, beside the parameter-count and FLOPs proxies
// (docs/benchmarks.md, "Cost model accuracy").

namespace tailor::bench {

// argv without --engine; returns the exit code. Without the llama.cpp sidecar (node or
// node-llama-cpp missing) it says so and exits 0 (the smoke test is then skipped), writing a
// JSON that records why.
int RunLlamaCppMode(int argc, char** argv);

}  // namespace tailor::bench

#endif  // TAILOR_BENCH_COSTMODEL_ACCURACY_LLAMA_CPP_MODE_H_
