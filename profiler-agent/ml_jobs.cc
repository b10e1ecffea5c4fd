#include "profiler-agent/ml_jobs.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/relative_budget.h"
#include "common/status_macros.h"
#include "common/job_output.h"
#include "common/proto_json.h"
#include "common/struct_values.h"
#include "compression/autocompress/text_quality.h"
#include "compression/costmodel/cost_table_proto.h"
#include "compression/engine/engine.h"
#include "compression/hf/hf_import.h"
#include "compression/hf/parent_architecture.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"
#include "common/model_fetch.h"
#include "compression/tasks/suites.h"
#include "compression/tasks/tokenizer.h"
#include "compression/tasks/training.h"
#include "profiler-agent/measure_job.h"
#include "profiler-agent/request_latency.h"
#include "profiler-agent/verify_data.h"
#include "methods/api/job_kinds.h"

namespace tailor::profiler {

namespace {

using ::tailor::struct_values::Num;
using ::tailor::struct_values::Str;

using google::protobuf::Struct;
using google::protobuf::Value;

// Downloads a model artifact and unpacks it below the job's work dir; returns the model dir.
absl::StatusOr<std::string> FetchModel(JobContext& ctx, const std::string& digest,
                                       const std::string& name) {
  return FetchModelArtifact(ctx, digest, ctx.work_dir(), name);
}

absl::StatusOr<std::string> ParentDir(JobContext& ctx) {
  const v1::ModelRef& p = ctx.contract().parent();
  if (!p.path().empty()) return p.path();
  if (!p.artifact_digest().empty()) return FetchModel(ctx, p.artifact_digest(), "parent");
  return absl::InvalidArgumentError(
      "parent: the contract names no model (set parent.path or parent.artifact_digest)");
}

// The model to verify: the `model_digest` of the dependency that produced a model (every
// method plans verify after the one job that produced its model, whatever that job's kind),
// else the contract's parent. Returns the dir and where it came from.
absl::StatusOr<std::pair<std::string, std::string>> ModelDir(JobContext& ctx) {
  std::vector<std::pair<std::string, std::string>> producers;  // (dependency key, digest)
  for (const auto& [key, output] : ctx.inputs()) {
    if (!output.model_digest().empty()) producers.emplace_back(key, output.model_digest());
  }
  if (producers.size() > 1) {
    std::sort(producers.begin(), producers.end());
    return absl::FailedPreconditionError(absl::StrCat(
        "verify needs one dependency that produced a model, got ", producers.size(), " (",
        producers[0].first, ", ", producers[1].first, producers.size() > 2 ? ", ..." : "",
        ")"));
  }
  if (producers.size() == 1) {
    const auto& [key, digest] = producers.front();
    TAILOR_ASSIGN_OR_RETURN(std::string dir, FetchModel(ctx, digest, "model"));
    return std::make_pair(dir, absl::StrCat(key, " model_digest ", digest));
  }
  TAILOR_ASSIGN_OR_RETURN(std::string dir, ParentDir(ctx));
  return std::make_pair(dir, absl::StrCat("parent ", dir));
}

MlProgressFn ProgressOf(JobContext& ctx) {
  return [&ctx](double fraction, const std::string& message,
                const std::map<std::string, double>& metrics) {
    return ctx.ReportProgress(fraction, message, 0, 0, metrics).ok() && !ctx.Cancelled();
  };
}

}  // namespace

bool IsBadModel(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kDataLoss ||
         code == absl::StatusCode::kNotFound || code == absl::StatusCode::kOutOfRange ||
         code == absl::StatusCode::kFailedPrecondition;
}

absl::Status BadModel(absl::string_view what, const absl::Status& st) {
  return absl::InvalidArgumentError(absl::StrCat(what, " failed validation: ", st.message()));
}

// Exact-match accuracy over the 8 task suites (and the parameter count) of a loaded model.
absl::StatusOr<v1::ModelQuality> TaskQuality(engine::Engine& eng, uint64_t seed, int samples) {
  v1::ModelQuality quality;
  quality.set_parameters(eng.config().ParameterCount());
  if (eng.config().vocab < tasks::kVocabSize) {
    quality.set_skipped(absl::StrCat("vocab ", eng.config().vocab,
                                     " is smaller than the task tokenizer's ", tasks::kVocabSize));
    return quality;
  }
  double sum = 0;
  int n = 0;
  for (const std::unique_ptr<tasks::TaskSuite>& suite : tasks::AllSuites()) {
    TAILOR_ASSIGN_OR_RETURN(tasks::EvalResult r,
                            tasks::Evaluate(eng.model(), *suite, samples, seed));
    (*quality.mutable_per_task())[r.task] = r.accuracy();
    sum += r.accuracy();
    ++n;
  }
  quality.set_task_accuracy(n > 0 ? sum / n : 0.0);
  return quality;
}


std::function<bool(absl::Duration)> PauseReporting(const MlProgressFn& progress,
                                                   double fraction, const std::string& why) {
  return [progress, fraction, why](absl::Duration pause) {
    for (absl::Duration left = pause; left > absl::ZeroDuration(); left -= absl::Seconds(1)) {
      const std::string message = absl::StrCat(
          why, " (", absl::ToInt64Seconds(absl::Ceil(left, absl::Seconds(1))), " s left)");
      if (progress && !progress(fraction, message, {})) return false;
      absl::SleepFor(std::min(left, absl::Seconds(1)));
    }
    return true;
  };
}

CloseCalls CloseCallsReporting(CloseCalls close, const MlProgressFn& progress,
                               double fraction) {
  close.wait = PauseReporting(progress, fraction,
                              "a close call: pausing before more serves, so that they fall in "
                              "another minute of the host");
  return close;
}

MlJobConfig MlJobConfigOf(const DeviceDescription& device, const HandlerOptions& options) {
  MlJobConfig ml;
  ml.device = device.device;
  ml.device_kind = device.device_kind;
  ml.profile_rounds = options.profile_rounds;
  ml.profile_validation_architectures = options.profile_validation_architectures;
  ml.profile_remeasures = options.profile_remeasures;
  if (options.profile_max_rounds > 0) ml.profile_max_rounds = options.profile_max_rounds;
  if (options.profile_stack_depth >= 0) ml.profile_stack_depth = options.profile_stack_depth;
  if (options.verify_repetitions > 0) ml.verify_repetitions = options.verify_repetitions;
  if (options.verify_task_samples > 0) ml.verify_task_samples = options.verify_task_samples;
  if (options.verify_serves > 0) ml.verify_serves = options.verify_serves;
  if (options.close_call_serves >= 0) ml.close_calls.extra_serves = options.close_call_serves;
  if (options.close_call_pause_s >= 0) {
    ml.close_calls.pause = absl::Seconds(options.close_call_pause_s);
  }
  if (options.slow_host_remeasures >= 0) ml.slow_host.remeasures = options.slow_host_remeasures;
  if (options.slow_host_pause_s >= 0) {
    ml.slow_host.pause = absl::Seconds(options.slow_host_pause_s);
  }
  ml.builtin_threads = options.engine_threads;
  return ml;
}

EngineIdentity BuiltinIdentity(int threads) {
  return EngineIdentity{engine::kEngineName, engine::BuiltinEngineVersion(threads), "", threads};
}

absl::Status CheckContractEngine(const v1::DeploymentContract& contract,
                                 const EngineIdentity& identity) {
  const v1::Target& t = contract.target();
  const std::string name = t.engine().empty() ? engine::kEngineName : t.engine();
  const std::string version =
      t.engine_version().empty() ? engine::kEngineVersion : t.engine_version();
  if (name != identity.name || version != identity.version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "target.engine: this agent serves ", identity.name, " ", identity.version,
        ", the contract asks for ", name, " ", version));
  }
  return absl::OkStatus();
}

absl::StatusOr<engine::EngineOptions> EngineOptionsFor(const v1::DeploymentContract& contract,
                                                       const MlJobConfig& config) {
  TAILOR_RETURN_IF_ERROR(CheckContractEngine(contract, BuiltinIdentity(config.builtin_threads)));
  TAILOR_ASSIGN_OR_RETURN(engine::EngineOptions options, TailorEngineOptionsFor(contract, config));
  options.cpu_threads = config.builtin_threads;
  return options;
}

absl::StatusOr<engine::EngineOptions> TailorEngineOptionsFor(
    const v1::DeploymentContract& contract, const MlJobConfig& config) {
  const v1::Target& t = contract.target();
  engine::EngineOptions options;
  options.device = config.device;
  const bool cpu = config.device == "cpu";
  if (t.precision() == v1::PRECISION_UNSPECIFIED) {
    options.precision = cpu ? engine::Precision::kFp32 : engine::Precision::kBf16;
  } else {
    TAILOR_ASSIGN_OR_RETURN(options.precision, costmodel::PrecisionFromProto(t.precision()));
  }
  if (cpu && options.precision == engine::Precision::kFp16) {
    return absl::InvalidArgumentError(
        "target.precision: FP16 is served on CUDA only; use FP32 or BF16 on cpu");
  }
  return options;
}

absl::StatusOr<ParentForProfile> ReadParentForProfile(const v1::DeploymentContract& contract,
                                                    const std::string& parent_dir) {
  // Read once: the internal config and the cost-table key come from the same text (the key
  // the coordinator computed from it at submission decides reuse).
  const std::string config_path = parent_dir + "/config.json";
  const std::string& format = contract.parent().format();
  absl::StatusOr<std::string> text = model::ReadFileToString(config_path);
  absl::StatusOr<model::HybridConfig> parent =
      text.ok() ? hf::ModelConfigFromJson(*text, config_path, format)
                : absl::StatusOr<model::HybridConfig>(text.status());
  absl::StatusOr<std::string> architecture =
      text.ok() ? hf::ParentArchitectureKey(*text, config_path, format)
                : absl::StatusOr<std::string>(text.status());
  if (parent.ok() && !architecture.ok()) parent = architecture.status();
  if (!parent.ok()) {
    return IsBadModel(parent.status().code()) ? BadModel("parent model", parent.status())
                                              : parent.status();
  }
  return ParentForProfile{*std::move(parent), *std::move(architecture)};
}

absl::StatusOr<ProfileJobOutput> RunProfile(const v1::DeploymentContract& contract,
                                            const std::string& parent_dir,
                                            const MlJobConfig& config,
                                            const MlProgressFn& progress) {
  TAILOR_ASSIGN_OR_RETURN(engine::EngineOptions engine_options,
                          EngineOptionsFor(contract, config));
  TAILOR_ASSIGN_OR_RETURN(ParentForProfile parent, ReadParentForProfile(contract, parent_dir));
  costmodel::ProfileOptions o;
  o.engine = engine_options;
  o.workload = costmodel::WorkloadFromProto(contract.workload());
  o.device_kind = config.device_kind;
  o.seed = contract.seed();
  if (config.profile_rounds > 0) o.rounds = config.profile_rounds;
  if (config.profile_validation_architectures > 0) {
    o.validation_architectures = config.profile_validation_architectures;
  }
  o.progress = progress;
  ProfileJobOutput out;
  TAILOR_ASSIGN_OR_RETURN(out.result, costmodel::ProfileCostTable(parent.config, o));
  out.table = costmodel::ToProto(out.result.table);
  out.table.set_engine_version(engine::BuiltinEngineVersion(config.builtin_threads));
  out.table.set_parent_architecture(parent.architecture);
  return out;
}

// A built-in measurement as verify reports it: latency judged on whole requests at the
// contract's percentile; prefill_ms and decode_ms stay the per-piece medians the engine's cost
// tables are fitted to (diagnostics).
v1::ModelCosts BuiltinCostsOf(const engine::Measurement& m, const engine::Workload& w,
                              v1::LatencyPercentile percentile) {
  v1::ModelCosts c;
  SetWholeRequestLatency(m.request_ms, w, percentile, c);
  c.set_memory_mib(static_cast<double>(m.peak_bytes) / (1 << 20));
  c.set_weight_memory_mib(static_cast<double>(m.weight_bytes) / (1 << 20));
  c.set_cache_mib(static_cast<double>(m.cache_bytes) / (1 << 20));
  c.set_prefill_ms(m.prefill_ms);
  c.set_decode_ms(m.decode_ms);
  c.set_cpu_ms(m.cpu_ms);
  return c;
}

costmodel::ServedModel BuiltinServedOf(const engine::Measurement& m) {
  costmodel::ServedModel s;
  for (size_t i = 0; i < m.request_ms.size(); ++i) {
    s.requests.push_back({m.request_ms[i], 0, 0, m.request_cpu_ms[i]});
  }
  return s;
}

namespace {

// The contract's request batch served in `eng` until calm: the whole request at the
// contract's percentile over enough repetitions for it.
absl::StatusOr<v1::ModelCosts> MeasureBuiltin(const v1::DeploymentContract& contract,
                                              const MlJobConfig& config, engine::Engine& eng) {
  const engine::Workload w = costmodel::WorkloadFromProto(contract.workload());
  const v1::LatencyPercentile percentile = contract.budget().latency_percentile();
  engine::MeasureOptions mo;
  mo.repetitions = RepetitionsFor(percentile, config.verify_repetitions);
  mo.seed = contract.seed();
  auto serve = [&]() -> absl::StatusOr<VerifyRun> {
    TAILOR_ASSIGN_OR_RETURN(engine::Measurement m, eng.Measure(w, mo));
    return VerifyRun{BuiltinCostsOf(m, w, percentile), BuiltinServedOf(m)};
  };
  // The serving thread's own CPU time is what the engine reports: one thread's worth when
  // nothing preempts it. On a GPU it mostly waits, and tells nothing.
  return MeasureUntilCalm(serve, RequestCalmOptions(config.device == "cpu"));
}

// `architecture` with dummy weights drawn from the contract's seed + `index`, in the built-in
// engine, its context long enough for the workload.
absl::StatusOr<std::unique_ptr<engine::Engine>> DummyEngine(
    model::HybridConfig architecture, const v1::DeploymentContract& contract,
    const engine::EngineOptions& options, const engine::Workload& w, size_t index = 0) {
  architecture.max_seq = std::max<int64_t>(architecture.max_seq, w.cache_positions());
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM lm,
                          model::CreateHybridLM(architecture, contract.seed() + index));
  return engine::Engine::Create(std::move(lm), options);
}

}  // namespace

absl::StatusOr<std::vector<v1::ModelCosts>> RunMeasure(
    const v1::DeploymentContract& contract, const std::vector<model::HybridConfig>& architectures,
    const MlJobConfig& config, const MlProgressFn& progress) {
  TAILOR_ASSIGN_OR_RETURN(engine::EngineOptions options, EngineOptionsFor(contract, config));
  const engine::Workload w = costmodel::WorkloadFromProto(contract.workload());
  TAILOR_RETURN_IF_ERROR(engine::ValidateWorkload(w));
  std::vector<v1::ModelCosts> out;
  for (size_t i = 0; i < architectures.size(); ++i) {
    if (progress && !progress(static_cast<double>(i) / architectures.size(),
                              absl::StrCat("serving architecture ", i + 1, " of ",
                                           architectures.size()),
                              {})) {
      return absl::CancelledError("measure cancelled");
    }
    TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> eng,
                            DummyEngine(architectures[i], contract, options, w, i));
    TAILOR_ASSIGN_OR_RETURN(v1::ModelCosts costs, MeasureBuiltin(contract, config, *eng));
    out.push_back(std::move(costs));
  }
  return out;
}

absl::StatusOr<v1::JobOutput> RunVerify(const v1::DeploymentContract& contract,
                                        const std::string& model_dir, const MlJobConfig& config,
                                        const MlProgressFn& progress, const EvalSample* eval,
                                        const std::string& parent_dir) {
  auto report = [&](double f, const std::string& message) -> absl::Status {
    if (progress && !progress(f, message, {})) return absl::CancelledError("verify cancelled");
    return absl::OkStatus();
  };
  TAILOR_ASSIGN_OR_RETURN(engine::EngineOptions options, EngineOptionsFor(contract, config));
  const engine::Workload w = costmodel::WorkloadFromProto(contract.workload());
  TAILOR_RETURN_IF_ERROR(engine::ValidateWorkload(w));
  TAILOR_RETURN_IF_ERROR(report(0.05, absl::StrCat("loading ", model_dir)));
  // parent { format } forces the layout of the parent's folder only, never of a student's.
  const std::string& format =
      model_dir == contract.parent().path() ? contract.parent().format() : std::string();
  absl::StatusOr<std::unique_ptr<engine::Engine>> e =
      engine::Engine::Load(model_dir, options, w.cache_positions(), format);
  if (!e.ok()) {
    return IsBadModel(e.status().code()) ? BadModel("model", e.status()) : e.status();
  }
  engine::Engine& eng = **e;
  TAILOR_RETURN_IF_ERROR(report(0.1, absl::StrCat("serving the contract's request batch (",
                                                  config.verify_serves, " serves)")));
  v1::JobOutput result;
  // The parent alongside: its architecture with dummy weights, as the profile served it.
  std::unique_ptr<engine::Engine> parent;
  if (!parent_dir.empty()) {
    TAILOR_ASSIGN_OR_RETURN(ParentForProfile p, ReadParentForProfile(contract, parent_dir));
    TAILOR_ASSIGN_OR_RETURN(parent, DummyEngine(p.config, contract, options, w));
  }
  TAILOR_ASSIGN_OR_RETURN(
      const v1::Budget judged,
      MeasureVerified(
          contract, config.verify_serves, [&] { return MeasureBuiltin(contract, config, eng); },
          parent == nullptr ? ServeFn()
                            : ServeFn([&] { return MeasureBuiltin(contract, config, *parent); }),
          CloseCallsReporting(config.close_calls, progress, 0.3), result));

  // Quality on the task suites, served at the contract's precision.
  TAILOR_RETURN_IF_ERROR(report(0.6, "evaluating the task suites"));
  TAILOR_ASSIGN_OR_RETURN(*result.mutable_quality(),
                          TaskQuality(eng, contract.seed(), config.verify_task_samples));
  if (eval != nullptr && !eval->sequences.empty()) {
    TAILOR_RETURN_IF_ERROR(report(0.8, absl::StrCat("perplexity on ", eval->sequences.size(),
                                                    " sequences of data.eval")));
    int64_t tokens = 0;
    TAILOR_ASSIGN_OR_RETURN(autocompress::ModelTextQuality q,
                            autocompress::ScoreSequences(eng.model(), eval->sequences, tokens));
    SetServedPerplexity(*eval, static_cast<int64_t>(eval->sequences.size()), tokens,
                        std::exp(q.nll_sum / static_cast<double>(tokens)),
                        *result.mutable_quality());
  }
  JudgeBudgets(judged, result);
  v1::EngineInfo& eng_info = *result.mutable_engine();
  eng_info.set_name(engine::kEngineName);
  eng_info.set_version(engine::BuiltinEngineVersion(config.builtin_threads));
  eng_info.set_threads(config.builtin_threads);
  eng_info.set_device(options.device);
  eng_info.set_precision(std::string(engine::PrecisionName(options.precision)));
  return result;
}

absl::StatusOr<costmodel::RecheckResult> RunRecheck(const v1::DeploymentContract& contract,
                                                    const std::string& parent_dir,
                                                    const v1::CostTable& table,
                                                    const MlJobConfig& config,
                                                    const MlProgressFn& progress) {
  TAILOR_ASSIGN_OR_RETURN(engine::EngineOptions options, EngineOptionsFor(contract, config));
  TAILOR_ASSIGN_OR_RETURN(ParentForProfile parent, ReadParentForProfile(contract, parent_dir));
  TAILOR_ASSIGN_OR_RETURN(costmodel::CostModel model, costmodel::CostModel::FromTable(table));
  const engine::Workload w = costmodel::WorkloadFromProto(contract.workload());
  TAILOR_RETURN_IF_ERROR(engine::ValidateWorkload(w));
  engine::MeasureOptions mo;
  mo.repetitions = config.verify_repetitions;
  mo.seed = contract.seed();
  costmodel::RecheckOptions o;
  o.progress = progress;
  return costmodel::RecheckCostTable(model, parent.config,
                                     costmodel::BuiltinRecheckServe(options, w, mo), o);
}

void JudgeBudgets(const v1::Budget& b, v1::JobOutput& out) {
  const v1::ModelCosts& m = out.measured();
  auto add = [&](const char* resource, double budget, double value, bool floor) {
    v1::BudgetCheck* check = out.add_budgets();
    check->set_resource(resource);
    check->set_budget(budget);
    check->set_measured(value);
    check->set_met(floor ? value >= budget : value <= budget);
    return check;
  };
  // The parent's figure a budget relative to it was resolved against, when served alongside.
  auto parent = [&](v1::BudgetCheck* check, const absl::StatusOr<double>& figure) {
    if (out.has_parent_beside() && figure.ok()) check->set_parent(*figure);
  };
  if (b.has_latency_ms_max()) {
    v1::BudgetCheck* c = add("latency_ms", b.latency_ms_max(), m.latency_ms(), false);
    if (b.has_latency_vs_parent_max()) {
      parent(c, ParentLatency(b.latency_percentile(), out.parent_beside()));
    }
  }
  if (b.has_throughput_tokens_per_s_min()) {
    v1::BudgetCheck* c = add("throughput_tokens_per_s", b.throughput_tokens_per_s_min(),
                             m.throughput_tokens_per_s(), true);
    if (b.has_throughput_vs_parent_min()) {
      parent(c, ParentThroughput(b.latency_percentile(), out.parent_beside()));
    }
  }
  if (b.has_memory_mib_max()) add("memory_mib", b.memory_mib_max(), m.memory_mib(), false);
  if (b.has_weight_memory_mib_max()) {
    add("weight_memory_mib", b.weight_memory_mib_max(), m.weight_memory_mib(), false);
  }
}

absl::StatusOr<v1::Budget> MeasureVerified(const v1::DeploymentContract& contract, int serves,
                                           const ServeFn& serve_model,
                                           const ServeFn& serve_parent, const CloseCalls& close,
                                           v1::JobOutput& out) {
  if (!serve_parent) {
    TAILOR_ASSIGN_OR_RETURN(*out.mutable_measured(),
                            MeasureServes(serves, serve_model, &contract.budget(), close));
    return contract.budget();
  }
  TAILOR_ASSIGN_OR_RETURN(
      BesideParent beside,
      MeasureServesBesideParent(serves, serve_model, serve_parent, contract.budget(), close));
  *out.mutable_measured() = std::move(beside.model);
  *out.mutable_parent_beside() = std::move(beside.parent);
  // Memory does not move with the host: held to the profile's figure, as the search was.
  if (contract.budget().has_memory_vs_parent_max()) {
    beside.budget.set_memory_mib_max(contract.budget().memory_mib_max());
  }
  return beside.budget;
}

namespace {

class BuiltinEngine : public ServingEngine {
 public:
  explicit BuiltinEngine(MlJobConfig config) : config_(std::move(config)) {}
  EngineIdentity identity() const override { return BuiltinIdentity(config_.builtin_threads); }
  absl::StatusOr<ProfileJobOutput> Profile(const v1::DeploymentContract& contract,
                                           const std::string& parent_dir,
                                           const std::string& /*work_dir*/,
                                           const MlProgressFn& progress) override {
    return RunProfile(contract, parent_dir, config_, progress);
  }
  absl::StatusOr<v1::JobOutput> Verify(const v1::DeploymentContract& contract,
                                       const ModelToServe& model,
                                       const std::string& /*work_dir*/,
                                       const MlProgressFn& progress) override {
    return RunVerify(contract, model.dir, config_, progress, model.eval, model.parent_dir);
  }
  absl::StatusOr<costmodel::RecheckResult> Recheck(const v1::DeploymentContract& contract,
                                                   const std::string& parent_dir,
                                                   const v1::CostTable& table,
                                                   const std::string& /*work_dir*/,
                                                   const MlProgressFn& progress) override {
    return RunRecheck(contract, parent_dir, table, config_, progress);
  }
  absl::StatusOr<std::vector<v1::ModelCosts>> Measure(
      const v1::DeploymentContract& contract, const std::string& /*parent_dir*/,
      const std::vector<model::HybridConfig>& architectures, const std::string& /*work_dir*/,
      const MlProgressFn& progress) override {
    return RunMeasure(contract, architectures, config_, progress);
  }

 private:
  const MlJobConfig config_;
};

}  // namespace

std::shared_ptr<ServingEngine> MakeBuiltinEngine(const MlJobConfig& config) {
  return std::make_shared<BuiltinEngine>(config);
}

absl::StatusOr<v1::ModelCosts> MeasureParent(ServingEngine& engine,
                                             const v1::DeploymentContract& contract,
                                             const std::string& parent_dir,
                                             const std::string& work_dir,
                                             const MlProgressFn& progress) {
  TAILOR_ASSIGN_OR_RETURN(ParentForProfile parent, ReadParentForProfile(contract, parent_dir));
  const std::vector<model::HybridConfig> serves(kParentServes, parent.config);
  TAILOR_ASSIGN_OR_RETURN(
      std::vector<v1::ModelCosts> measured,
      engine.Measure(contract, parent_dir, serves, work_dir + "/parent", progress));
  return MedianServe(measured, "serves of the parent");
}

JobHandler MakeProfileHandler(std::shared_ptr<ServingEngine> engine) {
  return [engine](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    TAILOR_ASSIGN_OR_RETURN(std::string parent_dir, ParentDir(ctx));
    const MlProgressFn progress = ProgressOf(ctx);
    // The profile to 95%, then the parent's serves: seconds against its minutes.
    auto profiling = [&](double f, const std::string& message,
                         const std::map<std::string, double>& metrics) {
      return progress(0.95 * f, message, metrics);
    };
    TAILOR_ASSIGN_OR_RETURN(ProfileJobOutput out,
                            engine->Profile(ctx.contract(), parent_dir, ctx.work_dir(), profiling));
    if (ctx.Cancelled()) return absl::CancelledError("profile cancelled");
    auto parent_progress = [&](double f, const std::string& message,
                               const std::map<std::string, double>& metrics) {
      return progress(0.95 + 0.05 * f, absl::StrCat("the parent: ", message), metrics);
    };
    TAILOR_ASSIGN_OR_RETURN(*out.table.mutable_parent_measured(),
                            MeasureParent(*engine, ctx.contract(), parent_dir, ctx.work_dir(),
                                          parent_progress));
    if (ctx.Cancelled()) return absl::CancelledError("profile cancelled");
    TAILOR_ASSIGN_OR_RETURN(v1::CostTable stored, ctx.PutCostTable(out.table));

    // The held-out architectures, predicted against measured, as an artifact.
    Struct validation;
    auto& rows = *(*validation.mutable_fields())["architectures"].mutable_list_value();
    for (const costmodel::ArchitectureMeasurement& a : out.result.validation) {
      auto& r = *rows.add_values()->mutable_struct_value()->mutable_fields();
      r["architecture"] = Str(a.description);
      r["parameters"] = Num(static_cast<double>(a.parameters));
      r["measured_latency_ms"] = Num(a.measured_latency_ms);
      r["predicted_latency_ms"] = Num(a.predicted_latency_ms);
      r["measured_memory_mib"] = Num(a.measured_memory_mib);
      r["predicted_memory_mib"] = Num(a.predicted_memory_mib);
    }
    const std::string json = ProtoJson(validation);
    TAILOR_RETURN_IF_ERROR(
        ctx.UploadArtifactBytes("cost_validation", "cost_validation.json", json).status());

    const costmodel::ValidationSummary& v = out.result.table.validation;
    std::vector<std::string> mapes;
    for (double m : out.result.round_latency_mapes) {
      mapes.push_back(absl::StrFormat("%.1f%%", 100 * m));
    }
    const std::string rounds =
        out.result.rounds <= 1
            ? std::string()
            : absl::StrCat(" after ", out.result.rounds, " rounds of every model (held-out "
                           "latency MAPE ", absl::StrJoin(mapes, " -> "), ")");
    TAILOR_RETURN_IF_ERROR(ctx.ReportProgress(
        1.0, absl::StrCat("cost table ", stored.id(), " stored", rounds), 0, 0,
        {{"latency_mape", v.latency_mape}, {"memory_mape", v.memory_mape}}, /*final=*/true));
    v1::ProfileResult profile;
    profile.set_cost_table_id(stored.id());
    profile.set_latency_mape(v.latency_mape);
    profile.set_latency_max_error(v.latency_max_error);
    profile.set_memory_mape(v.memory_mape);
    profile.set_validated_architectures(v.architectures);
    profile.set_entries(out.table.entries_size());
    profile.set_t0_ms(out.table.t0_ms());
    profile.set_profile_seconds(out.result.seconds);
    profile.set_rounds(out.result.rounds);
    for (double m : out.result.round_latency_mapes) profile.add_round_latency_mapes(m);
    *profile.mutable_parent_measured() = out.table.parent_measured();
    v1::JobOutput result;
    SetDetail(result, profile);
    spdlog::info("cost table {}: {} entries, latency MAPE {:.2f}% (max {:.2f}%), memory MAPE "
                 "{:.2f}% over {} held-out architectures",
                 stored.id(), out.table.entries_size(), 100 * v.latency_mape,
                 100 * v.latency_max_error, 100 * v.memory_mape, v.architectures);
    return result;
  };
}

namespace {

void SetRecheck(const costmodel::RecheckResult& r, v1::DriftCheckResult& d) {
  for (const costmodel::ArchitectureMeasurement& a : r.architectures) {
    v1::DriftCheckResult::Architecture* row = d.add_architectures();
    row->set_description(a.description);
    row->set_predicted_latency_ms(a.predicted_latency_ms);
    row->set_measured_latency_ms(a.measured_latency_ms);
    row->set_predicted_memory_mib(a.predicted_memory_mib);
    row->set_measured_memory_mib(a.measured_memory_mib);
  }
  d.set_latency_mape(r.summary.latency_mape);
  d.set_latency_max_error(r.summary.latency_max_error);
  d.set_memory_mape(r.summary.memory_mape);
  d.set_bound(r.bound);
  d.set_table_holds(r.holds);
}

bool HasSourceModel(JobContext& ctx) {
  for (const auto& [key, input] : ctx.inputs()) {
    if (!input.model_digest().empty()) return true;
  }
  return false;
}

}  // namespace

JobHandler MakeDriftCheckHandler(std::shared_ptr<ServingEngine> engine) {
  return [engine](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    v1::JobOutput result;
    v1::DriftCheckResult d;
    const v1::CostTable& table = ctx.assignment().source_cost_table();
    if (!table.id().empty()) {
      d.set_cost_table_id(table.id());
      TAILOR_ASSIGN_OR_RETURN(std::string parent_dir, ParentDir(ctx));
      TAILOR_ASSIGN_OR_RETURN(costmodel::RecheckResult recheck,
                              engine->Recheck(ctx.contract(), parent_dir, table,
                                              ctx.work_dir() + "/recheck", ProgressOf(ctx)));
      SetRecheck(recheck, d);
    }
    if (HasSourceModel(ctx)) {
      TAILOR_ASSIGN_OR_RETURN(auto model, ModelDir(ctx));
      ModelToServe student{model.first, false};
      if (HasTimedRelativeBudget(ctx.contract().budget())) {
        TAILOR_ASSIGN_OR_RETURN(student.parent_dir, ParentDir(ctx));
      }
      TAILOR_ASSIGN_OR_RETURN(
          result, engine->Verify(ctx.contract(), student, ctx.work_dir(), ProgressOf(ctx)));
      bool hold = result.budgets_size() > 0 &&
                  (!result.has_equivalence() || result.equivalence().passed());
      for (const v1::BudgetCheck& b : result.budgets()) hold = hold && b.met();
      d.set_budgets_hold(hold);
      d.set_student_source(model.second);
    }
    SetDetail(result, d);
    TAILOR_RETURN_IF_ERROR(
        ctx.UploadArtifactBytes("drift_check", "drift_check.json", ProtoJson(result)).status());
    TAILOR_RETURN_IF_ERROR(ctx.ReportProgress(
        1.0, d.table_holds() ? "cost table still holds" : "cost table drifted", 0, 0,
        {{"latency_mape", d.latency_mape()}}, /*final=*/true));
    spdlog::info("drift check of cost table {}: latency MAPE {:.2f}% over {} architectures "
                 "(bound {:.2f}%): {}; student {}",
                 table.id().empty() ? "-" : table.id(), 100 * d.latency_mape(),
                 d.architectures_size(), 100 * d.bound(),
                 d.table_holds() ? "holds" : "drifted",
                 d.budgets_hold() ? "meets every budget" : "misses a budget (or none)");
    return result;
  };
}

JobHandler MakeMeasureHandler(MlJobConfig config, std::shared_ptr<ServingEngine> engine) {
  return [config, engine](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    const absl::Time start = absl::Now();
    TAILOR_ASSIGN_OR_RETURN(const Candidates candidates, CandidatesOf(ctx));
    TAILOR_ASSIGN_OR_RETURN(std::string parent_dir, ParentDir(ctx));
    const MlProgressFn progress = ProgressOf(ctx);
    // Budgets on request time relative to the parent: the parent is served in every pass
    // (MeasureCandidates), as the candidate one past the last.
    std::optional<model::HybridConfig> parent;
    if (ParentReferenceMs(ctx.contract()).has_value()) {
      TAILOR_ASSIGN_OR_RETURN(ParentForProfile p, ReadParentForProfile(ctx.contract(), parent_dir));
      parent = std::move(p.config);
    }
    // Progress by rounds, as many as there could be (close-call rounds serve fewer).
    const int planned = kMeasureRounds * (2 + std::max(config.slow_host.remeasures, 0)) +
                        std::max(config.close_calls.extra_serves, 0);
    int served_rounds = 0;
    const CloseCalls close = CloseCallsReporting(
        config.close_calls,
        [&](double, const std::string& message, const std::map<std::string, double>& metrics) {
          return progress(static_cast<double>(served_rounds) / planned, message, metrics);
        },
        0);
    ServeRoundFn serve_round = [&](const std::vector<size_t>& which, const std::string& label)
        -> absl::StatusOr<std::vector<v1::ModelCosts>> {
      std::vector<model::HybridConfig> served;
      for (size_t i : which) {
        served.push_back(i < candidates.architectures.size() ? candidates.architectures[i]
                                                             : parent.value());
      }
      const double from = static_cast<double>(served_rounds++) / planned;
      auto in_round = [&](double f, const std::string& message,
                          const std::map<std::string, double>& metrics) {
        return progress(from + f / planned, absl::StrCat(label, ": ", message), metrics);
      };
      return engine->Measure(ctx.contract(), parent_dir, served, ctx.work_dir() + "/measure",
                             in_round);
    };
    SlowHostCheck slow_host = SlowHostCheckOf(config.slow_host, candidates.latency_error);
    if (slow_host.remeasures > 0) {
      slow_host.wait = PauseReporting(
          progress, 0,
          absl::StrFormat("the candidates measured more than %.1f%% above their cost table's "
                          "prices as a set (a slow host, not slow candidates): pausing "
                          "before serving them again",
                          100 * slow_host.bound));
    }
    TAILOR_ASSIGN_OR_RETURN(
        v1::MeasureResult r,
        MeasureCandidates(candidates, ctx.contract(), close, slow_host, serve_round,
                          parent.has_value()));
    const EngineIdentity id = engine->identity();
    v1::EngineInfo& info = *r.mutable_engine();
    info.set_name(id.name);
    info.set_version(id.version);
    info.set_build(id.build);
    info.set_threads(id.threads);
    r.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
    TAILOR_RETURN_IF_ERROR(ctx.ReportProgress(1.0, MeasureSummary(r, candidates.source), 0, 0,
                                              {}, /*final=*/true));
    v1::JobOutput result;
    SetDetail(result, r);
    return result;
  };
}

JobHandler MakeVerifyHandler(MlJobConfig config, std::shared_ptr<ServingEngine> engine,
                             std::vector<VerifyVariant> variants) {
  return [config, engine, variants](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    // A model a method verifies its own way (an entropy-coded package against its dense twin).
    for (const VerifyVariant& variant : variants) {
      if (variant.applies(ctx)) return variant.run(ctx);
    }
    // Nothing to verify when the job before found no model (a comparison branch whose
    // budget no model met): pass the reason on rather than verify the parent in its place.
    for (const auto& [key, input] : ctx.inputs()) {
      if (input.skipped()) {
        v1::JobOutput result;
        result.set_skipped(true);
        result.set_reason(!input.reason().empty() ? input.reason() : key + " was skipped");
        ctx.ReportProgress(1.0, "nothing to verify: " + key + " was skipped", 0, 0, {}, true)
            .IgnoreError();
        return result;
      }
    }
    TAILOR_ASSIGN_OR_RETURN(auto model, ModelDir(ctx));
    const bool is_parent = model.second.rfind("parent ", 0) == 0;
    // The parent's folder, fetched once (a stored parent is a download): the eval sample
    // reads its vocabulary, the main verify scores it.
    const bool scores_parent = ctx.job().key() == methods::jobs::kVerify && !is_parent;
    // A budget on request time relative to the parent is judged against the parent served
    // alongside (ModelToServe.parent_dir).
    const bool beside = !is_parent && HasTimedRelativeBudget(ctx.contract().budget());
    std::string parent_dir;
    if (ctx.contract().data().has_eval() || scores_parent || beside) {
      TAILOR_ASSIGN_OR_RETURN(parent_dir, ParentDir(ctx));
    }
    EvalSample eval;
    if (ctx.contract().data().has_eval()) {
      TAILOR_ASSIGN_OR_RETURN(eval, ReadEvalSample(ctx, parent_dir, config.verify_eval_sequences));
    }
    TAILOR_ASSIGN_OR_RETURN(
        v1::JobOutput result,
        engine->Verify(ctx.contract(),
                       {model.first, is_parent, &eval, beside ? parent_dir : std::string()},
                       ctx.work_dir(), ProgressOf(ctx)));
    result.set_model_source(model.second);
    // The main verify of a campaign also scores the parent under the same engine settings,
    // so the report compares parent, student and baseline measured the same way.
    if (scores_parent) {
      TAILOR_ASSIGN_OR_RETURN(engine::EngineOptions options,
                              TailorEngineOptionsFor(ctx.contract(), config));
      absl::StatusOr<std::unique_ptr<engine::Engine>> parent =
          engine::Engine::Load(parent_dir, options, 0, ctx.contract().parent().format());
      if (!parent.ok()) return BadModel("parent model", parent.status());
      ctx.ReportProgress(0.9, "evaluating the parent on the task suites").IgnoreError();
      TAILOR_ASSIGN_OR_RETURN(
          *result.mutable_parent_quality(),
          TaskQuality(**parent, ctx.contract().seed(), config.verify_task_samples));
    }
    const std::string json = ProtoJson(result);
    TAILOR_RETURN_IF_ERROR(ctx.UploadArtifactBytes("verify", "verify.json", json).status());
    TAILOR_RETURN_IF_ERROR(ctx.ReportProgress(
        1.0, "verified", 0, 0,
        {{"latency_ms", result.measured().latency_ms()},
         {"memory_mib", result.measured().memory_mib()}},
        /*final=*/true));
    return result;
  };
}

}  // namespace tailor::profiler
