#ifndef TAILOR_COMPRESSION_MODEL_LAYERS_H_
#define TAILOR_COMPRESSION_MODEL_LAYERS_H_

// What every layer kind (attention, mamba, moe, mlp) shares: masks, activation
// observation, per-layer cache state and the Mixer interface the HybridLM drives.
//
// Shapes: activations are [batch, time, channels]. Masks are float tensors of shape [C]
// (one architecture for the whole batch) or [batch, C] (one architecture per sequence, so a
// search step can train several sampled architectures in one batch). An undefined tensor
// means "no mask".

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "compression/model/config.h"

namespace tailor::model {

// Masks of one layer. Each applies to its axis in ranked (prefix) order; all zeros turns
// the layer off. Expert masks act on expert OUTPUTS after top-k routing (not on router
// scores): masked experts still take their top-k slot and still receive gradient.
struct LayerMask {
  at::Tensor attention_heads;  // [heads]: at the input of the output projection
  at::Tensor mamba_heads;      // [heads]: on the gated, normalised SSM output per head
  at::Tensor experts;          // [experts]: routed expert outputs
  at::Tensor expert_ffn;       // [expert_ffn]: every routed expert's FFN neurons
  at::Tensor shared_ffn;       // [shared_ffn]
  at::Tensor mlp_ffn;          // [ffn]
};

// Masks of a whole model. `hidden` masks residual channels: the embedding output, every
// block's output and the RMSNorms, which then average over the kept channels only, so a
// prefix mask computes exactly what the sliced (narrower) model computes.
struct ArchMask {
  at::Tensor hidden;              // [hidden]
  std::vector<LayerMask> layers;  // empty, or one per layer
};

// Where an activation was observed (for importance ranking and depth scores).
enum class Site {
  kBlockInput,      // [B, T, hidden]: residual stream entering block `layer`
  kNormOutput,      // [B, T, hidden]: pre-norm output of block `layer` (layer -1: final norm)
  kAttentionHeads,  // [B, T, heads, head_dim]: input of the attention output projection
  kMambaHeads,      // [B, T, heads, head_dim]: input of the Mamba output projection
  kMlpFfn,          // [B, T, ffn]: input of the MLP down projection
  kSharedFfn,       // [B, T, shared_ffn]: input of the shared expert's down projection
  kRouterProbs,     // [B*T, experts]: softmax of router logits over all experts
  kExpertFfn,       // [n, expert_ffn]: input of expert `expert`'s down projection, routed rows
  kExpertOutput,    // [n, hidden]: expert `expert`'s output before gate weight and mask
  kBlockOutput,     // [B, T, hidden]: residual stream leaving block `layer`
};

struct ActivationSite {
  Site site;
  int layer = -1;
  int expert = -1;
};

// Receives activations during a forward pass. Tensors may be part of the autograd graph:
// detach before keeping them, never modify them in place. OnLayerBegin/End bracket each
// block (present or not) so an engine can time layers.
class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  virtual void Observe(const ActivationSite& site, const at::Tensor& value) {}
  virtual void OnLayerBegin(int layer) {}
  virtual void OnLayerEnd(int layer) {}
};

// Inference state of one layer; which fields are defined depends on the kind.
struct LayerCache {
  at::Tensor k, v;     // attention: [B, kv_heads, capacity, head_dim]
  at::Tensor conv_x;   // mamba: [B, heads*head_dim, conv_kernel-1], last conv inputs
  at::Tensor conv_bc;  // mamba: [B, 2*groups*state, conv_kernel-1]
  at::Tensor ssm;      // mamba: [B, heads, head_dim, state]
};

// Reorders one layer's own axes; an empty vector leaves that axis alone. Entry i names the
// OLD index that moves to position i. Used to put the most important units first so that
// every candidate architecture is a prefix.
struct LayerPermutation {
  std::vector<int64_t> attention_kv_heads;  // [kv_heads]
  // [heads]; new head i must come from the KV group that moves to group i / (heads /
  // kv_heads), i.e. query heads are ranked inside their GQA group.
  std::vector<int64_t> attention_heads;
  std::vector<int64_t> mamba_heads;              // [heads]
  std::vector<int64_t> experts;                  // [experts]
  std::vector<std::vector<int64_t>> expert_ffn;  // [experts][expert_ffn], by OLD expert id
  std::vector<int64_t> shared_ffn;               // [shared_ffn]
  std::vector<int64_t> mlp_ffn;                  // [ffn]
};

// Constructor inputs shared by all kinds.
struct MixerInit {
  int64_t hidden = 0;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScalingSpec rope_scaling;
  double std = 0.02;      // init std of input projections
  double out_std = 0.02;  // init std of output projections (scaled down with depth)
  // false: every weight starts at zero (norms at one) without drawing from the generator,
  // for a model whose weights are loaded next (an import need not pay for random init).
  bool random = true;
};

// Serves a model's projections from weights it does not hold as dense parameters (an
// entropy-coded package, docs/entropy.md "Serving a package"). Set per model
// (HybridLMImpl::set_linear_provider); unset, every projection is torch::linear on the
// parameter, exactly as before. Keyed by the parameter tensor itself (its TensorImpl), so a
// lookup costs no name formatting on the hot path; the engine builds the key from the
// parameter's state-dict name.
class LinearProvider {
 public:
  virtual ~LinearProvider() = default;
  // x W^T, W = `weight` ([out, in]) or, with expert >= 0, weight[expert] of a stacked
  // [experts, out, in] parameter. An undefined result means "not mine": torch::linear.
  virtual at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, int64_t expert) = 0;
  // Rows `ids` of the embedding table `table`; undefined = torch::embedding.
  virtual at::Tensor Embedding(const at::Tensor& table, const at::Tensor& ids) = 0;
};

// Everything a mixer needs besides its input.
struct LayerContext {
  int layer = 0;
  int64_t position = 0;             // absolute position of input row 0
  LayerCache* cache = nullptr;      // null: a full forward without state
  bool decode = false;              // one new token per sequence: use the recurrent paths
  const LayerMask* mask = nullptr;  // null: unmasked
  ActivationObserver* observer = nullptr;
  at::Tensor* aux_loss = nullptr;  // MoE adds its load-balancing loss here when set
  LinearProvider* linear = nullptr;  // null: projections are torch::linear
};

// A block's transform f in h += g * f(RMSNorm(h)). Parameters are registered with stable
// names (see docs/model.md); the safetensors file uses exactly those names.
class Mixer : public torch::nn::Module {
 public:
  virtual at::Tensor Forward(const at::Tensor& x, const LayerContext& ctx) = 0;
  // Allocates this layer's cache state (zeros). Layers without state leave it empty.
  virtual void InitCache(LayerCache& cache, int64_t batch, int64_t capacity,
                         const at::TensorOptions& options) const {}
  // Reorders residual channels: new channel i is old channel perm[i].
  virtual void PermuteHidden(const at::Tensor& perm) = 0;
  // Reorders this layer's heads / experts / FFN neurons. Fields of other kinds must be
  // empty (checked by the caller); perms are validated here.
  virtual absl::Status Permute(const LayerPermutation& perm) = 0;
  // Copies the leading part of `parent` (same kind, wider or equal) that this layer's
  // (narrower) spec selects; `hidden` indexes the kept residual channels.
  virtual absl::Status CopyPrefixFrom(const Mixer& parent, const at::Tensor& hidden) = 0;
};

// --- helpers shared by the layer implementations --------------------------------------

// x W^T through the provider when one is set and serves W, else torch::linear(x, W) (or
// W[expert] for an expert stack) - bit-identical to the direct call.
at::Tensor Project(LinearProvider* provider, const at::Tensor& x, const at::Tensor& weight,
                   int64_t expert = -1);
inline at::Tensor Project(const LayerContext& ctx, const at::Tensor& x, const at::Tensor& weight,
                          int64_t expert = -1) {
  return Project(ctx.linear, x, weight, expert);
}
// torch::embedding(table, ids), or the provider's rows when it serves the table.
at::Tensor Embed(LinearProvider* provider, const at::Tensor& table, const at::Tensor& ids);

// Parameters a HybridLM reads only through Project / Embed (projections, experts, router,
// embedding, LM head), by state-dict name. Only these may be served by a LinearProvider
// without a dense copy; every other parameter (norms, conv kernels, biases) is read directly.
bool IsProjectionWeight(absl::string_view name);

// x * mask with mask [C] or [B, C] broadcast over x = [B, ..., C]. `channel_dim` is the
// dimension of x the mask indexes (negative counts from the end); dims after it broadcast.
at::Tensor ApplyMask(const at::Tensor& x, const at::Tensor& mask, int64_t channel_dim = -1);

// Per-row mask for flattened tokens: mask [C] or [B, C] -> [B*T, C] (rows of x.view(B*T, .)).
at::Tensor MaskRows(const at::Tensor& mask, int64_t batch, int64_t time);

// RMSNorm over the last dim. With a hidden mask the mean of squares runs over the kept
// channels only (sum(x^2 m) / sum(m)) and the output is masked, so masked == sliced.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps,
                   const at::Tensor& hidden_mask = {});

// Parameter initialisation shared by all kinds: N(0, std) with a fixed std, since the
// model is small and trained from scratch.
at::Tensor NormalInit(std::vector<int64_t> shape, double std);
// NormalInit(shape, std) when init.random, else zeros (no generator draw).
at::Tensor InitWeight(std::vector<int64_t> shape, double std, const MixerInit& init);

// Copies `src` into `dst` (a registered parameter) in place under NoGrad, so the module
// keeps the same tensor object. Shapes must match (caller checked).
void AssignParameter(at::Tensor& dst, const at::Tensor& src);

// OK when `perm` is a permutation of 0..n-1; the error names `what`.
absl::Status CheckPermutation(const std::vector<int64_t>& perm, int64_t n, absl::string_view what);
at::Tensor IndexTensor(const std::vector<int64_t>& index, const at::Device& device);
// Rows of a [units * width, ...] weight for the given units: u*width .. u*width+width-1.
at::Tensor ExpandUnits(const at::Tensor& units, int64_t width);

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_LAYERS_H_
