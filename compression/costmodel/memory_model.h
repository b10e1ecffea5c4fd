#ifndef TAILOR_COMPRESSION_COSTMODEL_MEMORY_MODEL_H_
#define TAILOR_COMPRESSION_COSTMODEL_MEMORY_MODEL_H_

// The analytic memory terms of M = W + C + P + R + eps for the built-in engine
// (docs/costmodel.md). All in bytes; `bytes` is the serving precision's element size.
//
//   W  weights: every parameter of the config (embedding, untied head, norms, all experts)
//   C  request cache: attention K and V for batch x (prefix + input + output) positions,
//      Mamba conv state (x and B/C channels over conv_kernel - 1 steps) and SSM state
//   R  runtime buffers the engine keeps for the whole request: prompt and output ids (int64)
//      and the prefill's residual stream [batch, input, hidden]
//   P  prefill workspace (measured per layer by the profiler, interpolated) and eps (measured
//      total minus the modelled terms) are calibrated, not formulas: see CostModel.
//
// No LibTorch here.

#include <cstdint>

#include "compression/engine/workload.h"
#include "compression/model/config.h"
#include "compression/model/kv_cache_layout.h"

namespace tailor::costmodel {

// Parameters of one layer at a hidden width (its pre-norm included; 0 when absent). Uses
// the model family's own count (HybridConfig::ParameterCount), so the two never disagree.
int64_t LayerParameterCount(const model::LayerSpec& spec, int64_t hidden);
// Embedding, LM head (none with tied embeddings: the embedding serves) and final norm.
int64_t FixedParameterCount(int64_t vocab, int64_t hidden, bool tied_embeddings = false);

int64_t LayerWeightBytes(const model::LayerSpec& spec, int64_t hidden, int64_t bytes);
int64_t WeightBytes(const model::HybridConfig& config, int64_t bytes);

// One layer's share of C; 0 for MoE, MLP and absent layers.
int64_t LayerCacheBytes(const model::LayerSpec& spec, const engine::Workload& workload,
                        int64_t bytes);
int64_t CacheBytes(const model::HybridConfig& config, const engine::Workload& workload,
                   int64_t bytes);
// The attention part of C as `layout` allocates it (kPerLayer: the sum of the attention
// layers' LayerCacheBytes).
int64_t AttentionCacheBytes(const model::HybridConfig& config, const engine::Workload& workload,
                            int64_t bytes, model::KvCacheLayout layout);

int64_t RuntimeBytes(int64_t hidden, const engine::Workload& workload, int64_t bytes);

inline double ToMiB(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_MEMORY_MODEL_H_
