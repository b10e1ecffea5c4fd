#ifndef TAILOR_TESTS_TESTING_HF_TEST_CHECKPOINT_H_
#define TAILOR_TESTS_TESTING_HF_TEST_CHECKPOINT_H_

// Tiny random Hugging Face checkpoints in the exact on-disk layout of each family tailor
// imports (config keys, tensor names, shards + model.safetensors.index.json, tokenizer
// files), for tests: no model hub is reachable here.
//
// The tensor lists are written out here family by family from the reference modeling
// code, independently of compression/hf/, so a wrong name or shape there fails the tests
// instead of agreeing with itself.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "compression/model/safetensors_format.h"
#include "nlohmann/json.hpp"

namespace tailor::testing {

// config.json of a tiny model; `architecture` is an architectures value
// ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
// "MixtralForCausalLM", "Qwen3MoeForCausalLM", "NemotronHForCausalLM"). Sizes: vocab 64,
// hidden 32, 2-4 layers; see the .cc for each family's choices (tied embeddings, rope
// scaling, q/k norms, dense and sparse layers, the Nemotron-H pattern "M*-E").
nlohmann::json TinyHfConfig(absl::string_view architecture);

// TinyHfConfig("NemotronHForCausalLM") with `pattern` as hybrid_override_pattern (and as
// many layers); without 'E' layers the MoE keys are left out, as a dense config has them.
nlohmann::json TinyNemotronHConfig(absl::string_view pattern);

// The tensors `config` implies, with random values (norm weights near 1, the rest small),
// in `dtype` (F32 or BF16).
std::vector<model::RawTensor> HfTestTensors(const nlohmann::json& config, model::DType dtype,
                                            uint64_t seed);

// "model-00002-of-00003.safetensors" for (2, 3).
std::string HfShardName(int index, int count);

// Writes config.json, the tensors (split by sorted name into `shards` files with
// model.safetensors.index.json; 1 writes a single model.safetensors) and, with
// `tokenizer`, tokenizer.json and tokenizer_config.json. `dir` must exist.
absl::Status WriteHfCheckpointFiles(const std::string& dir, const nlohmann::json& config,
                                    const std::vector<model::RawTensor>& tensors, int shards = 2,
                                    bool tokenizer = true);

struct HfTestCheckpointOptions {
  model::DType dtype = model::DType::kBF16;
  int shards = 2;
  bool tokenizer = true;
  uint64_t seed = 1;
};

// A new empty folder under the test temp dir ($TEST_TMPDIR, else the system's), named
// `prefix`XXXXXX; "" when it cannot be made.
std::string NewTestDir(absl::string_view prefix);

// TinyHfConfig + HfTestTensors + WriteHfCheckpointFiles.
absl::Status WriteHfTestCheckpoint(const std::string& dir, absl::string_view architecture,
                                   const HfTestCheckpointOptions& options = {});

}  // namespace tailor::testing

#endif  // TAILOR_TESTS_TESTING_HF_TEST_CHECKPOINT_H_
