#include "compression/hf/hf_import_moe.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tailor::hf {

model::LayerSpec MoeLayerSpec(const HfConfig& c) {
  model::LayerSpec l = model::LayerSpec::Moe(c.moe.num_experts, c.moe.experts_per_token,
                                             c.moe.expert_intermediate, /*shared_ffn=*/0);
  // softmax(all) -> top k -> renormalised (Mixtral; Qwen3-MoE with norm_topk_prob) is the
  // default variant; Qwen3-MoE without norm_topk_prob keeps the top-k probabilities as they are.
  l.moe.norm_top_k = c.moe.norm_topk_prob;
  return l;
}

absl::StatusOr<std::string> MapMoeLayerTensor(absl::string_view rest) {
  // Router: one [experts, hidden] matrix.
  if (rest == "block_sparse_moe.gate.weight" || rest == "mlp.gate.weight") {
    return std::string("moe.router");
  }
  absl::string_view tail;
  for (absl::string_view prefix : {"block_sparse_moe.experts.", "mlp.experts."}) {
    if (absl::StartsWith(rest, prefix)) {
      tail = rest.substr(prefix.size());
      break;
    }
  }
  if (tail.empty()) return absl::NotFoundError(absl::StrCat(rest, " is not an expert tensor"));
  // "E.w1.weight" / "E.gate_proj.weight".
  const std::vector<absl::string_view> parts = absl::StrSplit(tail, absl::MaxSplits('.', 1));
  int64_t expert = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &expert) || expert < 0) {
    return absl::NotFoundError(absl::StrCat(rest, " is not an expert tensor"));
  }
  // Mixtral: w1 = gate, w3 = up, w2 = down (modeling_mixtral.py: w2(act(w1 x) * w3 x)).
  static constexpr std::pair<absl::string_view, absl::string_view> kNames[] = {
      {"w1.weight", "w_gate"},        {"w3.weight", "w_up"},      {"w2.weight", "w_down"},
      {"gate_proj.weight", "w_gate"}, {"up_proj.weight", "w_up"}, {"down_proj.weight", "w_down"},
  };
  for (const auto& [hf, internal] : kNames) {
    if (parts[1] == hf) return absl::StrCat("moe.", internal, "[", expert, "]");
  }
  return absl::NotFoundError(absl::StrCat(rest, " is not an expert tensor"));
}

std::pair<std::string, int64_t> SplitStackSlot(absl::string_view internal) {
  const size_t open = internal.rfind('[');
  int64_t slot = -1;
  if (open == absl::string_view::npos || !absl::EndsWith(internal, "]") ||
      !absl::SimpleAtoi(internal.substr(open + 1, internal.size() - open - 2), &slot) ||
      slot < 0) {
    return {std::string(internal), -1};
  }
  return {std::string(internal.substr(0, open)), slot};
}

}  // namespace tailor::hf
