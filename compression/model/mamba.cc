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

}  // namespace

std::pair<at::Tensor, at::Tensor> SsdChunkedScan(const at::Tensor& x, const at::Tensor& dt,
                                                 const at::Tensor& a, const at::Tensor& b,
                                                 const at::Tensor& c, const at::Tensor& state,
                                                 int64_t chunk) {
  const int64_t bs = x.size(0), t = x.size(1), h = x.size(2), p = x.size(3), n = b.size(2);
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
  at::Tensor bc = padt(b).view({bs, nc, len, n});
  at::Tensor cc = padt(c).view({bs, nc, len, n});
  at::Tensor xdt = xc * dtc.unsqueeze(-1);      // [B, nc, L, H, P]
  at::Tensor acum = torch::cumsum(dtc * a, 2);  // [B, nc, L, H], log decay so far
  // Inside a chunk: y_l = sum_{s<=l} (C_l . B_s) exp(acum_l - acum_s) dt_s x_s.
  at::Tensor seg = acum.unsqueeze(3) - acum.unsqueeze(2);  // [B, nc, L(l), L(s), H]
  at::Tensor causal = torch::ones({len, len}, torch::dtype(torch::kBool).device(x.device()))
                          .tril()
                          .view({1, 1, len, len, 1});
  at::Tensor decay = torch::exp(seg.masked_fill(~causal, -std::numeric_limits<float>::infinity()));
  at::Tensor cb = torch::einsum("bcln,bcsn->bcls", {cc, bc});
  at::Tensor y = torch::einsum("bclsh,bcshp->bclhp", {cb.unsqueeze(-1) * decay, xdt});
  // State contributed by each chunk, decayed to the chunk's end.
  at::Tensor to_end = torch::exp(acum.narrow(2, len - 1, 1) - acum);  // [B, nc, L, H]
  at::Tensor chunk_states =
      torch::einsum("bcsn,bcshp->bchpn", {bc, xdt * to_end.unsqueeze(-1)});  // [B,nc,H,P,N]
  at::Tensor chunk_decay = torch::exp(acum.select(2, len - 1));              // [B, nc, H]
  // Across chunks: a short sequential recurrence over nc chunk states.
  std::vector<at::Tensor> starts;
  at::Tensor hstate = state;
  for (int64_t i = 0; i < nc; ++i) {
    starts.push_back(hstate);
    hstate = hstate * chunk_decay.select(1, i).view({bs, h, 1, 1}) + chunk_states.select(1, i);
  }
  at::Tensor start = torch::stack(starts, 1);  // [B, nc, H, P, N]
  y = y + torch::einsum("bcln,bchpn->bclhp", {cc, start}) * torch::exp(acum).unsqueeze(-1);
  y = y.reshape({bs, nc * len, h, p}).narrow(1, 0, t);
  return {y, hstate};
}

std::pair<at::Tensor, at::Tensor> SsdRecurrentScan(const at::Tensor& x, const at::Tensor& dt,
                                                   const at::Tensor& a, const at::Tensor& b,
                                                   const at::Tensor& c, const at::Tensor& state) {
  const int64_t bs = x.size(0), t = x.size(1), h = x.size(2);
  std::vector<at::Tensor> ys;
  at::Tensor hstate = state;
  for (int64_t i = 0; i < t; ++i) {
    at::Tensor dti = dt.select(1, i);  // [B, H]
    at::Tensor decay = torch::exp(dti * a).view({bs, h, 1, 1});
    at::Tensor input =
        (dti.unsqueeze(-1) * x.select(1, i)).unsqueeze(-1) * b.select(1, i).view({bs, 1, 1, -1});
    hstate = hstate * decay + input;
    ys.push_back(torch::einsum("bhpn,bn->bhp", {hstate, c.select(1, i)}));
  }
  return {torch::stack(ys, 1), hstate};
}

MambaImpl::MambaImpl(const MambaSpec& spec, const MixerInit& init)
    : spec_(spec), eps_(init.norm_eps) {
  const int64_t inner = spec.heads * spec.head_dim, bcw = 2 * spec.state, k = spec.conv_kernel;
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
  const int64_t b = u.size(0), t = u.size(1), h = spec_.heads, p = spec_.head_dim, n = spec_.state;
  at::Tensor z = Project(ctx, u, z_proj_).view({b, t, h, p});
  at::Tensor dt = torch::softplus(Project(ctx, u, dt_proj_) + dt_bias_);  // [B, T, H]
  at::Tensor* conv_x_state = ctx.cache != nullptr ? &ctx.cache->conv_x : nullptr;
  at::Tensor* conv_bc_state = ctx.cache != nullptr ? &ctx.cache->conv_bc : nullptr;
  at::Tensor xs =
      torch::silu(CausalConv(Project(ctx, u, x_proj_), conv_x_, conv_x_bias_, conv_x_state))
          .view({b, t, h, p});
  at::Tensor bcs =
      torch::silu(CausalConv(Project(ctx, u, bc_proj_), conv_bc_, conv_bc_bias_, conv_bc_state));
  at::Tensor bm = bcs.narrow(2, 0, n), cm = bcs.narrow(2, n, n);
  at::Tensor a = -torch::exp(a_log_);
  at::Tensor state =
      ctx.cache != nullptr ? ctx.cache->ssm : torch::zeros({b, h, p, n}, u.options());
  auto [y, final_state] = ctx.decode ? SsdRecurrentScan(xs, dt, a, bm, cm, state)
                                     : SsdChunkedScan(xs, dt, a, bm, cm, state, spec_.chunk);
  if (ctx.cache != nullptr) ctx.cache->ssm.copy_(final_state);
  y = y + xs * d_.view({h, 1});
  at::Tensor g = y * torch::silu(z);
  g = g * torch::rsqrt(g.pow(2).mean(-1, /*keepdim=*/true) + eps_) * norm_.view({h, p});
  if (ctx.mask != nullptr) g = ApplyMask(g, ctx.mask->mamba_heads, 2);
  if (ctx.observer != nullptr) ctx.observer->Observe({Site::kMambaHeads, ctx.layer}, g);
  return Project(ctx, g.reshape({b, t, h * p}), out_proj_);
}

void MambaImpl::InitCache(LayerCache& cache, int64_t batch, int64_t capacity,
                          const at::TensorOptions& options) const {
  const int64_t k = spec_.conv_kernel - 1;
  cache.conv_x = torch::zeros({batch, spec_.heads * spec_.head_dim, k}, options);
  cache.conv_bc = torch::zeros({batch, 2 * spec_.state, k}, options);
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
      spec_.conv_kernel != p.conv_kernel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mamba heads=", spec_.heads, " head_dim=", spec_.head_dim, " state=", spec_.state,
        " conv_kernel=", spec_.conv_kernel, " is not a prefix of heads=", p.heads,
        " head_dim=", p.head_dim, " state=", p.state, " conv_kernel=", p.conv_kernel));
  }
  const int64_t inner = spec_.heads * spec_.head_dim, h = spec_.heads;
  AssignParameter(z_proj_, parent->z_proj_.narrow(0, 0, inner).index_select(1, hidden));
  AssignParameter(x_proj_, parent->x_proj_.narrow(0, 0, inner).index_select(1, hidden));
  AssignParameter(bc_proj_, parent->bc_proj_.index_select(1, hidden));
  AssignParameter(dt_proj_, parent->dt_proj_.narrow(0, 0, h).index_select(1, hidden));
  AssignParameter(dt_bias_, parent->dt_bias_.narrow(0, 0, h));
  AssignParameter(a_log_, parent->a_log_.narrow(0, 0, h));
  AssignParameter(d_, parent->d_.narrow(0, 0, h));
  AssignParameter(conv_x_, parent->conv_x_.narrow(0, 0, inner));
  AssignParameter(conv_x_bias_, parent->conv_x_bias_.narrow(0, 0, inner));
  AssignParameter(conv_bc_, parent->conv_bc_);
  AssignParameter(conv_bc_bias_, parent->conv_bc_bias_);
  AssignParameter(norm_, parent->norm_.narrow(0, 0, inner));
  AssignParameter(out_proj_, parent->out_proj_.index_select(0, hidden).narrow(1, 0, inner));
  return absl::OkStatus();
}

}  // namespace tailor::model
