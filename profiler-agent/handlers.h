#ifndef TAILOR_PROFILER_AGENT_HANDLERS_H_
#define TAILOR_PROFILER_AGENT_HANDLERS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/agent_runtime.h"
#include "compression/gguf/llama_cpp_serve.h"
#include "profiler-agent/device.h"
#include "tailor/v1/job_output.pb.h"

namespace tailor::profiler {

struct HandlerOptions {
  // Also run `profile` and `verify` (the built-in engine). Needs a build with LibTorch, and
  // the agent's --engine/--engine-version must be the built-in engine's; otherwise they are
  // not offered (logged), so such jobs wait for an agent that has the engine.
  bool ml_jobs = false;
  // Measurement effort (0 = the job's default). Fewer rounds trade accuracy for time; the
  // profile job still validates, so a cheap table shows its larger error in `costs list`.
  int profile_rounds = 0;
  int profile_validation_architectures = 0;
  int profile_remeasures = -1;  // -1 = the profiler's default
  int profile_max_rounds = 0;   // 0 = MlJobConfig's (one round)
  int profile_stack_depth = -1;  // -1 = MlJobConfig's (the parent's positions)
  int verify_repetitions = 0;
  int verify_task_samples = 0;
  int verify_serves = 0;
  int close_call_serves = -1;  // -1 = default 6; 0 = none
  int close_call_pause_s = -1;  // -1 = MlJobConfig's (none); 0 = none
  int slow_host_remeasures = -1;  // -1 = MlJobConfig's (2); 0 = no check
  int slow_host_pause_s = -1;     // -1 = MlJobConfig's (none); 0 = none
  // The engine's own report about itself (ResolveServingEngine) and the threads it serves a
  // request with (llama.cpp).
  std::string engine_build;
  int engine_threads = 1;
  // llama.cpp: what times its requests (--llama-serve-harness).
  gguf::ServeHarness serve_harness = gguf::ServeHarness::kNative;
};

// The serving engine an agent registers, from --engine / --engine-version: the built-in
// engine as given; llama.cpp as node-llama-cpp reports itself (its package version; a given
// --engine-version must equal it). INVALID_ARGUMENT for an engine this build cannot serve or
// a version that is not the installed one; NotFound when node or the package is missing.
struct ServingEngineChoice {
  std::string name;
  std::string version;
  std::string build;
};
// The build says which harness times llama.cpp's requests (`harness`).
absl::StatusOr<ServingEngineChoice> ResolveServingEngine(
    const std::string& name, const std::string& version, const std::string& device,
    int threads, gguf::ServeHarness harness = gguf::ServeHarness::kNative);

// A way to verify a kind of model the shared `verify` job does not serve itself (an
// entropy-coded package): the method that produces such models registers it, so verify
// never needs to know which methods exist.
struct VerifyVariant {
  std::string name;  // for logs
  // True when this job's inputs name a model of this variant's kind.
  std::function<bool(const JobContext&)> applies;
  std::function<absl::StatusOr<v1::JobOutput>(JobContext&)> run;
};

// What a method's agent jobs register with (cmake/method_jobs.cmake, tailor_agent_jobs):
// each method's `void Register...(AgentJobs&)` adds its kinds.
class AgentJobs {
 public:
  AgentJobs(AgentRuntime& runtime, const DeviceDescription& device,
            const HandlerOptions& options, bool builtin_engine)
      : runtime_(runtime), device_(device), options_(options), builtin_engine_(builtin_engine) {}

  const DeviceDescription& device() const { return device_; }
  const HandlerOptions& options() const { return options_; }
  // True when jobs that run the built-in engine may be offered: --ml-jobs, a LibTorch build,
  // and the agent's --engine/--engine-version are the built-in engine's.
  bool builtin_engine() const { return builtin_engine_; }

  // Registers `handler` for `kind` (RegisterAgentJob).
  void Add(const std::string& kind, JobHandler handler);
  void AddVerifyVariant(VerifyVariant variant) { verify_variants_.push_back(std::move(variant)); }
  const std::vector<VerifyVariant>& verify_variants() const { return verify_variants_; }

 private:
  AgentRuntime& runtime_;
  const DeviceDescription& device_;
  const HandlerOptions& options_;
  const bool builtin_engine_;
  std::vector<VerifyVariant> verify_variants_;
};

// Registers every job kind the profiler agent runs: each method's agent jobs (generated list,
// cmake/method_jobs.cmake), then the shared `profile` and `verify`. The runtime advertises
// the kinds in AgentInfo.job_kinds.
void RegisterProfilerHandlers(AgentRuntime& runtime, const DeviceDescription& device,
                              const HandlerOptions& options = {});

// Registers `handler` for job kind `kind`, which a method must declare as an agent job
// (methods::JobKind); anything else is a programming error and aborts at startup, so a
// handler can never wait for jobs the planner places elsewhere or never plans.
void RegisterAgentJob(AgentRuntime& runtime, const std::string& kind, JobHandler handler);

}  // namespace tailor::profiler

#endif  // TAILOR_PROFILER_AGENT_HANDLERS_H_
