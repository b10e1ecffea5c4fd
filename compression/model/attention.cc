#include "compression/model/attention.h"

#include <torch/torch.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::model {
namespace {

// Llama 3.1's rescaling of inv_freq (RopeScalingSpec::kLlama3), per frequency: long
// wavelengths are divided by `factor`, short ones kept, the band between interpolated
// linearly in old_context / wavelength.
at::Tensor Llama3InvFreq(const at::Tensor& inv_freq, const RopeScalingSpec& r) {
  const double old_context = static_cast<double>(r.original_max_positions);
  at::Tensor wavelen = 2 * M_PI / inv_freq;
  at::Tensor smooth =
      (old_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  at::Tensor blended = (1 - smooth) * inv_freq / r.factor + smooth * inv_freq;
  at::Tensor out = torch::where(wavelen > old_context / r.low_freq_factor, inv_freq / r.factor,
                                blended);
  return torch::where(wavelen < old_context / r.high_freq_factor, inv_freq, out);
}

// cos/sin of shape [T, head_dim / 2] for absolute positions position .. position+T-1.
// Computed per call rather than cached: it is tiny next to the projections, and a cached
// table would have to follow the module across devices.
std::pair<at::Tensor, at::Tensor> RopeTables(int64_t position, int64_t time, int64_t head_dim,
                                             double theta, const RopeScalingSpec& scaling,
                                             const at::TensorOptions& options) {
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  at::Tensor inv_freq =
      torch::pow(theta, -torch::arange(0, head_dim, 2, f64) / static_cast<double>(head_dim));
  if (scaling.type == RopeScalingSpec::Type::kLlama3) inv_freq = Llama3InvFreq(inv_freq, scaling);
  at::Tensor pos = torch::arange(position, position + time, f64);
  at::Tensor angles = torch::outer(pos, inv_freq);
  return {angles.cos().to(options), angles.sin().to(options)};
}

// x: [B, T, heads, D]. Rotates the pairs (x[i], x[i + D/2]).
at::Tensor ApplyRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor x1 = x.narrow(-1, 0, half);
  at::Tensor x2 = x.narrow(-1, half, half);
  at::Tensor c = cos.unsqueeze(0).unsqueeze(2);  // [1, T, 1, D/2]
  at::Tensor s = sin.unsqueeze(0).unsqueeze(2);
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

}  // namespace

AttentionImpl::AttentionImpl(const AttentionSpec& spec, const MixerInit& init)
    : spec_(spec),
      rope_theta_(init.rope_theta),
      rope_scaling_(init.rope_scaling),
      norm_eps_(init.norm_eps) {
  const int64_t q = spec.heads * spec.head_dim;
  const int64_t kv = spec.kv_heads * spec.head_dim;
  q_proj_ = register_parameter("q_proj", InitWeight({q, init.hidden}, init.std, init));
  k_proj_ = register_parameter("k_proj", InitWeight({kv, init.hidden}, init.std, init));
  v_proj_ = register_parameter("v_proj", InitWeight({kv, init.hidden}, init.std, init));
  o_proj_ = register_parameter("o_proj", InitWeight({init.hidden, q}, init.out_std, init));
  // Variants after the demo family's weights, and without generator draws (biases start at
  // zero, norms at one), so a demo model's random weights are what they always were.
  if (spec.qkv_bias) {
    q_bias_ = register_parameter("q_bias", torch::zeros({q}));
    k_bias_ = register_parameter("k_bias", torch::zeros({kv}));
    v_bias_ = register_parameter("v_bias", torch::zeros({kv}));
  }
  if (spec.o_bias) o_bias_ = register_parameter("o_bias", torch::zeros({init.hidden}));
  if (spec.qk_norm) {
    q_norm_ = register_parameter("q_norm", torch::ones({spec.head_dim}));
    k_norm_ = register_parameter("k_norm", torch::ones({spec.head_dim}));
  }
}

at::Tensor AttentionImpl::Forward(const at::Tensor& x, const LayerContext& ctx) {
  const int64_t b = x.size(0), t = x.size(1);
  const int64_t h = spec_.heads, kvh = spec_.kv_heads, d = spec_.head_dim, g = h / kvh;
  at::Tensor q = Project(ctx, x, q_proj_);
  at::Tensor k = Project(ctx, x, k_proj_);
  at::Tensor v = Project(ctx, x, v_proj_);
  if (spec_.qkv_bias) {
    q = q + q_bias_;
    k = k + k_bias_;
    v = v + v_bias_;
  }
  q = q.view({b, t, h, d});
  k = k.view({b, t, kvh, d});
  v = v.view({b, t, kvh, d});
  if (spec_.qk_norm) {
    q = RmsNorm(q, q_norm_, norm_eps_);
    k = RmsNorm(k, k_norm_, norm_eps_);
  }
  if (spec_.rope) {
    auto [cos, sin] = RopeTables(ctx.position, t, d, rope_theta_, rope_scaling_, x.options());
    q = ApplyRope(q, cos, sin);
    k = ApplyRope(k, cos, sin);
  }
  k = k.transpose(1, 2);  // [B, KV, T, D]
  v = v.transpose(1, 2);
  at::Tensor keys = k, values = v;
  if (ctx.cache != nullptr) {
    // Write the new rows into the preallocated cache and attend over everything so far.
    ctx.cache->k.narrow(2, ctx.position, t).copy_(k);
    ctx.cache->v.narrow(2, ctx.position, t).copy_(v);
    keys = ctx.cache->k.narrow(2, 0, ctx.position + t);
    values = ctx.cache->v.narrow(2, 0, ctx.position + t);
  }
  const int64_t s = keys.size(2);
  // Group query heads by their KV head: [B, KV, G, T, D] against [B, KV, 1, S, D].
  at::Tensor qg = q.transpose(1, 2).reshape({b, kvh, g, t, d});
  at::Tensor scores =
      torch::matmul(qg, keys.unsqueeze(2).transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  at::Tensor key_pos = torch::arange(s, torch::dtype(torch::kLong).device(x.device())).unsqueeze(0);
  at::Tensor query_pos =
      torch::arange(ctx.position, ctx.position + t, torch::dtype(torch::kLong).device(x.device()))
          .unsqueeze(1);
  scores = scores.masked_fill(key_pos > query_pos, -std::numeric_limits<float>::infinity());
  at::Tensor out = torch::matmul(torch::softmax(scores, -1), values.unsqueeze(2));
  out = out.permute({0, 3, 1, 2, 4}).reshape({b, t, h, d});  // head = kv * G + g
  if (ctx.mask != nullptr) out = ApplyMask(out, ctx.mask->attention_heads, 2);
  if (ctx.observer != nullptr) {
    ctx.observer->Observe({Site::kAttentionHeads, ctx.layer}, out);
  }
  at::Tensor y = Project(ctx, out.reshape({b, t, h * d}), o_proj_);
  return spec_.o_bias ? y + o_bias_ : y;
}

void AttentionImpl::InitCache(LayerCache& cache, int64_t batch, int64_t capacity,
                              const at::TensorOptions& options) const {
  cache.k = torch::zeros({batch, spec_.kv_heads, capacity, spec_.head_dim}, options);
  cache.v = torch::zeros({batch, spec_.kv_heads, capacity, spec_.head_dim}, options);
}

void AttentionImpl::PermuteHidden(const at::Tensor& perm) {
  AssignParameter(q_proj_, q_proj_.index_select(1, perm));
  AssignParameter(k_proj_, k_proj_.index_select(1, perm));
  AssignParameter(v_proj_, v_proj_.index_select(1, perm));
  AssignParameter(o_proj_, o_proj_.index_select(0, perm));
  if (spec_.o_bias) AssignParameter(o_bias_, o_bias_.index_select(0, perm));
}

absl::Status AttentionImpl::Permute(const LayerPermutation& perm) {
  const int64_t h = spec_.heads, kvh = spec_.kv_heads, d = spec_.head_dim, g = h / kvh;
  if (perm.attention_heads.empty() && perm.attention_kv_heads.empty()) return absl::OkStatus();
  std::vector<int64_t> kv_perm = perm.attention_kv_heads;
  if (kv_perm.empty()) {
    for (int64_t i = 0; i < kvh; ++i) kv_perm.push_back(i);
  }
  TAILOR_RETURN_IF_ERROR(CheckPermutation(kv_perm, kvh, "attention_kv_heads"));
  std::vector<int64_t> head_perm = perm.attention_heads;
  if (head_perm.empty()) {
    // Whole groups move with their KV head; order inside a group is kept.
    for (int64_t i = 0; i < h; ++i) head_perm.push_back(kv_perm[i / g] * g + i % g);
  }
  TAILOR_RETURN_IF_ERROR(CheckPermutation(head_perm, h, "attention_heads"));
  for (int64_t i = 0; i < h; ++i) {
    if (head_perm[i] / g != kv_perm[i / g]) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention_heads: new head ", i, " comes from old head ", head_perm[i],
                       " of KV group ", head_perm[i] / g, ", but its group takes old KV head ",
                       kv_perm[i / g], " (query heads must stay inside their GQA group)"));
    }
  }
  at::Tensor q_rows = ExpandUnits(IndexTensor(head_perm, q_proj_.device()), d);
  at::Tensor kv_rows = ExpandUnits(IndexTensor(kv_perm, q_proj_.device()), d);
  AssignParameter(q_proj_, q_proj_.index_select(0, q_rows));
  AssignParameter(k_proj_, k_proj_.index_select(0, kv_rows));
  AssignParameter(v_proj_, v_proj_.index_select(0, kv_rows));
  AssignParameter(o_proj_, o_proj_.index_select(1, q_rows));
  if (spec_.qkv_bias) {  // biases move with their heads; q/k norms are shared by all heads
    AssignParameter(q_bias_, q_bias_.index_select(0, q_rows));
    AssignParameter(k_bias_, k_bias_.index_select(0, kv_rows));
    AssignParameter(v_bias_, v_bias_.index_select(0, kv_rows));
  }
  return absl::OkStatus();
}

absl::Status AttentionImpl::CopyPrefixFrom(const Mixer& parent_mixer, const at::Tensor& hidden) {
  const auto* parent = dynamic_cast<const AttentionImpl*>(&parent_mixer);
  if (parent == nullptr) return absl::InvalidArgumentError("parent layer is not attention");
  const AttentionSpec& p = parent->spec_;
  const int64_t pg = p.heads / p.kv_heads, cg = spec_.heads / spec_.kv_heads;
  if (p.qkv_bias != spec_.qkv_bias || p.o_bias != spec_.o_bias || p.qk_norm != spec_.qk_norm ||
      p.rope != spec_.rope) {
    return absl::InvalidArgumentError(
        "attention variants (qkv_bias, o_bias, qk_norm, rope) must match the parent's");
  }
  if (p.head_dim != spec_.head_dim || spec_.kv_heads > p.kv_heads || cg > pg) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention heads=", spec_.heads, " kv_heads=", spec_.kv_heads, " head_dim=", spec_.head_dim,
        " is not a prefix of heads=", p.heads, " kv_heads=", p.kv_heads, " head_dim=", p.head_dim,
        " (need the same head_dim, fewer KV groups and no more "
        "query heads per group)"));
  }
  // The first cg query heads of each of the first kv_heads groups.
  std::vector<int64_t> heads;
  for (int64_t j = 0; j < spec_.kv_heads; ++j) {
    for (int64_t i = 0; i < cg; ++i) heads.push_back(j * pg + i);
  }
  at::Tensor q_rows = ExpandUnits(IndexTensor(heads, hidden.device()), spec_.head_dim);
  const int64_t kv_rows = spec_.kv_heads * spec_.head_dim;
  AssignParameter(q_proj_, parent->q_proj_.index_select(0, q_rows).index_select(1, hidden));
  AssignParameter(k_proj_, parent->k_proj_.narrow(0, 0, kv_rows).index_select(1, hidden));
  AssignParameter(v_proj_, parent->v_proj_.narrow(0, 0, kv_rows).index_select(1, hidden));
  AssignParameter(o_proj_, parent->o_proj_.index_select(0, hidden).index_select(1, q_rows));
  CopyVariantsFrom(*parent, q_rows, kv_rows, hidden);
  return absl::OkStatus();
}

void AttentionImpl::CopyVariantsFrom(const AttentionImpl& parent, const at::Tensor& q_rows,
                                     int64_t kv_rows, const at::Tensor& hidden) {
  if (spec_.qkv_bias) {
    AssignParameter(q_bias_, parent.q_bias_.index_select(0, q_rows));
    AssignParameter(k_bias_, parent.k_bias_.narrow(0, 0, kv_rows));
    AssignParameter(v_bias_, parent.v_bias_.narrow(0, 0, kv_rows));
  }
  if (spec_.o_bias) AssignParameter(o_bias_, parent.o_bias_.index_select(0, hidden));
  if (spec_.qk_norm) {
    AssignParameter(q_norm_, parent.q_norm_);
    AssignParameter(k_norm_, parent.k_norm_);
  }
}

}  // namespace tailor::model
