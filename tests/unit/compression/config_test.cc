// HybridConfig: JSON round trip and one test per validation error.

#include "compression/model/config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"

namespace tailor::model {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;
using Json = nlohmann::json;

HybridConfig Sample() {
  HybridConfig c;
  c.vocab = 64;
  c.hidden = 128;
  c.max_seq = 96;
  c.rope_theta = 5000.0;
  c.norm_eps = 1e-6;
  c.layers = {LayerSpec::Attention(4, 2, 32),
              LayerSpec::Mamba(4, 32, 16, 4, 16),
              LayerSpec::Moe(4, 2, 96, 64),
              LayerSpec::Mlp(256),
              LayerSpec::Mlp(0),
              LayerSpec::Moe(0, 0, 0, 64)};
  return c;
}

Json SampleJson() { return Json::parse(HybridConfigToJson(Sample())); }

absl::Status ParseStatus(const Json& j) { return ParseHybridConfigJson(j.dump()).status(); }

TEST(HybridConfigTest, JsonRoundTrip) {
  const std::string text = HybridConfigToJson(Sample());
  TAILOR_ASSERT_OK_AND_ASSIGN(HybridConfig back, ParseHybridConfigJson(text));
  EXPECT_EQ(back, Sample());
  EXPECT_EQ(HybridConfigToJson(back), text);
  EXPECT_THAT(text, HasSubstr("\"kind\": \"mamba\""));
}

// The block variants of imported families (docs/model.md, "Block variants"): written only
// when set, so the demo family's config text (and every digest of it) is unchanged.
TEST(HybridConfigTest, VariantsRoundTripAndStayOutOfDemoConfigs) {
  const std::string demo = HybridConfigToJson(Sample());
  for (const char* key : {"rope_scaling", "tie_embeddings", "qkv_bias", "o_bias", "qk_norm",
                          "\"rope\"", "\"bias\""}) {
    EXPECT_THAT(demo, ::testing::Not(HasSubstr(key))) << key;
  }
  HybridConfig c = Sample();
  c.tie_embeddings = true;
  c.rope_scaling = {RopeScalingSpec::Type::kLlama3, 8.0, 1.0, 4.0, 8192};
  c.layers[0].attention.qkv_bias = true;
  c.layers[0].attention.o_bias = true;
  c.layers[0].attention.qk_norm = true;
  c.layers[0].attention.rope = false;
  c.layers[3].mlp.bias = true;
  const std::string text = HybridConfigToJson(c);
  TAILOR_ASSERT_OK_AND_ASSIGN(HybridConfig back, ParseHybridConfigJson(text));
  EXPECT_EQ(back, c);
  EXPECT_NE(back, Sample());
  EXPECT_EQ(HybridConfigToJson(back), text);
  // Tied: one vocab x hidden table fewer; biases and q/k norms counted.
  EXPECT_EQ(c.ParameterCount(), Sample().ParameterCount() - 64 * 128 + (4 + 2 * 2) * 32 + 128 +
                                    2 * 32 + 2 * 256 + 128);

  Json j = Json::parse(text);
  j["rope_scaling"]["high_freq_factor"] = 0.5;
  EXPECT_THAT(ParseStatus(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("rope_scaling.high_freq_factor: must be > "
                                                 "low_freq_factor (1), got 0.5")));
  j = Json::parse(text);
  j["rope_scaling"]["type"] = "yarn";
  EXPECT_THAT(ParseStatus(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("rope_scaling.type")));
  j = Json::parse(text);
  j["layers"][0]["attention"]["qk_norm"] = 1;
  EXPECT_THAT(ParseStatus(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("layers[0].attention.qk_norm: must be true or "
                                                 "false")));
  j = Json::parse(text);
  j["tie_embeddings"] = "yes";
  EXPECT_THAT(ParseStatus(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("tie_embeddings: must be true or false")));
}

TEST(HybridConfigTest, FileRoundTrip) {
  const std::string path = ::testing::TempDir() + "/config_test.json";
  TAILOR_ASSERT_OK(WriteHybridConfig(Sample(), path));
  TAILOR_ASSERT_OK_AND_ASSIGN(HybridConfig back, ReadHybridConfig(path));
  EXPECT_EQ(back, Sample());
  EXPECT_THAT(ReadHybridConfig(path + ".missing").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(".missing")));
}

TEST(HybridConfigTest, PresenceAndCounts) {
  HybridConfig c = Sample();
  EXPECT_TRUE(c.layers[0].present());
  EXPECT_FALSE(c.layers[4].present());
  EXPECT_TRUE(c.layers[5].present());  // shared expert only
  EXPECT_FALSE(c.layers[5].has_routed_experts());
  // Active parameters count top_k = 2 of 4 experts in layer 2.
  EXPECT_EQ(c.ParameterCount() - c.ActiveParameterCount(), 2 * 3 * 128 * 96);
}

TEST(HybridConfigTest, TopKAboveExperts) {
  Json j = SampleJson();
  j["layers"][3] = {{"kind", "moe"},
                    {"moe", {{"experts", 4}, {"top_k", 6}, {"expert_ffn", 8}, {"shared_ffn", 0}}}};
  EXPECT_THAT(ParseStatus(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                       "layers[3].moe.top_k: must be <= experts (4), got 6"));
}

struct BadCase {
  std::string name;
  std::string json_pointer;  // where to put the value
  Json value;
  std::string message;
};

class HybridConfigErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(HybridConfigErrorTest, NamesTheField) {
  Json j = SampleJson();
  j[Json::json_pointer(GetParam().json_pointer)] = GetParam().value;
  EXPECT_THAT(ParseStatus(j),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, HybridConfigErrorTest,
    ::testing::Values(
        BadCase{"vocab", "/vocab", 0, "vocab: must be > 0, got 0"},
        BadCase{"hidden_type", "/hidden", "128", "hidden: must be an integer"},
        BadCase{"hidden_float", "/hidden", 1.5, "hidden: must be an integer"},
        BadCase{"max_seq", "/max_seq", -3, "max_seq: must be > 0"},
        BadCase{"rope", "/rope_theta", 0.0, "rope_theta: must be a finite number > 0"},
        BadCase{"eps", "/norm_eps", "x", "norm_eps: must be a number"},
        BadCase{"unknown_top", "/hiden", 3, "hiden: unknown field"},
        BadCase{"format", "/format", "other", "format: must be \"tailor-hybrid-lm\""},
        BadCase{"version", "/version", 2, "version: unsupported"},
        BadCase{"layers_type", "/layers", 3, "layers: must be an array"},
        BadCase{"layer_type", "/layers/0", 3, "layers[0]: must be an object"},
        BadCase{"kind", "/layers/0/kind", "conv", "layers[0].kind: unknown layer kind \"conv\""},
        BadCase{"kind_section", "/layers/0/kind", "mlp", "layers[0].attention: unknown field"},
        BadCase{"missing_section", "/layers/3/kind", "moe", "layers[3].mlp: unknown field"},
        BadCase{"stray_section", "/layers/1/mlp", Json{{"ffn", 3}}, "layers[1].mlp: unknown field"},
        BadCase{"unknown_field", "/layers/0/attention/heads_", 1,
                "layers[0].attention.heads_: unknown field"},
        BadCase{"kv_above_heads", "/layers/0/attention/kv_heads", 8,
                "layers[0].attention.kv_heads: must be <= heads (4), got 8"},
        BadCase{"kv_divides", "/layers/0/attention/heads", 5,
                "layers[0].attention.kv_heads: must divide heads (5), got 2"},
        BadCase{"kv_zero", "/layers/0/attention/kv_heads", 0,
                "layers[0].attention.kv_heads: must be > 0, got 0"},
        BadCase{"head_dim_odd", "/layers/0/attention/head_dim", 31,
                "layers[0].attention.head_dim: must be even"},
        BadCase{"mamba_state", "/layers/1/mamba/state", 0, "layers[1].mamba.state: must be > 0"},
        BadCase{"mamba_chunk", "/layers/1/mamba/chunk", -1, "layers[1].mamba.chunk: must be > 0"},
        BadCase{"mamba_heads", "/layers/1/mamba/heads", -1, "layers[1].mamba.heads: must be >= 0"},
        BadCase{"moe_topk_zero", "/layers/2/moe/top_k", 0, "layers[2].moe.top_k: must be >= 1"},
        BadCase{"moe_ffn", "/layers/2/moe/expert_ffn", 0, "layers[2].moe.expert_ffn: must be > 0"},
        BadCase{"moe_shared", "/layers/2/moe/shared_ffn", -2,
                "layers[2].moe.shared_ffn: must be >= 0"},
        BadCase{"moe_no_experts", "/layers/5/moe/top_k", 2,
                "layers[5].moe.top_k: must be 0 when experts is 0, got 2"},
        BadCase{"mlp_ffn", "/layers/3/mlp/ffn", -1, "layers[3].mlp.ffn: must be >= 0"}),
    [](const auto& info) { return info.param.name; });

TEST(HybridConfigTest, MissingFieldsAndBadJson) {
  Json j = SampleJson();
  j.erase("vocab");
  EXPECT_THAT(ParseStatus(j), StatusIs(absl::StatusCode::kInvalidArgument, "vocab: required"));
  j = SampleJson();
  j["layers"][2]["moe"].erase("top_k");
  EXPECT_THAT(ParseStatus(j),
              StatusIs(absl::StatusCode::kInvalidArgument, "layers[2].moe.top_k: required"));
  j = SampleJson();
  j["layers"][0].erase("attention");
  EXPECT_THAT(ParseStatus(j),
              StatusIs(absl::StatusCode::kInvalidArgument, "layers[0].attention: required"));
  EXPECT_THAT(ParseHybridConfigJson("{").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseHybridConfigJson("[]").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("JSON object")));
}

TEST(HybridConfigTest, ValidateStructDirectly) {
  HybridConfig c = Sample();
  TAILOR_EXPECT_OK(ValidateHybridConfig(c));
  c.layers[2].moe.top_k = 6;
  EXPECT_THAT(ValidateHybridConfig(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "layers[2].moe.top_k: must be <= experts (4), got 6"));
  c = Sample();
  c.layers[0] = LayerSpec::Attention(0, 2, 32);
  EXPECT_THAT(ValidateHybridConfig(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "layers[0].attention.kv_heads: must be 0 when heads is 0, got 2"));
  c.layers[0] = LayerSpec::Attention(0, 0, 0);  // absent attention layer
  TAILOR_EXPECT_OK(ValidateHybridConfig(c));
  EXPECT_THAT(WriteHybridConfig(HybridConfig{}, ::testing::TempDir() + "/x.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocab")));
}

}  // namespace
}  // namespace tailor::model
