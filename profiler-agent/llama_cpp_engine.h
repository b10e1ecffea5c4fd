#ifndef TAILOR_PROFILER_AGENT_LLAMA_CPP_ENGINE_H_
#define TAILOR_PROFILER_AGENT_LLAMA_CPP_ENGINE_H_

// llama.cpp as a profiler agent's serving engine (docs/costmodel.md, "Engines"): the prebuilt
// llama.cpp of node-llama-cpp 3.21.1, every model served in a node child process of its own
// (tools/llama-sidecar/), so a llama.cpp abort (GGML_ASSERT on some layer patterns) fails one
// measurement with the child's message, never the agent.
//
// verify: the model (a student of a Hugging Face parent, or the parent) is exported to an F32
//   GGUF (gguf::ExportStudentToGguf / ExportHfToGguf), then
//   1. the equivalence gate: llama.cpp's next-token distribution against tailor's own forward
//      pass on the same model, over deterministic prompts; KL and argmax agreement must meet
//      target.equivalence (defaults KL <= 1e-3, agreement >= 99%). Both figures are budget
//      checks of the output; a model that fails is not measured.
//   2. the contract's request batch served in llama.cpp (gguf::RunServeBenchmark): latency is
//      the whole request at budget.latency_percentile over enough repetitions for it;
//      memory is what llama.cpp allocates (weights + KV / recurrent state + compute buffers).
//   3. quality on the task suites in tailor's engine: the gate showed both compute the same.
// profile: a cost table from whole requests of dummy-weight GGUF models
//   (costmodel::ProfileCostTableWholeModel), validated on held-out architectures.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/engine/workload.h"
#include "compression/costmodel/search_space.h"
#include "compression/costmodel/whole_model_profiler.h"
#include "compression/gguf/llama_cpp_serve.h"
#include "compression/gguf/llama_cpp_sidecar.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/model/hybrid_lm.h"
#include "profiler-agent/ml_jobs.h"
#include "profiler-agent/serving_engine.h"

namespace tailor::profiler {

inline constexpr char kLlamaCppEngineName[] = "llama.cpp";

struct LlamaCppEngineOptions {
  gguf::SidecarOptions sidecar;  // node, timeouts; `threads` serves every request
  // What times a request (gguf::RunServeBenchmark): the native loop around libllama, or
  // node-llama-cpp's own generation loop (docs/costmodel.md, "The serving harness").
  gguf::ServeHarness serve_harness = gguf::ServeHarness::kNative;
  // The gate's prompts: deterministic ids over the vocabulary, every position compared.
  int equivalence_prompts = 16;
  int equivalence_length = 32;
};

// What node-llama-cpp reports (tools/llama-sidecar/engine_identity.mjs): name "llama.cpp",
// version = the package version, build = llama.cpp's release and the CPU features it uses.
// NotFound when node or the package is missing (deploy/install-deps.sh installs both).
absl::StatusOr<EngineIdentity> DetectLlamaCpp(const gguf::SidecarOptions& sidecar);

// The engine; `identity` from DetectLlamaCpp (tests may pass their own).
std::shared_ptr<ServingEngine> MakeLlamaCppEngine(const MlJobConfig& config,
                                                  const LlamaCppEngineOptions& options,
                                                  const EngineIdentity& identity);

// --- pieces, exposed for tests -----------------------------------------------------------

// The gate's figures of tailor's log-probabilities `ours[p][t]` against llama.cpp's answers for
// the same prompts (one entry per prompt, positions aligned), judged against `gate` (its
// unset fields take the contract defaults). INVALID_ARGUMENT when shapes differ.
absl::StatusOr<v1::EquivalenceCheck> JudgeEquivalence(
    const std::vector<std::vector<std::vector<float>>>& ours,
    const std::vector<gguf::NextTokenLogprobs>& theirs, const v1::EquivalenceGate& gate);

// The gate end to end: `prompts` x `length` prompts, tailor's distribution from `model`,
// llama.cpp's from the GGUF at `gguf_path` in one child process. The prompts are the eval
// sample's sequences of at least `length` tokens, cut to it, when `eval` holds any (then both
// engines' perplexity over those tokens is recorded too), else deterministic ids from `seed`.
absl::StatusOr<v1::EquivalenceCheck> CheckEquivalence(model::HybridLM& model,
                                                      const std::string& gguf_path,
                                                      const v1::EquivalenceGate& gate,
                                                      const LlamaCppEngineOptions& options,
                                                      uint64_t seed,
                                                      const EvalSample* eval = nullptr);

// The search space llama.cpp can serve students of `parent` from: what its GGUF layouts hold
// (gguf::StudentShapeRulesOf). Profiling and drift re-measures draw only from it.
costmodel::SearchSpaceOptions LlamaCppServableSpace(const hf::HfCheckpoint& parent);

// A served GGUF's figures as the whole-model profiler and verify take them: every request's
// phases and CPU time, and llama.cpp's buffers as weights, state and compute MiB.
costmodel::ServedModel ServedModelOf(const gguf::LlamaCppServeMeasurement& m);

// The whole-model profiler's serve function in llama.cpp: each call draws `config`'s dummy
// weights, writes them as a student of `parent` in `scratch_dir` (which must exist), exports
// an F32 GGUF, serves it under `options` in a child process and deletes both files. `parent`
// must outlive the function.
costmodel::ServeModelFn LlamaCppServeModelFn(const hf::HfCheckpoint& parent,
                                             const std::string& scratch_dir,
                                             const gguf::ServeBenchmarkOptions& options);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_LLAMA_CPP_ENGINE_H_
