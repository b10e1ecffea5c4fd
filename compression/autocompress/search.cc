#include "compression/autocompress/search.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "compression/autocompress/penalty.h"
#include "compression/autocompress/supernet.h"
#include "compression/model/config.h"

namespace tailor::autocompress {
namespace {

absl::Status FromTorch(const c10::Error& e, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
}

// Restores requires_grad of the supernet's parameters when a router-only search ends, so
// freezing them (to skip their gradients) does not leak into the caller's model.
class FreezeGuard {
 public:
  FreezeGuard(model::HybridLM& m, bool freeze) {
    if (!freeze) return;
    for (auto& p : m->parameters()) {
      params_.push_back(p);
      flags_.push_back(p.requires_grad());
      p.requires_grad_(false);
    }
  }
  ~FreezeGuard() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].requires_grad_(flags_[i]);
  }

 private:
  std::vector<at::Tensor> params_;
  std::vector<bool> flags_;
};

namespace fs = std::filesystem;

constexpr char kMetaFile[] = "search.meta";
constexpr char kRouterFile[] = "router.pt";
constexpr char kSupernetFile[] = "supernet.pt";
constexpr char kPackMagic[] = "TAILOR-SEARCH-CHECKPOINT 1\n";

// The committed checkpoint named by the meta file.
struct Meta {
  std::string digest;
  int64_t step = 0;
  std::string state;  // subdirectory, "step-N"
};

// nullopt when there is no meta file; INVALID_ARGUMENT (naming the file) when it is garbled,
// which only a foreign writer can cause: it is always replaced atomically.
absl::StatusOr<std::optional<Meta>> ReadMeta(const std::string& dir) {
  const fs::path path = fs::path(dir) / kMetaFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<Meta>();
  TAILOR_ASSIGN_OR_RETURN(std::string text, model::ReadFileToString(path.string()));
  Meta m;
  bool has_step = false;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (kv.first == "digest") m.digest = kv.second;
    if (kv.first == "state") m.state = kv.second;
    if (kv.first == "step") has_step = absl::SimpleAtoi(kv.second, &m.step);
  }
  if (m.digest.empty() || m.state.empty() || !has_step || m.step < 0 ||
      m.state.find('/') != std::string::npos || m.state.find("..") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a search checkpoint"));
  }
  return std::optional<Meta>(std::move(m));
}

// What a checkpoint holds, as live objects of the running search.
struct Trainables {
  ArchRouter& router;
  model::HybridLM& supernet;
  torch::optim::Adam& router_opt;
  torch::optim::Adam* net_opt;  // null: supernet frozen, nothing of it is saved
  at::Generator& gen;
  at::Device device;  // the supernet's
  // The last step's metrics, so that resuming a finished search still reports them.
  double kd_loss = 0.0;
  double penalty = 0.0;
};

// Parameters by position ("p0", "p1", ...): the digest already guarantees the same modules,
// and positional keys avoid the dots of parameter names, which archive keys do not take.
void WriteParams(torch::serialize::OutputArchive& ar, const std::vector<at::Tensor>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    ar.write(absl::StrCat("p", i), params[i].detach());
  }
}

absl::Status ReadParams(torch::serialize::InputArchive& ar, std::vector<at::Tensor> params,
                        absl::string_view what) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor t;
    if (!ar.try_read(absl::StrCat("p", i), t) || t.sizes() != params[i].sizes()) {
      return absl::DataLossError(absl::StrCat(what, ": parameter ", i, " missing or reshaped"));
    }
    params[i].copy_(t);
  }
  return absl::OkStatus();
}

absl::Status SaveCheckpoint(const std::string& dir, const std::string& digest, int64_t step,
                            Trainables& t) {
  const std::string name = absl::StrCat("step-", step);
  const fs::path final_dir = fs::path(dir) / name;
  const fs::path tmp = fs::path(dir) / absl::StrCat(name, ".tmp");
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("checkpoint: cannot create ", tmp.string()));
  {
    torch::serialize::OutputArchive ar;
    WriteParams(ar, t.router->parameters());
    torch::serialize::OutputArchive opt;
    t.router_opt.save(opt);
    ar.write("router_opt", opt);
    ar.write("gumbel_state", t.gen.get_state());
    ar.write("step", torch::tensor(step, torch::kLong));
    ar.write("metrics", torch::tensor({t.kd_loss, t.penalty}, torch::kFloat64));
    ar.save_to((tmp / kRouterFile).string());
  }
  if (t.net_opt != nullptr) {
    torch::serialize::OutputArchive ar;
    WriteParams(ar, t.supernet->parameters());
    torch::serialize::OutputArchive opt;
    t.net_opt->save(opt);
    ar.write("supernet_opt", opt);
    ar.save_to((tmp / kSupernetFile).string());
  }
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("checkpoint: cannot rename ", tmp.string(), ": ", ec.message()));
  }
  // The commit point: until this rename the previous checkpoint is the valid one.
  TAILOR_RETURN_IF_ERROR(model::WriteFileAtomically(
      (fs::path(dir) / kMetaFile).string(),
      absl::StrCat("digest=", digest, "\nstep=", step, "\nstate=", name, "\n")));
  // Older states are garbage now (best effort).
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0 && n != name) fs::remove_all(e.path(), ec);
  }
  return absl::OkStatus();
}

absl::Status LoadCheckpoint(const std::string& dir, const Meta& meta, Trainables& t) {
  const fs::path state = fs::path(dir) / meta.state;
  torch::serialize::InputArchive ar;
  ar.load_from((state / kRouterFile).string(), torch::Device(torch::kCPU));
  TAILOR_RETURN_IF_ERROR(ReadParams(ar, t.router->parameters(), "checkpoint router"));
  torch::serialize::InputArchive opt;
  ar.read("router_opt", opt);
  t.router_opt.load(opt);
  at::Tensor gen_state, step;
  ar.read("gumbel_state", gen_state);
  ar.read("step", step);
  if (step.item<int64_t>() != meta.step) {
    return absl::DataLossError(absl::StrCat(state.string(), ": holds step ", step.item<int64_t>(),
                                            ", the meta file says ", meta.step));
  }
  t.gen.set_state(gen_state);
  at::Tensor metrics;
  ar.read("metrics", metrics);
  t.kd_loss = metrics[0].item<double>();
  t.penalty = metrics[1].item<double>();
  if (t.net_opt != nullptr) {
    torch::serialize::InputArchive net;
    net.load_from((state / kSupernetFile).string(), t.device);
    TAILOR_RETURN_IF_ERROR(ReadParams(net, t.supernet->parameters(), "checkpoint supernet"));
    torch::serialize::InputArchive nopt;
    net.read("supernet_opt", nopt);
    t.net_opt->load(nopt);
  }
  return absl::OkStatus();
}

// The argument checks of RunSearch, before anything is built.
absl::Status ValidateSearchArgs(model::HybridLM& parent, model::HybridLM& supernet,
                                const BatchSource& batches, const CostPredictor& cost,
                                const SearchOptions& options) {
  if (parent->config() != supernet->config()) {
    return absl::InvalidArgumentError("RunSearch: parent and supernet configs differ");
  }
  if (options.samples < 1 || options.schedule.steps < 1) {
    return absl::InvalidArgumentError("RunSearch: samples and steps must be >= 1");
  }
  if (options.global_batch < 0 || options.row_offset < 0 || options.checkpoint_every < 0) {
    return absl::InvalidArgumentError(
        "RunSearch: global_batch, row_offset and checkpoint_every must be >= 0");
  }
  if (!batches || !cost) return absl::InvalidArgumentError("RunSearch: missing callback");
  return absl::OkStatus();
}

// Whether `decision` ends the search early: converged, and accepted by the caller.
bool AcceptsConvergence(const SearchOptions& options, const ExtractionDecision& decision) {
  return options.stop_when_converged && decision.converged &&
         (!options.accept_extraction || options.accept_extraction(decision));
}

// Restores this search's committed checkpoint (if any) into `t` and `result`, and returns the
// first step to run. A checkpoint of another search (other digest) is noted and ignored.
absl::StatusOr<int64_t> ResumeSearch(const SearchSpace& space, const SearchOptions& options,
                                     const std::string& digest, Trainables& t,
                                     SearchResult& result) {
  int64_t first_step = 0;
  if (!options.checkpoint_dir.empty()) {
    absl::StatusOr<std::optional<Meta>> meta = ReadMeta(options.checkpoint_dir);
    if (!meta.ok()) return meta.status();
    if (meta->has_value() && (*meta)->digest != digest) {
      result.ignored_foreign_checkpoint = true;
    } else if (meta->has_value()) {
      TAILOR_RETURN_IF_ERROR(LoadCheckpoint(options.checkpoint_dir, **meta, t));
      first_step = (*meta)->step;
      result.resumed_from = first_step;
      result.steps_run = first_step;
      result.kd_loss = t.kd_loss;
      result.penalty = t.penalty;
    }
  }
  // A checkpoint written when the search converged: nothing is left to run.
  if (first_step > 0 && options.stop_when_converged) {
    torch::NoGradGuard no_grad;
    TAILOR_ASSIGN_OR_RETURN(ExtractionDecision d, DecideExtraction(space, t.router->Probabilities(),
                                                                   options.extract_threshold));
    if (AcceptsConvergence(options, d)) first_step = options.schedule.steps;
  }
  return first_step;
}

// What every search step reads: the inputs of RunSearch and the live training state.
struct SearchStep {
  model::HybridLM& parent;
  const SearchSpace& space;
  const BatchSource& batches;
  const CostPredictor& cost;
  const Budgets& budgets;
  const SearchOptions& options;
  const SearchHooks& hooks;
  Trainables& t;
  const std::vector<at::Tensor>& trained;  // for the gradient hook
};

// The batch of `step`, checked to hold this rank's rows of the global batch, on `device`.
// Sets `global` to the global batch size.
absl::StatusOr<at::Tensor> StepBatch(const BatchSource& batches, const SearchOptions& options,
                                     int64_t step, const at::Device& device, int64_t& global) {
  TAILOR_ASSIGN_OR_RETURN(at::Tensor tokens, batches(step));
  if (tokens.dim() != 2 || tokens.size(0) < 1) {
    return absl::InvalidArgumentError(absl::StrCat("batch of step ", step, ": want [B, T]"));
  }
  const int64_t b = tokens.size(0);
  global = options.global_batch > 0 ? options.global_batch : b;
  if (options.row_offset + b > global) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of step ", step, ": rows [", options.row_offset, ", ",
                     options.row_offset + b, ") exceed the global batch of ", global));
  }
  return tokens.to(device);
}

// samples[s][a]: architecture s's soft choice on axis a. Noise is drawn on the CPU
// generator so runs are reproducible whatever the device, and every rank draws all S
// architectures (the same ones) whichever rows it holds.
std::vector<std::vector<at::Tensor>> SampleArchitectures(ArchRouter& router,
                                                         const GumbelSchedule& schedule,
                                                         int64_t step, int64_t s_count,
                                                         at::Generator& gen) {
  std::vector<at::Tensor> logits = router->Forward();
  std::vector<std::vector<at::Tensor>> samples(s_count);
  for (int64_t s = 0; s < s_count; ++s) {
    for (const at::Tensor& z : logits) {
      samples[s].push_back(SampleGumbelSoftmax(z, schedule, step, gen));
    }
  }
  return samples;
}

// The supernet mask of this rank's `b` rows, each row masked by its sampled architecture.
absl::StatusOr<model::ArchMask> RowMask(const model::HybridConfig& config,
                                        const SearchSpace& space,
                                        const std::vector<std::vector<at::Tensor>>& samples,
                                        int64_t row_offset, int64_t b, int64_t global,
                                        const at::Device& device) {
  const int64_t s_count = static_cast<int64_t>(samples.size());
  // Even split over the GLOBAL batch: global row i trains architecture i * S / G.
  at::Tensor arch_of_row = torch::arange(row_offset, row_offset + b, torch::kLong)
                               .mul(s_count)
                               .div(global, "floor");
  std::vector<at::Tensor> rows;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    std::vector<at::Tensor> per_sample;
    for (int64_t s = 0; s < s_count; ++s) per_sample.push_back(samples[s][a]);
    rows.push_back(torch::stack(per_sample).index_select(0, arch_of_row).to(device));
  }
  return SoftArchMask(config, space, rows);
}

// KL(parent || masked supernet) on `tokens`; only the supernet side carries gradients.
absl::StatusOr<at::Tensor> MaskedKdLoss(model::HybridLM& parent, model::HybridLM& supernet,
                                        const at::Tensor& tokens, const model::ArchMask& mask) {
  at::Tensor teacher;
  {
    torch::NoGradGuard no_grad;
    TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput t, parent->Forward(tokens));
    teacher = t.logits;
  }
  model::ForwardOptions fwd;
  fwd.mask = &mask;
  TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput student, supernet->Forward(tokens, fwd));
  return ForwardKl(teacher, student.logits);
}

// The budget penalty averaged over the sampled architectures, with the options of `like`.
absl::StatusOr<at::Tensor> MeanPenalty(const CostPredictor& cost, const Budgets& budgets,
                                       double delta,
                                       const std::vector<std::vector<at::Tensor>>& samples,
                                       const at::TensorOptions& like) {
  at::Tensor penalty = torch::zeros({}, like);
  for (const std::vector<at::Tensor>& sample : samples) {
    TAILOR_ASSIGN_OR_RETURN(CostPrediction c, cost(sample));
    TAILOR_ASSIGN_OR_RETURN(at::Tensor p, BudgetLoss(c, budgets, delta));
    penalty = penalty + p.to(like);
  }
  return penalty / static_cast<double>(samples.size());
}

// Backward, the gradient hook (e.g. averaging over ranks), then both optimisers' steps.
absl::Status UpdateWeights(const at::Tensor& loss, Trainables& t, const SearchHooks& hooks,
                           const std::vector<at::Tensor>& trained) {
  t.router_opt.zero_grad();
  if (t.net_opt) t.net_opt->zero_grad();
  loss.backward();
  if (hooks.after_backward) TAILOR_RETURN_IF_ERROR(hooks.after_backward(trained));
  t.router_opt.step();
  if (t.net_opt) t.net_opt->step();
  return absl::OkStatus();
}

// The step's report: the KD loss averaged over ranks and the router's noise-free decision.
absl::StatusOr<StepReport> MakeStepReport(const SearchStep& s, int64_t step, const at::Tensor& kd,
                                          const at::Tensor& penalty) {
  at::Tensor kd_value = kd.detach().to(torch::kCPU, torch::kFloat64).reshape({1});
  if (s.hooks.reduce_mean) TAILOR_RETURN_IF_ERROR(s.hooks.reduce_mean(kd_value));

  StepReport report;
  report.step = step;
  report.kd_loss = kd_value.item<double>();
  report.penalty = penalty.item<double>();
  report.logit_scale = s.options.schedule.LogitScale(step);
  report.temperature = s.options.schedule.Temperature(step);
  {
    torch::NoGradGuard no_grad;
    TAILOR_ASSIGN_OR_RETURN(report.decision, DecideExtraction(s.space, s.t.router->Probabilities(),
                                                              s.options.extract_threshold));
  }
  return report;
}

// One search step: sample S architectures, train on KD + alpha * budget penalty, report.
absl::StatusOr<StepReport> TrainStep(const SearchStep& s, int64_t step) {
  const SearchOptions& options = s.options;
  int64_t global = 0;
  TAILOR_ASSIGN_OR_RETURN(at::Tensor tokens,
                          StepBatch(s.batches, options, step, s.t.device, global));
  const int64_t s_count = std::min(options.samples, global);
  const std::vector<std::vector<at::Tensor>> samples =
      SampleArchitectures(s.t.router, options.schedule, step, s_count, s.t.gen);
  TAILOR_ASSIGN_OR_RETURN(model::ArchMask mask,
                          RowMask(s.parent->config(), s.space, samples, options.row_offset,
                                  tokens.size(0), global, s.t.device));
  TAILOR_ASSIGN_OR_RETURN(at::Tensor kd, MaskedKdLoss(s.parent, s.t.supernet, tokens, mask));
  TAILOR_ASSIGN_OR_RETURN(at::Tensor penalty,
                          MeanPenalty(s.cost, s.budgets, options.delta, samples, kd.options()));
  at::Tensor loss = kd + options.alpha * penalty;
  TAILOR_RETURN_IF_ERROR(UpdateWeights(loss, s.t, s.hooks, s.trained));
  return MakeStepReport(s, step, kd, penalty);
}

// The step's outcome becomes the result so far, and the metrics the next checkpoint keeps.
void RecordStep(const StepReport& report, SearchResult& result, Trainables& t) {
  result.decision = report.decision;
  result.steps_run = report.step + 1;
  result.kd_loss = report.kd_loss;
  result.penalty = report.penalty;
  t.kd_loss = report.kd_loss;
  t.penalty = report.penalty;
}

// The router's final distributions; the decision from them when no step ran in this call.
absl::Status FinishResult(const SearchSpace& space, ArchRouter& router,
                          const SearchOptions& options, SearchResult& result) {
  torch::NoGradGuard no_grad;
  for (const at::Tensor& p : router->Probabilities()) result.probabilities.push_back(p.detach());
  if (result.decision.indices.empty()) {
    TAILOR_ASSIGN_OR_RETURN(result.decision, DecideExtraction(space, result.probabilities,
                                                              options.extract_threshold));
  }
  return absl::OkStatus();
}

}  // namespace

at::Tensor ForwardKl(const at::Tensor& teacher_logits, const at::Tensor& student_logits) {
  at::Tensor log_p = torch::log_softmax(teacher_logits, -1);
  at::Tensor log_q = torch::log_softmax(student_logits, -1);
  at::Tensor kl = (log_p.exp() * (log_p - log_q)).sum(-1);
  return kl.mean();
}

absl::StatusOr<at::Tensor> BudgetLoss(const CostPrediction& cost, const Budgets& budgets,
                                      double delta) {
  at::Tensor total;
  auto add = [&](const at::Tensor& rho, bool slack) {
    at::Tensor p = (slack ? BudgetPenalty(rho, delta) : torch::relu(rho - 1.0)).sum();
    total = total.defined() ? total + p : p;
  };
  auto need = [](const at::Tensor& t, const char* what) -> absl::Status {
    if (!t.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a ", what, " budget is set but the cost predictor gave no ", what));
    }
    return absl::OkStatus();
  };
  if (budgets.latency_ms.has_value()) {
    TAILOR_RETURN_IF_ERROR(need(cost.latency_ms, "latency"));
    add(cost.latency_ms / *budgets.latency_ms, budgets.slack_latency);
  }
  if (budgets.memory_mib.has_value()) {
    TAILOR_RETURN_IF_ERROR(need(cost.memory_mib, "memory"));
    add(cost.memory_mib / *budgets.memory_mib, budgets.slack_memory);
  }
  if (budgets.throughput.has_value()) {
    TAILOR_RETURN_IF_ERROR(need(cost.throughput, "throughput"));
    add(*budgets.throughput / cost.throughput, budgets.slack_throughput);
  }
  if (!total.defined()) total = torch::zeros({});
  return total;
}

absl::StatusOr<SearchResult> RunSearch(model::HybridLM& parent, model::HybridLM& supernet,
                                       const SearchSpace& space, ArchRouter& router,
                                       const BatchSource& batches, const CostPredictor& cost,
                                       const Budgets& budgets, const SearchOptions& options,
                                       const ProgressCallback& progress, const SearchHooks& hooks) {
  TAILOR_RETURN_IF_ERROR(ValidateSearchArgs(parent, supernet, batches, cost, options));
  const std::string digest = SearchDigest(parent->config(), space, budgets, options);
  SearchResult result;
  try {
    auto router_opt = MakeRouterOptimizer(router, options.router);
    std::unique_ptr<torch::optim::Adam> net_opt;
    if (options.supernet_lr > 0) {
      net_opt = std::make_unique<torch::optim::Adam>(
          supernet->parameters(), torch::optim::AdamOptions(options.supernet_lr));
    }
    FreezeGuard freeze(supernet, net_opt == nullptr);
    at::Generator gen = at::detail::createCPUGenerator(options.seed);
    const at::Device device = supernet->parameters().empty()
                                  ? at::Device(torch::kCPU)
                                  : supernet->parameters().front().device();
    Trainables trainables{router, supernet, *router_opt, net_opt.get(), gen, device};
    TAILOR_ASSIGN_OR_RETURN(const int64_t first_step,
                            ResumeSearch(space, options, digest, trainables, result));
    const bool checkpointing = !options.checkpoint_dir.empty() && options.write_checkpoints &&
                               options.checkpoint_every > 0;

    // Trained parameters, for the gradient hook.
    std::vector<at::Tensor> trained = router->parameters();
    if (net_opt) {
      for (const at::Tensor& p : supernet->parameters()) trained.push_back(p);
    }
    const SearchStep ctx{parent, space, batches, cost, budgets, options, hooks, trainables,
                         trained};

    for (int64_t step = first_step; step < options.schedule.steps; ++step) {
      TAILOR_ASSIGN_OR_RETURN(StepReport report, TrainStep(ctx, step));
      RecordStep(report, result, trainables);
      // The search ends here when it converged or ran its last step: checkpoint that too, so
      // a retry after a later failure (extraction, upload) skips the search altogether.
      const bool last =
          step + 1 == options.schedule.steps || AcceptsConvergence(options, report.decision);
      // Saved before the progress callback, so a run stopped by it (cancellation) still
      // leaves this step's checkpoint behind.
      if (checkpointing && ((step + 1) % options.checkpoint_every == 0 || last)) {
        TAILOR_RETURN_IF_ERROR(
            SaveCheckpoint(options.checkpoint_dir, digest, step + 1, trainables));
      }
      if (progress && !progress(report)) break;
      if (last) break;
    }
    TAILOR_RETURN_IF_ERROR(FinishResult(space, router, options, result));
  } catch (const c10::Error& e) {
    return FromTorch(e, "RunSearch");
  }
  return result;
}

std::string SearchDigest(const model::HybridConfig& parent, const SearchSpace& space,
                         const Budgets& budgets, const SearchOptions& o) {
  std::string text = model::HybridConfigToJson(parent);
  for (const ChoiceAxis& a : space.axes) {
    absl::StrAppend(&text, "|", a.name, ":", static_cast<int>(a.kind), ":", a.layer, ":",
                    absl::StrJoin(a.widths, ","));
  }
  auto num = [](double v) { return absl::StrFormat("%.17g", v); };
  auto opt = [&](const std::optional<double>& v) { return v ? num(*v) : std::string("-"); };
  absl::StrAppend(&text, "|budgets:", opt(budgets.latency_ms), ",", opt(budgets.memory_mib), ",",
                  opt(budgets.throughput), ",", budgets.slack_latency, budgets.slack_memory,
                  budgets.slack_throughput);
  const GumbelSchedule& s = o.schedule;
  absl::StrAppend(&text, "|schedule:", s.steps, ",", num(s.k_start), ",", num(s.k_end), ",",
                  num(s.tau_start), ",", num(s.tau_end));
  absl::StrAppend(&text, "|router:", o.router.input_dim, ",", o.router.hidden, ",",
                  num(o.router.learning_rate), ",", o.router.seed);
  absl::StrAppend(&text, "|search:", o.samples, ",", num(o.alpha), ",", num(o.delta), ",",
                  num(o.supernet_lr), ",", num(o.extract_threshold), ",",
                  o.stop_when_converged ? 1 : 0, ",", o.seed, ",", o.global_batch);
  // FNV-1a: a guard against loading the wrong run's state, not a security boundary.
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return absl::StrFormat("%016x", h);
}

int64_t CheckpointStep(const std::string& dir, const std::string& digest) {
  absl::StatusOr<std::optional<Meta>> meta = ReadMeta(dir);
  if (!meta.ok() || !meta->has_value() || (*meta)->digest != digest) return 0;
  return (*meta)->step;
}

absl::StatusOr<std::string> PackCheckpoint(const std::string& dir) {
  TAILOR_ASSIGN_OR_RETURN(std::optional<Meta> meta, ReadMeta(dir));
  if (!meta.has_value()) return std::string();
  std::string blob = kPackMagic;
  auto add = [&](const std::string& rel) -> absl::Status {
    TAILOR_ASSIGN_OR_RETURN(std::string bytes,
                            model::ReadFileToString((fs::path(dir) / rel).string()));
    absl::StrAppend(&blob, rel, "\n", bytes.size(), "\n", bytes);
    return absl::OkStatus();
  };
  for (const char* f : {kRouterFile, kSupernetFile}) {
    const std::string rel = (fs::path(meta->state) / f).string();
    if (fs::exists(fs::path(dir) / rel)) TAILOR_RETURN_IF_ERROR(add(rel));
  }
  TAILOR_RETURN_IF_ERROR(add(kMetaFile));  // last: unpacking commits with it
  return blob;
}

absl::Status UnpackCheckpoint(const std::string& blob, const std::string& dir) {
  if (blob.empty()) return absl::OkStatus();
  if (blob.rfind(kPackMagic, 0) != 0) {
    return absl::InvalidArgumentError("UnpackCheckpoint: not a packed search checkpoint");
  }
  size_t pos = std::strlen(kPackMagic);
  while (pos < blob.size()) {
    const size_t nl1 = blob.find('\n', pos);
    const size_t nl2 = nl1 == std::string::npos ? nl1 : blob.find('\n', nl1 + 1);
    if (nl2 == std::string::npos) {
      return absl::InvalidArgumentError("UnpackCheckpoint: truncated header");
    }
    const std::string rel = blob.substr(pos, nl1 - pos);
    size_t size = 0;
    if (!absl::SimpleAtoi(blob.substr(nl1 + 1, nl2 - nl1 - 1), &size) ||
        nl2 + 1 + size > blob.size() || rel.empty() || rel.find("..") != std::string::npos ||
        rel[0] == '/') {
      return absl::InvalidArgumentError(absl::StrCat("UnpackCheckpoint: bad entry '", rel, "'"));
    }
    const fs::path path = fs::path(dir) / rel;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    TAILOR_RETURN_IF_ERROR(
        model::WriteFileAtomically(path.string(), absl::string_view(blob).substr(nl2 + 1, size)));
    pos = nl2 + 1 + size;
  }
  return absl::OkStatus();
}

}  // namespace tailor::autocompress
