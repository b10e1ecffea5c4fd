#ifndef TAILOR_COMPRESSION_MODEL_ATTENTION_H_
#define TAILOR_COMPRESSION_MODEL_ATTENTION_H_

#include "compression/model/layers.h"

namespace tailor::model {

// Grouped-query causal self-attention with rotary positions (rotate-half convention, the
// pairs (i, i + head_dim/2), as HF's Llama family) and a preallocated KV cache. Weights:
// q_proj [heads*head_dim, hidden], k_proj and v_proj [kv_heads*head_dim, hidden], o_proj
// [hidden, heads*head_dim]. Variants (AttentionSpec): q_bias/k_bias/v_bias, o_bias [hidden],
// q_norm/k_norm [head_dim] (RMSNorm of each head before RoPE), no RoPE; llama3 rope scaling
// (MixerInit::rope_scaling).
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
  // Biases and q/k norms of the leading slice CopyPrefixFrom keeps.
  void CopyVariantsFrom(const AttentionImpl& parent, const at::Tensor& q_rows, int64_t kv_rows,
                        const at::Tensor& hidden);

  AttentionSpec spec_;
  double rope_theta_;
  RopeScalingSpec rope_scaling_;
  double norm_eps_;
  at::Tensor q_proj_, k_proj_, v_proj_, o_proj_;
  at::Tensor q_bias_, k_bias_, v_bias_, o_bias_;  // defined with qkv_bias / o_bias
  at::Tensor q_norm_, k_norm_;                    // defined with qk_norm
};

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_ATTENTION_H_
