#include "profiler-agent/llama_cpp_engine.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "compression/costmodel/cost_table_proto.h"
#include "compression/costmodel/calm_serving.h"
#include "compression/costmodel/whole_model_profiler.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/gguf/llama_cpp_serve.h"
#include "compression/gguf/student_to_gguf.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_import.h"
#include "compression/hf/parent_architecture.h"
#include "nlohmann/json.hpp"
#include "profiler-agent/request_latency.h"
#include "profiler-agent/verify_data.h"

namespace tailor::profiler {

namespace {

using Json = nlohmann::json;

constexpr double kDefaultMaxKl = 1e-3;
constexpr double kDefaultMinAgreement = 0.99;
constexpr double kMiB = 1024.0 * 1024.0;
// Unrecorded requests per served model (ServeOptions).
// node's sidecar slows requests ~6-35 of every model by 30-100% (its JIT, whatever the model's
// size), and a table profiled past 16 of them was off by 12.1% at the quickstart's size
// against 7.5% past 40 (docs/benchmarks.md, "Profiling the quickstart's parent").
constexpr int kVerifyWarmup = 40;
constexpr int kProfileWarmup = 40;
// Timed requests per served model when --profile-rounds is 0. A served model's cost is mostly
// its load and warm-up, so 15 requests cost little more than 5 (3m40s vs 3m34s for the
// quickstart parent's 56 models) and the median of 15 is what made its held-out error drop
// (latency MAPE 7.9% vs 24.8%, worst 12.6% vs 89.1%, 2026-12-04); the bench also uses 15.
constexpr int kProfileRepetitions = 15;

// Prompt i of the gate: deterministic ids over [0, vocab) (splitmix64 of seed and i).
std::vector<int64_t> GatePrompt(uint64_t seed, int i, int length, int64_t vocab) {
  std::vector<int64_t> out;
  uint64_t x =
      (seed + 1) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i) * 0xd1b54a32d192ed03ull;
  for (int t = 0; t < length; ++t) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    out.push_back(static_cast<int64_t>(z % static_cast<uint64_t>(vocab)));
  }
  return out;
}

// Up to `count` of the eval sample's sequences with at least `length` tokens, cut to it: the
// gate compares the engines on the contract's own text (every prompt shares one position
// list, so shorter sequences are left out).
std::vector<std::vector<int64_t>> EvalPrompts(const EvalSample* eval, int count, int length) {
  std::vector<std::vector<int64_t>> prompts;
  if (eval == nullptr || length < 2) return prompts;
  for (const data::TokenSequence& s : eval->sequences) {
    if (static_cast<int>(prompts.size()) >= count) break;
    if (static_cast<int>(s.tokens.size()) < length) continue;
    prompts.emplace_back(s.tokens.begin(), s.tokens.begin() + length);
  }
  return prompts;
}

// Both engines' perplexity over the gate's prompt tokens (shapes checked by
// JudgeEquivalence): position t of a prompt predicts its token t + 1.
void SetGatePerplexities(const std::vector<std::vector<int64_t>>& prompts,
                         const std::vector<std::vector<std::vector<float>>>& ours,
                         const std::vector<gguf::NextTokenLogprobs>& theirs,
                         v1::EquivalenceCheck& e) {
  double ours_nll = 0;
  double theirs_nll = 0;
  int64_t n = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (size_t t = 0; t + 1 < prompts[p].size() && t < ours[p].size(); ++t) {
      const int64_t next = prompts[p][t + 1];
      ours_nll -= ours[p][t][next];
      theirs_nll -= theirs[p].logprobs[t][next];
      ++n;
    }
  }
  if (n == 0) return;
  const double ours_ppl = std::exp(ours_nll / static_cast<double>(n));
  const double theirs_ppl = std::exp(theirs_nll / static_cast<double>(n));
  // Proto JSON has no infinity: an underflowed distribution leaves the figure out.
  if (std::isfinite(ours_ppl)) e.set_tailor_perplexity(ours_ppl);
  if (std::isfinite(theirs_ppl)) e.set_engine_perplexity(theirs_ppl);
}

// KL(ours || theirs) at one position; llama.cpp's null (underflowed) entries are -inf, so
// mass of ours there makes it infinite.
double PositionKl(const std::vector<float>& ours, const std::vector<double>& theirs) {
  double kl = 0;
  for (size_t v = 0; v < ours.size(); ++v) {
    const double p = std::exp(static_cast<double>(ours[v]));
    if (p == 0) continue;
    if (!std::isfinite(theirs[v])) return std::numeric_limits<double>::infinity();
    kl += p * (ours[v] - theirs[v]);
  }
  return std::max(kl, 0.0);
}

template <typename T>
size_t ArgMax(const std::vector<T>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The serving options of a verify or profile request batch under `w`.
// `warmup` unrecorded requests first: node's JIT and GC slowed requests ~13, ~22 and ~30 of a
// fresh sidecar by 30-100% whatever the model (docs/benchmarks.md, "llama.cpp"); a deployed
// server is long past them.
gguf::ServeBenchmarkOptions ServeOptions(const engine::Workload& w, int warmup, int repetitions,
                                         uint64_t seed, const LlamaCppEngineOptions& engine) {
  const gguf::SidecarOptions& sidecar = engine.sidecar;
  gguf::ServeBenchmarkOptions o;
  o.harness = engine.serve_harness;
  o.batch_size = w.batch_size;
  o.input_tokens = w.input_tokens;
  o.output_tokens = w.output_tokens;
  o.cached_prefix_tokens = w.cached_prefix_tokens;
  o.threads = sidecar.threads;
  o.warmup = warmup;
  o.repetitions = repetitions;
  o.seed = seed;
  o.sidecar = sidecar;
  return o;
}

// Measured costs of one served request batch, latency at `percentile` of whole requests.
v1::ModelCosts CostsOf(const gguf::LlamaCppServeMeasurement& m, const engine::Workload& w,
                       v1::LatencyPercentile percentile) {
  v1::ModelCosts c;
  SetWholeRequestLatency(m.request_ms, w, percentile, c);
  c.set_prefill_ms(engine::Median(m.prefill_ms));
  c.set_decode_ms(engine::Median(m.decode_ms));
  c.set_cpu_ms(engine::Median(m.cpu_ms));
  // What llama.cpp allocates: the weights, and the context's buffers (the KV / recurrent
  // cache for every cell of the context, and the compute buffers).
  const double weights = m.weights_bytes / kMiB;
  const double compute = m.compute_buffer_bytes / kMiB;
  const double cache = (m.context_buffer_bytes - m.compute_buffer_bytes) / kMiB;
  c.set_weight_memory_mib(weights);
  c.set_cache_mib(cache);
  c.set_state_mib(m.state_bytes / kMiB);
  c.set_compute_buffer_mib(compute);
  c.set_memory_mib(weights + m.context_buffer_bytes / kMiB);
  return c;
}

// llama.cpp aborting on a model (GGML_ASSERT) does so on every try: not worth a retry of the
// job, which an Internal error gets.
absl::Status Permanent(absl::Status st) {
  if (st.code() == absl::StatusCode::kInternal &&
      absl::StrContains(st.message(), "killed by signal")) {
    return absl::FailedPreconditionError(st.message());
  }
  return st;
}

// Serves the verified model until a run without interference (request_latency.h): a run
// another process preempted or starved measures the host, not the model.
absl::StatusOr<v1::ModelCosts> MeasureCalmly(const std::string& gguf_path,
                                             const gguf::ServeBenchmarkOptions& o,
                                             const engine::Workload& w,
                                             v1::LatencyPercentile percentile) {
  auto serve = [&]() -> absl::StatusOr<VerifyRun> {
    absl::StatusOr<gguf::LlamaCppServeMeasurement> m = gguf::RunServeBenchmark(gguf_path, o);
    if (!m.ok()) return Permanent(m.status());
    return VerifyRun{CostsOf(*m, w, percentile), ServedModelOf(*m)};
  };
  return MeasureUntilCalm(serve, RequestCalmOptions(o.threads));
}

// One dummy-weight model of the parent's search space at `dir`.gguf: weights drawn from
// `seed`, written as tailor's model folder (removed again), exported like any student.
absl::StatusOr<gguf::StudentGgufSummary> WriteDummyGguf(const model::HybridConfig& config,
                                                       uint64_t seed,
                                                       const hf::HfCheckpoint& parent,
                                                       const std::string& dir) {
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM lm, model::CreateHybridLM(config, seed));
  TAILOR_RETURN_IF_ERROR(model::SaveHybridLM(lm, dir));
  gguf::GgufExportOptions e;
  e.all_f32 = true;
  absl::StatusOr<gguf::StudentGgufSummary> exported =
      gguf::ExportStudentToGguf(dir, parent, dir + ".gguf", e);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return exported;
}

// The gate's figures as budget checks, so every report and verdict shows them.
void AddGateChecks(const v1::EquivalenceCheck& e, v1::JobOutput& out) {
  v1::BudgetCheck* kl = out.add_budgets();
  kl->set_resource("equivalence_max_kl");
  kl->set_budget(e.max_kl_allowed());
  kl->set_measured(e.max_kl());
  kl->set_met(e.max_kl() <= e.max_kl_allowed());
  v1::BudgetCheck* agree = out.add_budgets();
  agree->set_resource("equivalence_argmax_agreement");
  agree->set_budget(e.min_argmax_agreement());
  agree->set_measured(e.argmax_agreement());
  agree->set_met(e.argmax_agreement() >= e.min_argmax_agreement());
}

// The parent's checkpoint: llama.cpp serves Hugging Face models (their GGUF export).
absl::StatusOr<hf::HfCheckpoint> OpenHfParent(const v1::DeploymentContract& contract,
                                              const std::string& parent_dir) {
  const std::string& format = contract.parent().format();
  if (!hf::IsHfCheckpointDir(parent_dir, format)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "target.engine llama.cpp serves GGUF exports of Hugging Face checkpoints; the parent ",
        parent_dir, " is a tailor model folder (target.engine tailor-builtin serves those)"));
  }
  hf::HfCheckpointOptions options;
  options.format = format;
  return hf::HfCheckpoint::Open(parent_dir, options);
}

class LlamaCppEngine : public ServingEngine {
 public:
  LlamaCppEngine(MlJobConfig config, LlamaCppEngineOptions options, EngineIdentity identity)
      : config_(std::move(config)), options_(std::move(options)),
        identity_(std::move(identity)) {}

  EngineIdentity identity() const override { return identity_; }

  absl::StatusOr<ProfileJobOutput> Profile(const v1::DeploymentContract& contract,
                                           const std::string& parent_dir,
                                           const std::string& work_dir,
                                           const MlProgressFn& progress) override;

  absl::StatusOr<v1::JobOutput> Verify(const v1::DeploymentContract& contract,
                                       const ModelToServe& model, const std::string& work_dir,
                                       const MlProgressFn& progress) override;

  absl::StatusOr<costmodel::RecheckResult> Recheck(const v1::DeploymentContract& contract,
                                                   const std::string& parent_dir,
                                                   const v1::CostTable& table,
                                                   const std::string& work_dir,
                                                   const MlProgressFn& progress) override;
  absl::StatusOr<std::vector<v1::ModelCosts>> Measure(
      const v1::DeploymentContract& contract, const std::string& parent_dir,
      const std::vector<model::HybridConfig>& architectures, const std::string& work_dir,
      const MlProgressFn& progress) override;

 private:
  // The engine and precision checks every job starts with.
  absl::Status CheckContract(const v1::DeploymentContract& contract) const;
  // The model as an F32 GGUF in `work_dir`.
  absl::StatusOr<std::string> ExportGguf(const v1::DeploymentContract& contract,
                                         const ModelToServe& model,
                                         const std::string& work_dir) const;
  v1::EngineInfo Info() const;
  // How profiling and its recheck serve a model again while interference shows: as verify
  // does, at most --profile-remeasures times.
  costmodel::CalmServingOptions ProfileCalmOptions() const {
    costmodel::CalmServingOptions o = RequestCalmOptions(options_.sidecar.threads);
    if (config_.profile_remeasures >= 0) o.max_remeasures = config_.profile_remeasures;
    return o;
  }

  const MlJobConfig config_;
  const LlamaCppEngineOptions options_;
  const EngineIdentity identity_;
};

absl::Status LlamaCppEngine::CheckContract(const v1::DeploymentContract& contract) const {
  TAILOR_RETURN_IF_ERROR(CheckContractEngine(contract, identity_));
  const v1::Precision p = contract.target().precision();
  if (p != v1::PRECISION_UNSPECIFIED && p != v1::FP32) {
    return absl::FailedPreconditionError(absl::StrCat(
        "target.precision: this llama.cpp agent serves FP32 GGUF exports on cpu, the contract "
        "asks for ", v1::Precision_Name(p)));
  }
  if (config_.device != "cpu") {
    return absl::FailedPreconditionError(
        absl::StrCat("target.engine llama.cpp: this agent serves it on cpu only, not ",
                     config_.device));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LlamaCppEngine::ExportGguf(const v1::DeploymentContract& contract,
                                                      const ModelToServe& model,
                                                      const std::string& work_dir) const {
  const std::string parent_dir = model.is_parent ? model.dir : contract.parent().path();
  TAILOR_ASSIGN_OR_RETURN(hf::HfCheckpoint parent, OpenHfParent(contract, parent_dir));
  std::filesystem::create_directories(work_dir);
  const std::string path = absl::StrCat(work_dir, "/served.gguf");
  gguf::GgufExportOptions o;
  o.all_f32 = true;  // the gate compares with tailor's FP32 forward pass
  if (model.is_parent) {
    TAILOR_RETURN_IF_ERROR(gguf::ExportHfToGguf(parent, path, o).status());
  } else {
    TAILOR_RETURN_IF_ERROR(gguf::ExportStudentToGguf(model.dir, parent, path, o).status());
  }
  return path;
}

v1::EngineInfo LlamaCppEngine::Info() const {
  v1::EngineInfo info;
  info.set_name(identity_.name);
  info.set_version(identity_.version);
  info.set_build(identity_.build);
  info.set_threads(options_.sidecar.threads);
  info.set_device("cpu");
  info.set_precision("FP32");
  return info;
}

absl::StatusOr<ProfileJobOutput> LlamaCppEngine::Profile(const v1::DeploymentContract& contract,
                                                         const std::string& parent_dir,
                                                         const std::string& work_dir,
                                                         const MlProgressFn& progress) {
  TAILOR_RETURN_IF_ERROR(CheckContract(contract));
  TAILOR_ASSIGN_OR_RETURN(ParentForProfile p, ReadParentForProfile(contract, parent_dir));
  TAILOR_ASSIGN_OR_RETURN(hf::HfCheckpoint parent, OpenHfParent(contract, parent_dir));
  costmodel::WholeModelProfileOptions o;
  o.space = LlamaCppServableSpace(parent);
  const gguf::StudentShapeRules rules = gguf::StudentShapeRulesOf(parent.config());
  o.stand_ins = rules.stand_ins;
  o.kv_cache_layout = rules.kv_cache_layout;
  o.engine = identity_.name;
  o.engine_version = identity_.version;
  o.device_kind = config_.device_kind;
  o.workload = costmodel::WorkloadFromProto(contract.workload());
  TAILOR_RETURN_IF_ERROR(engine::ValidateWorkload(o.workload));
  o.seed = contract.seed();
  // A model's figure is the median of its requests: only sustained interference biases it, and
  // node's own jitter spreads every calm run's requests (max - min) by 20-60% at the
  // quickstart's size, so the profiler's default re-served every model twice and kept the run
  // with the fewest slow requests (docs/benchmarks.md, "Profiling the quickstart's parent").
  o.calm = ProfileCalmOptions();
  o.target_latency_mape = config_.profile_target_latency_mape;
  o.max_rounds = config_.profile_max_rounds;
  // Layouts of one width per kind serve models that hold every layer: no deeper stacks.
  if (!o.space.uniform_layers) o.stack_depth = config_.profile_stack_depth;
  if (config_.profile_validation_architectures > 0) {
    o.validation_architectures = config_.profile_validation_architectures;
  }
  o.progress = progress;
  const int repetitions =
      config_.profile_rounds > 0 ? config_.profile_rounds : kProfileRepetitions;
  const gguf::ServeBenchmarkOptions serve_options =
      ServeOptions(o.workload, kProfileWarmup, repetitions, contract.seed(), options_);
  const std::string scratch = absl::StrCat(work_dir, "/profile-models");
  std::filesystem::create_directories(scratch);
  const costmodel::ServeModelFn serve = LlamaCppServeModelFn(parent, scratch, serve_options);
  ProfileJobOutput out;
  TAILOR_ASSIGN_OR_RETURN(out.result, costmodel::ProfileCostTableWholeModel(p.config, o, serve));
  out.table = costmodel::ToProto(out.result.table);
  out.table.set_parent_architecture(p.architecture);
  return out;
}

absl::StatusOr<costmodel::RecheckResult> LlamaCppEngine::Recheck(
    const v1::DeploymentContract& contract, const std::string& parent_dir,
    const v1::CostTable& table, const std::string& work_dir, const MlProgressFn& progress) {
  TAILOR_RETURN_IF_ERROR(CheckContract(contract));
  TAILOR_ASSIGN_OR_RETURN(ParentForProfile p, ReadParentForProfile(contract, parent_dir));
  TAILOR_ASSIGN_OR_RETURN(hf::HfCheckpoint parent, OpenHfParent(contract, parent_dir));
  TAILOR_ASSIGN_OR_RETURN(costmodel::CostModel model, costmodel::CostModel::FromTable(table));
  const gguf::StudentShapeRules rules = gguf::StudentShapeRulesOf(parent.config());
  model.SetStandIns(rules.stand_ins);
  model.SetKvCacheLayout(rules.kv_cache_layout);
  const engine::Workload w = costmodel::WorkloadFromProto(contract.workload());
  TAILOR_RETURN_IF_ERROR(engine::ValidateWorkload(w));
  const int repetitions =
      config_.profile_rounds > 0 ? config_.profile_rounds : kProfileRepetitions;
  const std::string scratch = absl::StrCat(work_dir, "/recheck-models");
  std::filesystem::create_directories(scratch);
  const costmodel::ServeModelFn serve = LlamaCppServeModelFn(
      parent, scratch, ServeOptions(w, kProfileWarmup, repetitions, contract.seed(),
                                    options_));
  // As the whole-model profiler measured its held-out architectures: the median request, and
  // memory as llama.cpp allocated it.
  const costmodel::CalmServingOptions calm_options = ProfileCalmOptions();
  auto recheck_serve = [&](const model::HybridConfig& arch,
                           uint64_t seed) -> absl::StatusOr<costmodel::RecheckServed> {
    // Served as the table's own models were: again while interference shows.
    TAILOR_ASSIGN_OR_RETURN(
        costmodel::CalmServed calm,
        costmodel::ServeUntilCalm([&] { return serve(arch, seed); }, calm_options));
    const costmodel::ServedModel& served = calm.served;
    std::vector<double> request;
    for (const costmodel::ServedRequest& r : served.requests) request.push_back(r.request_ms);
    return costmodel::RecheckServed{engine::Median(std::move(request)),
                                    served.weights_mib + served.state_mib + served.compute_mib};
  };
  costmodel::RecheckOptions o;
  o.space = LlamaCppServableSpace(parent);
  o.require_present_layer = true;
  o.progress = progress;
  return costmodel::RecheckCostTable(model, p.config, recheck_serve, o);
}

absl::StatusOr<std::vector<v1::ModelCosts>> LlamaCppEngine::Measure(
    const v1::DeploymentContract& contract, const std::string& parent_dir,
    const std::vector<model::HybridConfig>& architectures, const std::string& work_dir,
    const MlProgressFn& progress) {
  TAILOR_RETURN_IF_ERROR(CheckContract(contract));
  TAILOR_ASSIGN_OR_RETURN(hf::HfCheckpoint parent, OpenHfParent(contract, parent_dir));
  const engine::Workload w = costmodel::WorkloadFromProto(contract.workload());
  TAILOR_RETURN_IF_ERROR(engine::ValidateWorkload(w));
  const v1::LatencyPercentile percentile = contract.budget().latency_percentile();
  const gguf::ServeBenchmarkOptions serve =
      ServeOptions(w, kVerifyWarmup, RepetitionsFor(percentile, config_.verify_repetitions),
                   contract.seed(), options_);
  std::filesystem::create_directories(work_dir);
  std::vector<v1::ModelCosts> out;
  for (size_t i = 0; i < architectures.size(); ++i) {
    if (progress && !progress(static_cast<double>(i) / architectures.size(),
                              absl::StrCat("serving architecture ", i + 1, " of ",
                                           architectures.size(), " in llama.cpp"),
                              {})) {
      return absl::CancelledError("measure cancelled");
    }
    const std::string dir = absl::StrCat(work_dir, "/candidate-", i);
    TAILOR_RETURN_IF_ERROR(
        WriteDummyGguf(architectures[i], contract.seed() + i, parent, dir).status());
    absl::StatusOr<v1::ModelCosts> costs = MeasureCalmly(dir + ".gguf", serve, w, percentile);
    std::error_code ec;
    std::filesystem::remove(dir + ".gguf", ec);
    if (!costs.ok()) return costs.status();
    out.push_back(*std::move(costs));
  }
  return out;
}

absl::StatusOr<v1::JobOutput> LlamaCppEngine::Verify(const v1::DeploymentContract& contract,
                                                     const ModelToServe& model,
                                                     const std::string& work_dir,
                                                     const MlProgressFn& progress) {
  auto report = [&](double f, const std::string& message) -> absl::Status {
    if (progress && !progress(f, message, {})) return absl::CancelledError("verify cancelled");
    return absl::OkStatus();
  };
  TAILOR_RETURN_IF_ERROR(CheckContract(contract));
  const engine::Workload w = costmodel::WorkloadFromProto(contract.workload());
  TAILOR_RETURN_IF_ERROR(engine::ValidateWorkload(w));
  TAILOR_RETURN_IF_ERROR(report(0.05, absl::StrCat("exporting ", model.dir, " to GGUF")));
  absl::StatusOr<std::string> gguf_path = ExportGguf(contract, model, work_dir);
  if (!gguf_path.ok()) {
    return IsBadModel(gguf_path.status().code()) ? BadModel("model", gguf_path.status())
                                                 : gguf_path.status();
  }
  // tailor's own forward pass of the same model: the gate's reference and the quality.
  TAILOR_ASSIGN_OR_RETURN(engine::EngineOptions tailor, TailorEngineOptionsFor(contract, config_));
  const std::string format = model.is_parent ? contract.parent().format() : std::string();
  absl::StatusOr<std::unique_ptr<engine::Engine>> ours =
      engine::Engine::Load(model.dir, tailor, w.cache_positions(), format);
  if (!ours.ok()) return BadModel("model", ours.status());
  TAILOR_RETURN_IF_ERROR(report(0.15, "equivalence gate: llama.cpp against tailor"));
  v1::JobOutput result;
  *result.mutable_engine() = Info();
  absl::StatusOr<v1::EquivalenceCheck> gate = CheckEquivalence(
      (*ours)->model(), *gguf_path, contract.target().equivalence(), options_, contract.seed(),
      model.eval);
  if (!gate.ok()) return Permanent(gate.status());
  *result.mutable_equivalence() = *std::move(gate);
  AddGateChecks(result.equivalence(), result);
  if (!result.equivalence().passed()) {
    result.set_reason(absl::StrCat(
        "equivalence gate failed: llama.cpp's next-token distribution differs from tailor's "
        "(max KL ", result.equivalence().max_kl(), ", argmax agreement ",
        result.equivalence().argmax_agreement(), "); nothing was measured"));
    return result;
  }
  const v1::LatencyPercentile percentile = contract.budget().latency_percentile();
  const int repetitions = RepetitionsFor(percentile, config_.verify_repetitions);
  TAILOR_RETURN_IF_ERROR(report(
      0.35, absl::StrCat("serving the contract's request batch ", repetitions, " times in ",
                         config_.verify_serves, " llama.cpp processes")));
  const gguf::ServeBenchmarkOptions serve =
      ServeOptions(w, kVerifyWarmup, repetitions, contract.seed(), options_);
  // The parent alongside: its architecture with dummy weights, as the profile served it.
  std::string parent_gguf;
  if (!model.parent_dir.empty()) {
    TAILOR_ASSIGN_OR_RETURN(hf::HfCheckpoint parent, OpenHfParent(contract, model.parent_dir));
    TAILOR_ASSIGN_OR_RETURN(ParentForProfile p, ReadParentForProfile(contract, model.parent_dir));
    const std::string dir = work_dir + "/parent-beside";
    TAILOR_RETURN_IF_ERROR(WriteDummyGguf(p.config, contract.seed(), parent, dir).status());
    parent_gguf = dir + ".gguf";
  }
  TAILOR_ASSIGN_OR_RETURN(
      const v1::Budget judged,
      MeasureVerified(
          contract, config_.verify_serves,
          [&] { return MeasureCalmly(*gguf_path, serve, w, percentile); },
          parent_gguf.empty()
              ? ServeFn()
              : ServeFn([&] { return MeasureCalmly(parent_gguf, serve, w, percentile); }),
          CloseCallsReporting(config_.close_calls, progress, 0.35), result));
  TAILOR_RETURN_IF_ERROR(report(0.7, "evaluating the task suites (tailor's engine)"));
  TAILOR_ASSIGN_OR_RETURN(*result.mutable_quality(),
                          TaskQuality(**ours, contract.seed(), config_.verify_task_samples));
  const v1::EquivalenceCheck& gate_check = result.equivalence();
  if (gate_check.has_engine_perplexity() && model.eval != nullptr) {
    // The gate's prompts are data.eval's text: llama.cpp's perplexity on their tokens (every
    // prompt's last position predicts no token of it).
    SetServedPerplexity(*model.eval, gate_check.prompts(),
                        gate_check.positions() - gate_check.prompts(),
                        gate_check.engine_perplexity(), *result.mutable_quality());
  }
  JudgeBudgets(judged, result);
  return result;
}

}  // namespace

costmodel::ServedModel ServedModelOf(const gguf::LlamaCppServeMeasurement& m) {
  costmodel::ServedModel s;
  for (size_t i = 0; i < m.request_ms.size(); ++i) {
    s.requests.push_back({m.request_ms[i], m.prefill_ms[i], m.decode_ms[i], m.cpu_ms[i]});
  }
  s.weights_mib = m.weights_bytes / kMiB;
  s.state_mib = (m.context_buffer_bytes - m.compute_buffer_bytes) / kMiB;
  s.compute_mib = m.compute_buffer_bytes / kMiB;
  return s;
}

namespace {

// Serves one dummy-weight model of the parent's search space: its weights drawn from `seed`,
// written as tailor's model folder, exported to GGUF like any student, served, deleted.
absl::StatusOr<costmodel::ServedModel> ServeDummyModel(const model::HybridConfig& config,
                                                      uint64_t seed,
                                                      const hf::HfCheckpoint& parent,
                                                      const std::string& dir,
                                                      const gguf::ServeBenchmarkOptions& o) {
  TAILOR_ASSIGN_OR_RETURN(gguf::StudentGgufSummary exported,
                          WriteDummyGguf(config, seed, parent, dir));
  const std::string path = dir + ".gguf";
  absl::StatusOr<gguf::LlamaCppServeMeasurement> m = gguf::RunServeBenchmark(path, o);
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (!m.ok()) return Permanent(m.status());
  costmodel::ServedModel served = ServedModelOf(*m);
  served.stand_in_mib = static_cast<double>(exported.stand_in_bytes) / kMiB;
  served.stand_in_layers = exported.stand_in_layers;
  return served;
}

}  // namespace

// Profiling and re-measured models are students of the parent, so they obey the same rules
// as the search's. A parent whose layout has one width per kind (Qwen3, Qwen2, Mixtral,
// Qwen3-MoE) is profiled on models of uniform widths with whole blocks removed.
costmodel::SearchSpaceOptions LlamaCppServableSpace(const hf::HfCheckpoint& parent) {
  const gguf::StudentShapeRules rules = gguf::StudentShapeRulesOf(parent.config());
  costmodel::SearchSpaceOptions o;
  o.keep_shared_experts = rules.keep_shared_experts;
  o.uniform_layers = !rules.per_layer_widths;
  o.prune_hidden_and_heads = rules.prune_hidden_and_heads;
  return o;
}

costmodel::ServeModelFn LlamaCppServeModelFn(const hf::HfCheckpoint& parent,
                                             const std::string& scratch_dir,
                                             const gguf::ServeBenchmarkOptions& options) {
  auto served = std::make_shared<int>(0);
  // A model deeper than the parent (the profiler's deep stacks: its layers tiled) is exported
  // against the parent's config repeated as often, one per depth, made on first use.
  auto deeper = std::make_shared<std::map<int64_t, hf::HfCheckpoint>>();
  const absl::StatusOr<model::HybridConfig> own = hf::HybridConfigFromHf(parent.config());
  const int64_t layers = own.ok() ? own->num_layers() : 0;
  return [&parent, scratch_dir, options, served, deeper, layers](
             const model::HybridConfig& config,
             uint64_t seed) -> absl::StatusOr<costmodel::ServedModel> {
    const std::string dir = absl::StrCat(scratch_dir, "/model-", (*served)++);
    if (layers == 0 || config.num_layers() <= layers || config.num_layers() % layers != 0) {
      return ServeDummyModel(config, seed, parent, dir, options);
    }
    const int64_t copies = config.num_layers() / layers;
    auto it = deeper->find(copies);
    if (it == deeper->end()) {
      it = deeper->emplace(copies, parent.ConfigRepeated(static_cast<int>(copies))).first;
    }
    return ServeDummyModel(config, seed, it->second, dir, options);
  };
}

absl::StatusOr<v1::EquivalenceCheck> JudgeEquivalence(
    const std::vector<std::vector<std::vector<float>>>& ours,
    const std::vector<gguf::NextTokenLogprobs>& theirs, const v1::EquivalenceGate& gate) {
  if (ours.size() != theirs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("equivalence: ", ours.size(),
                                                   " prompts of tailor's, ", theirs.size(),
                                                   " of llama.cpp's"));
  }
  v1::EquivalenceCheck e;
  e.set_max_kl_allowed(gate.has_max_kl() ? gate.max_kl() : kDefaultMaxKl);
  e.set_min_argmax_agreement(gate.has_min_argmax_agreement() ? gate.min_argmax_agreement()
                                                             : kDefaultMinAgreement);
  double kl_sum = 0;
  int agree = 0;
  for (size_t p = 0; p < ours.size(); ++p) {
    if (ours[p].size() != theirs[p].logprobs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("equivalence: prompt ", p, " has ",
                                                     ours[p].size(), " positions of tailor's, ",
                                                     theirs[p].logprobs.size(), " of llama.cpp's"));
    }
    for (size_t t = 0; t < ours[p].size(); ++t) {
      if (static_cast<int64_t>(ours[p][t].size()) != theirs[p].vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "equivalence: tailor's vocabulary has ", ours[p][t].size(), " tokens, llama.cpp's ",
            theirs[p].vocab_size));
      }
      const double kl = PositionKl(ours[p][t], theirs[p].logprobs[t]);
      e.set_max_kl(std::max(e.max_kl(), kl));
      kl_sum += kl;
      agree += ArgMax(ours[p][t]) == ArgMax(theirs[p].logprobs[t]);
      e.set_positions(e.positions() + 1);
    }
  }
  e.set_prompts(static_cast<int>(ours.size()));
  e.set_mean_kl(e.positions() > 0 ? kl_sum / e.positions() : 0);
  e.set_argmax_agreement(e.positions() > 0 ? static_cast<double>(agree) / e.positions() : 0);
  e.set_passed(e.positions() > 0 && e.max_kl() <= e.max_kl_allowed() &&
               e.argmax_agreement() >= e.min_argmax_agreement());
  return e;
}

absl::StatusOr<v1::EquivalenceCheck> CheckEquivalence(model::HybridLM& model,
                                                      const std::string& gguf_path,
                                                      const v1::EquivalenceGate& gate,
                                                      const LlamaCppEngineOptions& options,
                                                      uint64_t seed, const EvalSample* eval) {
  const int64_t vocab = model->config().vocab;
  const int length = static_cast<int>(
      std::min<int64_t>(options.equivalence_length, model->config().max_seq));
  std::vector<int64_t> positions(length);
  for (int i = 0; i < length; ++i) positions[i] = i;
  std::vector<std::vector<int64_t>> prompts =
      EvalPrompts(eval, options.equivalence_prompts, length);
  const bool from_eval = !prompts.empty();
  for (int i = 0; !from_eval && i < options.equivalence_prompts; ++i) {
    prompts.push_back(GatePrompt(seed, i, length, vocab));
  }
  std::vector<std::vector<std::vector<float>>> ours;
  std::vector<std::vector<int32_t>> ids;
  for (const std::vector<int64_t>& tokens : prompts) {
    TAILOR_ASSIGN_OR_RETURN(std::vector<std::vector<float>> lp,
                            hf::NextTokenLogprobs(model, tokens, positions));
    ours.push_back(std::move(lp));
    ids.emplace_back(tokens.begin(), tokens.end());
  }
  TAILOR_ASSIGN_OR_RETURN(std::vector<gguf::NextTokenLogprobs> theirs,
                          gguf::RunNextTokenLogprobsBatch(gguf_path, ids, positions,
                                                          options.sidecar));
  TAILOR_ASSIGN_OR_RETURN(v1::EquivalenceCheck e, JudgeEquivalence(ours, theirs, gate));
  e.set_prompts_from(from_eval ? "data.eval" : "random ids");
  if (from_eval) SetGatePerplexities(prompts, ours, theirs, e);
  return e;
}

absl::StatusOr<EngineIdentity> DetectLlamaCpp(const gguf::SidecarOptions& sidecar) {
  const std::string script = gguf::DefaultSidecarScript();
  const std::string path =
      absl::StrCat(script.substr(0, script.find_last_of('/') + 1), "engine_identity.mjs");
  TAILOR_ASSIGN_OR_RETURN(std::string out,
                          gguf::RunSidecarScript(path, {}, "", sidecar.timeout, sidecar));
  const Json j = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("node_llama_cpp") || !j["node_llama_cpp"].is_string() ||
      !j.contains("llama_cpp") || !j["llama_cpp"].is_string()) {
    return absl::InternalError(absl::StrCat(path, " printed no engine identity: ", out));
  }
  EngineIdentity id;
  id.name = kLlamaCppEngineName;
  id.version = j["node_llama_cpp"].get<std::string>();
  id.build = absl::StrCat("llama.cpp ", j["llama_cpp"].get<std::string>(), " ",
                          j.value("build", std::string("unknown")));
  id.threads = sidecar.threads;
  return id;
}

std::shared_ptr<ServingEngine> MakeLlamaCppEngine(const MlJobConfig& config,
                                                  const LlamaCppEngineOptions& options,
                                                  const EngineIdentity& identity) {
  return std::make_shared<LlamaCppEngine>(config, options, identity);
}

}  // namespace tailor::profiler
