#include "methods/entropy_code/jobs/agent_jobs.h"

#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/job_output.h"
#include "common/proto_json.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "compression/costmodel/cost_table_proto.h"
#include "compression/engine/engine.h"
#include "compression/engine/package_build.h"
#include "compression/entropy/autotune.h"
#include "compression/entropy/gemv.h"
#include "compression/entropy/package.h"
#include "compression/model/config.h"
#include "common/model_fetch.h"
#include "compression/tasks/suites.h"
#include "methods/api/job_kinds.h"
#include "methods/entropy_code/entropy_code_results.pb.h"
#include "methods/entropy_code/job_kinds.h"

namespace tailor::profiler {
namespace {

using v1::entropy_code::AutotuneResult;
using v1::entropy_code::PackageServing;
using v1::entropy_code::PackageVerifyResult;
using v1::entropy_code::SelectResult;
using v1::entropy_code::TensorServing;

// The input that hands on a package (the select job's output); null when none does.
const v1::JobOutput* PackageInput(const JobContext& ctx) {
  for (const auto& [key, output] : ctx.inputs()) {
    if (!output.package_digest().empty()) return &output;
  }
  return nullptr;
}

absl::StatusOr<std::string> Download(JobContext& ctx, const std::string& digest,
                                     const std::string& name) {
  const std::string path = absl::StrCat(ctx.work_dir(), "/", name);
  TAILOR_RETURN_IF_ERROR(ctx.DownloadArtifact(digest, path));
  return path;
}

absl::StatusOr<std::string> FetchModelDir(JobContext& ctx, const std::string& digest,
                                          const std::string& name) {
  return FetchModelArtifact(ctx, digest, ctx.work_dir(), name);
}

// The model a package is built from: the `verify` dependency's model (tail) or the parent.
struct Source {
  std::string digest;  // empty: `path`
  std::string path;
};

absl::StatusOr<Source> SourceOf(const JobContext& ctx) {
  const auto verify = ctx.inputs().find(methods::jobs::kVerify);
  if (verify != ctx.inputs().end()) {
    const std::string& s = verify->second.model_source();
    const size_t at = s.find("model_digest ");
    if (at != std::string::npos) return Source{s.substr(at + 13), ""};
  }
  const v1::ModelRef& p = ctx.contract().parent();
  if (!p.artifact_digest().empty()) return Source{p.artifact_digest(), ""};
  if (!p.path().empty()) return Source{"", p.path()};
  return absl::InvalidArgumentError(
      "parent: the contract names no model (set parent.path or parent.artifact_digest)");
}

absl::StatusOr<std::string> SourceDir(JobContext& ctx, const Source& s) {
  if (s.digest.empty()) return s.path;
  return FetchModelDir(ctx, s.digest, "source");
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename Fn>
double MedianUs(int reps, Fn fn) {
  std::vector<double> t;
  fn();  // warm-up
  for (int i = 0; i < reps; ++i) {
    const double a = NowSeconds();
    fn();
    t.push_back(1e6 * (NowSeconds() - a));
  }
  return engine::Median(t);
}

}  // namespace

JobHandler MakeAutotuneHandler(MlJobConfig config) {
  return [config](JobContext& ctx) -> absl::StatusOr<v1::JobOutput> {
    const double start = NowSeconds();
    TAILOR_RETURN_IF_ERROR(EngineOptionsFor(ctx.contract(), config).status());
    TAILOR_ASSIGN_OR_RETURN(Source source, SourceOf(ctx));
    TAILOR_ASSIGN_OR_RETURN(std::string dir, SourceDir(ctx, source));
    absl::StatusOr<std::vector<engine::SourceTensor>> tensors = engine::ReadSourceTensors(dir);
    if (!tensors.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("source model failed validation: ", tensors.status().message()));
    }
    const v1::EntropyParams& params = ctx.contract().entropy();
    const entropy::TuneSpace space = engine::TuneSpaceOf(params);
    entropy::TuneOptions options;  // one thread, like the engine (engine version 1)
    std::vector<entropy::TensorFrontier> frontiers;
    int64_t codable = 0, done = 0, dense_bytes = 0, weights = 0;
    double entropy_bits = 0;
    for (const auto& t : *tensors) codable += t.codable;
    for (const engine::SourceTensor& t : *tensors) {
      if (!t.codable) continue;
      if (ctx.Cancelled()) return absl::CancelledError("autotune cancelled");
      TAILOR_ASSIGN_OR_RETURN(entropy::QuantizedTensor q,
                              engine::StorageOf(t, params.weight_format()));
      TAILOR_ASSIGN_OR_RETURN(entropy::TensorFrontier f,
                              entropy::AutotuneTensor(t.name, q.view(), space, options));
      f.candidates.clear();  // the artifact carries the frontier; counts stay in the log
      dense_bytes += f.dense_bytes;
      weights += f.rows * f.cols;
      entropy_bits += f.entropy_bits_per_weight * static_cast<double>(f.rows * f.cols);
      frontiers.push_back(std::move(f));
      ++done;
      ctx.ReportProgress(static_cast<double>(done) / codable,
                         absl::StrCat("tuned ", t.name), done, codable)
          .IgnoreError();
    }
    const std::string format = engine::FormatName(params.weight_format());
    TAILOR_ASSIGN_OR_RETURN(
        v1::Artifact a, ctx.UploadArtifactBytes("entropy_frontiers", "frontiers.json",
                                                entropy::FrontiersToJson(frontiers, format)));
    AutotuneResult result;
    result.set_frontiers_digest(a.digest());
    result.set_weight_format(format);
    if (!source.digest.empty()) result.set_source_model_digest(source.digest);
    if (!source.path.empty()) result.set_source_model_path(source.path);
    result.set_tensors(static_cast<int64_t>(frontiers.size()));
    result.set_dense_bytes(dense_bytes);
    result.set_entropy_bits_per_weight(weights ? entropy_bits / weights : 0.0);
    result.set_autotune_seconds(NowSeconds() - start);
    result.set_device(config.device);
    v1::JobOutput output;
    SetDetail(output, result);
    TAILOR_RETURN_IF_ERROR(ctx.ReportProgress(
        1.0, absl::StrCat("tuned ", frontiers.size(), " tensors"), done, codable, {}, true));
    return output;
  };
}

namespace {

// Downloads the package artifact and unpacks it below the job's work dir; returns the dir.
absl::StatusOr<std::string> UnpackPackageArtifact(JobContext& ctx, const std::string& digest) {
  TAILOR_ASSIGN_OR_RETURN(std::string tar, Download(ctx, digest, "package.tar"));
  const std::string dir = absl::StrCat(ctx.work_dir(), "/package");
  if (absl::Status st = entropy::UnpackPackage(tar, dir); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("package artifact ", digest, " failed validation: ", st.message()));
  }
  return dir;
}

// The standard verify (measured, quality, budgets) of the package as served: the first 60%
// of the job's progress. The package-vs-twin figures need its latency, decode and weight
// memory, so a verify that measured none of them is an internal error.
absl::StatusOr<v1::JobOutput> VerifyAsServed(JobContext& ctx, const MlJobConfig& config,
                                             const std::string& digest, const std::string& dir) {
  auto progress = [&ctx](double f, const std::string& m, const std::map<std::string, double>& x) {
    return ctx.ReportProgress(0.6 * f, m, 0, 0, x).ok() && !ctx.Cancelled();
  };
  TAILOR_ASSIGN_OR_RETURN(v1::JobOutput output, RunVerify(ctx.contract(), dir, config, progress));
  output.set_model_source(absl::StrCat("package_digest ", digest));
  const v1::ModelCosts& measured = output.measured();
  if (!measured.has_latency_ms() || !measured.has_decode_ms() ||
      !measured.has_weight_memory_mib()) {
    return absl::InternalError(
        "verify measured no latency_ms, decode_ms or weight_memory_mib for the package");
  }
  return output;
}

// The source model the select job built the package from (its SelectResult detail).
absl::StatusOr<Source> SelectSourceOf(const v1::JobOutput& input) {
  Source source;
  if (std::optional<SelectResult> select = DetailOf<SelectResult>(input)) {
    source.digest = select->source_model_digest();
    source.path = select->source_model_path();
  }
  if (source.digest.empty() && source.path.empty()) {
    return absl::FailedPreconditionError("the select result names no source model");
  }
  return source;
}

// The dense twin: the source quantised with the same scheme, never coded. Two servings of
// it: as an uncoded package (the package's own kernels, dense GEMV where the package runs
// the fused one: the exact reference for greedy outputs) and as a plain model
// (torch::linear everywhere: the dense baseline for latency and memory).
struct DenseTwins {
  model::HybridConfig config;  // the package's, max_seq raised to the workload's positions
  std::unique_ptr<engine::Engine> plain;
  std::unique_ptr<engine::Engine> kernel;
};

absl::StatusOr<DenseTwins> LoadDenseTwins(JobContext& ctx, const v1::JobOutput& input,
                                          const std::string& dir,
                                          const engine::EngineOptions& options,
                                          const engine::Workload& w) {
  TAILOR_ASSIGN_OR_RETURN(Source source, SelectSourceOf(input));
  TAILOR_ASSIGN_OR_RETURN(std::string src_dir, SourceDir(ctx, source));
  TAILOR_ASSIGN_OR_RETURN(std::vector<engine::SourceTensor> tensors,
                          engine::ReadSourceTensors(src_dir));
  const v1::WeightFormat format = ctx.contract().entropy().weight_format();
  TAILOR_ASSIGN_OR_RETURN(model::TensorMap twin_state, engine::DenseTwin(tensors, format));
  DenseTwins twins;
  TAILOR_ASSIGN_OR_RETURN(twins.config, model::ReadHybridConfig(dir + "/config.json"));
  twins.config.max_seq = std::max(twins.config.max_seq, w.cache_positions());
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM lm, model::CreateHybridLM(twins.config, 0));
  TAILOR_RETURN_IF_ERROR(lm->LoadStateDict(twin_state, src_dir));
  twin_state.clear();
  TAILOR_ASSIGN_OR_RETURN(twins.plain, engine::Engine::Create(std::move(lm), options));
  TAILOR_ASSIGN_OR_RETURN(entropy::Package twin_package,
                          engine::DenseTwinPackage(src_dir, tensors, format));
  tensors.clear();
  TAILOR_ASSIGN_OR_RETURN(
      twins.kernel,
      engine::Engine::FromPackage(std::make_shared<const entropy::Package>(std::move(twin_package)),
                                  options, w.cache_positions()));
  return twins;
}

// How the package's greedy outputs compared with the dense twin's.
struct GreedyComparison {
  int64_t prompts = 0;
  int64_t tokens = 0;
  int64_t linear_mismatches = 0;  // prompts where the torch::linear twin decoded otherwise
};

// Greedy outputs on task prompts (eval split), one sequence at a time like decode. Any
// difference from the kernel twin fails the job: decoding must be lossless.
absl::StatusOr<GreedyComparison> CompareGreedyOutputs(JobContext& ctx, const MlJobConfig& config,
                                                      engine::Engine& pkg, DenseTwins& twins) {
  ctx.ReportProgress(0.65, "comparing greedy outputs with the dense twin").IgnoreError();
  const model::HybridConfig& hc = twins.config;
  const int per_suite = std::max(1, std::min(config.verify_task_samples, 8));
  tasks::Rng rng(ctx.contract().seed() ^ 0x5eedULL);
  GreedyComparison g;
  std::string mismatch;
  for (const auto& suite : tasks::AllSuites()) {
    for (int i = 0; i < per_suite && mismatch.empty(); ++i) {
      const tasks::Sample s = suite->Generate(rng, tasks::Split::kEval);
      const std::vector<tasks::Token> p = s.Prompt();
      std::vector<int64_t> ids(p.begin(), p.end());
      for (int64_t& id : ids) id = std::min<int64_t>(id, hc.vocab - 1);
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(s.Answer().size()) + 4,
                                          hc.max_seq - static_cast<int64_t>(ids.size()));
      if (n < 1) continue;
      at::Tensor prompt = torch::tensor(ids, at::kLong).unsqueeze(0);
      TAILOR_ASSIGN_OR_RETURN(at::Tensor a, pkg.Generate(prompt, n));
      TAILOR_ASSIGN_OR_RETURN(at::Tensor b, twins.kernel->Generate(prompt, n));
      TAILOR_ASSIGN_OR_RETURN(at::Tensor c, twins.plain->Generate(prompt, n));
      ++g.prompts;
      g.tokens += n;
      if (!a.equal(b)) mismatch = absl::StrCat(suite->name(), " prompt ", i);
      // torch::linear sums in another order than the GEMV kernels, so a near-tie could
      // legitimately flip; reported, not failed (docs/entropy.md "Exactness").
      if (!a.equal(c)) ++g.linear_mismatches;
    }
  }
  if (!mismatch.empty()) {
    return absl::DataLossError(absl::StrCat(
        "package greedy outputs differ from the dense twin on ", mismatch,
        ": decoding is not lossless"));
  }
  return g;
}

// End-to-end latency of the package against the plain dense twin (same engine path).
struct TwinLatency {
  engine::Measurement dense;       // the contract's request
  engine::Measurement package_b1;  // the contract's lengths at batch 1
  engine::Measurement dense_b1;
  int64_t fused_calls = 0;     // fused decode-GEMV calls in the package's batch-1 run
  bool fused_forward = false;  // the package's projections run the fused kernels
  double batch1_steps = 1;     // decode steps per batch-1 request
};

absl::StatusOr<TwinLatency> MeasureAgainstTwin(JobContext& ctx, const MlJobConfig& config,
                                               const engine::Workload& w, engine::Engine& pkg,
                                               engine::Engine& twin) {
  ctx.ReportProgress(0.75, "measuring the dense twin").IgnoreError();
  engine::MeasureOptions mo;
  mo.repetitions = config.verify_repetitions;
  mo.seed = ctx.contract().seed();
  TwinLatency l;
  TAILOR_ASSIGN_OR_RETURN(l.dense, twin.Measure(w, mo));
  // Batch-1 decode, where the fused decode-GEMV runs: the contract's lengths at batch 1,
  // package (fused kernels from the coded streams) vs the plain dense twin.
  ctx.ReportProgress(0.8, "measuring batch-1 decode, package vs dense twin").IgnoreError();
  engine::Workload w1 = w;
  w1.batch_size = 1;
  const engine::PackageLinear* linear = pkg.package_linear();
  const int64_t fused_before = linear != nullptr ? linear->counters().fused_gemv : 0;
  TAILOR_ASSIGN_OR_RETURN(l.package_b1, pkg.Measure(w1, mo));
  l.fused_calls = linear != nullptr ? linear->counters().fused_gemv - fused_before : 0;
  TAILOR_ASSIGN_OR_RETURN(l.dense_b1, twin.Measure(w1, mo));
  l.fused_forward = linear != nullptr;
  l.batch1_steps = static_cast<double>(std::max<int64_t>(1, w1.output_tokens - 1));
  return l;
}

// One tensor's batch-1 GEMV as served: fused decode-GEMV (coded) or dense GEMV (left dense).
struct TensorGemv {
  double package_us = 0;
  double dense_us = 0;  // the dense f32 GEMV the unpackaged model runs
  bool equal = true;    // coded: fused equals dense on the decoded form
};

absl::StatusOr<TensorGemv> MeasureTensorGemv(const entropy::LoadedTensor& t) {
  const int64_t r = t.info.rows(), c = t.info.cols();
  std::vector<float> x(c), y1(r), y2(r);
  for (int64_t k = 0; k < c; ++k) x[k] = std::sin(0.1f * static_cast<float>(k));
  TAILOR_ASSIGN_OR_RETURN(entropy::QuantizedTensor q, entropy::DecodeToQuantized(t));
  TAILOR_ASSIGN_OR_RETURN(std::vector<float> wf, entropy::Dequantize(q));
  const std::vector<uint8_t> f32(reinterpret_cast<const uint8_t*>(wf.data()),
                                 reinterpret_cast<const uint8_t*>(wf.data() + wf.size()));
  const entropy::TensorView dense_view{entropy::DType::kF32, r, c, f32};
  TensorGemv g;
  if (t.coded.has_value()) {
    TAILOR_RETURN_IF_ERROR(entropy::DenseGemv(q.view(), x.data(), q.scale_data(), y1.data()));
    TAILOR_RETURN_IF_ERROR(entropy::PackageGemv(t, x.data(), y2.data()));
    g.equal = std::memcmp(y1.data(), y2.data(), r * sizeof(float)) == 0;
  }
  g.package_us = MedianUs(5, [&] { (void)entropy::PackageGemv(t, x.data(), y2.data()); });
  g.dense_us =
      MedianUs(5, [&] { (void)entropy::DenseGemv(dense_view, x.data(), nullptr, y1.data()); });
  return g;
}

void FillTensorServing(const entropy::LoadedTensor& t, const TensorGemv& g, TensorServing& row) {
  const int64_t r = t.info.rows(), c = t.info.cols();
  row.set_name(t.info.name);
  row.set_dtype(entropy::DTypeName(t.info.dtype));
  row.set_storage(t.coded.has_value() ? "coded" : "dense");
  row.set_bits_per_weight(8.0 * t.info.bytes / static_cast<double>(r * c));
  row.set_entropy_bits_per_weight(t.info.entropy_bits_per_weight);
  row.set_bytes(t.info.resident_bytes());
  row.set_dense_bytes(t.info.dense_bytes);
  if (t.coded.has_value()) {
    row.set_config(absl::StrCat("k=", t.info.config.symbols_per_codeword, " L=",
                                t.info.config.table_log, " chunk=",
                                t.info.config.chunk_width));
  } else {
    row.set_config("dense");
  }
  row.set_frontier_points(static_cast<int64_t>(t.info.frontier.size()));
  row.set_gemv_us(g.package_us);
  row.set_dense_gemv_us(g.dense_us);
  row.set_fused_equals_dense(g.equal);
}

// The per-tensor GEMV measurements summed over the package's matrices.
struct GemvTotals {
  double fused_us = 0;
  double dense_us = 0;
  double entropy_bits = 0;
  int64_t weights = 0;
  int64_t coded = 0;
  bool fused_equal = true;
};

// Per tensor (a row in `e`): batch-1 GEMV as served against the dense f32 GEMV; a fused
// decode-GEMV that differs from the dense one on the decoded weights fails the job.
absl::StatusOr<GemvTotals> MeasureGemvPerTensor(JobContext& ctx, const entropy::Package& package,
                                                PackageServing& e) {
  ctx.ReportProgress(0.85, "measuring batch-1 GEMV per tensor").IgnoreError();
  GemvTotals s;
  for (const entropy::LoadedTensor& t : package.tensors) {
    if (t.info.shape.size() < 2) continue;
    TAILOR_ASSIGN_OR_RETURN(TensorGemv g, MeasureTensorGemv(t));
    if (t.coded.has_value()) {
      s.fused_equal &= g.equal;
      ++s.coded;
    }
    const int64_t weights = t.info.rows() * t.info.cols();
    s.fused_us += g.package_us;
    s.dense_us += g.dense_us;
    s.weights += weights;
    s.entropy_bits += t.info.entropy_bits_per_weight * static_cast<double>(weights);
    FillTensorServing(t, g, *e.add_tensors());
  }
  if (!s.fused_equal) {
    return absl::DataLossError(
        "the fused decode-GEMV differs from the dense GEMV on the decoded weights");
  }
  return s;
}

// Everything PackageServing reports besides the per-tensor rows.
struct ServingFigures {
  const entropy::Package& package;
  const v1::ModelCosts& measured;  // the standard verify's
  const GreedyComparison& greedy;
  const TwinLatency& latency;
  const GemvTotals& gemv;
};

void FillPackageServing(const ServingFigures& f, PackageServing& e) {
  const entropy::Package& package = f.package;
  const double resident_mib = static_cast<double>(package.resident_bytes()) / (1 << 20);
  const int64_t weights = f.gemv.weights;
  e.set_outputs_identical(true);
  e.set_outputs_identical_torch_linear(f.greedy.linear_mismatches == 0);
  e.set_prompts_differing_torch_linear(f.greedy.linear_mismatches);
  e.set_prompts_compared(f.greedy.prompts);
  e.set_tokens_compared(f.greedy.tokens);
  e.set_fused_equals_dense(f.gemv.fused_equal);
  e.set_coded_tensors(f.gemv.coded);
  e.set_weight_format(package.summary.weight_format);
  e.set_resident_bytes(package.resident_bytes());
  e.set_dense_bytes(package.dense_bytes());
  e.set_weights(weights);
  e.set_bits_per_weight(weights ? 8.0 * package.resident_bytes() / weights : 0.0);
  e.set_entropy_bits_per_weight(weights ? f.gemv.entropy_bits / weights : 0.0);
  e.set_gemv_batch1_us(f.gemv.fused_us);
  e.set_dense_gemv_batch1_us(f.gemv.dense_us);
  e.set_latency_ms(f.measured.latency_ms());
  e.set_dense_latency_ms(f.latency.dense.latency_ms);
  e.set_decode_ms(f.measured.decode_ms());
  e.set_dense_decode_ms(f.latency.dense.decode_ms);
  // The engine's own weight accounting: served projections at their coded size (measured
  // weight_memory_mib, which the standard verify already checked against the budget).
  e.set_served_weight_memory_mib(f.measured.weight_memory_mib());
  e.set_resident_weight_memory_mib(resident_mib);
  e.set_dense_weight_memory_mib(static_cast<double>(f.latency.dense.weight_bytes) / (1 << 20));
  e.set_fused_forward(f.latency.fused_forward);
  const engine::Measurement& pkg_b1 = f.latency.package_b1;
  const engine::Measurement& dense_b1 = f.latency.dense_b1;
  e.set_batch1_latency_ms(pkg_b1.latency_ms);
  e.set_dense_batch1_latency_ms(dense_b1.latency_ms);
  e.set_batch1_decode_ms(pkg_b1.decode_ms);
  e.set_dense_batch1_decode_ms(dense_b1.decode_ms);
  e.set_batch1_ms_per_token(pkg_b1.decode_ms / f.latency.batch1_steps);
  e.set_dense_batch1_ms_per_token(dense_b1.decode_ms / f.latency.batch1_steps);
  e.set_batch1_fused_gemv_calls(f.latency.fused_calls);
}

}  // namespace

bool HasPackageInput(const JobContext& ctx) { return PackageInput(ctx) != nullptr; }

absl::StatusOr<v1::JobOutput> RunPackageVerifyJob(JobContext& ctx, const MlJobConfig& config) {
  const v1::JobOutput* input = PackageInput(ctx);
  if (input == nullptr) return absl::FailedPreconditionError("no job input names a package");
  const std::string digest = input->package_digest();
  TAILOR_ASSIGN_OR_RETURN(std::string dir, UnpackPackageArtifact(ctx, digest));
  TAILOR_ASSIGN_OR_RETURN(v1::JobOutput output, VerifyAsServed(ctx, config, digest, dir));
  const v1::ModelCosts& measured = output.measured();

  TAILOR_ASSIGN_OR_RETURN(engine::EngineOptions options, EngineOptionsFor(ctx.contract(), config));
  const engine::Workload w = costmodel::WorkloadFromProto(ctx.contract().workload());
  absl::StatusOr<std::unique_ptr<engine::Engine>> pkg =
      engine::Engine::Load(dir, options, w.cache_positions());
  if (!pkg.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("package failed validation: ", pkg.status().message()));
  }
  const entropy::Package& package = *(*pkg)->package();
  TAILOR_ASSIGN_OR_RETURN(DenseTwins twins, LoadDenseTwins(ctx, *input, dir, options, w));

  TAILOR_ASSIGN_OR_RETURN(GreedyComparison greedy,
                          CompareGreedyOutputs(ctx, config, **pkg, twins));
  TAILOR_ASSIGN_OR_RETURN(TwinLatency latency,
                          MeasureAgainstTwin(ctx, config, w, **pkg, *twins.plain));
  PackageVerifyResult result;
  PackageServing& e = *result.mutable_entropy();
  TAILOR_ASSIGN_OR_RETURN(GemvTotals gemv, MeasureGemvPerTensor(ctx, package, e));
  FillPackageServing({package, measured, greedy, latency, gemv}, e);
  SetDetail(output, result);
  const std::string json = ProtoJson(output);
  TAILOR_RETURN_IF_ERROR(ctx.UploadArtifactBytes("verify", "verify.json", json).status());
  TAILOR_RETURN_IF_ERROR(ctx.ReportProgress(
      1.0, "package verified: greedy outputs identical", 0, 0,
      {{"latency_ms", measured.latency_ms()}, {"weight_memory_mib", measured.weight_memory_mib()}},
      /*final=*/true));
  return output;
}

void RegisterEntropyAgentJobs(AgentJobs& jobs) {
  if (!jobs.builtin_engine()) return;
  const MlJobConfig config = MlJobConfigOf(jobs.device(), jobs.options());
  jobs.Add(methods::jobs::kAutotune, MakeAutotuneHandler(config));
  jobs.AddVerifyVariant({"entropy-coded package", HasPackageInput,
                         [config](JobContext& ctx) { return RunPackageVerifyJob(ctx, config); }});
}

}  // namespace tailor::profiler
