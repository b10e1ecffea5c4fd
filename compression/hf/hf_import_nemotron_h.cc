#include "compression/hf/hf_import_nemotron_h.h"

#include <torch/torch.h>

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compression/hf/hf_import_internal.h"
#include "common/status_macros.h"

namespace tailor::hf {
namespace {

absl::string_view Arch(const HfConfig& c) { return ArchitectureName(c.architecture); }

using internal::CheckModelFits;
using internal::ShapeString;
using internal::TensorOfView;

// The Mamba mixer's HF tensors onto the internal mamba block. in_proj rows are
// [z (inner) | x (inner) | B (groups*state) | C (groups*state) | dt (heads)] and conv1d
// channels [x (inner) | B | C], the order of HF's torch.split and llama.cpp's views; tailor
// keeps z, x, B/C and dt as separate projections and convolves x and B/C separately.
void AddMambaSlices(const MambaConfig& m, const std::string& hf, const std::string& in,
                    std::vector<NemotronHTensorSlice>& out) {
  const int64_t inner = m.intermediate_size(), bc = 2 * m.n_groups * m.state_size;
  const std::string in_proj = hf + "in_proj.weight";
  out.push_back({in_proj, in + "z_proj", 0, inner});
  out.push_back({in_proj, in + "x_proj", inner, inner});
  out.push_back({in_proj, in + "bc_proj", 2 * inner, bc});
  out.push_back({in_proj, in + "dt_proj", 2 * inner + bc, m.num_heads});
  out.push_back({hf + "conv1d.weight", in + "conv_x", 0, inner});
  out.push_back({hf + "conv1d.weight", in + "conv_bc", inner, bc});
  out.push_back({hf + "conv1d.bias", in + "conv_x_bias", 0, inner});
  out.push_back({hf + "conv1d.bias", in + "conv_bc_bias", inner, bc});
  out.push_back({hf + "dt_bias", in + "dt_bias"});
  out.push_back({hf + "A_log", in + "a_log"});
  out.push_back({hf + "D", in + "d"});
  out.push_back({hf + "norm.weight", in + "norm"});
  out.push_back({hf + "out_proj.weight", in + "out_proj"});
}

// Nemotron-H's 'E' block as tailor's moe variants (config.h, MoeSpec).
model::LayerSpec MoeLayer(const MoeConfig& m) {
  model::LayerSpec l = model::LayerSpec::Moe(m.num_experts, m.experts_per_token,
                                             m.expert_intermediate, m.shared_intermediate);
  l.moe.router = model::MoeRouter::kSigmoid;
  l.moe.score_bias = true;
  l.moe.groups = m.n_group;
  l.moe.top_groups = m.topk_group;
  l.moe.norm_top_k = m.norm_topk_prob;
  l.moe.scale = m.routed_scaling_factor;
  l.moe.activation = model::FfnActivation::kReluSquared;
  return l;
}

// Router, score bias, each expert's up/down projection (stacked into [E, ...]) and the
// shared expert.
void AddMoeSlices(const MoeConfig& m, const std::string& hf, const std::string& in,
                  std::vector<NemotronHTensorSlice>& out) {
  out.push_back({hf + "gate.weight", in + "router"});
  out.push_back({hf + "gate.e_score_correction_bias", in + "score_bias"});
  for (int64_t e = 0; e < m.num_experts; ++e) {
    const std::string x = absl::StrCat(hf, "experts.", e, ".");
    out.push_back({x + "up_proj.weight", in + "w_up", 0, -1, e});
    out.push_back({x + "down_proj.weight", in + "w_down", 0, -1, e});
  }
  out.push_back({hf + "shared_experts.up_proj.weight", in + "shared_up"});
  out.push_back({hf + "shared_experts.down_proj.weight", in + "shared_down"});
}

// The slice of `t` (the HF tensor) that `s` names, shaped as `param`.
absl::StatusOr<at::Tensor> SliceOf(const at::Tensor& t, const NemotronHTensorSlice& s,
                                   const at::Tensor& param, const std::string& where) {
  at::Tensor v = t;
  if (s.rows >= 0) {
    v = t.reshape({t.size(0), -1});
    if (s.row_begin + s.rows > v.size(0)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": shape ", ShapeString(t.sizes()),
                                                     " has no rows [", s.row_begin, ", ",
                                                     s.row_begin + s.rows, ")"));
    }
    v = v.narrow(0, s.row_begin, s.rows);
    if (param.dim() == 1) v = v.reshape({s.rows});
  }
  if (v.sizes() != param.sizes()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": shape ", ShapeString(v.sizes()),
                                                   ", the model needs ",
                                                   ShapeString(param.sizes())));
  }
  return v;
}

}  // namespace

absl::Status RefuseUnsupportedNemotronH(const HfConfig& c) {
  if (!c.has_kind(LayerKind::kMamba)) return absl::OkStatus();
  if (!c.mamba.conv_bias) {
    return absl::UnimplementedError(absl::StrCat(
        Arch(c), ": use_conv_bias false is not supported (tailor's mamba block has conv biases)"));
  }
  // HF clamps dt to time_step_limit; the default (0, inf) is no clamp, and llama.cpp never
  // clamps, so only the default imports and exports to the same function.
  if (c.mamba.time_step_limit_min > 0 || c.mamba.time_step_limit_max > 0) {
    return absl::UnimplementedError(absl::StrCat(
        Arch(c), ": time_step_limit [", c.mamba.time_step_limit_min, ", ",
        c.mamba.time_step_limit_max, "] clamps dt; only the default [0, inf) is supported"));
  }
  return absl::OkStatus();
}

model::LayerSpec NemotronHMambaLayer(const MambaConfig& m) {
  model::LayerSpec l =
      model::LayerSpec::Mamba(m.num_heads, m.head_dim, m.state_size, m.conv_kernel, m.chunk_size);
  l.mamba.groups = m.n_groups;
  l.mamba.norm = model::MambaNorm::kPerGroup;
  return l;
}

absl::StatusOr<model::HybridConfig> NemotronHHybridConfig(const HfConfig& c) {
  TAILOR_RETURN_IF_ERROR(RefuseUnsupportedNemotronH(c));
  model::HybridConfig out;
  out.vocab = c.vocab_size;
  out.hidden = c.hidden_size;
  out.max_seq = c.max_position_embeddings;
  out.norm_eps = c.rms_norm_eps;
  out.tie_embeddings = c.tie_word_embeddings;
  for (LayerKind kind : c.layers) {
    model::LayerSpec l;
    if (kind == LayerKind::kMamba) {
      l = NemotronHMambaLayer(c.mamba);
    } else if (kind == LayerKind::kAttention) {
      l = model::LayerSpec::Attention(c.num_attention_heads, c.num_key_value_heads, c.head_dim);
      l.attention.rope = false;
    } else if (kind == LayerKind::kMlp) {
      l = model::LayerSpec::Mlp(c.intermediate_size);
      l.mlp.activation = model::FfnActivation::kReluSquared;
    } else {
      l = MoeLayer(c.moe);
    }
    out.layers.push_back(l);
  }
  absl::Status valid = model::ValidateHybridConfig(out);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Arch(c), ": the internal config is invalid: ", valid.message()));
  }
  return out;
}

absl::StatusOr<std::vector<NemotronHTensorSlice>> NemotronHTensorSlices(const HfConfig& c) {
  TAILOR_RETURN_IF_ERROR(RefuseUnsupportedNemotronH(c));
  std::vector<NemotronHTensorSlice> out;
  out.push_back({"backbone.embeddings.weight", "embed"});
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const std::string hf = absl::StrCat("backbone.layers.", i, ".");
    const std::string in = absl::StrCat("layers.", i, ".");
    out.push_back({hf + "norm.weight", in + "norm"});
    const std::string mixer = hf + "mixer.";
    if (c.layers[i] == LayerKind::kMamba) {
      AddMambaSlices(c.mamba, mixer, in + "mamba.", out);
    } else if (c.layers[i] == LayerKind::kAttention) {
      for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
        out.push_back({absl::StrCat(mixer, p, ".weight"), absl::StrCat(in, "attention.", p)});
      }
    } else if (c.layers[i] == LayerKind::kMlp) {
      out.push_back({mixer + "up_proj.weight", in + "mlp.w_up"});
      out.push_back({mixer + "down_proj.weight", in + "mlp.w_down"});
    } else {
      AddMoeSlices(c.moe, mixer, in + "moe.", out);
    }
  }
  out.push_back({"backbone.norm_f.weight", "final_norm"});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", "lm_head"});
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> NemotronHTensorMapping(
    const HfConfig& c) {
  TAILOR_ASSIGN_OR_RETURN(std::vector<NemotronHTensorSlice> slices, NemotronHTensorSlices(c));
  std::vector<std::pair<std::string, std::string>> out;
  for (const NemotronHTensorSlice& s : slices) out.emplace_back(s.hf, s.internal);
  return out;
}

absl::StatusOr<model::HybridLM> ImportNemotronH(const HfCheckpoint& checkpoint,
                                                uint64_t memory_limit_bytes) {
  const HfConfig& c = checkpoint.config();
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig config, NemotronHHybridConfig(c));
  TAILOR_ASSIGN_OR_RETURN(std::vector<NemotronHTensorSlice> slices, NemotronHTensorSlices(c));
  TAILOR_RETURN_IF_ERROR(CheckModelFits(checkpoint, config, memory_limit_bytes));
  TAILOR_ASSIGN_OR_RETURN(model::HybridLM model, model::CreateUninitializedHybridLM(config));
  try {
    const auto params = model->named_parameters(/*recurse=*/true);
    model::TensorMap views;
    std::map<std::string, std::vector<at::Tensor>> stacks;  // per-expert tensors, in order
    for (const NemotronHTensorSlice& s : slices) {
      TAILOR_ASSIGN_OR_RETURN(TensorView view, checkpoint.Tensor(s.hf));
      const std::string where =
          absl::StrCat(*view.file, ": tensor ", s.hf, " (-> ", s.internal, ")");
      const at::Tensor* param = params.find(s.internal);
      if (param == nullptr) {
        return absl::InternalError(absl::StrCat(where, ": the model has no such parameter"));
      }
      const at::Tensor want = s.expert >= 0 ? param->select(0, 0) : *param;
      TAILOR_ASSIGN_OR_RETURN(at::Tensor t, SliceOf(TensorOfView(view), s, want, where));
      if (s.expert >= 0) {
        stacks[s.internal].push_back(std::move(t));
      } else {
        views.emplace(s.internal, std::move(t));
      }
    }
    // One [E, ...] copy per stacked tensor; LoadStateDict checks its shape.
    for (auto& [name, parts] : stacks) views.emplace(name, torch::stack(parts));
    // Checks that every parameter got a tensor, then copies (converting to F32).
    // Each tensor's shard pages are released once copied: the import's peak is the F32
    // model, not the F32 model plus every mapped shard (docs/benchmarks.md, bench/hf_io).
    TAILOR_RETURN_IF_ERROR(model->LoadStateDict(
        views, checkpoint.dir(),
        [&](const at::Tensor& t) { checkpoint.ReleasePages(t.data_ptr(), t.nbytes()); }));
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat(checkpoint.dir(), ": import: ", e.what_without_backtrace()));
  }
  return model;
}

}  // namespace tailor::hf
