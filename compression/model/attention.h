#ifndef TAILOR_COMPRESSION_MODEL_ATTENTION_H_
#define TAILOR_COMPRESSION_MODEL_ATTENTION_H_

#include "compression/model/layers.h"

namespace tailor::model {

// Grouped-query causal self-attention with rotary positions (rotate-half convention) and a
// preallocated KV cache. Weights: q_proj [heads*head_dim, hidden], k_proj and v_proj
// [kv_heads*head_dim, hidden], o_proj [hidden, heads*head_dim]; no biases.
class AttentionImpl : public Mixer {
 public:
  AttentionImpl(const AttentionSpec& spec, const MixerInit& init);

  at::Tensor Forward(const at::Tensor& x, const LayerContext& ctx) override;
  void InitCache(LayerCache& cache, int64_t batch, int64_t capacity,
                 const at::TensorOptions& options) const override;
  void PermuteHidden(const at::Tensor& perm) override;
  absl::Status Permute(const LayerPermutation& perm) override;
  absl::Status CopyPrefixFrom(const Mixer& parent, const at::Tensor& hidden) override;

  const AttentionSpec& spec() const { return spec_; }

 private:
  AttentionSpec spec_;
  double rope_theta_;
  at::Tensor q_proj_, k_proj_, v_proj_, o_proj_;
};

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_ATTENTION_H_
