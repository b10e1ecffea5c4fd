#ifndef TAILOR_COMPRESSION_MODEL_HYBRID_LM_H_
#define TAILOR_COMPRESSION_MODEL_HYBRID_LM_H_

// The hybrid decoder LM: embedding -> blocks -> RMSNorm -> untied LM head, where block i is
//   h += g_i * mixer_i(RMSNorm_i(h))
// and mixer_i is attention, mamba, moe or mlp as HybridConfig::layers[i] says (absent
// layers are the identity). See docs/model.md for names, conventions and the cache.
//
// Threading: a model is not safe for concurrent forwards that share an InferenceCache;
// separate caches on one model are fine for inference (no module state is written).

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/model/config.h"
#include "compression/model/layers.h"
#include "compression/model/safetensors.h"

namespace tailor::model {

struct ForwardOptions {
  const ArchMask* mask = nullptr;          // supernet masks; null = the full model
  at::Tensor block_gates;                  // [num_layers] scalars g_i; undefined = all 1
  ActivationObserver* observer = nullptr;  // activations and per-layer begin/end
  // Gets only OnLayerBegin/End and is never handed to the mixers, so timing layers adds no
  // work (an `observer` makes MoE compute router probabilities just to report them).
  ActivationObserver* layer_timer = nullptr;
  // Prefill only: compute logits for the last position only ([B, 1, V]); an engine needs
  // just that and the LM head is a large share of a small model's prefill.
  bool last_position_only = false;
};

struct ForwardOutput {
  at::Tensor logits;    // [B, T, vocab]
  at::Tensor aux_loss;  // scalar MoE load-balancing loss summed over layers (0 without MoE)
};

// Per-sequence inference state: attention KV (preallocated to `capacity` positions),
// Mamba conv and SSM state. All sequences in the batch advance together. Copies share the
// same tensors. After a Prefill/DecodeStep that returned an error the contents are
// unspecified: Reset() before reusing it.
class InferenceCache {
 public:
  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }  // tokens consumed so far
  const std::vector<LayerCache>& layers() const { return layers_; }
  // Bytes held by all state tensors: the request-cache term C of the memory model.
  int64_t Bytes() const;
  // Back to an empty sequence (zeroes the state; keeps the allocation).
  void Reset();

 private:
  friend class HybridLMImpl;
  int64_t batch_ = 0;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
  std::vector<LayerCache> layers_;
};

class BlockImpl;

class HybridLMImpl : public torch::nn::Module {
 public:
  // `config` must be valid (CreateHybridLM checks); weights are random, drawn from
  // LibTorch's global generator, or zero (norms one) without a draw when !random_init.
  explicit HybridLMImpl(const HybridConfig& config, bool random_init = true);

  const HybridConfig& config() const { return config_; }

  // Full causal forward over tokens [B, T] (int64, values < vocab, T <= max_seq).
  // Differentiable; this is the training path.
  absl::StatusOr<ForwardOutput> Forward(const at::Tensor& tokens,
                                        const ForwardOptions& options = {});

  // A zeroed cache for `batch` sequences of up to `capacity` tokens (0 = max_seq), on the
  // device and dtype of the model's parameters.
  absl::StatusOr<InferenceCache> NewCache(int64_t batch, int64_t capacity = 0) const;
  // Consumes tokens [B, T] after cache.length() earlier tokens (T may be the whole prompt
  // or a chunk of it) and returns logits [B, T, V] (or [B, 1, V] with last_position_only).
  // Runs without autograd.
  absl::StatusOr<at::Tensor> Prefill(const at::Tensor& tokens, InferenceCache& cache,
                                     const ForwardOptions& options = {});
  // One new token per sequence, tokens [B] or [B, 1]; returns logits [B, V]. Uses the
  // recurrent Mamba step. Runs without autograd.
  absl::StatusOr<at::Tensor> DecodeStep(const at::Tensor& tokens, InferenceCache& cache,
                                        const ForwardOptions& options = {});

  int64_t num_layers() const { return config_.num_layers(); }
  // The mixer of layer i, or null when the layer is absent.
  Mixer* mixer(int64_t layer) const;

  // Weights by their safetensors names ("embed", "layers.3.attention.q_proj", ...).
  TensorMap StateDict() const;
  // Copies weights in: names must match exactly (no missing, no extra), shapes must match,
  // dtypes must be floating (converted to the parameter dtype). `source` prefixes errors.
  absl::Status LoadStateDict(const TensorMap& tensors, absl::string_view source);
  // The same, calling `copied(source tensor)` right after each parameter is copied from it
  // (an importer releases the mapped pages it no longer needs).
  absl::Status LoadStateDict(const TensorMap& tensors, absl::string_view source,
                             const std::function<void(const at::Tensor&)>& copied);

  // Reorders residual channels everywhere (new channel i = old perm[i]); logits unchanged.
  absl::Status PermuteHidden(const std::vector<int64_t>& perm);
  // Reorders one layer's heads / experts / neurons; logits unchanged.
  absl::Status PermuteLayer(int64_t layer, const LayerPermutation& perm);

  // Copies the prefix of `parent` that this (narrower, same-shaped) model selects.
  absl::Status CopyPrefixFrom(const HybridLMImpl& parent);

  // Routes every projection and the embedding lookup through `provider` (not owned; must
  // outlive the model's forwards; null restores torch::linear). Parameters the provider
  // serves may then be empty placeholders (see IsProjectionWeight). Not for training.
  void set_linear_provider(LinearProvider* provider) { linear_ = provider; }
  LinearProvider* linear_provider() const { return linear_; }

 private:
  struct RunOutput {
    at::Tensor logits;
    at::Tensor aux_loss;
  };
  absl::Status CheckTokens(const at::Tensor& tokens, int64_t start) const;
  absl::Status CheckOptions(const ForwardOptions& options, int64_t batch) const;
  RunOutput Run(const at::Tensor& tokens, InferenceCache* cache, bool decode, bool want_aux,
                const ForwardOptions& options);

  HybridConfig config_;
  at::Tensor embed_;       // [vocab, hidden]
  at::Tensor final_norm_;  // [hidden]
  at::Tensor lm_head_;     // [vocab, hidden]; undefined with tie_embeddings (embed_ serves)
  std::vector<std::shared_ptr<BlockImpl>> blocks_;
  LinearProvider* linear_ = nullptr;
};
TORCH_MODULE(HybridLM);

// Validates the config, seeds LibTorch's global generator with `seed` and builds a model
// with fresh weights (same config + seed = same weights).
absl::StatusOr<HybridLM> CreateHybridLM(const HybridConfig& config, uint64_t seed = 0);
// A model whose weights are about to be loaded: projections, embedding and head zero, norms
// one, without seeding or drawing from the global generator (only Mamba's dt, A and conv
// kernels are still drawn), so an import pays for no random init of a large model.
absl::StatusOr<HybridLM> CreateUninitializedHybridLM(const HybridConfig& config);

// DIR/config.json + DIR/model.safetensors (DIR is created). Weights are written as F32
// unless `dtype` says BF16 or F16.
absl::Status SaveHybridLM(const HybridLM& model, const std::string& dir, DType dtype = DType::kF32);
absl::StatusOr<HybridLM> LoadHybridLM(const std::string& dir);

// A new model of `child` (same vocab, layer count and kinds; every width <= the parent's)
// holding the leading slice of each of the parent's ranked axes: the first `hidden`
// channels, the first heads (query heads per GQA group, Mamba heads per B/C group), experts
// (per routing group: KeptExperts) and FFN neurons.
absl::StatusOr<HybridLM> SliceHybridLM(const HybridLM& parent, const HybridConfig& child);

// Whole-model permutation: residual channels, then each layer's own axes.
struct Permutation {
  std::vector<int64_t> hidden;           // empty = unchanged
  std::vector<LayerPermutation> layers;  // empty, or one per layer
};
absl::Status PermuteHybridLM(HybridLM& model, const Permutation& perm);

// Hard 0/1 masks that make `parent` compute what SliceHybridLM(parent, child) computes
// (exactly, except for the expert count: masked experts still take their routing slot).
// Mamba heads and routed experts are kept per group (KeptMambaHeads, KeptExperts); a child
// with other B/C or routing groups than its parent is refused naming the field.
absl::StatusOr<ArchMask> PrefixMask(const HybridConfig& parent, const HybridConfig& child);

// Shapes of every mask against the config ([C] or [batch, C]); errors name the field.
absl::Status ValidateArchMask(const ArchMask& mask, const HybridConfig& config, int64_t batch);

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_HYBRID_LM_H_
