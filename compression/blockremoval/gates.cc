#include "compression/blockremoval/gates.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/tasks/training.h"

namespace tailor::blockremoval {
namespace {

// Freezes parameters for the lifetime of the guard, restoring each flag after.
class FreezeParameters {
 public:
  explicit FreezeParameters(model::HybridLM& m) : params_(m->parameters()) {
    for (at::Tensor& p : params_) {
      was_.push_back(p.requires_grad());
      p.requires_grad_(false);
    }
  }
  ~FreezeParameters() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].requires_grad_(was_[i]);
  }

 private:
  std::vector<at::Tensor> params_;
  std::vector<bool> was_;
};

// Collects block inputs and outputs to score 1 - cos per token.
class InfluenceObserver : public model::ActivationObserver {
 public:
  InfluenceObserver(int layers, at::Tensor token_mask) : sums_(layers, 0.0), mask_(token_mask) {}
  void Observe(const model::ActivationSite& site, const at::Tensor& value) override {
    if (site.site == model::Site::kBlockInput) {
      input_ = value.detach();
    } else if (site.site == model::Site::kBlockOutput && input_.defined()) {
      const at::Tensor cos =
          torch::cosine_similarity(input_.to(torch::kFloat64), value.detach().to(torch::kFloat64),
                                   /*dim=*/-1, /*eps=*/1e-12);
      sums_[site.layer] += ((1.0 - cos) * mask_).sum().item<double>();
      input_ = at::Tensor();
    }
  }
  const std::vector<double>& sums() const { return sums_; }

 private:
  std::vector<double> sums_;
  at::Tensor mask_;
  at::Tensor input_;
};

std::vector<std::vector<tasks::Sample>> Chunks(const std::vector<tasks::Sample>& samples,
                                               int64_t batch_size) {
  std::vector<std::vector<tasks::Sample>> out;
  const size_t b = static_cast<size_t>(std::max<int64_t>(1, batch_size));
  for (size_t i = 0; i < samples.size(); i += b) {
    out.emplace_back(samples.begin() + i, samples.begin() + std::min(samples.size(), i + b));
  }
  return out;
}

}  // namespace

std::vector<int> PresentLayers(const model::HybridConfig& config) {
  std::vector<int> out;
  for (int i = 0; i < config.num_layers(); ++i) {
    if (config.layers[i].present()) out.push_back(i);
  }
  return out;
}

std::vector<tasks::Sample> CalibrationSamples(uint64_t seed, int64_t count, tasks::Split split) {
  const auto suites = tasks::AllSuites();
  std::vector<const tasks::TaskSuite*> ptrs;
  for (const auto& s : suites) ptrs.push_back(s.get());
  tasks::TaskMixture mixture(ptrs, seed, split);
  std::vector<tasks::Sample> out;
  for (int64_t i = 0; i < count; ++i) out.push_back(mixture.Next());
  return out;
}

absl::StatusOr<at::Tensor> SampleLoss(model::HybridLM& model, const tasks::Sample& sample,
                                      const at::Tensor& gates) {
  const tasks::Batch batch = tasks::MakeBatch({sample});
  model::ForwardOptions o;
  o.block_gates = gates;
  TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput out, model->Forward(batch.inputs, o));
  return tasks::AnswerLoss(out.logits, batch.targets.to(out.logits.device()));
}

absl::StatusOr<at::Tensor> GateGradients(model::HybridLM& model,
                                         const std::vector<tasks::Sample>& samples,
                                         const std::vector<int>& layers) {
  const int64_t n = model->num_layers();
  for (int l : layers) {
    if (l < 0 || l >= n) {
      return absl::InvalidArgumentError(absl::StrCat("layers: ", l, " out of range [0, ", n, ")"));
    }
  }
  FreezeParameters freeze(model);
  torch::AutoGradMode grad_on(true);
  const at::Tensor some = model->parameters().front();
  at::Tensor a = torch::zeros({static_cast<int64_t>(samples.size()),
                               static_cast<int64_t>(layers.size())},
                              torch::kFloat64);
  const at::Tensor index = torch::tensor(std::vector<int64_t>(layers.begin(), layers.end()),
                                         torch::kLong);
  for (size_t s = 0; s < samples.size(); ++s) {
    at::Tensor gates = torch::ones({n}, some.options()).requires_grad_(true);
    TAILOR_ASSIGN_OR_RETURN(at::Tensor loss, SampleLoss(model, samples[s], gates));
    at::Tensor g = torch::autograd::grad({loss}, {gates})[0];
    a[static_cast<int64_t>(s)] = g.detach().to(torch::kCPU, torch::kFloat64).index_select(0, index);
  }
  return a;
}

absl::StatusOr<Qubo> FisherQubo(const at::Tensor& a_in) {
  if (a_in.dim() != 2 || a_in.size(0) < 1 || a_in.size(1) < 1) {
    return absl::InvalidArgumentError("gate gradients: want a non-empty [samples, blocks] matrix");
  }
  const at::Tensor a = a_in.to(torch::kCPU, torch::kFloat64);
  at::Tensor h = a.t().matmul(a) / static_cast<double>(a.size(0));
  h = ((h + h.t()) * 0.5).contiguous();
  Qubo q;
  q.n = static_cast<int>(a.size(1));
  q.h.assign(h.data_ptr<double>(), h.data_ptr<double>() + h.numel());
  TAILOR_RETURN_IF_ERROR(ValidateQubo(q));
  return q;
}

absl::StatusOr<InfluenceSums> BlockInfluence(model::HybridLM& model,
                                             const std::vector<tasks::Sample>& samples,
                                             int64_t batch_size) {
  torch::NoGradGuard no_grad;
  InfluenceSums out;
  out.sum.assign(model->num_layers(), 0.0);
  for (const auto& chunk : Chunks(samples, batch_size)) {
    const tasks::Batch batch = tasks::MakeBatch(chunk);
    // Padding rows after <eos> are not text; leave them out of the mean.
    const at::Tensor mask = (batch.inputs != tasks::kPad).to(torch::kFloat64);
    InfluenceObserver obs(static_cast<int>(model->num_layers()), mask);
    model::ForwardOptions o;
    o.observer = &obs;
    TAILOR_RETURN_IF_ERROR(model->Forward(batch.inputs, o).status());
    for (size_t i = 0; i < out.sum.size(); ++i) out.sum[i] += obs.sums()[i];
    out.tokens += mask.sum().item<double>();
  }
  return out;
}

std::vector<int> LowestInfluence(const std::vector<double>& influence, int m) {
  std::vector<int> order(influence.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return influence[a] < influence[b]; });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(std::max(0, m))));
  std::sort(order.begin(), order.end());
  return order;
}

absl::StatusOr<model::HybridConfig> RemoveBlocks(const model::HybridConfig& config,
                                                 const std::vector<int>& removed) {
  model::HybridConfig child = config;
  for (int l : removed) {
    if (l < 0 || l >= config.num_layers()) {
      return absl::InvalidArgumentError(
          absl::StrCat("removed block ", l, " out of range [0, ", config.num_layers(), ")"));
    }
    if (!config.layers[l].present()) {
      return absl::InvalidArgumentError(absl::StrCat("block ", l, " is already absent"));
    }
    // The variant stays (a removed relu2 MLP is still one), so the child reads as the
    // parent's family wherever the layer's fields are looked at.
    child.layers[l] = model::LayerSpec::AbsentLike(config.layers[l]);
  }
  TAILOR_RETURN_IF_ERROR(model::ValidateHybridConfig(child));
  return child;
}

absl::StatusOr<model::HybridLM> WithoutBlocks(const model::HybridLM& parent,
                                              const std::vector<int>& removed) {
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig child, RemoveBlocks(parent->config(), removed));
  return model::SliceHybridLM(parent, child);
}

absl::StatusOr<double> HeldOutLoss(model::HybridLM& model,
                                   const std::vector<tasks::Sample>& samples,
                                   int64_t batch_size) {
  torch::NoGradGuard no_grad;
  double total = 0, tokens = 0;
  for (const auto& chunk : Chunks(samples, batch_size)) {
    const tasks::Batch batch = tasks::MakeBatch(chunk);
    TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput out, model->Forward(batch.inputs));
    const double count = (batch.targets != -100).sum().item<double>();
    if (count == 0) continue;
    total += tasks::AnswerLoss(out.logits, batch.targets.to(out.logits.device())).item<double>() *
             count;
    tokens += count;
  }
  if (tokens == 0) return absl::InvalidArgumentError("held-out loss: no answer tokens");
  return total / tokens;
}

}  // namespace tailor::blockremoval
