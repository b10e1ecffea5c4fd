#ifndef TAILOR_COMPRESSION_COSTMODEL_SEARCH_SPACE_H_
#define TAILOR_COMPRESSION_COSTMODEL_SEARCH_SPACE_H_

// The architecture search space carved out of a parent (spec section 1, "Search space"),
// shared by the profiler (which configurations to measure), the cost model (per-choice
// costs) and the architecture search.
//
// Global choices: the hidden width (a prefix of the parent's ranked residual channels) and
// the number of Mamba heads (the same in every kept Mamba layer, at most the layer's own; a
// multiple of every layer's B/C groups, each group keeping its first heads).
// Per-layer choices, each including "removed" (all widths 0: the layer is the identity):
//   attention: KV groups kept x query heads kept per group (heads within GQA groups)
//   mamba:     keep / remove (the head count is the global choice)
//   moe:       routed experts (top_k = min(parent top_k, experts); with routing groups k >= 2
//              of every group, top_k = min(parent top_k, top_groups * k)), routed-expert FFN
//              width, shared-expert FFN width; routed 0 with shared > 0 is a dense MLP
// Every option keeps the parent layer's block variant (biases, q/k norms, RoPE, Mamba groups
// and norm, MoE routing, activations); only widths change.
//   mlp:       FFN width
// Every width is a prefix of the parent's ranked axis, so any architecture is sliced from
// one ranked parent (SliceHybridLM) and masked in the supernet (PrefixMask).
//
// No LibTorch here.

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compression/model/config.h"

namespace tailor::costmodel {

struct SearchSpaceOptions {
  // Global hidden widths: parent * k / hidden_steps for k = 1..hidden_steps, rounded down to
  // a multiple of hidden_multiple (at least hidden_multiple).
  int hidden_steps = 4;
  int64_t hidden_multiple = 8;
  // Every other width (FFN, expert FFN, shared FFN, experts, KV groups, query heads per
  // group, Mamba heads): parent * k / width_steps for k = 1..width_steps, rounded to the
  // nearest integer >= 1, duplicates dropped.
  int width_steps = 4;
  // An MoE layer keeps its shared expert at full width whenever it keeps routed experts, and
  // is otherwise removed whole: the only MoE students a layout with one shared expert width
  // and a required shared expert can hold (GGUF `nemotron_h_moe`; gguf::StudentShapeRules).
  // That layout also has one expert count: Sample ties it across MoE layers.
  bool keep_shared_experts = false;
  // One width per kind for all layers, none removed: the only students a layout with global
  // widths can hold (llama.cpp's `qwen3`, `qwen2`, `mixtral`-as-`llama`, `qwen3moe`;
  // gguf::StudentShapeRules::per_layer_widths false). Sample then draws one option for all
  // layers of one parent spec, never "removed"; the options themselves are unchanged.
  bool uniform_layers = false;
  // false: the hidden width and attention heads keep the parent's (llama.cpp's `qwen2` sizes
  // attn_q by the hidden width; gguf::StudentShapeRules::prune_hidden_and_heads).
  bool prune_hidden_and_heads = true;
};

// One option of one layer. For Mamba the spec's head count is the parent's; the global
// Mamba-heads choice replaces it (see SearchSpace::LayerSpecFor).
struct LayerOption {
  model::LayerSpec spec;
  std::string label;  // e.g. "removed", "heads=2,kv=1", "experts=2,expert_ffn=64,shared_ffn=0"
};

// An architecture as indices into the space's choices.
struct Architecture {
  int hidden = 0;           // index into hidden_choices()
  int mamba_heads = 0;      // index into mamba_head_choices() (0 when there is no Mamba layer)
  std::vector<int> layers;  // per layer, an index into layer_options(i)

  bool operator==(const Architecture& o) const {
    return hidden == o.hidden && mamba_heads == o.mamba_heads && layers == o.layers;
  }
};

class SearchSpace {
 public:
  // INVALID_ARGUMENT when the parent config is invalid or options are out of range.
  static absl::StatusOr<SearchSpace> FromParent(const model::HybridConfig& parent,
                                                const SearchSpaceOptions& options = {});

  const model::HybridConfig& parent() const { return parent_; }
  const SearchSpaceOptions& options() const { return options_; }
  // Ascending; the last is the parent's.
  const std::vector<int64_t>& hidden_choices() const { return hidden_; }
  // Ascending; the last is the widest Mamba layer's head count. {0} without Mamba layers.
  const std::vector<int64_t>& mamba_head_choices() const { return mamba_heads_; }
  int num_layers() const { return static_cast<int>(options_by_layer_.size()); }
  // Option 0 is "removed" for every layer; the last is the parent's own layer.
  const std::vector<LayerOption>& layer_options(int layer) const {
    return options_by_layer_[layer];
  }

  // The layer's spec for an option under a global Mamba-heads choice.
  model::LayerSpec LayerSpecFor(int layer, int option, int mamba_heads_index) const;

  Architecture ParentArchitecture() const;
  // INVALID_ARGUMENT naming the index that is out of range.
  absl::Status Validate(const Architecture& arch) const;
  // The child config (same vocab, max_seq, layer count and kinds as the parent).
  absl::StatusOr<model::HybridConfig> Materialize(const Architecture& arch) const;
  // Uniform over every choice (global and per layer), so a draw is usually heterogeneous;
  // with uniform_layers one present option per parent layer spec, shared by its layers; with
  // keep_shared_experts every MoE layer keeping routed experts has the first one's count.
  Architecture Sample(std::mt19937_64& rng) const;
  // log10 of the number of architectures.
  double Log10Size() const;
  // One line: "hidden=96 mamba_heads=3 | attention heads=2,kv=1 | mamba keep | ...".
  std::string Describe(const Architecture& arch) const;

 private:
  model::HybridConfig parent_;
  SearchSpaceOptions options_;
  std::vector<int64_t> hidden_;
  std::vector<int64_t> mamba_heads_;
  std::vector<std::vector<LayerOption>> options_by_layer_;
};

// n * k / steps for k = 1..steps, rounded to the nearest multiple of `multiple` (at least
// `multiple`, at most n), the last always n; ascending, unique. {} for n <= 0.
// E.g. (4, 4) -> {1, 2, 3, 4}; (4, 4, 2) -> {2, 4}.
std::vector<int64_t> StepChoices(int64_t n, int steps, int64_t multiple = 1);

// A layer of the parent's block variant (biases, q/k norms, RoPE, Mamba groups and norm, MoE
// routing, activations) at other widths: the search space's options and the profiler's grid
// nodes, so a cost is measured on the block the child will run. MoeOf clamps top_k to the
// experts (and to those top_groups groups reach); experts 0 drops the routed part.
model::LayerSpec AttentionOf(const model::LayerSpec& parent, int64_t heads, int64_t kv_heads);
model::LayerSpec MambaOf(const model::LayerSpec& parent, int64_t heads);
model::LayerSpec MoeOf(const model::LayerSpec& parent, int64_t experts, int64_t expert_ffn,
                       int64_t shared_ffn);
model::LayerSpec MlpOf(const model::LayerSpec& parent, int64_t ffn);
// The KV groups and query heads per group an attention layer may keep: StepChoices, or the
// parent's alone without prune_heads (SearchSpaceOptions::prune_hidden_and_heads).
std::vector<int64_t> AttentionKvChoices(const model::AttentionSpec& a, int steps,
                                        bool prune_heads);
std::vector<int64_t> AttentionGroupChoices(const model::AttentionSpec& a, int steps,
                                           bool prune_heads);
// The routed-expert counts a layer may keep: StepChoices; with routing groups StepChoices in
// multiples of the groups with >= 2 per group (each group keeps its first k:
// model::KeptExperts), e.g. 8 experts in 2 groups, 4 steps -> {4, 6, 8}.
std::vector<int64_t> ExpertChoices(const model::MoeSpec& m, int steps);

// The canonical cost-table key of a layer at a hidden width (CostEntry.config), e.g.
//   attention  "hidden=128,heads=4,kv=2,head_dim=32"
//   mamba      "hidden=128,heads=4,head_dim=32,state=16,conv=4,chunk=16"
//   moe        "hidden=128,experts=4,top_k=2,expert_ffn=128,shared_ffn=128"
//   mlp        "hidden=128,ffn=256"
// An absent layer is "removed".
std::string LayerKey(const model::LayerSpec& spec, int64_t hidden);
// The numeric knobs of the key (CostEntry.params), same names.
std::map<std::string, double> LayerParams(const model::LayerSpec& spec, int64_t hidden);

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_SEARCH_SPACE_H_
