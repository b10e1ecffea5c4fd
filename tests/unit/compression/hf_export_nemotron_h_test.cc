// WriteNemotronHCheckpoint: a model of tailor's written in NVIDIA's NemotronHForCausalLM layout
// is what HfCheckpoint::Open accepts (every tensor of the family layout, HF's shapes) and what
// ImportNemotronH reads back into the same weights, bit for bit at F32; a config.json that does
// not describe the model is refused naming what differs, and nothing is written.

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_config.h"
#include "compression/hf/hf_export_nemotron_h.h"
#include "compression/hf/hf_import.h"
#include "compression/hf/hf_import_nemotron_h.h"
#include "compression/model/hybrid_lm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/status_matchers.h"

namespace tailor {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

// A model of `config` (a Nemotron-H config.json) with seeded random weights.
model::HybridLM ModelOf(const nlohmann::json& config) {
  absl::StatusOr<hf::HfConfig> hf = hf::ParseHfConfigJson(config.dump(), "config.json", "");
  EXPECT_THAT(hf.status(), IsOk());
  absl::StatusOr<model::HybridConfig> internal = hf::NemotronHHybridConfig(*hf);
  EXPECT_THAT(internal.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = model::CreateHybridLM(*internal, 7);
  EXPECT_THAT(m.status(), IsOk());
  return *m;
}

class NemotronHWriteTest : public ::testing::TestWithParam<const char*> {};

TEST_P(NemotronHWriteTest, ImportReadsBackTheSameWeights) {
  const nlohmann::json config = testing::TinyNemotronHConfig(GetParam());
  model::HybridLM written = ModelOf(config);
  const std::string dir = testing::NewTestDir("nemotron_h_write_") + "/parent";
  ASSERT_THAT(hf::WriteNemotronHCheckpoint(written, config, dir), IsOk());

  absl::StatusOr<hf::HfCheckpoint> opened = hf::HfCheckpoint::Open(dir);
  ASSERT_THAT(opened.status(), IsOk());
  EXPECT_EQ(opened->config().family, hf::Family::kNemotronH);
  absl::StatusOr<model::HybridLM> read = hf::ImportHfModel(*opened);
  ASSERT_THAT(read.status(), IsOk());
  EXPECT_EQ((*read)->config(), written->config());
  const model::TensorMap want = written->StateDict();
  const model::TensorMap got = (*read)->StateDict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(torch::equal(got.at(name), t)) << name;
  }
  const at::Tensor tokens = torch::randint(0, 64, {2, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  absl::StatusOr<model::ForwardOutput> a = (*read)->Forward(tokens);
  absl::StatusOr<model::ForwardOutput> b = written->Forward(tokens);
  ASSERT_THAT(a.status(), IsOk());
  ASSERT_THAT(b.status(), IsOk());
  EXPECT_TRUE(torch::equal(a->logits, b->logits));
}

// Mamba (in_proj and conv1d joined from four and two slices), attention, MLP and the
// experts (stacked per expert in tailor, one tensor each in HF).
INSTANTIATE_TEST_SUITE_P(Patterns, NemotronHWriteTest, ::testing::Values("M*-E", "M-M*-"));

TEST(NemotronHWriteTest, Bf16RoundsEveryWeightToNearestEven) {
  const nlohmann::json config = testing::TinyNemotronHConfig("M*-");
  const model::HybridLM written = ModelOf(config);
  const std::string dir = testing::NewTestDir("nemotron_h_write_");
  ASSERT_THAT(hf::WriteNemotronHCheckpoint(written, config, dir, model::DType::kBF16), IsOk());
  absl::StatusOr<hf::HfCheckpoint> opened = hf::HfCheckpoint::Open(dir);
  ASSERT_THAT(opened.status(), IsOk());
  absl::StatusOr<model::HybridLM> read = hf::ImportHfModel(*opened);
  ASSERT_THAT(read.status(), IsOk());
  for (const auto& [name, t] : written->StateDict()) {
    const at::Tensor rounded = t.to(torch::kBFloat16).to(torch::kFloat32);
    EXPECT_TRUE(torch::equal((*read)->StateDict().at(name), rounded)) << name;
  }
}

TEST(NemotronHWriteTest, AConfigThatDoesNotDescribeTheModelIsRefusedAndNothingIsWritten) {
  const nlohmann::json config = testing::TinyNemotronHConfig("M*-");
  const model::HybridLM model = ModelOf(config);
  const std::string dir = testing::NewTestDir("nemotron_h_write_") + "/parent";

  nlohmann::json wider = config;
  wider["intermediate_size"] = 64;
  EXPECT_THAT(hf::WriteNemotronHCheckpoint(model, wider, dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config.json does not describe the model: layer 2")));
  nlohmann::json longer = testing::TinyNemotronHConfig("M*--");
  EXPECT_THAT(hf::WriteNemotronHCheckpoint(model, longer, dir),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("3 layers vs 4")));
  nlohmann::json llama = testing::TinyHfConfig("LlamaForCausalLM");
  EXPECT_THAT(hf::WriteNemotronHCheckpoint(model, llama, dir),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not Nemotron-H")));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace tailor
