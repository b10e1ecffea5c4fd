#include "common/contract_io.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSketch[] = R"pb(
name: "npc-cpu"
method: AUTOCOMPRESS
parent { path: "tailor-data/models/parent-small" }   # config.json + model.safetensors
target { device_kind: "cpu" engine: "tailor-builtin" engine_version: "1" precision: FP32 }
workload { batch_size: 1 input_tokens: 128 output_tokens: 32 cached_prefix_tokens: 0 }
budget { latency_ms_max: 40 memory_mib_max: 64 }      # or throughput_tokens_per_s_min
search { steps: 250 sampled_architectures: 32 alpha: 1.0 dead_zone: 0.02 }
recovery { tokens: 2000000 }
compare_uniform_baseline: true
resources { search { nodes: 1 ranks_per_node: 2 gpus_per_node: 0 } }
labels { key: "owner" value: "games" }
)pb";

class TempFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("contract_io_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& content) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  std::filesystem::path dir_;
};

TEST(ParseContractTest, ParsesTheArchitectureSketch) {
  auto c = ParseContract(kSketch, ContractFormat::kTextProto, "npc.textproto");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->name(), "npc-cpu");
  EXPECT_EQ(c->method(), v1::AUTOCOMPRESS);
  EXPECT_EQ(c->parent().path(), "tailor-data/models/parent-small");
  EXPECT_EQ(c->target().precision(), v1::FP32);
  EXPECT_TRUE(c->workload().has_cached_prefix_tokens());
  EXPECT_EQ(c->workload().input_tokens(), 128);
  EXPECT_DOUBLE_EQ(c->budget().latency_ms_max(), 40);
  EXPECT_FALSE(c->budget().has_throughput_tokens_per_s_min());
  EXPECT_EQ(c->search().sampled_architectures(), 32);
  EXPECT_EQ(c->recovery().tokens(), 2000000);
  EXPECT_TRUE(c->compare_uniform_baseline());
  EXPECT_EQ(c->resources().search().ranks_per_node(), 2);
  EXPECT_EQ(c->labels().at("owner"), "games");
}

TEST(ParseContractTest, ParsesJsonWithProtoOrJsonFieldNames) {
  constexpr char kJson[] = R"({
    "name": "tput",
    "method": "AUTOCOMPRESS",
    "target": {"device_kind": "NVIDIA H200", "precision": "BF16"},
    "workload": {"batchSize": 128, "input_tokens": 512, "output_tokens": 128},
    "budget": {"throughput_tokens_per_s_min": 7330.5},
    "recovery": {"tokens": "10000000000"},
    "labels": {"team.pipeline": "nightly"}
  })";
  auto c = ParseContract(kJson, ContractFormat::kJson, "tput.json");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->target().device_kind(), "NVIDIA H200");
  EXPECT_EQ(c->target().precision(), v1::BF16);
  EXPECT_EQ(c->workload().batch_size(), 128);
  EXPECT_DOUBLE_EQ(c->budget().throughput_tokens_per_s_min(), 7330.5);
  EXPECT_EQ(c->recovery().tokens(), 10000000000LL);
  EXPECT_EQ(c->labels().at("team.pipeline"), "nightly");
}

TEST(ParseContractTest, AutoDetectsTheFormat) {
  auto json = ParseContract("  \n {\"name\": \"a\"}", ContractFormat::kAuto, "x");
  ASSERT_THAT(json, IsOk());
  EXPECT_EQ(json->name(), "a");
  auto text = ParseContract("name: \"b\"", ContractFormat::kAuto, "x");
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(text->name(), "b");
}

TEST(ParseContractTest, EmptyTextIsAnEmptyContract) {
  // Parsing is not validation: an empty contract parses and is rejected by the validator.
  auto c = ParseContract("", ContractFormat::kAuto, "empty");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->ByteSizeLong(), 0u);
}

TEST(ParseContractTest, UnknownTextFieldNamesSourceLineAndColumn) {
  constexpr char kText[] = "name: \"x\"\nworkload { batch: 1 }\n";
  EXPECT_THAT(ParseContract(kText, ContractFormat::kTextProto, "npc.textproto"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("npc.textproto:2:12: unknown field 'batch' in "
                                 "tailor.v1.Workload")));
}

TEST(ParseContractTest, TextSyntaxErrorHasOneBasedPosition) {
  constexpr char kText[] = "name: \"x\"\nmethod AUTOCOMPRESS\n";
  EXPECT_THAT(ParseContract(kText, ContractFormat::kTextProto, "a.textproto"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a.textproto:2:8: ")));
}

TEST(ParseContractTest, UnknownEnumValueIsAnError) {
  EXPECT_THAT(ParseContract("method: SQUASH", ContractFormat::kTextProto, "m.textproto"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("m.textproto:1:9: "), HasSubstr("SQUASH"))));
}

TEST(ParseContractTest, RepeatedSingularFieldIsAnError) {
  EXPECT_THAT(ParseContract("name: \"a\"\nname: \"b\"", ContractFormat::kTextProto, "d"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("d:2:")));
}

TEST(ParseContractTest, TabsCountAsOneColumn) {
  // Protobuf's tokenizer expands tabs to multiples of 8; editors jump by characters.
  constexpr char kText[] = "workload {\n\tbatch: 1\n}\n";
  EXPECT_THAT(ParseContract(kText, ContractFormat::kTextProto, "t.textproto"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t.textproto:2:2: unknown field 'batch'")));
}

TEST(ParseContractTest, UnknownJsonFieldNamesLineAndColumn) {
  constexpr char kJson[] = "{\n  \"name\": \"x\",\n  \"workload\": {\"batch\": 1}\n}";
  EXPECT_THAT(ParseContract(kJson, ContractFormat::kJson, "npc.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("npc.json:3:16: unknown field 'batch' in workload")));
}

TEST(ParseContractTest, UnknownTopLevelJsonField) {
  EXPECT_THAT(ParseContract(R"({"nmae": "x"})", ContractFormat::kJson, "n.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("n.json:1:2: unknown field 'nmae' in "
                                 "tailor.v1.DeploymentContract")));
}

TEST(ParseContractTest, JsonSyntaxErrorHasPosition) {
  EXPECT_THAT(ParseContract("{\n  \"name\": }", ContractFormat::kJson, "bad.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad.json:2:11: ")));
  EXPECT_THAT(ParseContract("{\"name\": \"x\"} trailing", ContractFormat::kJson, "t.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("t.json:1:15: ")));
}

TEST(ParseContractTest, JsonWrongTypeNamesFieldAndPosition) {
  EXPECT_THAT(ParseContract("{\"workload\": {\n  \"batchSize\": \"many\"}}", ContractFormat::kJson,
                            "t.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t.json:2:3: workload.batch_size: invalid value \"many\"")));
  EXPECT_THAT(ParseContract(R"({"entropy": {"table_log": [10, "x"]}})", ContractFormat::kJson,
                            "l.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("l.json:1:32: entropy.table_log[1]: invalid value")));
}

TEST(ParseContractTest, JsonUnknownEnumValueIsAnError) {
  EXPECT_THAT(ParseContract(R"({"method": "SQUASH"})", ContractFormat::kJson, "e.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("e.json:1:2: method: "), HasSubstr("SQUASH"))));
}

TEST(ParseContractTest, DuplicateJsonKeyIsAnError) {
  // Protobuf keeps the last value; a contract that says two things must not pick one silently.
  EXPECT_THAT(ParseContract("{\"name\": \"a\",\n \"name\": \"b\"}", ContractFormat::kJson, "d.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("d.json:2:2: duplicate key 'name'")));
  // Same keys in different objects are fine.
  EXPECT_THAT(ParseContract(R"({"resources": {"search": {"nodes": 1}, "rank": {"nodes": 1}}})",
                            ContractFormat::kJson, "ok.json"),
              IsOk());
}

TEST(ParseContractTest, JsonRootMustBeAnObject) {
  EXPECT_THAT(ParseContract("[1]", ContractFormat::kJson, "r.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("r.json: ")));
}

TEST(ParseContractTest, DeeplyNestedJsonIsRejectedNotCrashing) {
  std::string text(100000, '[');
  EXPECT_THAT(ParseContract(text, ContractFormat::kJson, "deep.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("deep.json")));
  std::string object = "{\"labels\": " + std::string(50000, '[');
  EXPECT_THAT(ParseContract(object, ContractFormat::kJson, "deep2.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("deep2.json")));
}

TEST(ParseContractTest, RejectsOversizeInputWithSizeAndLimit) {
  std::string text(kMaxContractBytes + 1, ' ');
  EXPECT_THAT(ParseContract(text, ContractFormat::kAuto, "big.textproto"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("big.textproto"), HasSubstr("262145 bytes"),
                             HasSubstr("limit of 262144 bytes"))));
}

TEST(ParseContractTest, AcceptsInputExactlyAtTheLimit) {
  std::string text = "name: \"edge\"\n#";
  text.append(kMaxContractBytes - text.size(), 'x');
  ASSERT_EQ(text.size(), kMaxContractBytes);
  auto c = ParseContract(text, ContractFormat::kTextProto, "edge");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->name(), "edge");
}

TEST_F(TempFiles, LoadsByExtension) {
  auto json = LoadContractFile(Write("c.json", R"({"name": "j", "method": "PROBE"})"));
  ASSERT_THAT(json, IsOk());
  EXPECT_EQ(json->method(), v1::PROBE);
  for (const char* ext : {".textproto", ".txtpb", ".pbtxt"}) {
    auto text = LoadContractFile(Write(std::string("c") + ext, "name: \"t\" method: PROBE"));
    ASSERT_THAT(text, IsOk()) << ext;
    EXPECT_EQ(text->name(), "t");
  }
  // Unknown extension: detected from the content.
  auto other = LoadContractFile(Write("c.contract", R"({"name": "auto"})"));
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(other->name(), "auto");
}

TEST_F(TempFiles, ExtensionWinsOverContent) {
  // A .textproto holding JSON is parsed as textproto, so the user gets a positioned error
  // instead of a silent format switch.
  std::string path = Write("c.textproto", R"({"name": "j"})");
  EXPECT_THAT(LoadContractFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(path + ":1:1: ")));
}

TEST_F(TempFiles, ErrorsNameTheFilePath) {
  std::string path = Write("npc.textproto", "name: \"x\"\nworkload {\n  batch: 1\n}\n");
  EXPECT_THAT(LoadContractFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(path + ":3:3: unknown field 'batch'")));
}

TEST_F(TempFiles, MissingFileIsNotFound) {
  std::string path = (dir_ / "nope.textproto").string();
  EXPECT_THAT(LoadContractFile(path),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("contract file '" + path + "' not found")));
}

TEST_F(TempFiles, DirectoryIsInvalid) {
  EXPECT_THAT(LoadContractFile(dir_.string()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is a directory")));
}

TEST_F(TempFiles, OversizeFileIsRefused) {
  std::string path = Write("big.textproto", std::string(kMaxContractBytes + 10, '\n'));
  EXPECT_THAT(LoadContractFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("262154 bytes"), HasSubstr("limit of 262144 bytes"))));
}

TEST(ContractToJsonTest, UsesProtoFieldNamesAndRoundTrips) {
  auto c = ParseContract(kSketch, ContractFormat::kTextProto, "npc");
  ASSERT_THAT(c, IsOk());
  std::string json = ContractToJson(*c);
  EXPECT_THAT(json, HasSubstr("\"batch_size\":1"));
  EXPECT_THAT(json, HasSubstr("\"method\":\"AUTOCOMPRESS\""));
  EXPECT_THAT(json, HasSubstr("\"compare_uniform_baseline\":true"));
  EXPECT_THAT(json, Not(HasSubstr("batchSize")));
  // Explicit zeros of optional fields survive: "unset" and "0" mean different things.
  EXPECT_THAT(json, HasSubstr("\"cached_prefix_tokens\":0"));
  auto back = ParseContract(json, ContractFormat::kJson, "roundtrip");
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*c, *back));
}

TEST(ContractToJsonTest, EmptyContractIsEmptyObject) {
  EXPECT_EQ(ContractToJson(v1::DeploymentContract()), "{}");
}

}  // namespace
}  // namespace tailor
