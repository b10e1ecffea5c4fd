#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_SPACE_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_SPACE_H_

// The AutoCompress search space (spec §1 "Search space"): a list of choice axes, each a
// short ascending list of prefix widths on one ranked axis of the parent. A candidate
// architecture is one index per axis; the supernet mask of an axis is the expected
// keep-mask of its (soft) choice. No LibTorch here so that cost-model code can read it.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/model/config.h"

namespace tailor::autocompress {

enum class AxisKind {
  kHidden,          // global: residual width
  kMambaHeads,      // global: heads of every Mamba layer (model::KeptMambaHeads: clamped
                    // to the layer's heads, multiples of its B/C groups)
  kAttentionHeads,  // per layer: query heads kept per GQA group (0 = layer removed)
  kExperts,         // per layer: routed experts (0 = no routed part; with routing groups
                    // multiples of them, each group keeping its first: model::KeptExperts)
  kExpertFfn,       // per layer: every routed expert's FFN width (0 = no routed part)
  kSharedFfn,       // per layer: shared-expert FFN width (0 = no shared part)
  kMlpFfn,          // per layer: dense MLP width (0 = layer removed)
};

struct ChoiceAxis {
  AxisKind kind = AxisKind::kHidden;
  int layer = -1;               // -1 for global axes
  std::vector<int64_t> widths;  // ascending, distinct; the last is the parent's width
  std::string name;             // "hidden", "layers[3].experts", ... (for logs and reports)
  // Further layers that take this axis's width too (SpaceOptions::uniform_layers): one
  // choice, one width, for `layer` and every one of these.
  std::vector<int> tied_layers;

  // The layers the axis sets: none for a global axis, else `layer` then `tied_layers`.
  std::vector<int> layers() const;
  bool covers(int l) const;
};

struct SearchSpace {
  std::vector<ChoiceAxis> axes;
  int64_t total_choices() const;
};

struct SpaceOptions {
  // Non-zero widths per axis: round(full * i / n) for i = 1..n (deduplicated).
  int width_choices = 4;
  // Adds width 0 to per-layer axes so a layer (or an MoE part) can be removed.
  bool allow_removal = true;
  // Keeps shared experts at full width (the paper found them cheap and left them whole).
  bool search_shared_ffn = true;
  // One width per kind for all layers: the per-layer axes of a kind over layers of the same
  // parent width become one axis, and no layer is removed. For parents whose only deployable
  // layouts have one width per kind (hf::StudentShapeRules): a student the search can pick
  // is always one the export can write.
  bool uniform_layers = false;
  // false: the hidden and attention-head axes keep only the parent's width (a layout that
  // ties the query width to the hidden width: llama.cpp's `qwen2`).
  bool prune_hidden_and_heads = true;
  // An MoE layer keeps its shared expert at full width unless the layer is removed whole (its
  // routed experts gone too): gguf::StudentShapeRules::keep_shared_experts.
  bool keep_shared_experts = false;
};

// One axis per global width and per prunable per-layer width of `parent`. Expert-count
// choices stay >= top_k (a masked expert still takes its routing slot, so fewer experts
// than top_k has no supernet counterpart); a layer with routing groups keeps k >= 2 experts
// of every group (multiples of its groups, model::KeptExperts) with top_groups * k >= top_k.
// Mamba head choices are multiples of every Mamba layer's groups
// (model::MambaHeadMultiple). Absent parent layers get no axes. With `uniform_layers` the
// per-layer axes of one kind and parent width are tied into one, named "layers[i,j,...]".
absl::StatusOr<SearchSpace> BuildSearchSpace(const model::HybridConfig& parent,
                                             const SpaceOptions& options = {});

// The child described by one choice index per axis (indices[i] indexes axes[i].widths).
// Widths of 0 remove the part; MoE routed part is dropped when experts or expert_ffn is 0.
absl::StatusOr<model::HybridConfig> ChildConfig(const model::HybridConfig& parent,
                                                const SearchSpace& space,
                                                const std::vector<int>& indices);

// The measured settle's finer space (docs/autocompress.md, "fine steps"): `space` with each
// step between two non-zero widths of the hidden width and of the FFN axes (dense MLP,
// routed-expert and shared-expert FFN) split into `fine_steps` equal parts, rounded to whole
// units. Why: one step of the search's space (64 of an MLP's 256 units, 32 of 128 hidden
// units) is 4-8% of a request on the quickstart's parent, more than the budget the settle
// leaves unused; the search itself needs no finer choices. Head and expert counts keep
// their widths (whole heads, whole routing groups), and so does a step from 0 (removing a
// layer is not a width). Every width of `space` stays, so each of its choices has one here
// (RefineIndices). `fine_steps` <= 1: `space` itself.
SearchSpace RefineSpace(const SearchSpace& space, int fine_steps);

// `indices` (one choice per axis of `coarse`) as the choices of the same widths in `fine`,
// RefineSpace of `coarse`. INVALID_ARGUMENT naming the axis when the axes differ or a width
// has no counterpart.
absl::StatusOr<std::vector<int>> RefineIndices(const SearchSpace& coarse,
                                               const SearchSpace& fine,
                                               const std::vector<int>& indices);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_SPACE_H_
