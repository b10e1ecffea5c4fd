#include "compression/autocompress/cost_predictor.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/costmodel/interaction.h"
#include "compression/costmodel/memory_model.h"
#include "compression/model/deci_blocks.h"

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

// The axes as the tables index them: every axis's size, and where the hidden and the global
// Mamba-heads axes are (-1: none).
struct SpaceAxes {
  std::vector<int64_t> sizes;
  int hidden = -1;
  int mamba = -1;
};

absl::StatusOr<SpaceAxes> ScanAxes(const HybridConfig& parent, const SearchSpace& space) {
  SpaceAxes out;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    const ChoiceAxis& axis = space.axes[a];
    out.sizes.push_back(static_cast<int64_t>(axis.widths.size()));
    if (axis.kind == AxisKind::kHidden) out.hidden = static_cast<int>(a);
    if (axis.kind == AxisKind::kMambaHeads) out.mamba = static_cast<int>(a);
    for (int l : axis.layers()) {
      if (l >= parent.num_layers()) {
        return absl::InvalidArgumentError(
            absl::StrCat(axis.name, ": no such layer in the parent"));
      }
    }
  }
  if (out.hidden < 0) {
    return absl::InvalidArgumentError("SpaceCostModel: the space has no hidden axis");
  }
  return out;
}

// The fixed terms per hidden choice, flat [H].
struct FixedColumns {
  std::vector<double> time[2];  // T0 per phase
  std::vector<double> memory;   // everything but the workspace
  std::vector<double> workspace;
};

// Fixed terms per hidden choice, recovered from the prediction of an empty model: with
// no present layer the counts are all 0, so T0 = time / F_fixed(0).
absl::StatusOr<FixedColumns> TabulateFixed(const costmodel::CostModel& model,
                                           const HybridConfig& parent,
                                           const std::vector<int64_t>& hidden,
                                           const costmodel::InteractionModel& interaction) {
  FixedColumns out;
  const costmodel::KindCounts zero{};
  for (int64_t h : hidden) {
    TAILOR_ASSIGN_OR_RETURN(costmodel::Prediction p, model.Predict(EmptyAt(parent, h)));
    out.time[0].push_back(p.prefill_ms / interaction.Factor(costmodel::kFixedRow, false, zero));
    out.time[1].push_back(p.decode_ms / interaction.Factor(costmodel::kFixedRow, true, zero));
    out.memory.push_back(p.memory.total_mib - p.memory.workspace_mib);
    out.workspace.push_back(p.memory.workspace_mib);
  }
  return out;
}

// One layer's costs over (hidden choice h, combination k of its axes), flat row-major
// [H, K]; present is [K].
struct LayerColumns {
  std::vector<int> axes;  // the axes the layer depends on, in the order k is flattened
  std::vector<double> time[2], static_mib, workspace, present, value_mib;
};

// One side (K or V) of an attention layer's cache in MiB, at the table's scale.
double HalfCacheMiB(const costmodel::CostModel& model, const LayerSpec& spec) {
  const costmodel::MemoryModelData& m = model.table().memory;
  const double bytes =
      static_cast<double>(costmodel::LayerCacheBytes(spec, model.workload(), m.element_bytes));
  return bytes * m.attention_cache_scale / 2.0 / (1024.0 * 1024.0);
}

// The axes layer `l` depends on: the global Mamba-heads axis for a Mamba layer, then its own.
std::vector<int> AxesOfLayer(const HybridConfig& parent, const SearchSpace& space,
                             const SpaceAxes& axes, int l) {
  std::vector<int> out;
  if (parent.layers[l].kind == LayerKind::kMamba && axes.mamba >= 0) out.push_back(axes.mamba);
  for (size_t a = 0; a < space.axes.size(); ++a) {
    if (space.axes[a].covers(l)) out.push_back(static_cast<int>(a));
  }
  return out;
}

// Tabulates layer `l` with every other axis at its widest choice (the parent's), so that
// only the layer's own axes and the hidden width vary. Errors name the layer.
absl::StatusOr<LayerColumns> TabulateLayer(const costmodel::CostModel& model,
                                           const HybridConfig& parent, const SearchSpace& space,
                                           const SpaceAxes& axes, int l) {
  LayerColumns out;
  out.axes = AxesOfLayer(parent, space, axes, l);
  int64_t k_count = 1;
  for (int a : out.axes) k_count *= axes.sizes[a];
  out.present.assign(k_count, 0.0);
  std::vector<int> base;
  for (const ChoiceAxis& axis : space.axes) {
    base.push_back(static_cast<int>(axis.widths.size()) - 1);
  }
  const int64_t h_count = axes.sizes[axes.hidden];
  for (int64_t h = 0; h < h_count; ++h) {
    std::vector<int> idx = base;
    idx[axes.hidden] = static_cast<int>(h);
    for (int64_t k = 0; k < k_count; ++k) {
      // Row-major digits of k over the layer's axes: the last axis varies fastest, the same
      // order as the outer product in Predict.
      int64_t rest = k;
      for (size_t i = out.axes.size(); i-- > 0;) {
        const int64_t n = axes.sizes[out.axes[i]];
        idx[out.axes[i]] = static_cast<int>(rest % n);
        rest /= n;
      }
      TAILOR_ASSIGN_OR_RETURN(HybridConfig child, ChildConfig(parent, space, idx));
      const LayerSpec& spec = child.layers[l];
      absl::StatusOr<costmodel::LayerCost> c = model.CostOfLayer(spec, child.hidden);
      if (!c.ok()) {
        return absl::Status(c.status().code(),
                            absl::StrCat("layers[", l, "]: ", c.status().message()));
      }
      out.time[0].push_back(c->prefill_ms);
      out.time[1].push_back(c->decode_ms);
      out.static_mib.push_back(c->static_mib);
      out.workspace.push_back(c->workspace_mib);
      out.value_mib.push_back(spec.kind == LayerKind::kAttention ? HalfCacheMiB(model, spec) : 0);
      if (h == 0) out.present[k] = spec.present() ? 1.0 : 0.0;
    }
  }
  return out;
}

// Stand-in `s` at every hidden choice.
absl::StatusOr<LayerColumns> TabulateStandIn(const costmodel::CostModel& model,
                                             const model::StandInLayer& s,
                                             const std::vector<int64_t>& hidden) {
  LayerColumns out;
  for (int64_t h : hidden) {
    absl::StatusOr<costmodel::LayerCost> c = model.CostOfLayer(s.spec, h);
    if (!c.ok()) {
      return absl::Status(c.status().code(),
                          absl::StrCat("the engine's stand-in ", model::LayerKindName(s.absent),
                                       " layer: ", c.status().message()));
    }
    out.time[0].push_back(c->prefill_ms);
    out.time[1].push_back(c->decode_ms);
    out.static_mib.push_back(c->static_mib);
    out.workspace.push_back(c->workspace_mib);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const SpaceCostModel>> SpaceCostModel::Build(
    const costmodel::CostModel& model, const HybridConfig& parent, const SearchSpace& space) {
  std::shared_ptr<SpaceCostModel> out(new SpaceCostModel());
  TAILOR_ASSIGN_OR_RETURN(const SpaceAxes axes, ScanAxes(parent, space));
  out->axis_sizes_ = axes.sizes;
  out->hidden_axis_ = axes.hidden;
  const std::vector<int64_t>& hidden = space.axes[out->hidden_axis_].widths;
  const int64_t h_count = static_cast<int64_t>(hidden.size());
  out->interaction_ = model.table().interaction;
  const engine::Workload& w = model.workload();
  out->tokens_per_request_ = static_cast<double>(w.batch_size * w.output_tokens);

  try {
    // The empty model lacks every kind: its prediction holds no stand-in only without them.
    costmodel::CostModel bare = model;
    bare.SetStandIns({});
    TAILOR_ASSIGN_OR_RETURN(const FixedColumns fixed,
                            TabulateFixed(bare, parent, hidden, out->interaction_));
    for (int ph = 0; ph < 2; ++ph) out->fixed_time_[ph] = Doubles(fixed.time[ph], {h_count});
    out->fixed_memory_ = Doubles(fixed.memory, {h_count});
    out->fixed_workspace_ = Doubles(fixed.workspace, {h_count});

    for (int l = 0; l < parent.num_layers(); ++l) {
      TAILOR_ASSIGN_OR_RETURN(const LayerColumns c, TabulateLayer(model, parent, space, axes, l));
      const int64_t k_count = static_cast<int64_t>(c.present.size());
      LayerTable t;
      t.kind = static_cast<int>(parent.layers[l].kind);
      t.axes = c.axes;
      for (int ph = 0; ph < 2; ++ph) t.time[ph] = Doubles(c.time[ph], {h_count, k_count});
      t.static_mib = Doubles(c.static_mib, {h_count, k_count});
      t.workspace = Doubles(c.workspace, {h_count, k_count});
      t.present = Doubles(c.present, {k_count});
      t.value_mib = Doubles(c.value_mib, {h_count, k_count});
      out->layers_.push_back(std::move(t));
    }
    out->deci_blocks_ = model.kv_cache_layout() == model::KvCacheLayout::kDeciBlocks &&
                        model::PairsAsDeciBlocks(parent);
    if (out->deci_blocks_) {
      int64_t head_dim = 0;
      for (const LayerSpec& l : parent.layers) head_dim = std::max(head_dim, l.attention.head_dim);
      out->deci_one_head_mib_ = HalfCacheMiB(model, LayerSpec::Attention(1, 1, head_dim));
    }
    for (const model::StandInLayer& s : model.stand_ins()) {
      TAILOR_ASSIGN_OR_RETURN(const LayerColumns c, TabulateStandIn(model, s, hidden));
      StandInTable t;
      t.kind = static_cast<int>(s.absent);
      for (int l = 0; l < parent.num_layers(); ++l) {
        if (parent.layers[l].kind == s.absent) t.layers.push_back(l);
      }
      for (int ph = 0; ph < 2; ++ph) t.time[ph] = Doubles(c.time[ph], {h_count});
      t.static_mib = Doubles(c.static_mib, {h_count});
      t.workspace = Doubles(c.workspace, {h_count});
      out->stand_ins_.push_back(std::move(t));
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
    std::vector<at::Tensor> kept;    // per layer, the probability it is present
    std::vector<at::Tensor> values;  // per layer, its expected V rows (deci only), [H]
    for (const LayerTable& t : layers_) {
      at::Tensor q = torch::ones({1}, torch::kFloat64);
      for (int a : t.axes) q = (q.unsqueeze(1) * y[a].unsqueeze(0)).reshape({-1});
      kept.push_back(torch::dot(q, t.present));
      counts[t.kind] = counts[t.kind] + kept.back();
      for (int ph = 0; ph < 2; ++ph) time[ph].push_back(torch::mv(t.time[ph], q));
      static_sum = static_sum + torch::mv(t.static_mib, q);
      ws.push_back(torch::mv(t.workspace, q));
      if (deci_blocks_) values.push_back(torch::mv(t.value_mib, q));
    }
    if (deci_blocks_) static_sum = static_sum + DeciCacheCorrection(values, kept);
    std::vector<at::Tensor> absent;  // per stand-in, the probability the engine adds it
    for (const StandInTable& s : stand_ins_) {
      at::Tensor a = torch::ones({}, torch::kFloat64);
      for (int l : s.layers) a = a * (1.0 - kept[l]);
      absent.push_back(a);
      counts[s.kind] = counts[s.kind] + a;
      static_sum = static_sum + a * s.static_mib;
      ws.push_back(a * s.workspace);
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
      for (size_t i = 0; i < stand_ins_.size(); ++i) {
        const int kind = stand_ins_[i].kind;
        if (!f[kind].defined()) f[kind] = factor(kind, ph);
        latency_h = latency_h + absent[i] * stand_ins_[i].time[ph] * f[kind];
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

// The `deci` cache minus the per-layer V rows already in S (see the header), [H].
at::Tensor SpaceCostModel::DeciCacheCorrection(const std::vector<at::Tensor>& values,
                                               const std::vector<at::Tensor>& kept) const {
  const at::Tensor one = torch::ones({}, torch::kFloat64);
  at::Tensor blocks = torch::zeros({}, torch::kFloat64);
  at::Tensor before = one;  // probability that every earlier block is absent
  at::Tensor first_without_attention = torch::zeros({}, torch::kFloat64);
  at::Tensor per_layer = torch::zeros_like(fixed_memory_);
  std::vector<at::Tensor> widths;  // each attention layer's V rows, and the stand-in's
  for (size_t i = 0; i + 1 < layers_.size(); i += 2) {
    const at::Tensor& ka = kept[i];
    const at::Tensor& km = kept[i + 1];
    widths.push_back(values[i]);
    per_layer = per_layer + values[i];
    const at::Tensor absent = (one - ka) * (one - km);
    blocks = blocks + (one - absent);
    first_without_attention = first_without_attention + before * (one - ka) * km;
    before = before * absent;
  }
  const at::Tensor stand_in = first_without_attention * deci_one_head_mib_;
  widths.push_back(stand_in.expand_as(per_layer));
  const at::Tensor widest = torch::stack(widths).amax(0);
  return blocks * widest + stand_in - per_layer;
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
