#ifndef TAILOR_COMPRESSION_HF_HF_IMPORT_INTERNAL_H_
#define TAILOR_COMPRESSION_HF_HF_IMPORT_INTERNAL_H_

// Pieces the family importers (hf_import.cc, hf_import_moe.cc, hf_import_nemotron_h.cc)
// share; not an API.

#include <cstdint>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/model/config.h"

namespace tailor::hf::internal {

// A tensor over the mapped bytes (no copy). Safetensors does not align tensors, so a
// misaligned one is copied into an aligned buffer first (one tensor, never the model).
at::Tensor TensorOfView(const TensorView& v);

// ResourceExhausted naming both sizes when the F32 model of `config` exceeds `limit` bytes
// (0: MemAvailable), before anything is allocated.
absl::Status CheckModelFits(const HfCheckpoint& checkpoint, const model::HybridConfig& config,
                            uint64_t limit);

// "[4, 32]".
std::string ShapeString(at::IntArrayRef shape);

}  // namespace tailor::hf::internal

#endif  // TAILOR_COMPRESSION_HF_HF_IMPORT_INTERNAL_H_
