// safetensors: round trip for every dtype and one test per corruption the reader must
// refuse.

#include "compression/model/safetensors.h"

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::model {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A file from a hand-written header: length prefix + header + data.
std::string MakeFile(const std::string& header, const std::string& data) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

absl::Status ParseStatus(const std::string& bytes) {
  return SafetensorsFile::Parse(bytes, "bad.safetensors").status();
}

TEST(SafetensorsTest, RoundTripEveryDtype) {
  torch::manual_seed(1);
  TensorMap tensors = {
      {"f32", torch::randn({3, 5})},
      {"bf16", torch::randn({4, 2}).to(torch::kBFloat16)},
      {"f16", torch::randn({7}).to(torch::kHalf)},
      {"i8", torch::randint(-128, 127, {2, 3}, torch::kChar)},
      {"u8", torch::randint(0, 255, {9}, torch::kByte)},
      {"i32", torch::randint(-1000, 1000, {2, 2, 2}, torch::kInt)},
      {"i64", torch::randint(-100000, 100000, {3}, torch::kLong)},
      {"scalar", torch::tensor(3.5f).reshape({})},
      {"empty", torch::zeros({0, 4})},
      {"strided", torch::randn({4, 6}).t()},  // non-contiguous input
  };
  const std::string path = ::testing::TempDir() + "/roundtrip.safetensors";
  TAILOR_ASSERT_OK(SaveSafetensors(path, tensors, {{"format", "test"}, {"note", "é"}}));
  std::map<std::string, std::string> metadata;
  TAILOR_ASSERT_OK_AND_ASSIGN(TensorMap loaded, LoadSafetensors(path, &metadata));
  EXPECT_EQ(metadata.at("format"), "test");
  EXPECT_EQ(metadata.at("note"), "é");
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const at::Tensor& got = loaded.at(name);
    EXPECT_EQ(got.scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(got.sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(got, t)) << name;
  }
  TAILOR_ASSERT_OK_AND_ASSIGN(SafetensorsFile file, SafetensorsFile::Read(path));
  ASSERT_NE(file.Find("i64"), nullptr);
  EXPECT_EQ(file.Find("i64")->dtype, DType::kI64);
  EXPECT_EQ(file.Find("nope"), nullptr);
}

TEST(SafetensorsTest, SerializeIsDeterministicAndAligned) {
  std::vector<RawTensor> a = {{"b", DType::kU8, {3}, "xyz"}, {"a", DType::kI32, {1}, "abcd"}};
  std::vector<RawTensor> b = {a[1], a[0]};
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string x, SerializeSafetensors(a, {}));
  TAILOR_ASSERT_OK_AND_ASSIGN(std::string y, SerializeSafetensors(b, {}));
  EXPECT_EQ(x, y);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(x[i]);
  EXPECT_EQ(n % 8, 0u);
  TAILOR_ASSERT_OK_AND_ASSIGN(SafetensorsFile f, SafetensorsFile::Parse(x, "mem"));
  EXPECT_EQ(f.Bytes(*f.Find("a")), "abcd");
  EXPECT_EQ(f.Bytes(*f.Find("b")), "xyz");
}

// A streamed tensor producing `bytes` (counting its calls in `*calls`).
StreamedTensor Streamed(std::string name, DType dtype, std::vector<int64_t> shape,
                        std::string bytes, int* calls) {
  return {std::move(name), dtype, std::move(shape),
          [bytes = std::move(bytes), calls]() -> absl::StatusOr<std::string> {
            ++*calls;
            return bytes;
          }};
}

TEST(SafetensorsTest, StreamedWriteIsByteIdenticalToSerialize) {
  int calls = 0;
  const std::vector<StreamedTensor> streamed = {
      Streamed("b", DType::kU8, {3}, "xyz", &calls),
      Streamed("a", DType::kI32, {1}, "abcd", &calls)};
  const std::string path = ::testing::TempDir() + "/streamed.safetensors";
  TAILOR_ASSERT_OK(WriteSafetensorsStreamed(path, streamed, {{"format", "pt"}}));
  EXPECT_EQ(calls, 2);
  TAILOR_ASSERT_OK_AND_ASSIGN(
      std::string want,
      SerializeSafetensors({{"b", DType::kU8, {3}, "xyz"}, {"a", DType::kI32, {1}, "abcd"}},
                           {{"format", "pt"}}));
  std::ifstream in(path, std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, want);
}

TEST(SafetensorsTest, StreamedWriteFailuresLeaveNothing) {
  const std::string path = ::testing::TempDir() + "/streamed_bad.safetensors";
  int calls = 0;
  // The header is checked before anything is produced.
  EXPECT_THAT(WriteSafetensorsStreamed(path, {Streamed("", DType::kU8, {1}, "a", &calls)}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       path + ": safetensors: empty tensor name"));
  EXPECT_EQ(calls, 0);
  // A producer that returns the wrong length.
  EXPECT_THAT(WriteSafetensorsStreamed(path, {Streamed("x", DType::kF32, {2}, "abc", &calls)},
                                       {}),
              StatusIs(absl::StatusCode::kInternal,
                       path + ": tensor 'x': produced 3 bytes for shape [2]"));
  // A producer's error, named with its tensor.
  const StreamedTensor failing{"y", DType::kU8, {1}, []() -> absl::StatusOr<std::string> {
                                 return absl::DataLossError("source gone");
                               }};
  EXPECT_THAT(WriteSafetensorsStreamed(path, {failing}, {}),
              StatusIs(absl::StatusCode::kDataLoss, path + ": tensor 'y': source gone"));
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir())) {
    EXPECT_EQ(e.path().filename().string().find("streamed_bad"), std::string::npos)
        << e.path();
  }
}

TEST(SafetensorsTest, WriterRejectsBadInput) {
  EXPECT_THAT(SerializeSafetensors({{"x", DType::kF32, {2}, "abc"}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 'x'")));
  EXPECT_THAT(SerializeSafetensors({{"x", DType::kU8, {1}, "a"}, {"x", DType::kU8, {1}, "b"}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate")));
  EXPECT_THAT(SerializeSafetensors({{"", DType::kU8, {1}, "a"}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(SerializeSafetensors({{"__metadata__", DType::kU8, {1}, "a"}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reserved")));
  EXPECT_THAT(SaveSafetensors(::testing::TempDir() + "/d.safetensors",
                              {{"d", torch::zeros({2}, torch::kDouble)}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 'd'")));
}

TEST(SafetensorsTest, TruncatedFile) {
  const std::string path = ::testing::TempDir() + "/trunc.safetensors";
  TAILOR_ASSERT_OK(SaveSafetensors(path, {{"w", torch::ones({16})}}));
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() - 5);
  EXPECT_THAT(SafetensorsFile::Parse(bytes, path),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(path), HasSubstr("tensor 'w'"), HasSubstr("out of bounds"),
                             HasSubstr("truncated"))));
  // Cut inside the header.
  EXPECT_THAT(SafetensorsFile::Parse(bytes.substr(0, 20), path),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("exceeds")));
  EXPECT_THAT(SafetensorsFile::Parse(bytes.substr(0, 5), path),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("too short")));
}

TEST(SafetensorsTest, MissingFile) {
  EXPECT_THAT(SafetensorsFile::Read(::testing::TempDir() + "/none.safetensors").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none.safetensors")));
}

TEST(SafetensorsTest, BadHeaderLength) {
  std::string bytes = MakeFile("{}", "");
  bytes[7] = 0x01;  // 2^56 + 2 bytes of header
  EXPECT_THAT(ParseStatus(bytes),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("bad.safetensors"), HasSubstr("header length"))));
}

TEST(SafetensorsTest, BadJson) {
  EXPECT_THAT(ParseStatus(MakeFile("{\"w\": {\"dtype\": ", "")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseStatus(MakeFile("[1, 2]", "")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not a JSON object")));
  EXPECT_THAT(ParseStatus(MakeFile(R"({"w": 3})", "")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("tensor 'w'")));
}

TEST(SafetensorsTest, UnknownDtype) {
  EXPECT_THAT(
      ParseStatus(MakeFile(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})",
                           std::string(8, '\0'))),
      StatusIs(absl::StatusCode::kDataLoss,
               AllOf(HasSubstr("tensor 'w'"), HasSubstr("unknown dtype \"F64\""))));
}

TEST(SafetensorsTest, ShapeLengthMismatch) {
  EXPECT_THAT(
      ParseStatus(MakeFile(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})",
                           std::string(20, '\0'))),
      StatusIs(absl::StatusCode::kDataLoss,
               AllOf(HasSubstr("tensor 'w'"), HasSubstr("needs 24 bytes"), HasSubstr("span 20"))));
  EXPECT_THAT(
      ParseStatus(MakeFile(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
                           std::string(4, '\0'))),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("shape entries")));
}

TEST(SafetensorsTest, OverlappingOffsets) {
  EXPECT_THAT(ParseStatus(MakeFile(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                       "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
                                   std::string(6, '\0'))),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("tensor 'b'"), HasSubstr("overlap tensor 'a'"))));
}

TEST(SafetensorsTest, OffsetsOutOfBounds) {
  EXPECT_THAT(
      ParseStatus(MakeFile(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})",
                           std::string(6, '\0'))),
      StatusIs(absl::StatusCode::kDataLoss,
               AllOf(HasSubstr("tensor 'a'"), HasSubstr("out of bounds"))));
  EXPECT_THAT(
      ParseStatus(MakeFile(R"({"a": {"dtype": "U8", "shape": [0], "data_offsets": [3, 2]}})", "")),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("begin > end")));
}

TEST(SafetensorsTest, GapsAndTrailingBytes) {
  EXPECT_THAT(
      ParseStatus(MakeFile(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}})",
                           std::string(4, '\0'))),
      StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("tensor 'a'"), HasSubstr("gap"))));
  EXPECT_THAT(
      ParseStatus(MakeFile(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})",
                           std::string(4, '\0'))),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("trailing")));
}

TEST(SafetensorsTest, BadNamesAndMetadata) {
  EXPECT_THAT(ParseStatus(MakeFile(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                       "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                                   std::string(2, '\0'))),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("duplicate tensor name 'a'")));
  EXPECT_THAT(ParseStatus(MakeFile(R"({"": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})",
                                   std::string(1, '\0'))),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("empty tensor name")));
  EXPECT_THAT(ParseStatus(MakeFile(R"({"__metadata__": {"k": 1}})", "")),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("__metadata__")));
  EXPECT_THAT(ParseStatus(MakeFile(
                  R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 1}})",
                  std::string(1, '\0'))),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("unknown field 'x'")));
}

}  // namespace
}  // namespace tailor::model
