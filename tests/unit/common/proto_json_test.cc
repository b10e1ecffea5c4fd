// ProtoJson: the one JSON printer; an Any of a type this build lacks does not break the rest.
#include "common/proto_json.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "tailor/v1/job_output.pb.h"

namespace tailor {
namespace {

TEST(ProtoJsonTest, KnownDetailPrintsItsFieldsInline) {
  v1::JobOutput output;
  output.set_model_digest("ab12");
  v1::ProfileResult profile;
  profile.set_cost_table_id("ct-1");
  output.mutable_detail()->PackFrom(profile);
  const nlohmann::json j = nlohmann::json::parse(ProtoJson(output));
  EXPECT_EQ(j["model_digest"], "ab12");
  EXPECT_EQ(j["detail"]["@type"], "type.googleapis.com/tailor.v1.ProfileResult");
  EXPECT_EQ(j["detail"]["cost_table_id"], "ct-1");
  EXPECT_EQ(j["world_size"], 0);  // every primitive field is printed
}

// A coordinator with a method this CLI was built without: the output still prints, and the
// detail names the type it cannot show.
TEST(ProtoJsonTest, UnknownDetailTypeIsNamedNotFatal) {
  v1::JobOutput output;
  output.set_model_digest("ab12");
  output.mutable_detail()->set_type_url("type.googleapis.com/tailor.nowhere.FooResult");
  output.mutable_detail()->set_value(std::string("\x08\x01", 2));
  const nlohmann::json j = nlohmann::json::parse(ProtoJson(output, /*add_whitespace=*/false));
  EXPECT_EQ(j["model_digest"], "ab12");
  EXPECT_EQ(j["detail"]["@type"], "type.googleapis.com/google.protobuf.StringValue");
  EXPECT_EQ(j["detail"]["value"],
            "type.googleapis.com/tailor.nowhere.FooResult (not known to this build of tailor)");
}

}  // namespace
}  // namespace tailor
