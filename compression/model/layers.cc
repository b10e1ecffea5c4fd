#include "compression/model/layers.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"

namespace tailor::model {

at::Tensor ApplyMask(const at::Tensor& x, const at::Tensor& mask, int64_t channel_dim) {
  if (!mask.defined()) return x;
  const int64_t nd = x.dim();
  const int64_t cd = channel_dim < 0 ? nd + channel_dim : channel_dim;
  std::vector<int64_t> shape;
  if (mask.dim() == 2) {
    // Per-sequence mask: batch on dim 0, channels on `cd`, ones elsewhere.
    shape.assign(nd, 1);
    shape[0] = mask.size(0);
    shape[cd] = mask.size(1);
  } else {
    shape.push_back(mask.size(0));
    for (int64_t i = cd + 1; i < nd; ++i) shape.push_back(1);
  }
  return x * mask.to(x.options()).view(shape);
}

at::Tensor MaskRows(const at::Tensor& mask, int64_t batch, int64_t time) {
  if (!mask.defined()) return mask;
  const int64_t c = mask.size(-1);
  if (mask.dim() == 1) return mask.unsqueeze(0).expand({batch * time, c});
  return mask.unsqueeze(1).expand({batch, time, c}).reshape({batch * time, c});
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps,
                   const at::Tensor& hidden_mask) {
  if (!hidden_mask.defined()) {
    return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
  }
  at::Tensor m = hidden_mask.to(x.options());
  if (m.dim() == 2) m = m.unsqueeze(1);  // [B, 1, C] against [B, T, C]
  // Masked channels are zero in the residual stream already; dividing by the kept count
  // (not C) is what makes a prefix mask equal to the sliced model.
  at::Tensor kept = m.sum(-1, /*keepdim=*/true).clamp_min(1e-6);
  at::Tensor ms = (x.pow(2) * m).sum(-1, /*keepdim=*/true) / kept;
  return x * torch::rsqrt(ms + eps) * weight * m;
}

at::Tensor Project(LinearProvider* provider, const at::Tensor& x, const at::Tensor& weight,
                   int64_t expert) {
  if (provider != nullptr) {
    at::Tensor y = provider->Linear(x, weight, expert);
    if (y.defined()) return y;
  }
  return torch::linear(x, expert < 0 ? weight : weight[expert]);
}

at::Tensor Embed(LinearProvider* provider, const at::Tensor& table, const at::Tensor& ids) {
  if (provider != nullptr) {
    at::Tensor y = provider->Embedding(table, ids);
    if (y.defined()) return y;
  }
  return torch::embedding(table, ids);
}

bool IsProjectionWeight(absl::string_view name) {
  const size_t dot = name.rfind('.');
  const absl::string_view leaf = dot == absl::string_view::npos ? name : name.substr(dot + 1);
  // Kept in sync with the Project / Embed call sites of attention, mamba, moe, mlp and
  // hybrid_lm: a name missing here only costs a dense copy, an extra one would break serving.
  static constexpr absl::string_view kLeaves[] = {
      "q_proj", "k_proj",  "v_proj",      "o_proj",    "z_proj",      "x_proj",
      "bc_proj", "dt_proj", "out_proj",   "w_gate",    "w_up",        "w_down",
      "router",  "shared_gate", "shared_up", "shared_down", "embed", "lm_head"};
  for (absl::string_view l : kLeaves) {
    if (leaf == l) return true;
  }
  return false;
}

at::Tensor NormalInit(std::vector<int64_t> shape, double std) { return torch::randn(shape) * std; }

at::Tensor InitWeight(std::vector<int64_t> shape, double std, const MixerInit& init) {
  return init.random ? NormalInit(std::move(shape), std) : torch::zeros(shape);
}

void AssignParameter(at::Tensor& dst, const at::Tensor& src) {
  torch::NoGradGuard no_grad;
  dst.copy_(src);
}

absl::Status CheckPermutation(const std::vector<int64_t>& perm, int64_t n, absl::string_view what) {
  if (static_cast<int64_t>(perm.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": permutation has ", perm.size(), " entries, want ", n));
  }
  std::vector<bool> seen(n, false);
  for (int64_t v : perm) {
    if (v < 0 || v >= n || seen[v]) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": not a permutation of 0..", n - 1, " (bad or repeated ", v, ")"));
    }
    seen[v] = true;
  }
  return absl::OkStatus();
}

at::Tensor IndexTensor(const std::vector<int64_t>& index, const at::Device& device) {
  return torch::tensor(index, torch::kLong).to(device);
}

at::Tensor ExpandUnits(const at::Tensor& units, int64_t width) {
  return (units.unsqueeze(1) * width + torch::arange(width, units.options()).unsqueeze(0))
      .flatten();
}

}  // namespace tailor::model
