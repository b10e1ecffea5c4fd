#ifndef TAILOR_COMPRESSION_HF_HF_EXPORT_NEMOTRON_H_H_
#define TAILOR_COMPRESSION_HF_HF_EXPORT_NEMOTRON_H_H_

// A model of tailor's in NVIDIA's NemotronHForCausalLM checkpoint layout: config.json and
// model.safetensors with the `backbone.` names, the Mamba mixer's z / x / B,C / dt rows joined
// back into in_proj and its x and B,C channels into conv1d, one tensor per expert. It is the
// exact inverse of ImportNemotronH (hf_import_nemotron_h.h): the importer reads the written
// folder back into the same tensors, bit for bit at F32.
//
// What writes one: tailor-train-parent --layout nemotron-h, so the quickstart has a trained
// hybrid parent in a layout llama.cpp serves (after GGUF conversion).

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compression/hf/hf_config.h"
#include "compression/model/hybrid_lm.h"
#include "compression/model/safetensors_format.h"
#include "nlohmann/json.hpp"

namespace tailor::hf {

// Writes `model` as a Nemotron-H checkpoint with `config_json` as its config.json into `dir`
// (created when missing; config.json and model.safetensors replaced atomically). The model's
// config must be exactly NemotronHHybridConfig of that config.json, else InvalidArgument
// naming the first field or layer that differs; nothing is written then. Weights are stored as
// `dtype` (F32, BF16 or F16; torch_dtype in config.json says which).
absl::Status WriteNemotronHCheckpoint(const model::HybridLM& model, nlohmann::json config_json,
                                      const std::string& dir,
                                      model::DType dtype = model::DType::kF32);

}  // namespace tailor::hf

#endif  // TAILOR_COMPRESSION_HF_HF_EXPORT_NEMOTRON_H_H_
