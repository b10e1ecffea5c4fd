#include "compression/autocompress/ranking.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::autocompress {
namespace {

using model::ActivationSite;
using model::HybridConfig;
using model::LayerKind;
using model::LayerSpec;
using model::Site;

absl::Status FromTorch(const c10::Error& e, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
}

// Scores are accumulated in double on the CPU: calibration sums many batches and the
// ranking must not depend on accumulation order more than necessary.
at::Tensor ToAcc(const at::Tensor& t) { return t.detach().to(torch::kCPU, torch::kDouble); }

void AddTo(at::Tensor& acc, const at::Tensor& value) {
  if (acc.defined()) {
    acc = acc + value;
  } else {
    acc = value.clone();
  }
}

std::vector<double> ToVector(const at::Tensor& t) {
  if (!t.defined()) return {};
  at::Tensor c = t.contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Per-axis scores, zeros when the axis was never observed (e.g. an expert no token chose).
std::vector<double> Scores(const at::Tensor& acc, int64_t n) {
  if (!acc.defined()) return std::vector<double>(n, 0.0);
  return ToVector(acc.sqrt());
}

// Head scores: L2 norm over head_dim of the channel scores = sqrt of the summed squares.
std::vector<double> HeadScores(const at::Tensor& acc, int64_t heads) {
  if (!acc.defined()) return std::vector<double>(heads, 0.0);
  return ToVector(acc.sum(1).sqrt());
}

}  // namespace

at::Tensor SquaredMeanAbs(const at::Tensor& a) {
  at::Tensor per_seq = a.abs().mean(1);  // [B, C...]
  return per_seq.pow(2).sum(0);
}

ImportanceObserver::ImportanceObserver(const HybridConfig& config)
    : config_(config), layers_(config.num_layers()) {
  for (int64_t i = 0; i < config.num_layers(); ++i) {
    const LayerSpec& l = config.layers[i];
    if (l.kind == LayerKind::kMoe && l.moe.experts > 0) {
      layers_[i].expert_ffn.resize(l.moe.experts);
      layers_[i].expert_norm_sum = torch::zeros({l.moe.experts}, torch::kDouble);
      layers_[i].expert_tokens = torch::zeros({l.moe.experts}, torch::kDouble);
    }
  }
}

void ImportanceObserver::Observe(const ActivationSite& site, const at::Tensor& value) {
  if (site.layer >= static_cast<int>(layers_.size())) return;
  if (site.site == Site::kNormOutput) {
    AddTo(hidden_, SquaredMeanAbs(ToAcc(value)));
    return;
  }
  if (site.layer < 0) return;
  LayerAcc& acc = layers_[site.layer];
  switch (site.site) {
    case Site::kAttentionHeads:
      AddTo(acc.attention_heads, SquaredMeanAbs(ToAcc(value)));
      break;
    case Site::kMambaHeads:
      AddTo(acc.mamba_heads, SquaredMeanAbs(ToAcc(value)));
      break;
    case Site::kMlpFfn:
      AddTo(acc.mlp_ffn, SquaredMeanAbs(ToAcc(value)));
      break;
    case Site::kSharedFfn:
      AddTo(acc.shared_ffn, SquaredMeanAbs(ToAcc(value)));
      break;
    case Site::kExpertFfn:
      if (site.expert >= 0 && site.expert < static_cast<int>(acc.expert_ffn.size())) {
        AddTo(acc.expert_ffn[site.expert], ToAcc(value).pow(2).sum(0));
      }
      break;
    case Site::kExpertOutput:
      if (site.expert >= 0 && acc.expert_norm_sum.defined() &&
          site.expert < acc.expert_norm_sum.size(0)) {
        at::Tensor v = ToAcc(value);
        acc.expert_norm_sum[site.expert] += v.norm(2, {1}).sum();
        acc.expert_tokens[site.expert] += static_cast<double>(v.size(0));
      }
      break;
    case Site::kBlockInput:
      acc.block_input = ToAcc(value);
      break;
    case Site::kBlockOutput:
      if (acc.block_input.defined()) {
        at::Tensor cos = torch::cosine_similarity(acc.block_input, ToAcc(value), -1);
        acc.depth_sum += (1.0 - cos).sum().item<double>();
        acc.depth_tokens += cos.numel();
        acc.block_input = at::Tensor();
      }
      break;
    default:
      break;
  }
}

Importance ImportanceObserver::Result() const {
  Importance out;
  out.hidden = Scores(hidden_, config_.hidden);
  out.layers.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& l = config_.layers[i];
    const LayerAcc& acc = layers_[i];
    LayerImportance& r = out.layers[i];
    if (!l.present()) continue;
    switch (l.kind) {
      case LayerKind::kAttention:
        r.attention_heads = HeadScores(acc.attention_heads, l.attention.heads);
        break;
      case LayerKind::kMamba:
        r.mamba_heads = HeadScores(acc.mamba_heads, l.mamba.heads);
        break;
      case LayerKind::kMoe:
        if (l.moe.experts > 0) {
          r.experts = ToVector(acc.expert_norm_sum / acc.expert_tokens.clamp_min(1.0));
          for (int64_t e = 0; e < l.moe.experts; ++e) {
            r.expert_ffn.push_back(Scores(acc.expert_ffn[e], l.moe.expert_ffn));
          }
        }
        if (l.moe.shared_ffn > 0) r.shared_ffn = Scores(acc.shared_ffn, l.moe.shared_ffn);
        break;
      case LayerKind::kMlp:
        r.mlp_ffn = Scores(acc.mlp_ffn, l.mlp.ffn);
        break;
    }
    r.depth = acc.depth_tokens > 0 ? acc.depth_sum / static_cast<double>(acc.depth_tokens) : 0.0;
  }
  return out;
}

absl::StatusOr<Importance> RankImportance(model::HybridLM& model,
                                          const std::vector<at::Tensor>& batches) {
  if (batches.empty()) return absl::InvalidArgumentError("RankImportance: no calibration batches");
  ImportanceObserver observer(model->config());
  try {
    torch::NoGradGuard no_grad;
    model::ForwardOptions options;
    options.observer = &observer;
    for (const at::Tensor& batch : batches) {
      TAILOR_RETURN_IF_ERROR(model->Forward(batch, options).status());
    }
    return observer.Result();
  } catch (const c10::Error& e) {
    return FromTorch(e, "RankImportance");
  }
}

std::vector<int64_t> DescendingOrder(const std::vector<double>& scores) {
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  return order;
}

std::vector<int64_t> GroupedDescendingOrder(const std::vector<double>& scores, int64_t groups) {
  if (groups <= 1) return DescendingOrder(scores);
  const int64_t per = static_cast<int64_t>(scores.size()) / groups;
  std::vector<int64_t> order;
  for (int64_t g = 0; g < groups; ++g) {
    const std::vector<double> inside(scores.begin() + g * per, scores.begin() + (g + 1) * per);
    for (int64_t j : DescendingOrder(inside)) order.push_back(g * per + j);
  }
  return order;
}

absl::StatusOr<model::Permutation> RankedPermutation(const HybridConfig& config,
                                                     const Importance& importance) {
  auto check = [](size_t got, int64_t want, const std::string& what) -> absl::Status {
    if (static_cast<int64_t>(got) != want) {
      return absl::InvalidArgumentError(
          absl::StrCat("importance ", what, ": ", got, " scores, want ", want));
    }
    return absl::OkStatus();
  };
  TAILOR_RETURN_IF_ERROR(check(importance.hidden.size(), config.hidden, "hidden"));
  TAILOR_RETURN_IF_ERROR(check(importance.layers.size(), config.num_layers(), "layers"));
  model::Permutation perm;
  perm.hidden = DescendingOrder(importance.hidden);
  perm.layers.resize(config.num_layers());
  for (int64_t i = 0; i < config.num_layers(); ++i) {
    const LayerSpec& l = config.layers[i];
    const LayerImportance& r = importance.layers[i];
    model::LayerPermutation& p = perm.layers[i];
    const std::string at = absl::StrCat("layers[", i, "]");
    if (!l.present()) continue;
    switch (l.kind) {
      case LayerKind::kAttention: {
        const int64_t h = l.attention.heads, kv = l.attention.kv_heads, g = h / kv;
        TAILOR_RETURN_IF_ERROR(check(r.attention_heads.size(), h, at + ".attention_heads"));
        std::vector<double> group(kv, 0.0);
        for (int64_t q = 0; q < h; ++q) group[q / g] += r.attention_heads[q];
        p.attention_kv_heads = DescendingOrder(group);
        for (int64_t new_group = 0; new_group < kv; ++new_group) {
          const int64_t old_group = p.attention_kv_heads[new_group];
          std::vector<double> inside(r.attention_heads.begin() + old_group * g,
                                     r.attention_heads.begin() + (old_group + 1) * g);
          for (int64_t j : DescendingOrder(inside)) p.attention_heads.push_back(old_group * g + j);
        }
        break;
      }
      case LayerKind::kMamba:
        TAILOR_RETURN_IF_ERROR(check(r.mamba_heads.size(), l.mamba.heads, at + ".mamba_heads"));
        // B/C rows are shared by a group's heads: heads are ranked inside their group, and
        // a child keeps the same number of the best heads of every group.
        p.mamba_heads = GroupedDescendingOrder(r.mamba_heads, l.mamba.groups);
        break;
      case LayerKind::kMoe:
        if (l.moe.experts > 0) {
          TAILOR_RETURN_IF_ERROR(check(r.experts.size(), l.moe.experts, at + ".experts"));
          TAILOR_RETURN_IF_ERROR(check(r.expert_ffn.size(), l.moe.experts, at + ".expert_ffn"));
          // Experts per layer; with routing groups only inside their group, which the
          // group-limited routing needs (the model refuses moves between groups).
          p.experts = GroupedDescendingOrder(r.experts, l.moe.groups);
          for (const auto& s : r.expert_ffn) {
            TAILOR_RETURN_IF_ERROR(check(s.size(), l.moe.expert_ffn, at + ".expert_ffn[e]"));
            p.expert_ffn.push_back(DescendingOrder(s));
          }
        }
        if (l.moe.shared_ffn > 0) {
          TAILOR_RETURN_IF_ERROR(check(r.shared_ffn.size(), l.moe.shared_ffn, at + ".shared_ffn"));
          p.shared_ffn = DescendingOrder(r.shared_ffn);
        }
        break;
      case LayerKind::kMlp:
        TAILOR_RETURN_IF_ERROR(check(r.mlp_ffn.size(), l.mlp.ffn, at + ".mlp_ffn"));
        p.mlp_ffn = DescendingOrder(r.mlp_ffn);
        break;
    }
  }
  return perm;
}

absl::Status PermuteModel(model::HybridLM& model, const Importance& importance) {
  TAILOR_ASSIGN_OR_RETURN(model::Permutation perm, RankedPermutation(model->config(), importance));
  return model::PermuteHybridLM(model, perm);
}

}  // namespace tailor::autocompress
