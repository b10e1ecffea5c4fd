// Input limits of config.json and safetensors files (docs/operations.md, "Input limits"):
// each limit is accepted exactly at the maximum and rejected one past it, with an error
// naming the field and the limit.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compression/model/config.h"
#include "compression/model/safetensors_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::model {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

HybridConfig Small() {
  HybridConfig c;
  c.vocab = 64;
  c.hidden = 32;
  c.max_seq = 64;
  c.layers = {LayerSpec::Attention(4, 2, 8), LayerSpec::Mamba(2, 8, 8, 4, 16),
              LayerSpec::Moe(4, 2, 16, 8), LayerSpec::Mlp(64)};
  return c;
}

struct ConfigLimit {
  std::string field;  // as the error names it
  int64_t max;
  std::function<void(HybridConfig&, int64_t)> set;
};

std::vector<ConfigLimit> ConfigLimits() {
  return {
      {"vocab", kMaxVocab, [](HybridConfig& c, int64_t v) { c.vocab = v; }},
      {"hidden", kMaxWidth, [](HybridConfig& c, int64_t v) { c.hidden = v; }},
      {"max_seq", kMaxSeq, [](HybridConfig& c, int64_t v) { c.max_seq = v; }},
      {"layers[0].attention.heads", kMaxHeads,
       [](HybridConfig& c, int64_t v) { c.layers[0].attention = {v, 1, 8}; }},
      {"layers[0].attention.head_dim", kMaxHeads,
       [](HybridConfig& c, int64_t v) { c.layers[0].attention.head_dim = v; }},
      {"layers[1].mamba.heads", kMaxHeads,
       [](HybridConfig& c, int64_t v) { c.layers[1].mamba.heads = v; }},
      {"layers[1].mamba.head_dim", kMaxHeads,
       [](HybridConfig& c, int64_t v) { c.layers[1].mamba.head_dim = v; }},
      {"layers[1].mamba.state", kMaxHeads,
       [](HybridConfig& c, int64_t v) { c.layers[1].mamba.state = v; }},
      {"layers[1].mamba.conv_kernel", kMaxConvKernel,
       [](HybridConfig& c, int64_t v) { c.layers[1].mamba.conv_kernel = v; }},
      {"layers[1].mamba.chunk", kMaxChunk,
       [](HybridConfig& c, int64_t v) { c.layers[1].mamba.chunk = v; }},
      {"layers[2].moe.experts", kMaxExperts,
       [](HybridConfig& c, int64_t v) { c.layers[2].moe.experts = v; }},
      {"layers[2].moe.expert_ffn", kMaxWidth,
       [](HybridConfig& c, int64_t v) { c.layers[2].moe.expert_ffn = v; }},
      {"layers[2].moe.shared_ffn", kMaxWidth,
       [](HybridConfig& c, int64_t v) { c.layers[2].moe.shared_ffn = v; }},
      {"layers[3].mlp.ffn", kMaxWidth,
       [](HybridConfig& c, int64_t v) { c.layers[3].mlp.ffn = v; }},
  };
}

TEST(ModelConfigLimitsTest, EachWidthAtTheLimitIsValidAndOnePastIsNamed) {
  for (const ConfigLimit& limit : ConfigLimits()) {
    SCOPED_TRACE(limit.field);
    HybridConfig c = Small();
    limit.set(c, limit.max);
    EXPECT_THAT(ValidateHybridConfig(c), IsOk());
    // And through the JSON reader, which validates too.
    EXPECT_THAT(ParseHybridConfigJson(HybridConfigToJson(c)).status(), IsOk());
    limit.set(c, limit.max + 1);
    EXPECT_THAT(ValidateHybridConfig(c),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(limit.field + ": must be <= " + std::to_string(limit.max) +
                                   ", got " + std::to_string(limit.max + 1))));
  }
}

TEST(ModelConfigLimitsTest, LayerCountAtTheLimitIsValidAndOnePastIsNamed) {
  HybridConfig c = Small();
  c.layers.assign(kMaxLayers, LayerSpec::Mlp(8));
  EXPECT_THAT(ValidateHybridConfig(c), IsOk());
  const std::string at_limit = HybridConfigToJson(c);
  EXPECT_THAT(ParseHybridConfigJson(at_limit).status(), IsOk());
  c.layers.push_back(LayerSpec::Mlp(8));
  EXPECT_THAT(ValidateHybridConfig(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layers: at most 1024 entries, got 1025")));
  EXPECT_THAT(ParseHybridConfigJson(HybridConfigToJson(c)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layers: at most 1024 entries, got 1025")));
}

TEST(ModelConfigLimitsTest, LargestConfigParameterCountDoesNotOverflow) {
  // Every width at its maximum: the parameter count must still fit in int64 (the limits are
  // chosen for that), so budgets computed from it never wrap.
  HybridConfig c;
  c.vocab = kMaxVocab;
  c.hidden = kMaxWidth;
  c.max_seq = kMaxSeq;
  c.layers.assign(kMaxLayers, LayerSpec::Moe(kMaxExperts, kMaxExperts, kMaxWidth, kMaxWidth));
  ASSERT_THAT(ValidateHybridConfig(c), IsOk());
  EXPECT_GT(c.ParameterCount(), int64_t{1} << 61);
  EXPECT_GE(c.ParameterCount(), c.ActiveParameterCount());
}

TEST(ModelConfigLimitsTest, ConfigTextLargerThanTheLimitIsRefusedUnparsed) {
  std::string text = HybridConfigToJson(Small());
  text.append(kMaxConfigJsonBytes - text.size(), ' ');  // JSON whitespace: still valid
  EXPECT_THAT(ParseHybridConfigJson(text).status(), IsOk());
  text.push_back(' ');
  EXPECT_THAT(ParseHybridConfigJson(text).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("larger than the limit of 16777216 bytes")));
}

RawTensor Tensor(std::string name, std::vector<int64_t> shape = {1}) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {std::move(name), DType::kU8, std::move(shape), std::string(n, 'x')};
}

TEST(SafetensorsLimitsTest, TensorNameAtTheLimitReadsAndOnePastIsRefused) {
  auto at = SerializeSafetensors({Tensor(std::string(kMaxTensorNameBytes, 'n'))}, {});
  ASSERT_THAT(at.status(), IsOk());
  EXPECT_THAT(SafetensorsFile::Parse(*at, "f").status(), IsOk());

  const std::string long_name(kMaxTensorNameBytes + 1, 'n');
  EXPECT_THAT(SerializeSafetensors({Tensor(long_name)}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tensor name of 1025 bytes exceeds the 1024-byte limit")));
  // A file written by someone else: patch the name in a valid file (same header length).
  std::string bytes = *at;
  const size_t pos = bytes.find(std::string(kMaxTensorNameBytes, 'n'));
  bytes.replace(pos, kMaxTensorNameBytes, long_name);
  const uint64_t header_len = bytes.size() - 8 - 1;  // one data byte
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header_len >> (8 * i)) & 0xff);
  EXPECT_THAT(SafetensorsFile::Parse(bytes, "f.safetensors").status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("f.safetensors: tensor name of 1025 bytes exceeds the "
                                 "1024-byte limit")));
}

TEST(SafetensorsLimitsTest, RankAtTheLimitReadsAndOnePastIsRefused) {
  auto at = SerializeSafetensors({Tensor("t", std::vector<int64_t>(kMaxTensorRank, 1))}, {});
  ASSERT_THAT(at.status(), IsOk());
  EXPECT_THAT(SafetensorsFile::Parse(*at, "f").status(), IsOk());
  EXPECT_THAT(
      SerializeSafetensors({Tensor("t", std::vector<int64_t>(kMaxTensorRank + 1, 1))}, {})
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("tensor 't': shape has 9 dimensions, more than the 8 allowed")));
  const std::string header =
      R"({"t":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header + "x";
  EXPECT_THAT(SafetensorsFile::Parse(bytes, "f").status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("f: tensor 't': shape has 9 dimensions, more than the 8")));
}

TEST(SafetensorsLimitsTest, TensorCountAtTheLimitReadsAndOnePastIsRefused) {
  std::vector<RawTensor> tensors;
  tensors.reserve(kMaxSafetensorsTensors + 1);
  for (size_t i = 0; i < kMaxSafetensorsTensors; ++i) {
    tensors.push_back({std::to_string(i), DType::kU8, {0}, ""});
  }
  auto at = SerializeSafetensors(tensors, {{"k", "v"}});
  ASSERT_THAT(at.status(), IsOk());
  auto file = SafetensorsFile::Parse(*at, "f");
  ASSERT_THAT(file.status(), IsOk());
  EXPECT_EQ(file->tensors().size(), kMaxSafetensorsTensors);

  tensors.push_back({"one-more", DType::kU8, {0}, ""});
  EXPECT_THAT(SerializeSafetensors(tensors, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("131073 tensors, more than the 131072 allowed")));
  // The same file with one more entry spliced into its header.
  std::string bytes = *at;
  const std::string extra = R"("one-more":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)";
  bytes.insert(9, extra);  // right after the opening '{'
  const uint64_t header_len = bytes.size() - 8;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header_len >> (8 * i)) & 0xff);
  EXPECT_THAT(SafetensorsFile::Parse(bytes, "f").status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("f: header lists 131073 tensors, more than the 131072 allowed")));
}

TEST(SafetensorsLimitsTest, HeaderLengthPastTheLimitIsRefusedBeforeReading) {
  std::string bytes(8, '\0');
  const uint64_t too_long = kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((too_long >> (8 * i)) & 0xff);
  EXPECT_THAT(SafetensorsFile::Parse(bytes, "f").status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("header length 104857601 exceeds the 104857600-byte limit")));
  // Exactly at the limit the length is accepted and the (missing) bytes are what fails.
  const uint64_t at = kMaxSafetensorsHeaderBytes;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((at >> (8 * i)) & 0xff);
  EXPECT_THAT(SafetensorsFile::Parse(bytes, "f").status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated file?")));
}

}  // namespace
}  // namespace tailor::model
