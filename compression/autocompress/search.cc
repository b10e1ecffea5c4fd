#include "compression/autocompress/search.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/autocompress/penalty.h"
#include "compression/autocompress/supernet.h"

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
  auto add = [&](const at::Tensor& rho) {
    at::Tensor p = BudgetPenalty(rho, delta).sum();
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
    add(cost.latency_ms / *budgets.latency_ms);
  }
  if (budgets.memory_mib.has_value()) {
    TAILOR_RETURN_IF_ERROR(need(cost.memory_mib, "memory"));
    add(cost.memory_mib / *budgets.memory_mib);
  }
  if (budgets.throughput.has_value()) {
    TAILOR_RETURN_IF_ERROR(need(cost.throughput, "throughput"));
    add(*budgets.throughput / cost.throughput);
  }
  if (!total.defined()) total = torch::zeros({});
  return total;
}

absl::StatusOr<SearchResult> RunSearch(model::HybridLM& parent, model::HybridLM& supernet,
                                       const SearchSpace& space, ArchRouter& router,
                                       const BatchSource& batches, const CostPredictor& cost,
                                       const Budgets& budgets, const SearchOptions& options,
                                       const ProgressCallback& progress) {
  if (parent->config() != supernet->config()) {
    return absl::InvalidArgumentError("RunSearch: parent and supernet configs differ");
  }
  if (options.samples < 1 || options.schedule.steps < 1) {
    return absl::InvalidArgumentError("RunSearch: samples and steps must be >= 1");
  }
  if (!batches || !cost) return absl::InvalidArgumentError("RunSearch: missing callback");
  const model::HybridConfig& config = parent->config();
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
    for (int64_t step = 0; step < options.schedule.steps; ++step) {
      TAILOR_ASSIGN_OR_RETURN(at::Tensor tokens, batches(step));
      if (tokens.dim() != 2 || tokens.size(0) < 1) {
        return absl::InvalidArgumentError(absl::StrCat("batch of step ", step, ": want [B, T]"));
      }
      const int64_t b = tokens.size(0);
      const int64_t s_count = std::min(options.samples, b);

      std::vector<at::Tensor> logits = router->Forward();
      // samples[s][a]: architecture s's soft choice on axis a. Noise is drawn on the CPU
      // generator so runs are reproducible whatever the device.
      std::vector<std::vector<at::Tensor>> samples(s_count);
      for (int64_t s = 0; s < s_count; ++s) {
        for (const at::Tensor& z : logits) {
          samples[s].push_back(SampleGumbelSoftmax(z, options.schedule, step, gen));
        }
      }
      // Even split: sequence i trains architecture i * S / B.
      at::Tensor arch_of_row = torch::arange(b, torch::kLong).mul(s_count).div(b, "floor");
      std::vector<at::Tensor> rows;
      for (size_t a = 0; a < space.axes.size(); ++a) {
        std::vector<at::Tensor> per_sample;
        for (int64_t s = 0; s < s_count; ++s) per_sample.push_back(samples[s][a]);
        rows.push_back(torch::stack(per_sample).index_select(0, arch_of_row).to(device));
      }
      TAILOR_ASSIGN_OR_RETURN(model::ArchMask mask, SoftArchMask(config, space, rows));

      at::Tensor teacher;
      {
        torch::NoGradGuard no_grad;
        TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput t, parent->Forward(tokens));
        teacher = t.logits;
      }
      model::ForwardOptions fwd;
      fwd.mask = &mask;
      TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput student, supernet->Forward(tokens, fwd));
      at::Tensor kd = ForwardKl(teacher, student.logits);

      at::Tensor penalty = torch::zeros({}, kd.options());
      for (int64_t s = 0; s < s_count; ++s) {
        TAILOR_ASSIGN_OR_RETURN(CostPrediction c, cost(samples[s]));
        TAILOR_ASSIGN_OR_RETURN(at::Tensor p, BudgetLoss(c, budgets, options.delta));
        penalty = penalty + p.to(kd.options());
      }
      penalty = penalty / static_cast<double>(s_count);
      at::Tensor loss = kd + options.alpha * penalty;

      router_opt->zero_grad();
      if (net_opt) net_opt->zero_grad();
      loss.backward();
      router_opt->step();
      if (net_opt) net_opt->step();

      StepReport report;
      report.step = step;
      report.kd_loss = kd.item<double>();
      report.penalty = penalty.item<double>();
      report.logit_scale = options.schedule.LogitScale(step);
      report.temperature = options.schedule.Temperature(step);
      {
        torch::NoGradGuard no_grad;
        TAILOR_ASSIGN_OR_RETURN(report.decision, DecideExtraction(space, router->Probabilities(),
                                                                  options.extract_threshold));
      }
      result.decision = report.decision;
      result.steps_run = step + 1;
      if (progress && !progress(report)) break;
      if (options.stop_when_converged && report.decision.converged) break;
    }
    torch::NoGradGuard no_grad;
    for (const at::Tensor& p : router->Probabilities()) result.probabilities.push_back(p.detach());
    if (result.steps_run == 0) {
      TAILOR_ASSIGN_OR_RETURN(result.decision, DecideExtraction(space, result.probabilities,
                                                                options.extract_threshold));
    }
  } catch (const c10::Error& e) {
    return FromTorch(e, "RunSearch");
  }
  return result;
}

}  // namespace tailor::autocompress
