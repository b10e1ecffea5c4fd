// Input limits of a deployment contract (docs/operations.md, "Input limits"): every string
// and list limit is accepted at the maximum and rejected one past it with the field named,
// and the contract text itself is capped at kMaxContractBytes in both formats.

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/contract_io.h"
#include "coordinator/contract_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "methods/entropy_code/entropy_code.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using methods::kMaxCandidates;
using v1::DeploymentContract;

DeploymentContract Probe() {
  DeploymentContract c;
  c.set_name("probe");
  c.set_method(v1::PROBE);
  c.mutable_target()->set_device_kind("NVIDIA H200");
  c.mutable_resources()->mutable_profile()->set_gpus_per_node(1);
  return c;
}

std::vector<std::string> Errors(const DeploymentContract& c) {
  std::vector<std::string> out;
  for (const FieldError& e : CheckContract(c)) out.push_back(e.ToString());
  return out;
}

struct StringLimit {
  std::string field;
  size_t max;
  char fill;
  std::function<void(DeploymentContract&, const std::string&)> set;
  std::string past_error;  // the whole error for a value one past the limit
};

std::vector<StringLimit> StringLimits() {
  return {
      {"name", kMaxNameChars, 'n', [](DeploymentContract& c, const std::string& v) {
         c.set_name(v);
       },
       // Long values are quoted shortened to 64 characters.
       absl::StrCat("name: must match [A-Za-z0-9._-]{1,64}, got \"", std::string(64, 'n'),
                    "...\"")},
      {"team", kMaxNameChars, 't', [](DeploymentContract& c, const std::string& v) {
         c.set_team(v);
       }, ""},
      {"target.engine", kMaxNameChars, 'e', [](DeploymentContract& c, const std::string& v) {
         c.mutable_target()->set_engine(v);
       }, ""},
      {"target.engine_version", kMaxNameChars, '1',
       [](DeploymentContract& c, const std::string& v) {
         c.mutable_target()->set_engine_version(v);
       }, ""},
      {"target.device_kind", kMaxDeviceKindChars, 'd',
       [](DeploymentContract& c, const std::string& v) {
         c.mutable_target()->set_device_kind(v);
       }, "target.device_kind: must be at most 128 characters, got 129"},
      {"parent.path", kMaxParentPathBytes, 'p', [](DeploymentContract& c, const std::string& v) {
         c.mutable_parent()->set_path(v);
       }, "parent.path: must be at most 4096 bytes, got 4097"},
      {"resources.profile.gpu_type", kMaxGpuTypeChars, 'g',
       [](DeploymentContract& c, const std::string& v) {
         c.mutable_resources()->mutable_profile()->set_gpu_type(v);
       }, ""},
      {"labels[\"k\"]", kMaxLabelValueChars, 'v', [](DeploymentContract& c, const std::string& v) {
         (*c.mutable_labels())["k"] = v;
       }, "labels[\"k\"]: value must be at most 256 characters, got 257"},
  };
}

TEST(ContractLimitsTest, EachStringAtTheLimitIsValidAndOnePastIsNamed) {
  for (const StringLimit& limit : StringLimits()) {
    SCOPED_TRACE(limit.field);
    DeploymentContract c = Probe();
    limit.set(c, std::string(limit.max, limit.fill));
    EXPECT_THAT(Errors(c), IsEmpty());
    limit.set(c, std::string(limit.max + 1, limit.fill));
    const std::vector<FieldError> errors = CheckContract(c);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].field, limit.field);
    if (!limit.past_error.empty()) {
      EXPECT_EQ(errors[0].ToString(), limit.past_error);
    }
    EXPECT_THAT(ValidateContract(c),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(limit.field + ": ")));
  }
}

TEST(ContractLimitsTest, LabelKeyAtTheLimitIsValidAndOnePastIsNamed) {
  DeploymentContract c = Probe();
  (*c.mutable_labels())[std::string(kMaxLabelKeyChars, 'k')] = "v";
  EXPECT_THAT(Errors(c), IsEmpty());
  c.mutable_labels()->clear();
  const std::string key(kMaxLabelKeyChars + 1, 'k');
  (*c.mutable_labels())[key] = "v";
  EXPECT_THAT(Errors(c),
              ElementsAre(absl::StrCat("labels[\"", key, "\"]: key must match [a-z0-9_.-]{1,63}")));
}

TEST(ContractLimitsTest, LabelCountAtTheLimitIsValidAndOnePastIsNamed) {
  DeploymentContract c = Probe();
  for (int i = 0; i < kMaxLabels; ++i) (*c.mutable_labels())[absl::StrCat("l", i)] = "v";
  EXPECT_THAT(Errors(c), IsEmpty());
  (*c.mutable_labels())["one-more"] = "v";
  EXPECT_THAT(Errors(c), ElementsAre("labels: at most 32 entries, got 33"));
}

TEST(ContractLimitsTest, CandidateListsAtTheLimitAreValidAndOnePastIsNamed) {
  DeploymentContract c = Probe();
  for (int i = 0; i < kMaxCandidates; ++i) c.mutable_entropy()->add_chunk_width(64 + 8 * i);
  EXPECT_THAT(Errors(c), IsEmpty());
  c.mutable_entropy()->add_chunk_width(4096);
  EXPECT_THAT(Errors(c), ElementsAre("entropy.chunk_width: at most 16 entries, got 17"));
}

TEST(ContractLimitsTest, StringsMustBeValidUtf8) {
  // Regression (contract_textproto fuzzer): "\351" in a textproto string is not UTF-8; such
  // a contract cannot be sent over gRPC nor written as JSON.
  auto parsed = ParseContract(
      "name: \"p\" method: PROBE target { device_kind: \"cpu\" } parent { path: \"a\\351b\" }",
      ContractFormat::kTextProto, "c");
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_THAT(Errors(*parsed), ElementsAre("parent.path: must be valid UTF-8, got \"a\\351b\""));
  DeploymentContract c = Probe();
  c.mutable_target()->set_device_kind("H\xc3");  // truncated two-byte sequence
  EXPECT_THAT(Errors(c), ElementsAre("target.device_kind: must be valid UTF-8, got \"H\\303\""));
  c = Probe();
  (*c.mutable_labels())["k"] = "\xed\xa0\x80";  // a UTF-16 surrogate, not a character
  EXPECT_THAT(Errors(c), ElementsAre(HasSubstr("labels[\"k\"]: value must be valid UTF-8")));
  c = Probe();
  c.mutable_parent()->set_path("mod\xc3\xa8les/\xf0\x9f\x98\x80");  // "modèles/😀"
  EXPECT_THAT(Errors(c), IsEmpty());
}

// A contract text of exactly `size` bytes: a valid contract padded with a comment
// (textproto) or whitespace (JSON).
std::string Padded(ContractFormat format, size_t size) {
  std::string text = format == ContractFormat::kJson
                         ? std::string(R"({"name": "probe", "method": "PROBE", )"
                                       R"("target": {"deviceKind": "cpu"}})")
                         : std::string("name: \"probe\" method: PROBE target { device_kind: \"cpu\" }\n#");
  text.append(size - text.size(), format == ContractFormat::kJson ? ' ' : 'x');
  return text;
}

TEST(ContractLimitsTest, ContractTextAtTheLimitParsesAndOnePastIsRefused) {
  for (ContractFormat format : {ContractFormat::kTextProto, ContractFormat::kJson}) {
    SCOPED_TRACE(format == ContractFormat::kJson ? "json" : "textproto");
    auto at = ParseContract(Padded(format, kMaxContractBytes), format, "c");
    ASSERT_THAT(at.status(), IsOk());
    EXPECT_THAT(ValidateContract(*at), IsOk());
    EXPECT_THAT(ParseContract(Padded(format, kMaxContractBytes + 1), format, "c").status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("c: contract is 262145 bytes, larger than the limit of "
                                   "262144 bytes")));
  }
}

}  // namespace
}  // namespace tailor::coordinator
