#include "compression/costmodel/cost_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/costmodel/memory_model.h"

namespace tailor::costmodel {

namespace {

double Get(const std::map<std::string, double>& p, const char* key) {
  const auto it = p.find(key);
  return it == p.end() ? 0.0 : it->second;
}

double BytesToMiB(double bytes) { return bytes / (1024.0 * 1024.0); }

// One layer's share of C in bytes, at the table's per-kind calibration (exact integers when
// the scales are 1, as in built-in tables).
double ScaledCacheBytes(const model::LayerSpec& spec, const engine::Workload& w,
                        const MemoryModelData& m) {
  const double b = static_cast<double>(LayerCacheBytes(spec, w, m.element_bytes));
  switch (spec.kind) {
    case model::LayerKind::kAttention:
      return b * m.attention_cache_scale;
    case model::LayerKind::kMamba:
      return b * m.mamba_cache_scale;
    default:
      return b;
  }
}

double ScaledCacheMiB(const model::HybridConfig& arch, const engine::Workload& w,
                      const MemoryModelData& m, model::KvCacheLayout layout) {
  double b = static_cast<double>(AttentionCacheBytes(arch, w, m.element_bytes, layout)) *
             m.attention_cache_scale;
  for (const model::LayerSpec& l : arch.layers) {
    if (l.kind != model::LayerKind::kAttention) b += ScaledCacheBytes(l, w, m);
  }
  return BytesToMiB(b);
}

double ScaledRuntimeMiB(int64_t hidden, const engine::Workload& w, const MemoryModelData& m) {
  return BytesToMiB(static_cast<double>(RuntimeBytes(hidden, w, m.element_bytes)) *
                    m.runtime_scale);
}

}  // namespace

GridCoordinates CoordinatesOf(const std::string& kind, const std::map<std::string, double>& p) {
  const double hidden = Get(p, "hidden");
  if (kind == "attention") {
    const double kv = Get(p, "kv");
    return {absl::StrCat("head_dim=", Get(p, "head_dim")),
            {hidden, kv, kv > 0 ? Get(p, "heads") / kv : 0.0}};
  }
  if (kind == "mamba") {
    return {absl::StrCat("head_dim=", Get(p, "head_dim"), ",state=", Get(p, "state"),
                         ",conv=", Get(p, "conv"), ",chunk=", Get(p, "chunk")),
            {hidden, Get(p, "heads")}};
  }
  if (kind == "moe") {
    if (Get(p, "experts") > 0) {
      return {absl::StrCat("routed,top_k=", Get(p, "top_k")),
              {hidden, Get(p, "experts"), Get(p, "expert_ffn"), Get(p, "shared_ffn")}};
    }
    return {"shared", {hidden, Get(p, "shared_ffn")}};
  }
  return {"", {hidden, kind == "mlp" ? Get(p, "ffn") : 0.0}};
}

absl::StatusOr<CostModel> CostModel::FromData(CostTableData table) {
  struct Points {
    std::vector<std::vector<double>> x;
    std::vector<double> time, workspace;
  };
  std::map<GridKey, Points> groups;
  bool has_fixed = false;
  for (const CostEntryData& e : table.entries) {
    if (e.phase != kPrefill && e.phase != kDecode) {
      return absl::InvalidArgumentError(
          absl::StrCat("cost table: entry ", e.layer_kind, " ", e.config, ": phase '", e.phase,
                       "' (want prefill or decode)"));
    }
    has_fixed |= e.layer_kind == kFixedKind;
    GridCoordinates c = CoordinatesOf(e.layer_kind, e.params);
    Points& g = groups[{e.layer_kind, c.cls, e.phase}];
    g.x.push_back(std::move(c.x));
    g.time.push_back(e.time_ms);
    g.workspace.push_back(Get(e.params, kWorkspaceParam));
  }
  if (!has_fixed) {
    return absl::InvalidArgumentError("cost table: no fixed-cost (T0) entries");
  }
  CostModel m;
  for (const auto& [key, pts] : groups) {
    absl::StatusOr<GridInterpolator> time = GridInterpolator::Build(pts.x, pts.time);
    absl::StatusOr<GridInterpolator> ws = GridInterpolator::Build(pts.x, pts.workspace);
    if (!time.ok() || !ws.ok()) {
      const absl::Status& st = time.ok() ? ws.status() : time.status();
      return absl::Status(st.code(),
                          absl::StrCat("cost table: ", std::get<0>(key), " [", std::get<1>(key),
                                       "] ", std::get<2>(key), ": ", st.message()));
    }
    m.grids_[key] = std::make_shared<Grid>(Grid{*std::move(time), *std::move(ws)});
  }
  m.table_ = std::move(table);
  return m;
}

absl::StatusOr<const CostModel::Grid*> CostModel::FindGrid(const std::string& kind,
                                                           const std::string& cls,
                                                           const std::string& phase) const {
  const auto it = grids_.find({kind, cls, phase});
  if (it == grids_.end()) {
    return absl::NotFoundError(absl::StrCat("cost table has no ", phase, " costs for ", kind,
                                            cls.empty() ? "" : absl::StrCat(" [", cls, "]"),
                                            ": profile this layer class first"));
  }
  return it->second.get();
}

absl::StatusOr<double> CostModel::FixedTime(int64_t hidden, const std::string& phase) const {
  TAILOR_ASSIGN_OR_RETURN(const Grid* g, FindGrid(kFixedKind, "", phase));
  return g->time.Evaluate({static_cast<double>(hidden), 0.0});
}

absl::StatusOr<double> CostModel::FixedWorkspace(int64_t hidden) const {
  TAILOR_ASSIGN_OR_RETURN(const Grid* p, FindGrid(kFixedKind, "", kPrefill));
  TAILOR_ASSIGN_OR_RETURN(const Grid* d, FindGrid(kFixedKind, "", kDecode));
  const std::vector<double> x = {static_cast<double>(hidden), 0.0};
  return std::max(p->workspace.Evaluate(x), d->workspace.Evaluate(x));
}

absl::StatusOr<LayerCost> CostModel::CostOfLayer(const model::LayerSpec& spec,
                                                 int64_t hidden) const {
  LayerCost c;
  if (!spec.present()) return c;
  const std::string kind(model::LayerKindName(spec.kind));
  const GridCoordinates xy = CoordinatesOf(kind, LayerParams(spec, hidden));
  TAILOR_ASSIGN_OR_RETURN(const Grid* p, FindGrid(kind, xy.cls, kPrefill));
  TAILOR_ASSIGN_OR_RETURN(const Grid* d, FindGrid(kind, xy.cls, kDecode));
  c.prefill_ms = p->time.Evaluate(xy.x);
  c.decode_ms = d->time.Evaluate(xy.x);
  c.workspace_mib = std::max(p->workspace.Evaluate(xy.x), d->workspace.Evaluate(xy.x));
  const MemoryModelData& mm = table_.memory;
  c.static_mib = BytesToMiB(
      static_cast<double>(LayerWeightBytes(spec, hidden, mm.element_bytes)) * mm.weights_scale +
      ScaledCacheBytes(spec, table_.workload, mm));
  return c;
}

absl::StatusOr<double> CostModel::FixedCost(const model::HybridConfig& arch) const {
  const KindCounts counts = PresentCounts(arch);
  TAILOR_ASSIGN_OR_RETURN(double prefill, FixedTime(arch.hidden, kPrefill));
  TAILOR_ASSIGN_OR_RETURN(double decode, FixedTime(arch.hidden, kDecode));
  return prefill * table_.interaction.Factor(kFixedRow, false, counts) +
         decode * table_.interaction.Factor(kFixedRow, true, counts);
}

absl::StatusOr<Prediction> CostModel::Predict(const model::HybridConfig& arch) const {
  return Predict(arch, table_.workload);
}

absl::StatusOr<Prediction> CostModel::Predict(const model::HybridConfig& requested,
                                              const engine::Workload& w) const {
  if (!(w == table_.workload)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "workload ", w.batch_size, "/", w.input_tokens, "/", w.output_tokens, "/",
        w.cached_prefix_tokens, " differs from the table's ", table_.workload.batch_size, "/",
        table_.workload.input_tokens, "/", table_.workload.output_tokens, "/",
        table_.workload.cached_prefix_tokens,
        " (batch/input/output/prefix): cost tables are tied to their contract"));
  }
  const model::HybridConfig arch = model::WithStandIns(requested, stand_ins_);
  Prediction out;
  const InteractionModel& im = table_.interaction;
  const KindCounts counts = PresentCounts(arch);
  TAILOR_ASSIGN_OR_RETURN(double fixed_prefill, FixedTime(arch.hidden, kPrefill));
  TAILOR_ASSIGN_OR_RETURN(double fixed_decode, FixedTime(arch.hidden, kDecode));
  out.prefill_ms = fixed_prefill * im.Factor(kFixedRow, false, counts);
  out.decode_ms = fixed_decode * im.Factor(kFixedRow, true, counts);
  TAILOR_ASSIGN_OR_RETURN(double workspace, FixedWorkspace(arch.hidden));
  for (size_t i = 0; i < arch.layers.size(); ++i) {
    absl::StatusOr<LayerCost> c = CostOfLayer(arch.layers[i], arch.hidden);
    if (!c.ok()) {
      return absl::Status(c.status().code(),
                          absl::StrCat("layers[", i, "]: ", c.status().message()));
    }
    const int row = static_cast<int>(arch.layers[i].kind);
    out.prefill_ms += c->prefill_ms * im.Factor(row, false, counts);
    out.decode_ms += c->decode_ms * im.Factor(row, true, counts);
    workspace = std::max(workspace, c->workspace_mib);
  }
  out.latency_ms = out.prefill_ms + out.decode_ms;
  out.throughput_tokens_per_s =
      out.latency_ms > 0
          ? 1000.0 * static_cast<double>(w.batch_size * w.output_tokens) / out.latency_ms
          : 0;
  const MemoryModelData& mm = table_.memory;
  MemoryBreakdown& m = out.memory;
  m.weights_mib =
      BytesToMiB(static_cast<double>(WeightBytes(arch, mm.element_bytes)) * mm.weights_scale);
  m.cache_mib = ScaledCacheMiB(arch, w, mm, kv_cache_layout_);
  m.workspace_mib = workspace;
  m.runtime_mib = ScaledRuntimeMiB(arch.hidden, w, mm);
  m.eps_mib = table_.memory.eps_mib;
  m.total_mib = m.weights_mib + m.cache_mib + m.workspace_mib + m.runtime_mib + m.eps_mib;
  out.memory_mib = m.total_mib;
  return out;
}

absl::StatusOr<ChoiceCosts> CostModel::CostsOfChoices(const SearchSpace& space, int hidden_index,
                                                      int mamba_heads_index) const {
  if (hidden_index < 0 || hidden_index >= static_cast<int>(space.hidden_choices().size()) ||
      mamba_heads_index < 0 ||
      mamba_heads_index >= static_cast<int>(space.mamba_head_choices().size())) {
    return absl::InvalidArgumentError("CostsOfChoices: global choice index out of range");
  }
  const int64_t hidden = space.hidden_choices()[hidden_index];
  const int64_t bytes = table_.memory.element_bytes;
  ChoiceCosts out;
  out.interaction = table_.interaction;
  TAILOR_ASSIGN_OR_RETURN(out.fixed_ms[0], FixedTime(hidden, kPrefill));
  TAILOR_ASSIGN_OR_RETURN(out.fixed_ms[1], FixedTime(hidden, kDecode));
  TAILOR_ASSIGN_OR_RETURN(out.fixed_workspace_mib, FixedWorkspace(hidden));
  const model::HybridConfig& parent = space.parent();
  const MemoryModelData& mm = table_.memory;
  out.fixed_memory_mib =
      BytesToMiB(static_cast<double>(FixedParameterCount(parent.vocab, hidden,
                                                         parent.tie_embeddings) * bytes) *
                     mm.weights_scale +
                 static_cast<double>(RuntimeBytes(hidden, table_.workload, bytes)) *
                     mm.runtime_scale) +
      mm.eps_mib;
  for (int l = 0; l < space.num_layers(); ++l) {
    const int n = static_cast<int>(space.layer_options(l).size());
    std::vector<double> pre(n), dec(n), lat(n), mem(n), ws(n);
    std::vector<bool> present(n);
    for (int o = 0; o < n; ++o) {
      const model::LayerSpec spec = space.LayerSpecFor(l, o, mamba_heads_index);
      TAILOR_ASSIGN_OR_RETURN(LayerCost c, CostOfLayer(spec, hidden));
      pre[o] = c.prefill_ms;
      dec[o] = c.decode_ms;
      lat[o] = c.prefill_ms + c.decode_ms;
      mem[o] = c.static_mib;
      ws[o] = c.workspace_mib;
      present[o] = spec.present();
    }
    out.kind.push_back(static_cast<int>(space.parent().layers[l].kind));
    out.present.push_back(std::move(present));
    out.phase_ms[0].push_back(std::move(pre));
    out.phase_ms[1].push_back(std::move(dec));
    out.latency_ms.push_back(std::move(lat));
    out.memory_mib.push_back(std::move(mem));
    out.workspace_mib.push_back(std::move(ws));
  }
  return out;
}

}  // namespace tailor::costmodel

namespace tailor::costmodel {

double LatencyOfChoices(const ChoiceCosts& c, const std::vector<int>& options) {
  KindCounts counts{};
  for (size_t l = 0; l < options.size(); ++l) {
    if (c.present[l][options[l]]) counts[c.kind[l]] += 1;
  }
  double total = 0;
  for (int phase = 0; phase < 2; ++phase) {
    const bool decode = phase == 1;
    total += c.fixed_ms[phase] * c.interaction.Factor(kFixedRow, decode, counts);
    for (size_t l = 0; l < options.size(); ++l) {
      total += c.phase_ms[phase][l][options[l]] * c.interaction.Factor(c.kind[l], decode, counts);
    }
  }
  return total;
}

}  // namespace tailor::costmodel
