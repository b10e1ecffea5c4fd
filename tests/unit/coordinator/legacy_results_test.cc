// UpgradeLegacyResult (storage migration 6): a schema-5 Struct result becomes its typed
// JobOutput by key name, strictly.
#include "methods/legacy_results.h"

#include <gtest/gtest.h>

#include "common/job_output.h"
#include "google/protobuf/util/json_util.h"
#include "methods/block_removal/block_removal_results.pb.h"
#include "methods/entropy_code/entropy_code_results.pb.h"

namespace tailor::methods {
namespace {

google::protobuf::Struct Result(const std::string& json) {
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  return s;
}

TEST(LegacyResultsTest, SharedKeysGoToTheOutputAndTheRestToTheKindsDetail) {
  absl::StatusOr<v1::JobOutput> out = UpgradeLegacyResult(
      "profile", Result(R"({"cost_table_id": "ct-1", "entries": 232, "t0_ms": 0.5})"));
  ASSERT_TRUE(out.ok()) << out.status();
  const auto profile = DetailOf<v1::ProfileResult>(*out);
  ASSERT_TRUE(profile.has_value());
  EXPECT_EQ(profile->cost_table_id(), "ct-1");
  EXPECT_EQ(profile->entries(), 232);
  EXPECT_DOUBLE_EQ(profile->t0_ms(), 0.5);
}

// gate_gradients wrote `layers` as the parent layer index of each QUBO variable (numbers),
// where JobOutput.layers is one description per layer (strings): the kind's detail declares
// the name, so it wins.
TEST(LegacyResultsTest, AKeyTheDetailDeclaresGoesToTheDetail) {
  absl::StatusOr<v1::JobOutput> out = UpgradeLegacyResult(
      "gate_gradients", Result(R"({"layers": [0, 1, 3], "world_size": 2})"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->world_size(), 2);
  EXPECT_EQ(out->layers_size(), 0);
  const auto gates = DetailOf<v1::block_removal::GateGradientsResult>(*out);
  ASSERT_TRUE(gates.has_value());
  ASSERT_EQ(gates->layers_size(), 3);
  EXPECT_EQ(gates->layers(2), 3);
}

// A plain verify has no detail; a verify of an entropy-coded package carries the entropy
// method's, chosen by what the result holds.
TEST(LegacyResultsTest, VerifyTakesADetailOnlyWhenItHasOne) {
  absl::StatusOr<v1::JobOutput> plain =
      UpgradeLegacyResult("verify", Result(R"({"measured": {"latency_ms": 30}})"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->has_detail());
  EXPECT_DOUBLE_EQ(plain->measured().latency_ms(), 30);

  absl::StatusOr<v1::JobOutput> package = UpgradeLegacyResult(
      "verify", Result(R"({"measured": {"latency_ms": 30},
                           "entropy": {"outputs_identical": true}})"));
  ASSERT_TRUE(package.ok()) << package.status();
  const auto served = DetailOf<v1::entropy_code::PackageVerifyResult>(*package);
  ASSERT_TRUE(served.has_value());
  EXPECT_TRUE(served->entropy().outputs_identical());
}

TEST(LegacyResultsTest, AKeyThatFitsNothingFailsNamingTheKeys) {
  absl::StatusOr<v1::JobOutput> out =
      UpgradeLegacyResult("rank", Result(R"({"world_size": 1, "mystery": 7})"));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("result keys {mystery, world_size} fit no typed output"),
            std::string::npos)
      << out.status();
}

TEST(LegacyResultsTest, AFractionIntoAnIntegerFieldFails) {
  absl::StatusOr<v1::JobOutput> out =
      UpgradeLegacyResult("distill", Result(R"({"steps": 2.5})"));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tailor::methods
