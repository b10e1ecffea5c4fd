#ifndef TAILOR_COMPRESSION_MODEL_MAMBA_H_
#define TAILOR_COMPRESSION_MODEL_MAMBA_H_

#include "compression/model/layers.h"

namespace tailor::model {

// Mamba-2-style selective state-space mixer (SSD, scalar decay per head, `groups` B/C groups;
// head h reads group h / (heads / groups)):
//   z, x = proj(u); B, C = proj(u); dt = softplus(proj(u) + dt_bias)
//   x, (B, C) = SiLU(causal depthwise conv(...) + conv bias)
//   h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T;  y_t = h_t C_t + D x_t      (per head)
//   out = out_proj(RMSNorm(y * SiLU(z)))
// The gated norm runs per head (the demo family's: removing heads does not change the others)
// or per B/C group (Nemotron-H). Under a head mask the per-group norm averages over the kept
// heads' channels only, so a mask that keeps the same heads in every group computes what the
// sliced model computes. Prefill runs the chunked SSD scan (quadratic inside a chunk,
// recurrent across chunks); decode runs the one-step recurrence.
class MambaImpl : public Mixer {
 public:
  MambaImpl(const MambaSpec& spec, const MixerInit& init);

  at::Tensor Forward(const at::Tensor& x, const LayerContext& ctx) override;
  void InitCache(LayerCache& cache, int64_t batch, int64_t capacity,
                 const at::TensorOptions& options) const override;
  void PermuteHidden(const at::Tensor& perm) override;
  absl::Status Permute(const LayerPermutation& perm) override;
  absl::Status CopyPrefixFrom(const Mixer& parent, const at::Tensor& hidden) override;

  const MambaSpec& spec() const { return spec_; }

 private:
  MambaSpec spec_;
  double eps_;
  at::Tensor z_proj_, x_proj_, bc_proj_, dt_proj_;  // [out, hidden]
  at::Tensor dt_bias_, a_log_, d_;                  // [heads]
  at::Tensor conv_x_, conv_x_bias_;                 // [heads*head_dim, K], [heads*head_dim]
  at::Tensor conv_bc_, conv_bc_bias_;               // [2*groups*state, K], [2*groups*state]
  at::Tensor norm_;                                 // [heads*head_dim]
  at::Tensor out_proj_;                             // [hidden, heads*head_dim]
};

// The scan itself, exposed for tests: x [B, T, H, P], dt [B, T, H], a [H] (negative),
// b and c [B, T, N] (one group) or [B, T, G, N] (head h reads group h / (H / G)),
// state [B, H, P, N] (the state before x[:, 0]). Returns y [B, T, H, P] (without the D skip)
// and the state after the last step.
std::pair<at::Tensor, at::Tensor> SsdChunkedScan(const at::Tensor& x, const at::Tensor& dt,
                                                 const at::Tensor& a, const at::Tensor& b,
                                                 const at::Tensor& c, const at::Tensor& state,
                                                 int64_t chunk);
std::pair<at::Tensor, at::Tensor> SsdRecurrentScan(const at::Tensor& x, const at::Tensor& dt,
                                                   const at::Tensor& a, const at::Tensor& b,
                                                   const at::Tensor& c, const at::Tensor& state);

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_MAMBA_H_
