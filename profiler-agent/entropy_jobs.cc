#include "profiler-agent/entropy_jobs.h"

#include <google/protobuf/util/json_util.h>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/struct_values.h"
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

namespace tailor::profiler {
namespace {

using ::tailor::struct_values::Num;
using ::tailor::struct_values::Str;
using ::tailor::struct_values::Json;
using ::tailor::struct_values::Bool;

using google::protobuf::Struct;
using google::protobuf::Value;

std::string InputField(const JobContext& ctx, const std::string& field) {
  for (const auto& [key, result] : ctx.inputs()) {
    const auto f = result.fields().find(field);
    if (f != result.fields().end() && f->second.has_string_value()) return f->second.string_value();
  }
  return "";
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
    const auto f = verify->second.fields().find("model_source");
    if (f != verify->second.fields().end() && f->second.has_string_value()) {
      const std::string s = f->second.string_value();
      const size_t at = s.find("model_digest ");
      if (at != std::string::npos) return Source{s.substr(at + 13), ""};
    }
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
  return [config](JobContext& ctx) -> absl::StatusOr<Struct> {
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
    Struct result;
    auto& f = *result.mutable_fields();
    f["frontiers_digest"] = Str(a.digest());
    f["weight_format"] = Str(format);
    if (!source.digest.empty()) f["source_model_digest"] = Str(source.digest);
    if (!source.path.empty()) f["source_model_path"] = Str(source.path);
    f["tensors"] = Num(static_cast<double>(frontiers.size()));
    f["dense_bytes"] = Num(static_cast<double>(dense_bytes));
    f["entropy_bits_per_weight"] = Num(weights ? entropy_bits / weights : 0.0);
    f["autotune_seconds"] = Num(NowSeconds() - start);
    f["device"] = Str(config.device);
    TAILOR_RETURN_IF_ERROR(ctx.ReportProgress(
        1.0, absl::StrCat("tuned ", frontiers.size(), " tensors"), done, codable, {}, true));
    return result;
  };
}

bool HasPackageInput(const JobContext& ctx) { return !InputField(ctx, "package_digest").empty(); }

absl::StatusOr<Struct> RunPackageVerifyJob(JobContext& ctx, const MlJobConfig& config) {
  const std::string digest = InputField(ctx, "package_digest");
  TAILOR_ASSIGN_OR_RETURN(std::string tar, Download(ctx, digest, "package.tar"));
  const std::string dir = absl::StrCat(ctx.work_dir(), "/package");
  if (absl::Status st = entropy::UnpackPackage(tar, dir); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("package artifact ", digest, " failed validation: ", st.message()));
  }
  auto progress = [&ctx](double f, const std::string& m, const std::map<std::string, double>& x) {
    return ctx.ReportProgress(0.6 * f, m, 0, 0, x).ok() && !ctx.Cancelled();
  };
  // The standard verify (measured, quality, budgets) of the package as served.
  TAILOR_ASSIGN_OR_RETURN(Struct result, RunVerify(ctx.contract(), dir, config, progress));
  auto& fields = *result.mutable_fields();
  fields["model_source"] = Str(absl::StrCat("package_digest ", digest));

  TAILOR_ASSIGN_OR_RETURN(engine::EngineOptions options, EngineOptionsFor(ctx.contract(), config));
  const engine::Workload w = costmodel::WorkloadFromProto(ctx.contract().workload());
  absl::StatusOr<std::unique_ptr<engine::Engine>> pkg =
      engine::Engine::Load(dir, options, w.cache_positions());
  if (!pkg.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("package failed validation: ", pkg.status().message()));
  }
  const entropy::Package& package = *(*pkg)->package();

  // The dense twin: the source quantised with the same scheme, never coded. Two servings of
  // it: as an uncoded package (the package's own kernels, dense GEMV where the package runs
  // the fused one: the exact reference for greedy outputs) and as a plain model
  // (torch::linear everywhere: the dense baseline for latency and memory).
  Source source;
  source.digest = InputField(ctx, "source_model_digest");
  source.path = InputField(ctx, "source_model_path");
  if (source.digest.empty() && source.path.empty()) {
    return absl::FailedPreconditionError("the select result names no source model");
  }
  TAILOR_ASSIGN_OR_RETURN(std::string src_dir, SourceDir(ctx, source));
  TAILOR_ASSIGN_OR_RETURN(std::vector<engine::SourceTensor> tensors,
                          engine::ReadSourceTensors(src_dir));
  TAILOR_ASSIGN_OR_RETURN(model::TensorMap twin_state,
                          engine::DenseTwin(tensors, ctx.contract().entropy().weight_format()));
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig hc, model::ReadHybridConfig(dir + "/config.json"));
  hc.max_seq = std::max(hc.max_seq, w.cache_positions());
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM lm, model::CreateHybridLM(hc, 0));
  TAILOR_RETURN_IF_ERROR(lm->LoadStateDict(twin_state, src_dir));
  twin_state.clear();
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> twin,
                          engine::Engine::Create(std::move(lm), options));
  TAILOR_ASSIGN_OR_RETURN(
      entropy::Package twin_package,
      engine::DenseTwinPackage(src_dir, tensors, ctx.contract().entropy().weight_format()));
  tensors.clear();
  TAILOR_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::Engine> kernel_twin,
      engine::Engine::FromPackage(std::make_shared<const entropy::Package>(std::move(twin_package)),
                                  options, w.cache_positions()));

  // Greedy outputs on task prompts (eval split), one sequence at a time like decode.
  ctx.ReportProgress(0.65, "comparing greedy outputs with the dense twin").IgnoreError();
  const uint64_t seed = ctx.contract().has_seed() ? ctx.contract().seed() : 1;
  const int per_suite = std::max(1, std::min(config.verify_task_samples, 8));
  tasks::Rng rng(seed ^ 0x5eedULL);
  int64_t prompts = 0, compared = 0, linear_mismatches = 0;
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
      TAILOR_ASSIGN_OR_RETURN(at::Tensor a, (*pkg)->Generate(prompt, n));
      TAILOR_ASSIGN_OR_RETURN(at::Tensor b, kernel_twin->Generate(prompt, n));
      TAILOR_ASSIGN_OR_RETURN(at::Tensor c, twin->Generate(prompt, n));
      ++prompts;
      compared += n;
      if (!a.equal(b)) mismatch = absl::StrCat(suite->name(), " prompt ", i);
      // torch::linear sums in another order than the GEMV kernels, so a near-tie could
      // legitimately flip; reported, not failed (docs/entropy.md "Exactness").
      if (!a.equal(c)) ++linear_mismatches;
    }
  }
  if (!mismatch.empty()) {
    return absl::DataLossError(absl::StrCat(
        "package greedy outputs differ from the dense twin on ", mismatch,
        ": decoding is not lossless"));
  }

  // End-to-end latency of the contract's request, package vs dense twin (same engine path).
  ctx.ReportProgress(0.75, "measuring the dense twin").IgnoreError();
  engine::MeasureOptions mo;
  mo.repetitions = config.verify_repetitions;
  mo.seed = seed;
  TAILOR_ASSIGN_OR_RETURN(engine::Measurement dense_m, twin->Measure(w, mo));
  // Batch-1 decode, where the fused decode-GEMV runs: the contract's lengths at batch 1,
  // package (fused kernels from the coded streams) vs the plain dense twin.
  ctx.ReportProgress(0.8, "measuring batch-1 decode, package vs dense twin").IgnoreError();
  engine::Workload w1 = w;
  w1.batch_size = 1;
  const engine::PackageLinear* linear = (*pkg)->package_linear();
  const int64_t fused_before = linear != nullptr ? linear->counters().fused_gemv : 0;
  TAILOR_ASSIGN_OR_RETURN(engine::Measurement pkg_b1, (*pkg)->Measure(w1, mo));
  const int64_t fused_calls = linear != nullptr ? linear->counters().fused_gemv - fused_before : 0;
  TAILOR_ASSIGN_OR_RETURN(engine::Measurement dense_b1, twin->Measure(w1, mo));

  // Per tensor: fused decode-GEMV (coded) or dense GEMV (left dense) at batch 1, against
  // the dense f32 GEMV the unpackaged model runs; fused must equal dense on the decoded form.
  ctx.ReportProgress(0.85, "measuring batch-1 GEMV per tensor").IgnoreError();
  Struct ent;
  auto& e = *ent.mutable_fields();
  auto& rows = *e["tensors"].mutable_list_value();
  double fused_total = 0, dense_total = 0, entropy_bits = 0;
  int64_t weights = 0, coded = 0;
  bool fused_equal = true;
  for (const entropy::LoadedTensor& t : package.tensors) {
    const int64_t r = t.info.rows(), c = t.info.cols();
    if (t.info.shape.size() < 2) continue;
    std::vector<float> x(c), y1(r), y2(r);
    for (int64_t k = 0; k < c; ++k) x[k] = std::sin(0.1f * static_cast<float>(k));
    TAILOR_ASSIGN_OR_RETURN(entropy::QuantizedTensor q, entropy::DecodeToQuantized(t));
    TAILOR_ASSIGN_OR_RETURN(std::vector<float> wf, entropy::Dequantize(q));
    const std::vector<uint8_t> f32(reinterpret_cast<const uint8_t*>(wf.data()),
                                   reinterpret_cast<const uint8_t*>(wf.data() + wf.size()));
    const entropy::TensorView dense_view{entropy::DType::kF32, r, c, f32};
    bool equal = true;
    if (t.coded.has_value()) {
      TAILOR_RETURN_IF_ERROR(entropy::DenseGemv(q.view(), x.data(), q.scale_data(), y1.data()));
      TAILOR_RETURN_IF_ERROR(entropy::PackageGemv(t, x.data(), y2.data()));
      equal = std::memcmp(y1.data(), y2.data(), r * sizeof(float)) == 0;
      fused_equal &= equal;
      ++coded;
    }
    const double pkg_us = MedianUs(5, [&] { (void)entropy::PackageGemv(t, x.data(), y2.data()); });
    const double dense_us =
        MedianUs(5, [&] { (void)entropy::DenseGemv(dense_view, x.data(), nullptr, y1.data()); });
    fused_total += pkg_us;
    dense_total += dense_us;
    weights += r * c;
    entropy_bits += t.info.entropy_bits_per_weight * static_cast<double>(r * c);
    Struct row;
    auto& rf = *row.mutable_fields();
    rf["name"] = Str(t.info.name);
    rf["dtype"] = Str(entropy::DTypeName(t.info.dtype));
    rf["storage"] = Str(t.coded.has_value() ? "coded" : "dense");
    rf["bits_per_weight"] = Num(8.0 * t.info.bytes / static_cast<double>(r * c));
    rf["entropy_bits_per_weight"] = Num(t.info.entropy_bits_per_weight);
    rf["bytes"] = Num(static_cast<double>(t.info.resident_bytes()));
    rf["dense_bytes"] = Num(static_cast<double>(t.info.dense_bytes));
    if (t.coded.has_value()) {
      rf["config"] = Str(absl::StrCat("k=", t.info.config.symbols_per_codeword, " L=",
                                      t.info.config.table_log, " chunk=",
                                      t.info.config.chunk_width));
    } else {
      rf["config"] = Str("dense");
    }
    rf["frontier_points"] = Num(static_cast<double>(t.info.frontier.size()));
    rf["gemv_us"] = Num(pkg_us);
    rf["dense_gemv_us"] = Num(dense_us);
    rf["fused_equals_dense"] = Bool(equal);
    *rows.add_values()->mutable_struct_value() = std::move(row);
  }
  if (!fused_equal) {
    return absl::DataLossError("the fused decode-GEMV differs from the dense GEMV on the decoded weights");
  }
  const double resident_mib = static_cast<double>(package.resident_bytes()) / (1 << 20);
  e["outputs_identical"] = Bool(true);
  e["outputs_identical_torch_linear"] = Bool(linear_mismatches == 0);
  e["prompts_differing_torch_linear"] = Num(static_cast<double>(linear_mismatches));
  e["prompts_compared"] = Num(static_cast<double>(prompts));
  e["tokens_compared"] = Num(static_cast<double>(compared));
  e["fused_equals_dense"] = Bool(fused_equal);
  e["coded_tensors"] = Num(static_cast<double>(coded));
  e["weight_format"] = Str(package.summary.weight_format);
  e["resident_bytes"] = Num(static_cast<double>(package.resident_bytes()));
  e["dense_bytes"] = Num(static_cast<double>(package.dense_bytes()));
  e["weights"] = Num(static_cast<double>(weights));
  e["bits_per_weight"] = Num(weights ? 8.0 * package.resident_bytes() / weights : 0.0);
  e["entropy_bits_per_weight"] = Num(weights ? entropy_bits / weights : 0.0);
  e["gemv_batch1_us"] = Num(fused_total);
  e["dense_gemv_batch1_us"] = Num(dense_total);
  const auto& measured = fields["measured"].struct_value().fields();
  e["latency_ms"] = measured.at("latency_ms");
  e["dense_latency_ms"] = Num(dense_m.latency_ms);
  e["decode_ms"] = measured.at("decode_ms");
  e["dense_decode_ms"] = Num(dense_m.decode_ms);
  // The engine's own weight accounting: served projections at their coded size (measured
  // weight_memory_mib, which the standard verify already checked against the budget).
  e["served_weight_memory_mib"] = measured.at("weight_memory_mib");
  e["resident_weight_memory_mib"] = Num(resident_mib);
  e["dense_weight_memory_mib"] = Num(static_cast<double>(dense_m.weight_bytes) / (1 << 20));
  e["fused_forward"] = Bool(linear != nullptr);
  e["batch1_latency_ms"] = Num(pkg_b1.latency_ms);
  e["dense_batch1_latency_ms"] = Num(dense_b1.latency_ms);
  e["batch1_decode_ms"] = Num(pkg_b1.decode_ms);
  e["dense_batch1_decode_ms"] = Num(dense_b1.decode_ms);
  const double steps = static_cast<double>(std::max<int64_t>(1, w1.output_tokens - 1));
  e["batch1_ms_per_token"] = Num(pkg_b1.decode_ms / steps);
  e["dense_batch1_ms_per_token"] = Num(dense_b1.decode_ms / steps);
  e["batch1_fused_gemv_calls"] = Num(static_cast<double>(fused_calls));
  fields["entropy"].mutable_struct_value()->Swap(&ent);
  TAILOR_ASSIGN_OR_RETURN(std::string json, Json(result));
  TAILOR_RETURN_IF_ERROR(ctx.UploadArtifactBytes("verify", "verify.json", json).status());
  TAILOR_RETURN_IF_ERROR(ctx.ReportProgress(
      1.0, "package verified: greedy outputs identical", 0, 0,
      {{"latency_ms", measured.at("latency_ms").number_value()},
       {"weight_memory_mib", measured.at("weight_memory_mib").number_value()}},
      /*final=*/true));
  return result;
}

}  // namespace tailor::profiler
