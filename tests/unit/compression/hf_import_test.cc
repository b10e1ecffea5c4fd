// Import of Hugging Face checkpoints into tailor's model (compression/hf/hf_import): the
// internal config and tensor mapping of each dense family, the families still refused, and
// tailor's next-token distribution against llama.cpp's (the node-llama-cpp sidecar) on the
// GGUF that ExportHfToGguf writes from the same checkpoint: an implementation tailor did
// not write, so agreement shows the block variants and the mapping right. Last, the
// tailor-engine binary's --next-token-logprobs on an HF folder and on a tailor folder.

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/gguf/llama_cpp_sidecar.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_import.h"
#include "compression/hf/parent_architecture.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/llama_cpp_agreement.h"
#include "tests/testing/status_matchers.h"

namespace tailor::hf {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;

std::string NewDir() { return testing::NewTestDir("hf_import_"); }

// A BF16 test checkpoint of `arch` in a new folder (BF16 -> F32 is exact, so tailor and the
// all-F32 GGUF see the same weights).
std::string WriteCheckpoint(absl::string_view arch) {
  const std::string dir = NewDir();
  EXPECT_THAT(testing::WriteHfTestCheckpoint(dir, arch), IsOk());
  return dir;
}

TEST(HfImportTest, InternalConfigOfEachDenseFamily) {
  absl::StatusOr<HfCheckpoint> llama = HfCheckpoint::Open(WriteCheckpoint("LlamaForCausalLM"));
  ASSERT_THAT(llama.status(), IsOk());
  absl::StatusOr<model::HybridConfig> c = HybridConfigFromHf(llama->config());
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_EQ(c->vocab, 64);
  EXPECT_EQ(c->hidden, 32);
  EXPECT_EQ(c->max_seq, 128);
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->norm_eps, 1e-5);
  EXPECT_FALSE(c->tie_embeddings);
  EXPECT_EQ(c->rope_scaling.type, model::RopeScalingSpec::Type::kLlama3);
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_positions, 64);
  ASSERT_EQ(c->num_layers(), 4);  // two HF layers, each attention + MLP
  EXPECT_EQ(c->layers[0], model::LayerSpec::Attention(4, 2, 8));
  EXPECT_EQ(c->layers[1], model::LayerSpec::Mlp(48));
  EXPECT_EQ(c->layers[2], c->layers[0]);

  absl::StatusOr<HfCheckpoint> qwen3 = HfCheckpoint::Open(WriteCheckpoint("Qwen3ForCausalLM"));
  ASSERT_THAT(qwen3.status(), IsOk());
  c = HybridConfigFromHf(qwen3->config());
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_EQ(c->layers[0].attention.head_dim, 16);  // not hidden / heads
  EXPECT_TRUE(c->layers[0].attention.qk_norm);
  EXPECT_FALSE(c->layers[0].attention.qkv_bias);
  EXPECT_EQ(c->rope_scaling.type, model::RopeScalingSpec::Type::kNone);

  absl::StatusOr<HfCheckpoint> qwen2 = HfCheckpoint::Open(WriteCheckpoint("Qwen2ForCausalLM"));
  ASSERT_THAT(qwen2.status(), IsOk());
  c = HybridConfigFromHf(qwen2->config());
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_TRUE(c->tie_embeddings);
  EXPECT_TRUE(c->layers[0].attention.qkv_bias);
  EXPECT_FALSE(c->layers[0].attention.o_bias);
  // Tied: one table for embedding and head.
  EXPECT_EQ(c->ParameterCount(),
            64 * 32 + 32 + 2 * (32 + 32 * 32 * 2 + 32 * 16 * 2 + 64 + 3 * 32 * 48 + 32));

  // The variants survive config.json: a saved import reads back equal.
  absl::StatusOr<model::HybridConfig> back =
      model::ParseHybridConfigJson(model::HybridConfigToJson(*c));
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(*back, *c);
}

TEST(HfImportTest, MappingCoversEveryTensor) {
  absl::StatusOr<HfCheckpoint> qwen2 = HfCheckpoint::Open(WriteCheckpoint("Qwen2ForCausalLM"));
  ASSERT_THAT(qwen2.status(), IsOk());
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> m =
      HfTensorMapping(qwen2->config());
  ASSERT_THAT(m.status(), IsOk());
  EXPECT_EQ(m->size(), qwen2->tensor_names().size());
  EXPECT_THAT(*m, Contains(Pair("model.embed_tokens.weight", "embed")));
  EXPECT_THAT(*m, Contains(Pair("model.norm.weight", "final_norm")));
  EXPECT_THAT(*m, Contains(Pair("model.layers.1.input_layernorm.weight", "layers.2.norm")));
  EXPECT_THAT(*m,
              Contains(Pair("model.layers.1.post_attention_layernorm.weight", "layers.3.norm")));
  EXPECT_THAT(*m,
              Contains(Pair("model.layers.0.self_attn.k_proj.bias", "layers.0.attention.k_bias")));
  EXPECT_THAT(*m, Contains(Pair("model.layers.1.mlp.down_proj.weight", "layers.3.mlp.w_down")));
}

// Mixtral and Qwen3-MoE import: compression_hf_moe_test; Nemotron-H:
// compression_hf_nemotron_h_test.

// parent { format }: a checkpoint whose config.json names no architecture (it would be read
// as tailor's own config) imports once the layout is forced, with the same architecture key.
TEST(HfImportTest, ForcedFormatReadsAConfigWithoutArchitectures) {
  const std::string dir = WriteCheckpoint("Qwen3ForCausalLM");
  const std::string path = dir + "/config.json";
  const std::string original = *model::ReadFileToString(path);
  nlohmann::json config = nlohmann::json::parse(original);
  config.erase("architectures");
  config.erase("model_type");
  ASSERT_THAT(model::WriteFileAtomically(path, config.dump(2)), IsOk());
  EXPECT_FALSE(IsHfCheckpointDir(dir));
  EXPECT_THAT(LoadModelDir(dir).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(IsHfCheckpointDir(dir, "qwen3"));
  absl::StatusOr<model::HybridLM> forced = LoadModelDir(dir, "qwen3");
  ASSERT_THAT(forced.status(), IsOk());
  EXPECT_TRUE((*forced)->config().layers[0].attention.qk_norm);
  absl::StatusOr<model::HybridConfig> read = ReadModelConfig(dir, "Qwen3ForCausalLM");
  ASSERT_THAT(read.status(), IsOk());
  EXPECT_EQ(*read, (*forced)->config());
  EXPECT_EQ(*ParentArchitectureKey(config.dump(), "config.json", "qwen3"),
            *ParentArchitectureKey(original));
}

TEST(HfImportTest, WeightsAreTheCheckpointsInF32AndSurviveSaveAndLoad) {
  const std::string dir = WriteCheckpoint("Qwen3ForCausalLM");
  absl::StatusOr<model::HybridLM> m = LoadModelDir(dir);  // detected as HF
  ASSERT_THAT(m.status(), IsOk());
  const model::TensorMap state = (*m)->StateDict();
  absl::StatusOr<HfCheckpoint> c = HfCheckpoint::Open(dir);
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<TensorView> v = c->Tensor("model.layers.1.self_attn.q_norm.weight");
  ASSERT_THAT(v.status(), IsOk());
  ASSERT_EQ(v->dtype, model::DType::kBF16);
  const at::Tensor& q_norm = state.at("layers.2.attention.q_norm");
  ASSERT_EQ(q_norm.scalar_type(), at::kFloat);
  for (int64_t i = 0; i < 16; ++i) {  // BF16 is the high half of an F32
    uint16_t bits;
    std::memcpy(&bits, v->data + 2 * i, 2);
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float expected;
    std::memcpy(&expected, &wide, 4);
    EXPECT_EQ(q_norm[i].item<float>(), expected) << i;
  }
  const std::string saved = NewDir() + "/tailor";
  ASSERT_THAT(model::SaveHybridLM(*m, saved), IsOk());
  EXPECT_FALSE(IsHfCheckpointDir(saved));
  absl::StatusOr<model::HybridLM> back = LoadModelDir(saved);
  ASSERT_THAT(back.status(), IsOk());
  const std::vector<int64_t> tokens = {1, 5, 17, 33, 60, 2};
  absl::StatusOr<std::vector<std::vector<float>>> a = NextTokenLogprobs(*m, tokens, {0, 5});
  absl::StatusOr<std::vector<std::vector<float>>> b = NextTokenLogprobs(*back, tokens, {0, 5});
  ASSERT_THAT(a.status(), IsOk());
  ASSERT_THAT(b.status(), IsOk());
  EXPECT_EQ(*a, *b);
  EXPECT_THAT(NextTokenLogprobs(*m, {1, 64}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 64)")));
  EXPECT_THAT(NextTokenLogprobs(*m, {1, 2}, {2}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("position 2")));
}

TEST(HfImportTest, ModelLargerThanMemoryIsRefusedNamingItsSize) {
  const std::string dir = WriteCheckpoint("LlamaForCausalLM");
  absl::StatusOr<HfCheckpoint> c = HfCheckpoint::Open(dir);
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridConfig> config = HybridConfigFromHf(c->config());
  ASSERT_THAT(config.status(), IsOk());
  const int64_t bytes = config->ParameterCount() * 4;
  HfImportOptions options;
  options.memory_limit_bytes = bytes - 1;
  EXPECT_THAT(ImportHfModel(*c, options).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr(absl::StrCat(dir, ": the imported model takes 0.00 GiB (", bytes,
                                              " bytes) in F32, more than the 0.00 GiB (",
                                              bytes - 1, " bytes) of memory available"))));
  options.memory_limit_bytes = bytes;
  EXPECT_THAT(ImportHfModel(*c, options).status(), IsOk());
}

// --- against llama.cpp ------------------------------------------------------------------

// The same weights under plain RoPE: what tailor would compute with the llama3 scaling
// ignored. The test weights are small, so the distributions are flat and that mistake
// alone moves them by less than the 1e-4 bound; the control shows the comparison still
// tells it apart.
absl::StatusOr<model::HybridLM> WithoutRopeScaling(const model::HybridLM& m) {
  model::HybridConfig config = m->config();
  config.rope_scaling = model::RopeScalingSpec();
  absl::StatusOr<model::HybridLM> out = model::CreateUninitializedHybridLM(config);
  if (!out.ok()) return out.status();
  absl::Status s = (*out)->LoadStateDict(m->StateDict(), "control");
  if (!s.ok()) return s;
  return out;
}

void CheckAgainstLlamaCpp(absl::string_view arch) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  const std::string dir = WriteCheckpoint(arch);
  absl::StatusOr<HfCheckpoint> c = HfCheckpoint::Open(dir);
  ASSERT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = ImportHfModel(*c);
  ASSERT_THAT(m.status(), IsOk());
  const std::string gguf_path = NewDir() + "/model.gguf";
  gguf::GgufExportOptions options;
  options.all_f32 = true;
  ASSERT_THAT(gguf::ExportHfToGguf(*c, gguf_path, options).status(), IsOk());
  const bool scaled = (*m)->config().rope_scaling.type != model::RopeScalingSpec::Type::kNone;
  absl::StatusOr<model::HybridLM> control = WithoutRopeScaling(*m);
  ASSERT_THAT(control.status(), IsOk());
  auto logprobs_of = [](model::HybridLM model) -> testing::LogprobsFn {
    return [model](const auto& tokens, const auto& positions) mutable {
      return NextTokenLogprobs(model, tokens, positions);
    };
  };
  testing::LlamaCppComparison comparison;
  if (scaled) comparison.controls.push_back({"without the llama3 scaling", logprobs_of(*control)});
  testing::ExpectAgreesWithLlamaCpp(logprobs_of(*m), gguf_path, comparison, std::string(arch));
}

TEST(HfImportLlamaCppTest, LlamaWithLlama3RopeMatchesLlamaCpp) {
  CheckAgainstLlamaCpp("LlamaForCausalLM");
}
TEST(HfImportLlamaCppTest, Qwen3MatchesLlamaCpp) { CheckAgainstLlamaCpp("Qwen3ForCausalLM"); }
TEST(HfImportLlamaCppTest, Qwen2TiedWithBiasesMatchesLlamaCpp) {
  CheckAgainstLlamaCpp("Qwen2ForCausalLM");
}

// --- tailor-engine --next-token-logprobs ------------------------------------------------

// Runs `command`, returning its stdout; the exit status goes to `status`.
std::string RunCommand(const std::string& command, int& status) {
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  if (pipe == nullptr) {
    status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  status = ::pclose(pipe);
  return out;
}

// The CLI prints exactly what NextTokenLogprobs computes, for an HF folder and for the
// tailor folder of the same model.
TEST(HfImportEngineCliTest, PrintsVocabSizeLogprobsForBothLayouts) {
  const std::string hf_dir = WriteCheckpoint("LlamaForCausalLM");
  absl::StatusOr<model::HybridLM> m = LoadModelDir(hf_dir);
  ASSERT_THAT(m.status(), IsOk());
  const std::string tailor_dir = NewDir() + "/tailor";
  ASSERT_THAT(model::SaveHybridLM(*m, tailor_dir), IsOk());
  absl::StatusOr<std::vector<std::vector<float>>> want = NextTokenLogprobs(*m, {5, 17, 33});
  ASSERT_THAT(want.status(), IsOk());
  for (const std::string& dir : {hf_dir, tailor_dir}) {
    int status = 0;
    const std::string out = RunCommand(
        absl::StrCat(TAILOR_ENGINE_BIN, " --model ", dir, " --next-token-logprobs 5,17,33 --json"),
        status);
    ASSERT_EQ(status, 0) << dir;
    const nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_array()) << out;
    ASSERT_EQ(j.size(), 64u);
    double mass = 0;
    for (size_t v = 0; v < 64; ++v) {
      ASSERT_TRUE(j[v].is_number()) << v;
      EXPECT_EQ(j[v].get<float>(), (*want)[0][v]) << v;  // %.9g round-trips a float
      mass += std::exp(j[v].get<double>());
    }
    EXPECT_NEAR(mass, 1.0, 1e-5);
  }
  int status = 0;
  RunCommand(absl::StrCat(TAILOR_ENGINE_BIN, " --model ", hf_dir,
                          " --next-token-logprobs 5,x --json 2>/dev/null"),
             status);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  RunCommand(absl::StrCat(TAILOR_ENGINE_BIN, " --model ", hf_dir,
                          " --next-token-logprobs 5,99 --json 2>/dev/null"),
             status);
  EXPECT_EQ(WEXITSTATUS(status), 1);  // 99 is outside the vocabulary
}

}  // namespace
}  // namespace tailor::hf
