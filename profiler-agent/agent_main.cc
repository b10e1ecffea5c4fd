#include "profiler-agent/agent_main.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/time/time.h"
#include "common/agent_runtime.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "compression/engine/workload.h"
#include "profiler-agent/device.h"
#include "profiler-agent/handlers.h"

namespace tailor::profiler {
namespace {

struct Flags {
  std::string coordinator;
  std::string device = "cpu";
  std::string name;
  std::string engine = engine::kEngineName;
  std::string engine_version;  // default: the built-in engine's, or what llama.cpp reports
  int engine_threads = 1;
  std::string llama_serve_harness = "native";
  std::string work_dir = "tailor-agent-work";
  std::string log_level = "info";
  std::string token;
  int profile_rounds = 0;
  int profile_validation = 0;
  int profile_remeasures = -1;
  int profile_max_rounds = 3;
  int profile_stack_depth = 0;
  int verify_repetitions = 0;
  int verify_task_samples = 0;
  int verify_serves = 0;
  int close_call_serves = -1;
  int close_call_pause_s = 60;
  int slow_host_remeasures = -1;
  int slow_host_pause_s = 60;
  std::string ca_cert;
  std::string token_file;
  int max_jobs = 1;
  double stop_grace_s = 30;
  bool no_wait_for_coordinator = false;
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "tailor-profiler-agent: %s\n", message.c_str());
  return 2;
}

void DeclareFlags(CLI::App& app, Flags& flags) {
  app.add_option("--coordinator", flags.coordinator,
                 "HOST:PORT (default $TAILOR_COORDINATOR or 127.0.0.1:50051)");
  app.add_option("--device", flags.device, "cpu or cuda:N")->required();
  app.add_option("--name", flags.name, "stable agent name (default HOSTNAME:DEVICE)");
  app.add_option("--engine", flags.engine,
                 "serving engine: tailor-builtin, or llama.cpp (node-llama-cpp, installed by "
                 "deploy/install-deps.sh)")
      ->capture_default_str();
  app.add_option("--engine-version", flags.engine_version,
                 "serving engine version (default: tailor-builtin's for its threads, 1 or "
                 "1+threadsN; llama.cpp: the installed node-llama-cpp's, which a given value "
                 "must equal)");
  app.add_option("--engine-threads", flags.engine_threads,
                 "threads serving each request (tailor-builtin: LibTorch intra-op threads, "
                 "part of its version)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--llama-serve-harness", flags.llama_serve_harness,
                 "llama.cpp: what times a request: native (a C++ loop around the package's "
                 "libllama, tailor-llama-serve) or node (node-llama-cpp's generation loop, "
                 "~0.45 ms of JavaScript per token; docs/costmodel.md)")
      ->check(CLI::IsMember({"native", "node"}))
      ->capture_default_str();
  app.add_option("--work-dir", flags.work_dir, "scratch directory for jobs")->capture_default_str();
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str();
  auto* token_opt = app.add_option("--token", flags.token,
                                   "agent-role bearer token (default $TAILOR_TOKEN; visible in "
                                   "ps, prefer --token-file)");
  app.add_option("--token-file", flags.token_file,
                 "file holding the agent-role bearer token (first line)")
      ->check(CLI::ExistingFile)
      ->excludes(token_opt);
  app.add_option("--ca-cert", flags.ca_cert,
                 "PEM CA certificate; enables TLS (default $TAILOR_CA_CERT)")
      ->check(CLI::ExistingFile);
  app.add_option("--max-jobs", flags.max_jobs, "jobs run at the same time")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--stop-grace", flags.stop_grace_s,
                 "seconds running jobs may finish after SIGTERM before they are cancelled")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--no-wait-for-coordinator", flags.no_wait_for_coordinator,
               "during an outage let heartbeats fail fast instead of waiting for the "
               "coordinator (the earlier behaviour: slower reconnects; bench_reconnect's "
               "baseline)");
  app.add_option("--profile-rounds", flags.profile_rounds,
                 "profile: timed rounds per configuration (0 = default)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--profile-validation", flags.profile_validation,
                 "profile: held-out architectures measured end to end (0 = default)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--profile-remeasures", flags.profile_remeasures,
                 "profile (llama.cpp): serves again of a model whose requests show "
                 "interference (-1 = default 2)")
      ->check(CLI::Range(-1, 10));
  app.add_option("--profile-max-rounds", flags.profile_max_rounds,
                 "profile (llama.cpp): rounds of every model while the table's held-out "
                 "latency MAPE is over 5%, each model's requests pooled over its rounds")
      ->check(CLI::Range(1, 10));
  app.add_option("--profile-stack-depth", flags.profile_stack_depth,
                 "profile (llama.cpp, per-layer layouts): profiling models stack each layer "
                 "configuration D and D/2 times, the parent's layers tiled (0 = at the "
                 "parent's own positions)")
      ->check(CLI::Range(0, 64))
      ->check([](const std::string& v) {
        return v == "1" ? std::string("one copy is no stack: 0, or 2 to 64") : std::string();
      })
      ->capture_default_str();
  app.add_option("--verify-repetitions", flags.verify_repetitions,
                 "verify: measured requests (0 = default 15)")
      ->check(CLI::Range(0, 10000));
  app.add_option("--verify-serves", flags.verify_serves,
                 "verify: serves of the model, judged on the median one (0 = default 3)")
      ->check(CLI::Range(0, 100));
  app.add_option("--close-call-serves", flags.close_call_serves,
                 "verify and measure: more serves of a latency or throughput within 10% of "
                 "its budget (-1 = default 6, 0 = none)")
      ->check(CLI::Range(-1, 100));
  app.add_option("--close-call-pause-s", flags.close_call_pause_s,
                 "verify and measure: seconds before each of the two groups of close-call "
                 "serves, so that they sample more than one minute of the host (0 = back to "
                 "back)")
      ->check(CLI::Range(0, 600));
  app.add_option("--slow-host-remeasures", flags.slow_host_remeasures,
                 "measure: how often the settle's rungs are served again while, as a set, "
                 "they measure slower than their cost table's validated worst error allows "
                 "(a slow host, not slow rungs; -1 = default 2, 0 = never)")
      ->check(CLI::Range(-1, 10));
  app.add_option("--slow-host-pause-s", flags.slow_host_pause_s,
                 "measure: seconds of pause before serving the rungs again on a slow host")
      ->check(CLI::Range(0, 600));
  app.add_option("--verify-task-samples", flags.verify_task_samples,
                 "verify: evaluation samples per task suite (0 = default 64)")
      ->check(CLI::Range(0, 100000));
}

// What the runtime needs from the flags and the detected device; a usage error otherwise.
absl::StatusOr<AgentRuntimeOptions> RuntimeOptions(const Flags& flags,
                                                   const DeviceDescription& device) {
  AgentRuntimeOptions options;
  options.coordinator = ResolveCoordinatorAddress(flags.coordinator);
  options.info =
      MakeAgentInfo(device, flags.name, LocalHostname(), flags.engine, flags.engine_version);
  options.token = flags.token;
  if (!flags.token_file.empty()) {
    std::ifstream in(flags.token_file);
    std::getline(in, options.token);
    options.token = std::string(absl::StripAsciiWhitespace(options.token));
    if (options.token.empty()) {
      return absl::InvalidArgumentError("--token-file: '" + flags.token_file + "' is empty");
    }
  }
  options.ca_cert = flags.ca_cert;
  options.work_dir = flags.work_dir;
  options.max_concurrent_jobs = flags.max_jobs;
  options.stop_grace = absl::Seconds(flags.stop_grace_s);
  options.wait_for_coordinator = !flags.no_wait_for_coordinator;
  return options;
}

HandlerOptions HandlerOptionsOf(const Flags& flags, const ServingEngineChoice& engine) {
  HandlerOptions handler_options;
  handler_options.engine_build = engine.build;
  handler_options.engine_threads = flags.engine_threads;
  handler_options.serve_harness = *gguf::ParseServeHarness(flags.llama_serve_harness);
  handler_options.ml_jobs = true;
  handler_options.profile_rounds = flags.profile_rounds;
  handler_options.profile_validation_architectures = flags.profile_validation;
  handler_options.profile_remeasures = flags.profile_remeasures;
  handler_options.profile_max_rounds = flags.profile_max_rounds;
  handler_options.profile_stack_depth = flags.profile_stack_depth;
  handler_options.verify_repetitions = flags.verify_repetitions;
  handler_options.verify_task_samples = flags.verify_task_samples;
  handler_options.verify_serves = flags.verify_serves;
  handler_options.close_call_serves = flags.close_call_serves;
  handler_options.close_call_pause_s = flags.close_call_pause_s;
  handler_options.slow_host_remeasures = flags.slow_host_remeasures;
  handler_options.slow_host_pause_s = flags.slow_host_pause_s;
  return handler_options;
}

// Runs the agent until it stops: the first stop signal drains running jobs, the second
// cancels them.
int RunUntilStopped(AgentRuntime& runtime, sigset_t stop_signals) {
  std::atomic<bool> finished{false};
  std::thread signals([&] {
    int received = 0;
    while (true) {
      int sig = 0;
      if (sigwait(&stop_signals, &sig) != 0) continue;
      if (finished.load()) return;
      if (++received == 1) {
        spdlog::info("signal {}: stopping after running jobs (send again to cancel them)", sig);
        runtime.Stop();
      } else {
        spdlog::warn("signal {} again: cancelling running jobs", sig);
        runtime.StopNow();
      }
    }
  });
  const absl::Status status = runtime.Run();
  finished.store(true);
  pthread_kill(signals.native_handle(), SIGTERM);  // wakes the sigwait so the thread can end
  signals.join();
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    return 1;
  }
  return 0;
}

}  // namespace

int AgentMain(int argc, char** argv, const std::function<void(AgentRuntime&)>& register_more) {
  // Block the stop signals in every thread (the runtime's threads inherit this mask) and take
  // them synchronously on one thread, where calling into the runtime is safe. Blocked first
  // thing, so a SIGTERM during start-up (device detection) is a clean stop too, not a kill.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  Flags flags;
  CLI::App app{
      "tailor-profiler-agent: registers a target device with the tailor coordinator "
      "and runs probe/profile/verify jobs for it"};
  DeclareFlags(app, flags);
  // CLI11 reports parse errors by exception; this is the library boundary where we turn them
  // into the documented exit code 2.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (absl::Status st = InitLogging("tailor-profiler-agent", flags.log_level); !st.ok()) {
    return Usage(std::string(st.message()));
  }
  absl::StatusOr<DeviceDescription> device = DetectDevice(flags.device);
  if (!device.ok()) {
    if (device.status().code() == absl::StatusCode::kInvalidArgument ||
        device.status().code() == absl::StatusCode::kFailedPrecondition) {
      return Usage(std::string(device.status().message()));
    }
    spdlog::error("cannot use device {}: {}", flags.device, device.status().ToString());
    return 1;
  }
  if (flags.engine_version.empty() && flags.engine != "llama.cpp") {
    flags.engine_version = engine::BuiltinEngineVersion(flags.engine_threads);
  }
  absl::StatusOr<ServingEngineChoice> engine = ResolveServingEngine(
      flags.engine, flags.engine_version, device->device, flags.engine_threads,
      *gguf::ParseServeHarness(flags.llama_serve_harness));
  if (!engine.ok()) {
    if (engine.status().code() == absl::StatusCode::kInvalidArgument) {
      return Usage(std::string(engine.status().message()));
    }
    spdlog::error("cannot serve with engine {}: {}", flags.engine, engine.status().ToString());
    return 1;
  }
  flags.engine_version = engine->version;
  absl::StatusOr<AgentRuntimeOptions> options = RuntimeOptions(flags, *device);
  if (!options.ok()) return Usage(std::string(options.status().message()));
  AgentRuntime runtime(*options);
  RegisterProfilerHandlers(runtime, *device, HandlerOptionsOf(flags, *engine));
  if (!engine->build.empty()) {
    spdlog::info("engine {} {}: {}", engine->name, engine->version, engine->build);
  }
  if (register_more) register_more(runtime);
  spdlog::info("agent {} serving {} ({}, {} MiB) for coordinator {}", options->info.name(),
               device->device, device->device_kind, device->memory_mib, options->coordinator);
  return RunUntilStopped(runtime, stop_signals);
}

}  // namespace tailor::profiler
