#include "compression/model/mamba.h"

#include <torch/torch.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::model {
namespace {

// u: [B, T, C]; weight [C, K]; state [B, C, K-1] holds the K-1 inputs before u[:, 0] and
// is advanced in place when given. Zero state == causal zero padding, so the full forward
// and the cached paths share this one function.
at::Tensor CausalConv(const at::Tensor& u, const at::Tensor& weight, const at::Tensor& bias,
                      at::Tensor* state) {
  const int64_t b = u.size(0), t = u.size(1), c = u.size(2), k = weight.size(1);
  at::Tensor ut = u.transpose(1, 2);
  at::Tensor prev = state != nullptr ? *state : torch::zeros({b, c, k - 1}, u.options());
  at::Tensor full = torch::cat({prev, ut}, 2);  // [B, C, K-1+T]
  const std::vector<int64_t> one = {1}, zero = {0};
  at::Tensor out = torch::conv1d(full, weight.unsqueeze(1), bias, /*stride=*/one,
                                 /*padding=*/zero, /*dilation=*/one, /*groups=*/c);
  if (state != nullptr) state->copy_(full.narrow(2, t, k - 1));
  return out.transpose(1, 2);
}

// B or C as the scan reads it: [B, T, N] when one group serves every head (the demo
// family's layout, computed exactly as before groups existed), else one row per head
// [B, T, H, N] (head h reads group h / (heads / groups), HF's repeat_interleave).
at::Tensor PerHead(const at::Tensor& v, int64_t heads) {
  if (v.dim() == 3) return v;
  const int64_t groups = v.size(2);
  if (groups == 1) return v.squeeze(2);
  return v.repeat_interleave(heads / groups, 2);
}

// RMSNorm of the gated output g [B, T, H, P] over each head or each group of heads, times
// `weight` [H*P]. With a head mask the mean of squares runs over the kept channels only and
// masked heads come out zero, so a mask that keeps a prefix of each group equals slicing.
at::Tensor GatedNorm(const at::Tensor& g, const at::Tensor& weight, const MambaSpec& spec,
                     double eps, const at::Tensor& head_mask) {
  const int64_t b = g.size(0), t = g.size(1), h = spec.heads, p = spec.head_dim;
  const int64_t units = spec.norm == MambaNorm::kPerHead ? h : spec.groups;
  at::Tensor x = g.reshape({b, t, units, h * p / units});
  at::Tensor ms;
  at::Tensor m;  // [1 or B, 1, units, channels per unit]
  if (head_mask.defined()) {
    m = head_mask.to(g.options());
    m = m.dim() == 1 ? m.view({1, 1, h, 1}) : m.view({m.size(0), 1, h, 1});
    m = m.expand({-1, 1, h, p});
    m = m.reshape({m.size(0), 1, units, h * p / units});
    at::Tensor kept = m.sum(-1, /*keepdim=*/true).clamp_min(1e-6);
    ms = (x.pow(2) * m).sum(-1, /*keepdim=*/true) / kept;
  } else {
    ms = x.pow(2).mean(-1, /*keepdim=*/true);
  }
  at::Tensor y = x * torch::rsqrt(ms + eps);
  if (m.defined()) y = y * m;
  return y.reshape({b, t, h, p}) * weight.view({h, p});
}

// Old head indices that keep the first `per_group` heads of each of `groups` groups of
// `parent_per_group` heads, group by group.
std::vector<int64_t> GroupPrefixHeads(int64_t groups, int64_t parent_per_group,
                                      int64_t per_group) {
  std::vector<int64_t> heads;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = 0; i < per_group; ++i) heads.push_back(g * parent_per_group + i);
  }
  return heads;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> SsdChunkedScan(const at::Tensor& x, const at::Tensor& dt,
                                                 const at::Tensor& a, const at::Tensor& b,
                                                 const at::Tensor& c, const at::Tensor& state,
                                                 int64_t chunk) {
  const int64_t bs = x.size(0), t = x.size(1), h = x.size(2), p = x.size(3), n = b.size(-1);
  const at::Tensor bh = PerHead(b, h), ch = PerHead(c, h);
  const bool shared = bh.dim() == 3;  // one B/C row for every head
  const int64_t len = std::min(chunk, t);
  const int64_t nc = (t + len - 1) / len;
  const int64_t pad = nc * len - t;
  // Padding steps have dt = 0 and x = 0: decay 1 and no input, so the final state is the
  // state after the last real step.
  auto padt = [&](const at::Tensor& v) {
    if (pad == 0) return v;
    std::vector<int64_t> shape = v.sizes().vec();
    shape[1] = pad;
    return torch::cat({v, torch::zeros(shape, v.options())}, 1);
  };
  at::Tensor xc = padt(x).view({bs, nc, len, h, p});
  at::Tensor dtc = padt(dt).view({bs, nc, len, h});
  const std::vector<int64_t> bc_shape =
      shared ? std::vector<int64_t>{bs, nc, len, n} : std::vector<int64_t>{bs, nc, len, h, n};
  at::Tensor bc = padt(bh).reshape(bc_shape);
  at::Tensor cc = padt(ch).reshape(bc_shape);
  at::Tensor xdt = xc * dtc.unsqueeze(-1);      // [B, nc, L, H, P]
  at::Tensor acum = torch::cumsum(dtc * a, 2);  // [B, nc, L, H], log decay so far
  // Inside a chunk: y_l = sum_{s<=l} (C_l . B_s) exp(acum_l - acum_s) dt_s x_s.
  at::Tensor seg = acum.unsqueeze(3) - acum.unsqueeze(2);  // [B, nc, L(l), L(s), H]
  at::Tensor causal = torch::ones({len, len}, torch::dtype(torch::kBool).device(x.device()))
                          .tril()
                          .view({1, 1, len, len, 1});
  at::Tensor decay = torch::exp(seg.masked_fill(~causal, -std::numeric_limits<float>::infinity()));
  at::Tensor cb = shared ? torch::einsum("bcln,bcsn->bcls", {cc, bc}).unsqueeze(-1)
                         : torch::einsum("bclhn,bcshn->bclsh", {cc, bc});
  at::Tensor y = torch::einsum("bclsh,bcshp->bclhp", {cb * decay, xdt});
  // State contributed by each chunk, decayed to the chunk's end.
  at::Tensor to_end = torch::exp(acum.narrow(2, len - 1, 1) - acum);  // [B, nc, L, H]
  at::Tensor chunk_states = torch::einsum(shared ? "bcsn,bcshp->bchpn" : "bcshn,bcshp->bchpn",
                                          {bc, xdt * to_end.unsqueeze(-1)});  // [B,nc,H,P,N]
  at::Tensor chunk_decay = torch::exp(acum.select(2, len - 1));              // [B, nc, H]
  // Across chunks: a short sequential recurrence over nc chunk states.
  std::vector<at::Tensor> starts;
  at::Tensor hstate = state;
  for (int64_t i = 0; i < nc; ++i) {
    starts.push_back(hstate);
    hstate = hstate * chunk_decay.select(1, i).view({bs, h, 1, 1}) + chunk_states.select(1, i);
  }
  at::Tensor start = torch::stack(starts, 1);  // [B, nc, H, P, N]
  y = y + torch::einsum(shared ? "bcln,bchpn->bclhp" : "bclhn,bchpn->bclhp", {cc, start}) *
              torch::exp(acum).unsqueeze(-1);
  y = y.reshape({bs, nc * len, h, p}).narrow(1, 0, t);
  return {y, hstate};
}

std::pair<at::Tensor, at::Tensor> SsdRecurrentScan(const at::Tensor& x, const at::Tensor& dt,
                                                   const at::Tensor& a, const at::Tensor& b,
                                                   const at::Tensor& c, const at::Tensor& state) {
  const int64_t bs = x.size(0), t = x.size(1), h = x.size(2);
  const at::Tensor bh = PerHead(b, h), ch = PerHead(c, h);
  const bool shared = bh.dim() == 3;
  std::vector<at::Tensor> ys;
  at::Tensor hstate = state;
  for (int64_t i = 0; i < t; ++i) {
    at::Tensor dti = dt.select(1, i);  // [B, H]
    at::Tensor decay = torch::exp(dti * a).view({bs, h, 1, 1});
    at::Tensor input = (dti.unsqueeze(-1) * x.select(1, i)).unsqueeze(-1) *
                       bh.select(1, i).view({bs, shared ? 1 : h, 1, -1});
    hstate = hstate * decay + input;
    ys.push_back(
        torch::einsum(shared ? "bhpn,bn->bhp" : "bhpn,bhn->bhp", {hstate, ch.select(1, i)}));
  }
  return {torch::stack(ys, 1), hstate};
}

MambaImpl::MambaImpl(const MambaSpec& spec, const MixerInit& init)
    : spec_(spec), eps_(init.norm_eps) {
  const int64_t inner = spec.heads * spec.head_dim, bcw = 2 * spec.groups * spec.state;
  const int64_t k = spec.conv_kernel;
  z_proj_ = register_parameter("z_proj", InitWeight({inner, init.hidden}, init.std, init));
  x_proj_ = register_parameter("x_proj", InitWeight({inner, init.hidden}, init.std, init));
  bc_proj_ = register_parameter("bc_proj", InitWeight({bcw, init.hidden}, init.std, init));
  dt_proj_ = register_parameter("dt_proj", InitWeight({spec.heads, init.hidden}, init.std, init));
  // dt starts log-uniform in [1e-3, 1e-1] (Mamba's init); dt_bias is its inverse softplus.
  at::Tensor dt =
      torch::exp(torch::rand({spec.heads}) * (std::log(0.1) - std::log(1e-3)) + std::log(1e-3));
  dt_bias_ = register_parameter("dt_bias", dt + torch::log(-torch::expm1(-dt)));
  // A = -exp(a_log) starts in [-16, -1]: heads with a spread of memory lengths.
  a_log_ = register_parameter("a_log", torch::log(torch::rand({spec.heads}) * 15 + 1));
  d_ = register_parameter("d", torch::ones({spec.heads}));
  const double conv_bound = 1.0 / std::sqrt(static_cast<double>(k));
  conv_x_ = register_parameter("conv_x", (torch::rand({inner, k}) * 2 - 1) * conv_bound);
  conv_x_bias_ = register_parameter("conv_x_bias", torch::zeros({inner}));
  conv_bc_ = register_parameter("conv_bc", (torch::rand({bcw, k}) * 2 - 1) * conv_bound);
  conv_bc_bias_ = register_parameter("conv_bc_bias", torch::zeros({bcw}));
  norm_ = register_parameter("norm", torch::ones({inner}));
  out_proj_ = register_parameter("out_proj", InitWeight({init.hidden, inner}, init.out_std, init));
}

at::Tensor MambaImpl::Forward(const at::Tensor& u, const LayerContext& ctx) {
  const int64_t b = u.size(0), t = u.size(1), h = spec_.heads, p = spec_.head_dim;
  const int64_t n = spec_.state, gn = spec_.groups * spec_.state;
  at::Tensor z = Project(ctx, u, z_proj_).view({b, t, h, p});
  at::Tensor dt = torch::softplus(Project(ctx, u, dt_proj_) + dt_bias_);  // [B, T, H]
  at::Tensor* conv_x_state = ctx.cache != nullptr ? &ctx.cache->conv_x : nullptr;
  at::Tensor* conv_bc_state = ctx.cache != nullptr ? &ctx.cache->conv_bc : nullptr;
  at::Tensor xs =
      torch::silu(CausalConv(Project(ctx, u, x_proj_), conv_x_, conv_x_bias_, conv_x_state))
          .view({b, t, h, p});
  at::Tensor bcs =
      torch::silu(CausalConv(Project(ctx, u, bc_proj_), conv_bc_, conv_bc_bias_, conv_bc_state));
  at::Tensor bm = bcs.narrow(2, 0, gn).reshape({b, t, spec_.groups, n});
  at::Tensor cm = bcs.narrow(2, gn, gn).reshape({b, t, spec_.groups, n});
  at::Tensor a = -torch::exp(a_log_);
  at::Tensor state =
      ctx.cache != nullptr ? ctx.cache->ssm : torch::zeros({b, h, p, n}, u.options());
  auto [y, final_state] = ctx.decode ? SsdRecurrentScan(xs, dt, a, bm, cm, state)
                                     : SsdChunkedScan(xs, dt, a, bm, cm, state, spec_.chunk);
  if (ctx.cache != nullptr) ctx.cache->ssm.copy_(final_state);
  y = y + xs * d_.view({h, 1});
  at::Tensor g = y * torch::silu(z);
  const at::Tensor head_mask = ctx.mask != nullptr ? ctx.mask->mamba_heads : at::Tensor();
  if (spec_.norm == MambaNorm::kPerHead) {
    // The demo family's path, unchanged: norm per head, then the mask.
    g = g * torch::rsqrt(g.pow(2).mean(-1, /*keepdim=*/true) + eps_) * norm_.view({h, p});
    g = ApplyMask(g, head_mask, 2);
  } else {
    g = GatedNorm(g, norm_, spec_, eps_, head_mask);
  }
  if (ctx.observer != nullptr) ctx.observer->Observe({Site::kMambaHeads, ctx.layer}, g);
  return Project(ctx, g.reshape({b, t, h * p}), out_proj_);
}

void MambaImpl::InitCache(LayerCache& cache, int64_t batch, int64_t capacity,
                          const at::TensorOptions& options) const {
  const int64_t k = spec_.conv_kernel - 1;
  cache.conv_x = torch::zeros({batch, spec_.heads * spec_.head_dim, k}, options);
  cache.conv_bc = torch::zeros({batch, 2 * spec_.groups * spec_.state, k}, options);
  cache.ssm = torch::zeros({batch, spec_.heads, spec_.head_dim, spec_.state}, options);
}

void MambaImpl::PermuteHidden(const at::Tensor& perm) {
  for (at::Tensor* w : {&z_proj_, &x_proj_, &bc_proj_, &dt_proj_}) {
    AssignParameter(*w, w->index_select(1, perm));
  }
  AssignParameter(out_proj_, out_proj_.index_select(0, perm));
}

absl::Status MambaImpl::Permute(const LayerPermutation& perm) {
  if (perm.mamba_heads.empty()) return absl::OkStatus();
  TAILOR_RETURN_IF_ERROR(CheckPermutation(perm.mamba_heads, spec_.heads, "mamba_heads"));
  // B/C rows belong to a group, so a head may only move inside its own group.
  const int64_t per_group = spec_.heads / spec_.groups;
  for (int64_t i = 0; i < spec_.heads; ++i) {
    if (perm.mamba_heads[i] / per_group != i / per_group) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mamba_heads: head ", perm.mamba_heads[i], " of B/C group ",
          perm.mamba_heads[i] / per_group, " cannot move to position ", i, " (group ",
          i / per_group, "); heads are permuted only inside their group of ", per_group));
    }
  }
  at::Tensor heads = IndexTensor(perm.mamba_heads, z_proj_.device());
  at::Tensor rows = ExpandUnits(heads, spec_.head_dim);
  for (at::Tensor* w : {&z_proj_, &x_proj_, &conv_x_, &conv_x_bias_, &norm_}) {
    AssignParameter(*w, w->index_select(0, rows));
  }
  for (at::Tensor* w : {&dt_proj_, &dt_bias_, &a_log_, &d_}) {
    AssignParameter(*w, w->index_select(0, heads));
  }
  AssignParameter(out_proj_, out_proj_.index_select(1, rows));
  return absl::OkStatus();
}

absl::Status MambaImpl::CopyPrefixFrom(const Mixer& parent_mixer, const at::Tensor& hidden) {
  const auto* parent = dynamic_cast<const MambaImpl*>(&parent_mixer);
  if (parent == nullptr) return absl::InvalidArgumentError("parent layer is not mamba");
  const MambaSpec& p = parent->spec_;
  if (spec_.heads > p.heads || spec_.head_dim != p.head_dim || spec_.state != p.state ||
      spec_.conv_kernel != p.conv_kernel || spec_.groups != p.groups || spec_.norm != p.norm) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mamba heads=", spec_.heads, " head_dim=", spec_.head_dim, " state=", spec_.state,
        " conv_kernel=", spec_.conv_kernel, " groups=", spec_.groups,
        " norm=", MambaNormName(spec_.norm), " is not a prefix of heads=", p.heads,
        " head_dim=", p.head_dim, " state=", p.state, " conv_kernel=", p.conv_kernel,
        " groups=", p.groups, " norm=", MambaNormName(p.norm)));
  }
  // Every group keeps its first heads / groups heads (its B/C rows stay whole), so the
  // child's head h still reads the group it read in the parent.
  const at::Tensor heads = IndexTensor(
      GroupPrefixHeads(p.groups, p.heads / p.groups, spec_.heads / spec_.groups),
      parent->z_proj_.device());
  const at::Tensor rows = ExpandUnits(heads, spec_.head_dim);
  AssignParameter(z_proj_, parent->z_proj_.index_select(0, rows).index_select(1, hidden));
  AssignParameter(x_proj_, parent->x_proj_.index_select(0, rows).index_select(1, hidden));
  AssignParameter(bc_proj_, parent->bc_proj_.index_select(1, hidden));
  AssignParameter(dt_proj_, parent->dt_proj_.index_select(0, heads).index_select(1, hidden));
  AssignParameter(dt_bias_, parent->dt_bias_.index_select(0, heads));
  AssignParameter(a_log_, parent->a_log_.index_select(0, heads));
  AssignParameter(d_, parent->d_.index_select(0, heads));
  AssignParameter(conv_x_, parent->conv_x_.index_select(0, rows));
  AssignParameter(conv_x_bias_, parent->conv_x_bias_.index_select(0, rows));
  AssignParameter(conv_bc_, parent->conv_bc_);
  AssignParameter(conv_bc_bias_, parent->conv_bc_bias_);
  AssignParameter(norm_, parent->norm_.index_select(0, rows));
  AssignParameter(out_proj_, parent->out_proj_.index_select(0, hidden).index_select(1, rows));
  return absl::OkStatus();
}

}  // namespace tailor::model
