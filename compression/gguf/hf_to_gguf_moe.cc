#include "compression/gguf/hf_to_gguf_moe.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tailor::gguf {
namespace {

// "model.layers.N.<rest>" -> {N, rest}; {-1, ""} for other names.
std::pair<int64_t, absl::string_view> LayerOf(absl::string_view hf_name) {
  const std::vector<absl::string_view> parts = absl::StrSplit(hf_name, absl::MaxSplits('.', 3));
  int64_t layer = -1;
  if (parts.size() == 4 && parts[0] == "model" && parts[1] == "layers" &&
      absl::SimpleAtoi(parts[2], &layer) && layer >= 0) {
    return {layer, parts[3]};
  }
  return {-1, ""};
}

bool Mixtral(const hf::HfConfig& c) { return c.architecture == hf::Architecture::kMixtral; }

// The HF name of one projection of expert `e` in layer `i`; `which` 0 gate, 1 up, 2 down.
std::string ExpertTensorName(const hf::HfConfig& c, int64_t i, int64_t e, int which) {
  // Mixtral: w1 = gate, w3 = up, w2 = down.
  static constexpr const char* kMixtral[] = {"w1", "w3", "w2"};
  static constexpr const char* kQwen[] = {"gate_proj", "up_proj", "down_proj"};
  return Mixtral(c) ? absl::StrCat("model.layers.", i, ".block_sparse_moe.experts.", e, ".",
                                   kMixtral[which], ".weight")
                    : absl::StrCat("model.layers.", i, ".mlp.experts.", e, ".", kQwen[which],
                                   ".weight");
}

TensorType NativeType(model::DType d) {
  if (d == model::DType::kBF16) return TensorType::kBF16;
  if (d == model::DType::kF16) return TensorType::kF16;
  return TensorType::kF32;
}

// One stacked [E, rows, cols] tensor streamed from E [rows, cols] views in order.
absl::Status AddStack(const std::string& name, const std::vector<hf::TensorView>& views,
                      bool all_f32, GgufWriter& w) {
  TensorType type = all_f32 ? TensorType::kF32 : NativeType(views[0].dtype);
  for (const hf::TensorView& v : views) {
    if (*v.shape != *views[0].shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": the experts' tensors differ in shape (", *v.file, ") and cannot be stacked"));
    }
    if (v.dtype != views[0].dtype) type = TensorType::kF32;  // one type per GGUF tensor
  }
  std::vector<int64_t> shape = {static_cast<int64_t>(views.size())};
  shape.insert(shape.end(), views[0].shape->begin(), views[0].shape->end());
  std::vector<TensorSource> parts;
  for (const hf::TensorView& v : views) parts.push_back(CheckpointTensorSource(v, type));
  return w.AddTensor(name, shape, type, [parts](const ByteSink& sink) -> absl::Status {
    for (const TensorSource& part : parts) {
      absl::Status s = part(sink);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::StatusOr<std::string> MoeGgufArchitecture(const hf::HfConfig& c) {
  const absl::string_view name = hf::ArchitectureName(c.architecture);
  if (c.moe.router != hf::Router::kSoftmax || c.moe.shared_intermediate != 0) {
    return absl::UnimplementedError(
        absl::StrCat(name, ": only a softmax router without shared experts is exported"));
  }
  if (Mixtral(c)) {
    if (c.sliding_window != 0) {
      return absl::UnimplementedError(absl::StrCat(
          name, ": sliding_window ", c.sliding_window,
          " has no GGUF `llama` equivalent (llama.cpp would attend to the whole context)"));
    }
    // llama.cpp's converter writes Mixtral as `llama` with experts; its MoE branch is
    // softmax -> top k -> renormalised, Mixtral's routing exactly.
    return std::string("llama");
  }
  if (c.architecture != hf::Architecture::kQwen3Moe) {
    return absl::UnimplementedError(absl::StrCat(name, " is not a MoE family tailor exports"));
  }
  if (!c.moe.norm_topk_prob) {
    return absl::UnimplementedError(absl::StrCat(
        name, ": norm_topk_prob = false cannot be expressed: llama.cpp's `qwen3moe` always "
              "renormalises the top-k expert weights"));
  }
  if (c.has_kind(hf::LayerKind::kAttentionMlp)) {
    return absl::UnimplementedError(absl::StrCat(
        name, ": dense layers (mlp_only_layers / decoder_sparse_step) cannot be expressed: "
              "llama.cpp's `qwen3moe` loads routed experts in every layer"));
  }
  if (c.qkv_bias || c.o_bias) {
    return absl::UnimplementedError(
        absl::StrCat(name, ": attention_bias is not loaded by llama.cpp's `qwen3moe` arch"));
  }
  return std::string("qwen3moe");
}

absl::StatusOr<std::string> MoeRouterGgufName(absl::string_view hf_name) {
  const auto [layer, rest] = LayerOf(hf_name);
  if (layer >= 0 && (rest == "block_sparse_moe.gate.weight" || rest == "mlp.gate.weight")) {
    return absl::StrCat("blk.", layer, ".ffn_gate_inp.weight");
  }
  return absl::NotFoundError(absl::StrCat(hf_name, " is not a router tensor"));
}

bool IsHfExpertTensor(absl::string_view hf_name) {
  const absl::string_view rest = LayerOf(hf_name).second;
  return absl::StartsWith(rest, "block_sparse_moe.experts.") ||
         absl::StartsWith(rest, "mlp.experts.");
}

absl::Status AddMoeMetadata(const hf::HfConfig& c, const std::string& arch, GgufWriter& w) {
  absl::Status s = w.Add(arch + ".expert_count", static_cast<uint32_t>(c.moe.num_experts));
  if (s.ok()) {
    s = w.Add(arch + ".expert_used_count", static_cast<uint32_t>(c.moe.experts_per_token));
  }
  // Mixtral's experts are feed_forward_length (= intermediate_size) wide already.
  if (s.ok() && !Mixtral(c)) {
    s = w.Add(arch + ".expert_feed_forward_length",
              static_cast<uint32_t>(c.moe.expert_intermediate));
  }
  return s;
}

absl::Status AddStackedExperts(const hf::HfCheckpoint& ckpt, bool all_f32,
                               GgufExportSummary& summary, GgufWriter& w) {
  const hf::HfConfig& c = ckpt.config();
  static constexpr const char* kGguf[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.layers[i] != hf::LayerKind::kAttentionMoe) continue;
    for (int which = 0; which < 3; ++which) {
      const std::string name = absl::StrCat("blk.", i, ".", kGguf[which], ".weight");
      std::vector<hf::TensorView> views;
      for (int64_t e = 0; e < c.moe.num_experts; ++e) {
        const std::string hf_name = ExpertTensorName(c, i, e, which);
        absl::StatusOr<hf::TensorView> view = ckpt.Tensor(hf_name);
        if (!view.ok()) return view.status();
        views.push_back(*view);
        summary.map.emplace_back(hf_name, name);
      }
      absl::Status s = AddStack(name, views, all_f32, w);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace tailor::gguf
