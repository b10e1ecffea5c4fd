#include "compression/autocompress/cost_predictor.h"

#include <torch/torch.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/costmodel/interaction.h"

namespace tailor::autocompress {
namespace {

using model::HybridConfig;
using model::LayerKind;
using model::LayerSpec;

// `parent` at hidden width `hidden` with every layer absent: its prediction is the fixed
// part alone (T0, embedding/head weights, runtime buffers, eps, P0). The cost model keeps
// its per-phase T0 private, and going through Predict keeps both sides one formula.
HybridConfig EmptyAt(const HybridConfig& parent, int64_t hidden) {
  HybridConfig c = parent;
  c.hidden = hidden;
  for (LayerSpec& l : c.layers) {
    l.attention.heads = l.attention.kv_heads = 0;
    l.mamba.heads = 0;
    l.moe.experts = l.moe.top_k = l.moe.expert_ffn = l.moe.shared_ffn = 0;
    l.mlp.ffn = 0;
  }
  return c;
}

at::Tensor Doubles(const std::vector<double>& v, std::vector<int64_t> shape) {
  return torch::tensor(v, torch::kFloat64).reshape(shape);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const SpaceCostModel>> SpaceCostModel::Build(
    const costmodel::CostModel& model, const HybridConfig& parent, const SearchSpace& space) {
  std::shared_ptr<SpaceCostModel> out(new SpaceCostModel());
  int mamba_axis = -1;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    const ChoiceAxis& axis = space.axes[a];
    out->axis_sizes_.push_back(static_cast<int64_t>(axis.widths.size()));
    if (axis.kind == AxisKind::kHidden) out->hidden_axis_ = static_cast<int>(a);
    if (axis.kind == AxisKind::kMambaHeads) mamba_axis = static_cast<int>(a);
    if (axis.layer >= parent.num_layers()) {
      return absl::InvalidArgumentError(absl::StrCat(axis.name, ": no such layer in the parent"));
    }
  }
  if (out->hidden_axis_ < 0) {
    return absl::InvalidArgumentError("SpaceCostModel: the space has no hidden axis");
  }
  const std::vector<int64_t>& hidden = space.axes[out->hidden_axis_].widths;
  const int64_t h_count = static_cast<int64_t>(hidden.size());
  out->interaction_ = model.table().interaction;
  const engine::Workload& w = model.workload();
  out->tokens_per_request_ = static_cast<double>(w.batch_size * w.output_tokens);

  try {
    // Fixed terms per hidden choice, recovered from the prediction of an empty model: with
    // no present layer the counts are all 0, so T0 = time / F_fixed(0).
    std::vector<double> fixed_time[2], fixed_memory, fixed_ws;
    const costmodel::KindCounts zero{};
    for (int64_t h : hidden) {
      TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction p, model.Predict(EmptyAt(parent, h)));
      fixed_time[0].push_back(p.prefill_ms /
                              out->interaction_.Factor(costmodel::kFixedRow, false, zero));
      fixed_time[1].push_back(p.decode_ms /
                              out->interaction_.Factor(costmodel::kFixedRow, true, zero));
      fixed_memory.push_back(p.memory.total_mib - p.memory.workspace_mib);
      fixed_ws.push_back(p.memory.workspace_mib);
    }
    for (int ph = 0; ph < 2; ++ph) out->fixed_time_[ph] = Doubles(fixed_time[ph], {h_count});
    out->fixed_memory_ = Doubles(fixed_memory, {h_count});
    out->fixed_workspace_ = Doubles(fixed_ws, {h_count});

    // The widest choice of every axis: the parent, so that only the layer's own axes vary.
    std::vector<int> base;
    for (const ChoiceAxis& axis : space.axes)
      base.push_back(static_cast<int>(axis.widths.size()) - 1);

    for (int l = 0; l < parent.num_layers(); ++l) {
      LayerTable t;
      t.kind = static_cast<int>(parent.layers[l].kind);
      if (parent.layers[l].kind == LayerKind::kMamba && mamba_axis >= 0)
        t.axes.push_back(mamba_axis);
      for (size_t a = 0; a < space.axes.size(); ++a) {
        if (space.axes[a].layer == l) t.axes.push_back(static_cast<int>(a));
      }
      int64_t k_count = 1;
      for (int a : t.axes) k_count *= out->axis_sizes_[a];
      std::vector<double> time[2], stat, ws, present(k_count, 0.0);
      for (int64_t h = 0; h < h_count; ++h) {
        std::vector<int> idx = base;
        idx[out->hidden_axis_] = static_cast<int>(h);
        for (int64_t k = 0; k < k_count; ++k) {
          // Row-major digits of k over t.axes: the last axis varies fastest, the same order
          // as the outer product in Predict.
          int64_t rest = k;
          for (size_t i = t.axes.size(); i-- > 0;) {
            const int64_t n = out->axis_sizes_[t.axes[i]];
            idx[t.axes[i]] = static_cast<int>(rest % n);
            rest /= n;
          }
          TAILOR_ASSIGN_OR_RETURN(HybridConfig child, ChildConfig(parent, space, idx));
          const LayerSpec& spec = child.layers[l];
          absl::StatusOr<costmodel::LayerCost> c = model.CostOfLayer(spec, child.hidden);
          if (!c.ok()) {
            return absl::Status(c.status().code(),
                                absl::StrCat("layers[", l, "]: ", c.status().message()));
          }
          time[0].push_back(c->prefill_ms);
          time[1].push_back(c->decode_ms);
          stat.push_back(c->static_mib);
          ws.push_back(c->workspace_mib);
          if (h == 0) present[k] = spec.present() ? 1.0 : 0.0;
        }
      }
      for (int ph = 0; ph < 2; ++ph) t.time[ph] = Doubles(time[ph], {h_count, k_count});
      t.static_mib = Doubles(stat, {h_count, k_count});
      t.workspace = Doubles(ws, {h_count, k_count});
      t.present = Doubles(present, {k_count});
      out->layers_.push_back(std::move(t));
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("SpaceCostModel: ", e.what_without_backtrace()));
  }
  return std::shared_ptr<const SpaceCostModel>(std::move(out));
}

int64_t SpaceCostModel::tabulated_options() const {
  int64_t n = 0;
  for (const LayerTable& t : layers_) n += t.static_mib.numel();
  return n;
}

absl::StatusOr<CostPrediction> SpaceCostModel::Predict(
    const std::vector<at::Tensor>& choices) const {
  if (choices.size() != axis_sizes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cost predictor: ", choices.size(), " choice vectors for ", axis_sizes_.size(), " axes"));
  }
  for (size_t a = 0; a < choices.size(); ++a) {
    if (!choices[a].defined() || choices[a].numel() != axis_sizes_[a]) {
      return absl::InvalidArgumentError(
          absl::StrCat("cost predictor: axis ", a, " needs ", axis_sizes_[a], " choices"));
    }
  }
  CostPrediction out;
  try {
    std::vector<at::Tensor> y;
    y.reserve(choices.size());
    for (const at::Tensor& c : choices)
      y.push_back(c.to(torch::kCPU, torch::kFloat64).reshape({-1}));
    const at::Tensor& p = y[hidden_axis_];

    std::array<at::Tensor, costmodel::kKinds> counts;
    for (at::Tensor& n : counts) n = torch::zeros({}, torch::kFloat64);
    // Per layer, the hidden-conditional expectations [H].
    std::vector<at::Tensor> time[2];
    at::Tensor static_sum = fixed_memory_;
    std::vector<at::Tensor> ws = {fixed_workspace_};
    for (const LayerTable& t : layers_) {
      at::Tensor q = torch::ones({1}, torch::kFloat64);
      for (int a : t.axes) q = (q.unsqueeze(1) * y[a].unsqueeze(0)).reshape({-1});
      counts[t.kind] = counts[t.kind] + torch::dot(q, t.present);
      for (int ph = 0; ph < 2; ++ph) time[ph].push_back(torch::mv(t.time[ph], q));
      static_sum = static_sum + torch::mv(t.static_mib, q);
      ws.push_back(torch::mv(t.workspace, q));
    }

    auto factor = [&](int row, int ph) -> at::Tensor {
      const costmodel::GammaRows& g = ph == 1 ? interaction_.decode : interaction_.prefill;
      at::Tensor e = torch::zeros({}, torch::kFloat64);
      for (int j = 0; j < costmodel::kKinds; ++j) {
        if (g[row][j] != 0.0) e = e + g[row][j] * (counts[j] - interaction_.reference[j]);
      }
      return e.exp();
    };
    at::Tensor latency_h = torch::zeros_like(fixed_memory_);  // [H]
    for (int ph = 0; ph < 2; ++ph) {
      latency_h = latency_h + fixed_time_[ph] * factor(costmodel::kFixedRow, ph);
      // One factor per kind: layers of a kind share it.
      std::array<at::Tensor, costmodel::kKinds> f;
      for (size_t l = 0; l < layers_.size(); ++l) {
        const int kind = layers_[l].kind;
        if (!f[kind].defined()) f[kind] = factor(kind, ph);
        latency_h = latency_h + time[ph][l] * f[kind];
      }
    }
    out.latency_ms = torch::dot(p, latency_h);
    const at::Tensor workspace = torch::stack(ws).amax(0);
    out.memory_mib = torch::dot(p, static_sum + workspace);
    out.throughput = (1000.0 * tokens_per_request_) / out.latency_ms;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("cost predictor: ", e.what_without_backtrace()));
  }
  return out;
}

CostPredictor SpaceCostModel::AsPredictor(std::shared_ptr<const SpaceCostModel> self) {
  return [self = std::move(self)](const std::vector<at::Tensor>& choices) {
    return self->Predict(choices);
  };
}

absl::StatusOr<CostPredictor> MakeCostPredictor(const costmodel::CostModel& model,
                                                const HybridConfig& parent,
                                                const SearchSpace& space) {
  TAILOR_ASSIGN_OR_RETURN(std::shared_ptr<const SpaceCostModel> m,
                          SpaceCostModel::Build(model, parent, space));
  return SpaceCostModel::AsPredictor(std::move(m));
}

}  // namespace tailor::autocompress
