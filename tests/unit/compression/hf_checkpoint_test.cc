// Hugging Face checkpoints (compression/hf): config parsing per family, opening tiny
// checkpoints in each family's exact layout, and every bad-checkpoint case with its exact
// message and code.

#include "compression/hf/hf_checkpoint.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/hf/hf_config.h"
#include "compression/model/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/status_matchers.h"

namespace tailor::hf {
namespace {

using ::tailor::testing::HfShardName;
using ::tailor::testing::HfTestTensors;
using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::tailor::testing::TinyHfConfig;
using ::tailor::testing::WriteHfCheckpointFiles;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

const char* const kArchitectures[] = {
    "LlamaForCausalLM",   "MistralForCausalLM",  "Qwen2ForCausalLM",     "Qwen3ForCausalLM",
    "MixtralForCausalLM", "Qwen3MoeForCausalLM", "NemotronHForCausalLM",
};

std::string NewDir() { return testing::NewTestDir("hf_ckpt_"); }

absl::StatusOr<HfConfig> Parse(const Json& j, absl::string_view format = "") {
  return ParseHfConfigJson(j.dump(), "config.json", format);
}

std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.insert(e.path().filename().string() + ":" +
               std::to_string(std::filesystem::file_size(e.path())));
  }
  return out;
}

// --- config.json ---------------------------------------------------------------------

TEST(HfConfigTest, LlamaKeysAndLlama3Rope) {
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(TinyHfConfig("LlamaForCausalLM")));
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.family, Family::kLlama);
  EXPECT_EQ(c.vocab_size, 64);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 8);  // hidden_size / num_attention_heads
  EXPECT_EQ(c.intermediate_size, 48);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias || c.qk_norm || c.tie_word_embeddings);
  EXPECT_THAT(c.layers, ElementsAre(LayerKind::kAttentionMlp, LayerKind::kAttentionMlp));
}

TEST(HfConfigTest, DefaultsForKvHeadsAndHeadDim) {
  Json j = TinyHfConfig("LlamaForCausalLM");
  j.erase("num_key_value_heads");
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("rms_norm_eps");
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(j));
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
}

TEST(HfConfigTest, Qwen2HasQkvBiasesAndTiedEmbeddings) {
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(TinyHfConfig("Qwen2ForCausalLM")));
  EXPECT_EQ(c.family, Family::kLlama);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1000000.0);  // written as an integer
}

TEST(HfConfigTest, Qwen3HasQkNormsAndItsOwnHeadDim) {
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(TinyHfConfig("Qwen3ForCausalLM")));
  EXPECT_EQ(c.family, Family::kQwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 16);
}

TEST(HfConfigTest, MixtralExperts) {
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(TinyHfConfig("MixtralForCausalLM")));
  EXPECT_EQ(c.family, Family::kMixtral);
  EXPECT_EQ(c.moe.num_experts, 4);
  EXPECT_EQ(c.moe.experts_per_token, 2);
  EXPECT_EQ(c.moe.expert_intermediate, 24);
  EXPECT_EQ(c.moe.router, Router::kSoftmax);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_THAT(c.layers, ElementsAre(LayerKind::kAttentionMoe, LayerKind::kAttentionMoe));
}

TEST(HfConfigTest, Qwen3MoeSparseAndDenseLayersAndRopeParameters) {
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(TinyHfConfig("Qwen3MoeForCausalLM")));
  EXPECT_EQ(c.family, Family::kQwen3Moe);
  EXPECT_THAT(c.layers, ElementsAre(LayerKind::kAttentionMoe, LayerKind::kAttentionMlp,
                                    LayerKind::kAttentionMoe));
  EXPECT_EQ(c.moe.num_experts, 4);
  EXPECT_EQ(c.moe.expert_intermediate, 16);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_EQ(c.intermediate_size, 40);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1000000.0);
  EXPECT_TRUE(c.qk_norm);
}

TEST(HfConfigTest, NemotronHPatternMambaAndMoe) {
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(TinyHfConfig("NemotronHForCausalLM")));
  EXPECT_EQ(c.family, Family::kNemotronH);
  EXPECT_FALSE(c.rope);
  EXPECT_THAT(c.layers, ElementsAre(LayerKind::kMamba, LayerKind::kAttention, LayerKind::kMlp,
                                    LayerKind::kMoe));
  EXPECT_EQ(c.mamba.num_heads, 4);
  EXPECT_EQ(c.mamba.head_dim, 8);
  EXPECT_EQ(c.mamba.state_size, 8);
  EXPECT_EQ(c.mamba.n_groups, 2);
  EXPECT_EQ(c.mamba.conv_kernel, 4);
  EXPECT_EQ(c.mamba.chunk_size, 16);
  EXPECT_EQ(c.mamba.intermediate_size(), 32);
  EXPECT_EQ(c.mamba.conv_dim(), 32 + 2 * 2 * 8);
  EXPECT_EQ(c.moe.router, Router::kSigmoidGrouped);
  EXPECT_EQ(c.moe.num_experts, 4);
  EXPECT_EQ(c.moe.shared_intermediate, 24);
  EXPECT_DOUBLE_EQ(c.moe.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.intermediate_size, 48);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
}

TEST(HfConfigTest, NemotronHLayersBlockTypeAndLegacyKeysAndInfinity) {
  Json j = TinyHfConfig("NemotronHForCausalLM");
  j.erase("hybrid_override_pattern");
  j["layers_block_type"] = {"mamba", "attention", "mlp", "moe"};
  j.erase("n_groups");
  j["mamba_n_groups"] = 4;
  std::string text = j.dump();
  // Python's json module writes float('inf') as a bare Infinity.
  text.insert(text.size() - 1, R"(, "time_step_limit": [0.0, Infinity])");
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, ParseHfConfigJson(text, "config.json"));
  EXPECT_EQ(c.mamba.n_groups, 4);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.mamba.time_step_limit_max, 0.0);
}

TEST(HfConfigTest, ModelTypeWhenNoArchitectures) {
  Json j = TinyHfConfig("MistralForCausalLM");
  j.erase("architectures");
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(j));
  EXPECT_EQ(c.architecture, Architecture::kMistral);
}

TEST(HfConfigTest, ForcedFormatOverridesDetection) {
  Json j = TinyHfConfig("Qwen3ForCausalLM");
  j["architectures"] = {"MyFinetunedQwen"};
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument));
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(j, "qwen3"));
  EXPECT_EQ(c.architecture, Architecture::kQwen3);
  TAILOR_ASSERT_OK_AND_ASSIGN(c, Parse(TinyHfConfig("LlamaForCausalLM"), "Qwen2ForCausalLM"));
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_THAT(Parse(j, "gpt2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "format: unsupported \"gpt2\" (supported: LlamaForCausalLM, "
                       "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
                       "MixtralForCausalLM, Qwen3MoeForCausalLM, NemotronHForCausalLM, or their "
                       "model_type llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, "
                       "nemotron_h)"));
}

TEST(HfConfigTest, UnsupportedArchitectureNamesTheSupportedOnes) {
  Json j = TinyHfConfig("LlamaForCausalLM");
  j["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: architectures: unsupported \"GPT2LMHeadModel\" "
                                 "(supported: LlamaForCausalLM, MistralForCausalLM, "
                                 "Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM, "
                                 "Qwen3MoeForCausalLM, NemotronHForCausalLM; parent { format: "
                                 "... } forces one)"));
}

TEST(HfConfigTest, KvHeadsMustDivideHeads) {
  Json j = TinyHfConfig("LlamaForCausalLM");
  j["num_key_value_heads"] = 3;
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: num_key_value_heads: must divide "
                                 "num_attention_heads (4), got 3"));
}

TEST(HfConfigTest, KeyErrorsNameTheKey) {
  Json j = TinyHfConfig("LlamaForCausalLM");
  j.erase("hidden_size");
  EXPECT_THAT(Parse(j),
              StatusIs(absl::StatusCode::kInvalidArgument, "config.json: hidden_size: missing"));
  j = TinyHfConfig("LlamaForCausalLM");
  j["vocab_size"] = "64";
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: vocab_size: must be an integer, got \"64\""));
  j = TinyHfConfig("LlamaForCausalLM");
  j["hidden_act"] = "gelu";
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: hidden_act: only \"silu\" is supported, got "
                                 "\"gelu\""));
  j = TinyHfConfig("Qwen2ForCausalLM");
  j["use_sliding_window"] = true;
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: use_sliding_window: sliding-window attention is "
                                 "not supported"));
  EXPECT_THAT(ParseHfConfigJson("{", "config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, "config.json: not valid JSON"));
}

TEST(HfConfigTest, OtherRopeTypesAreRefusedByName) {
  Json j = TinyHfConfig("LlamaForCausalLM");
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: rope_scaling.type: unsupported \"yarn\" "
                                 "(supported: default, llama3)"));
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}};
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: rope_scaling.original_max_position_embeddings: "
                                 "missing"));
}

TEST(HfConfigTest, NemotronHErrors) {
  Json j = TinyHfConfig("NemotronHForCausalLM");
  j["hybrid_override_pattern"] = "M*X";
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: hybrid_override_pattern: character 2 is 'X'; the "
                                 "pattern takes M (Mamba), * (attention), - (MLP) and E (MoE)"));
  j = TinyHfConfig("NemotronHForCausalLM");
  j["n_groups"] = 3;
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: n_groups: must divide mamba_num_heads (4), got 3"));
  j = TinyHfConfig("NemotronHForCausalLM");
  j["num_hidden_layers"] = 5;
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: num_hidden_layers: must equal the length of "
                                 "hybrid_override_pattern (4), got 5"));
  j = TinyHfConfig("NemotronHForCausalLM");
  j["mlp_hidden_act"] = "silu";
  EXPECT_THAT(Parse(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                 "config.json: mlp_hidden_act: only \"relu2\" is supported, got "
                                 "\"silu\""));
}

// --- ExpectedTensors against the independent writer's list -----------------------------

class HfFamilyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HfFamilyTest, ExpectedTensorsMatchTheReferenceLayout) {
  const Json j = TinyHfConfig(GetParam());
  TAILOR_ASSERT_OK_AND_ASSIGN(HfConfig c, Parse(j));
  std::map<std::string, std::vector<int64_t>> want;
  for (const model::RawTensor& t : HfTestTensors(j, model::DType::kF32, 1)) {
    want[t.name] = t.shape;
  }
  std::map<std::string, std::vector<int64_t>> got;
  for (const ExpectedTensor& t : ExpectedTensors(c)) {
    got[t.name] = t.shape;
    EXPECT_EQ(t.dims.size(), t.shape.size()) << t.name;
  }
  EXPECT_EQ(got, want);
}

TEST_P(HfFamilyTest, OpensWithFamilyShapesAndTokenizer) {
  const std::string dir = NewDir();
  TAILOR_ASSERT_OK(testing::WriteHfTestCheckpoint(dir, GetParam()));
  TAILOR_ASSERT_OK_AND_ASSIGN(HfCheckpoint ckpt, HfCheckpoint::Open(dir));
  EXPECT_EQ(ArchitectureName(ckpt.config().architecture), GetParam());
  EXPECT_THAT(ckpt.shard_files(), ElementsAre(HfShardName(1, 2), HfShardName(2, 2)));
  EXPECT_THAT(ckpt.tokenizer_files(), ElementsAre("tokenizer.json", "tokenizer_config.json"));
  const std::vector<model::RawTensor> written =
      HfTestTensors(TinyHfConfig(GetParam()), model::DType::kBF16, 1);
  std::vector<std::string> names;
  uint64_t bytes = 0;
  for (const model::RawTensor& t : written) {
    names.push_back(t.name);
    bytes += t.data.size();
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(ckpt.tensor_names(), names);
  EXPECT_EQ(ckpt.weight_bytes(), bytes);
  for (const model::RawTensor& t : written) {
    TAILOR_ASSERT_OK_AND_ASSIGN(TensorView v, ckpt.Tensor(t.name));
    EXPECT_EQ(v.dtype, model::DType::kBF16);
    EXPECT_EQ(*v.shape, t.shape);
    ASSERT_EQ(v.size_bytes, t.data.size());
    EXPECT_EQ(std::memcmp(v.data, t.data.data(), t.data.size()), 0) << t.name;
  }
  EXPECT_THAT(ckpt.Tensor("model.nope"),
              StatusIs(absl::StatusCode::kNotFound, absl::StrCat(dir, ": no tensor model.nope")));
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilyTest, ::testing::ValuesIn(kArchitectures),
                         [](const auto& info) { return std::string(info.param); });

// --- opening checkpoints ----------------------------------------------------------------

TEST(HfCheckpointTest, SingleF32FileWithoutTokenizer) {
  const std::string dir = NewDir();
  TAILOR_ASSERT_OK(testing::WriteHfTestCheckpoint(
      dir, "Qwen3ForCausalLM", {.dtype = model::DType::kF32, .shards = 1, .tokenizer = false}));
  TAILOR_ASSERT_OK_AND_ASSIGN(HfCheckpoint ckpt, HfCheckpoint::Open(dir));
  EXPECT_THAT(ckpt.shard_files(), ElementsAre("model.safetensors"));
  EXPECT_TRUE(ckpt.tokenizer_files().empty());
  TAILOR_ASSERT_OK_AND_ASSIGN(TensorView v, ckpt.Tensor("model.layers.1.self_attn.q_norm.weight"));
  EXPECT_EQ(v.dtype, model::DType::kF32);
  EXPECT_THAT(*v.shape, ElementsAre(16));
}

TEST(HfCheckpointTest, TiedEmbeddingsHaveNoLmHead) {
  const std::string dir = NewDir();
  TAILOR_ASSERT_OK(testing::WriteHfTestCheckpoint(dir, "Qwen2ForCausalLM"));
  TAILOR_ASSERT_OK_AND_ASSIGN(HfCheckpoint ckpt, HfCheckpoint::Open(dir));
  EXPECT_TRUE(ckpt.config().tie_word_embeddings);
  EXPECT_THAT(ckpt.Tensor("lm_head.weight"), StatusIs(absl::StatusCode::kNotFound));
  TAILOR_EXPECT_OK(ckpt.Tensor("model.embed_tokens.weight"));
}

TEST(HfCheckpointTest, TiedEmbeddingsWithAnLmHeadAreRefused) {
  const std::string dir = NewDir();
  Json j = TinyHfConfig("LlamaForCausalLM");
  j["tie_word_embeddings"] = true;
  // The tensors of the untied model: lm_head.weight is one too many.
  TAILOR_ASSERT_OK(WriteHfCheckpointFiles(
      dir, j, HfTestTensors(TinyHfConfig("LlamaForCausalLM"), model::DType::kBF16, 1), 1));
  EXPECT_THAT(HfCheckpoint::Open(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat(dir,
                                    "/model.safetensors: unexpected tensor lm_head.weight: "
                                    "config.json has tie_word_embeddings true")));
}

TEST(HfCheckpointTest, ForcedFormat) {
  const std::string dir = NewDir();
  Json j = TinyHfConfig("MistralForCausalLM");
  j["architectures"] = {"MyMistralVariant"};
  j.erase("model_type");
  TAILOR_ASSERT_OK(WriteHfCheckpointFiles(
      dir, j, HfTestTensors(TinyHfConfig("MistralForCausalLM"), model::DType::kBF16, 1)));
  EXPECT_THAT(HfCheckpoint::Open(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("/config.json: architectures: unsupported \"MyMistralVariant\"")));
  TAILOR_ASSERT_OK_AND_ASSIGN(HfCheckpoint ckpt,
                              HfCheckpoint::Open(dir, {.format = "MistralForCausalLM"}));
  EXPECT_EQ(ckpt.config().architecture, Architecture::kMistral);
}

TEST(HfCheckpointTest, MemoryLimit) {
  const std::string dir = NewDir();
  TAILOR_ASSERT_OK(testing::WriteHfTestCheckpoint(dir, "LlamaForCausalLM"));
  uint64_t files = 0;
  for (int k = 1; k <= 2; ++k) {
    files += std::filesystem::file_size(absl::StrCat(dir, "/", HfShardName(k, 2)));
  }
  EXPECT_THAT(HfCheckpoint::Open(dir, {.memory_limit_bytes = files - 1}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       absl::StrCat(dir, ": the shards take 0.00 GiB (", files,
                                    " bytes), more than the 0.00 GiB (", files - 1,
                                    " bytes) of the memory limit set")));
  TAILOR_EXPECT_OK(HfCheckpoint::Open(dir, {.memory_limit_bytes = files}));
  TAILOR_EXPECT_OK(HfCheckpoint::Open(dir));  // MemAvailable
  TAILOR_ASSERT_OK_AND_ASSIGN(uint64_t available, AvailableMemoryBytes());
  EXPECT_GT(available, 0u);
}

// --- bad checkpoints: exact message and code, nothing written --------------------------

class BadCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewDir();
    config_ = TinyHfConfig("LlamaForCausalLM");
    tensors_ = HfTestTensors(config_, model::DType::kBF16, 1);
  }
  void Write() { TAILOR_ASSERT_OK(WriteHfCheckpointFiles(dir_, config_, tensors_)); }
  std::string Path(absl::string_view file) const { return absl::StrCat(dir_, "/", file); }
  Json Index() const {
    return Json::parse(*model::ReadFileToString(Path("model.safetensors.index.json")));
  }
  void SetIndex(const Json& j) {
    TAILOR_ASSERT_OK(model::WriteFileAtomically(Path("model.safetensors.index.json"), j.dump()));
  }
  model::RawTensor& Find(absl::string_view name) {
    for (model::RawTensor& t : tensors_) {
      if (t.name == name) return t;
    }
    ADD_FAILURE() << "no tensor " << name;
    return tensors_[0];
  }
  // Opens, expects the error, and checks that the folder is unchanged.
  void ExpectOpenFails(absl::StatusCode code, const std::string& message) {
    const std::set<std::string> before = Listing(dir_);
    EXPECT_THAT(HfCheckpoint::Open(dir_), StatusIs(code, message));
    EXPECT_EQ(Listing(dir_), before);
  }

  std::string dir_;
  Json config_;
  std::vector<model::RawTensor> tensors_;
};

TEST_F(BadCheckpointTest, MissingShard) {
  Write();
  ASSERT_EQ(::unlink(Path(HfShardName(2, 2)).c_str()), 0);
  ExpectOpenFails(absl::StatusCode::kNotFound,
                  Path("model-00002-of-00002.safetensors: named by model.safetensors.index.json "
                       "for tensor model.layers.1.input_layernorm.weight, not found"));
}

TEST_F(BadCheckpointTest, IndexNamesATensorNoShardHas) {
  Write();
  Json index = Index();
  index["weight_map"]["model.layers.2.mlp.up_proj.weight"] = HfShardName(2, 2);
  SetIndex(index);
  ExpectOpenFails(absl::StatusCode::kInvalidArgument,
                  Path("model-00002-of-00002.safetensors: has no tensor "
                       "model.layers.2.mlp.up_proj.weight, which model.safetensors.index.json "
                       "places there"));
}

TEST_F(BadCheckpointTest, ShardTensorTheIndexOmits) {
  Write();
  Json index = Index();
  index["weight_map"].erase("model.norm.weight");
  SetIndex(index);
  ExpectOpenFails(absl::StatusCode::kInvalidArgument,
                  Path("model-00002-of-00002.safetensors: tensor model.norm.weight is not "
                       "listed in model.safetensors.index.json"));
}

TEST_F(BadCheckpointTest, IndexShardOutsideTheFolder) {
  Write();
  Json index = Index();
  index["weight_map"]["model.norm.weight"] = "../model.safetensors";
  SetIndex(index);
  ExpectOpenFails(absl::StatusCode::kInvalidArgument,
                  Path("model.safetensors.index.json: weight_map: tensor model.norm.weight: the "
                       "shard must be a file name in the checkpoint folder, got "
                       "\"../model.safetensors\""));
}

TEST_F(BadCheckpointTest, ShapeDisagreesWithConfig) {
  model::RawTensor& k = Find("model.layers.1.self_attn.k_proj.weight");
  k.shape = {32, 32};  // as if num_key_value_heads were 4
  k.data.resize(32 * 32 * 2);
  Write();
  ExpectOpenFails(absl::StatusCode::kInvalidArgument,
                  Path("model-00002-of-00002.safetensors: tensor "
                       "model.layers.1.self_attn.k_proj.weight: shape [32, 32] disagrees with "
                       "config.json: expected [16, 32] = [num_key_value_heads * head_dim, "
                       "hidden_size]"));
}

TEST_F(BadCheckpointTest, MissingTensor) {
  tensors_.erase(std::find_if(tensors_.begin(), tensors_.end(), [](const auto& t) {
    return t.name == "model.layers.0.mlp.up_proj.weight";
  }));
  Write();
  ExpectOpenFails(absl::StatusCode::kInvalidArgument,
                  Path("model.safetensors.index.json: no tensor "
                       "model.layers.0.mlp.up_proj.weight [48, 32], which config.json "
                       "(LlamaForCausalLM) implies"));
}

TEST_F(BadCheckpointTest, UnexpectedTensor) {
  tensors_.push_back(
      {"model.layers.0.self_attn.o_proj.bias", model::DType::kBF16, {32}, std::string(64, '\0')});
  tensors_.push_back({"model.rotary_emb.inv_freq", model::DType::kF32, {4}, std::string(16, 0)});
  Write();
  ExpectOpenFails(absl::StatusCode::kInvalidArgument,
                  Path("model-00001-of-00002.safetensors: unexpected tensor "
                       "model.layers.0.self_attn.o_proj.bias: config.json (LlamaForCausalLM) "
                       "implies no such tensor (and 1 more)"));
}

TEST_F(BadCheckpointTest, UnsupportedDType) {
  model::RawTensor& e = Find("model.embed_tokens.weight");
  e.dtype = model::DType::kI32;
  e.data.resize(64 * 32 * 4);
  Write();
  ExpectOpenFails(absl::StatusCode::kInvalidArgument,
                  Path("model-00001-of-00002.safetensors: tensor model.embed_tokens.weight: "
                       "dtype I32 is not supported (F32, BF16, F16)"));
}

TEST_F(BadCheckpointTest, TruncatedShard) {
  Write();
  const std::string shard = Path(HfShardName(2, 2));
  const std::string bytes = *model::ReadFileToString(shard);
  TAILOR_ASSERT_OK_AND_ASSIGN(model::SafetensorsHeader header,
                              model::ParseSafetensorsHeader(bytes, bytes.size(), shard));
  const uint64_t buffer = bytes.size() - header.data_start;
  std::filesystem::resize_file(shard, bytes.size() - 10);
  // The last tensor by name is the last in the file (the writer sorts by name); its 64
  // bytes end at the buffer's end, now 10 bytes short.
  ExpectOpenFails(
      absl::StatusCode::kDataLoss,
      absl::StrCat(shard, ": tensor 'model.norm.weight': data_offsets [", buffer - 64, ", ", buffer,
                   "] out of bounds: data buffer is ", buffer - 10, " bytes (truncated file?)"));
}

TEST_F(BadCheckpointTest, UnsupportedArchitecture) {
  config_["architectures"] = {"FalconForCausalLM"};
  Write();
  ExpectOpenFails(absl::StatusCode::kInvalidArgument,
                  Path("config.json: architectures: unsupported \"FalconForCausalLM\" "
                       "(supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                       "Qwen3ForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM, "
                       "NemotronHForCausalLM; parent { format: ... } forces one)"));
}

TEST_F(BadCheckpointTest, NoWeights) {
  TAILOR_ASSERT_OK(model::WriteFileAtomically(Path("config.json"), config_.dump()));
  ExpectOpenFails(absl::StatusCode::kNotFound,
                  absl::StrCat(dir_,
                               ": neither model.safetensors.index.json nor "
                               "model.safetensors found"));
}

}  // namespace
}  // namespace tailor::hf
