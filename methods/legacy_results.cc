#include "methods/legacy_results.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "methods/registry.h"

namespace tailor::methods {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::Message;
using google::protobuf::Struct;

// Parses `fields` into `out`, refusing any key `out` does not declare.
absl::Status ParseStrict(const Struct& fields, Message& out) {
  std::string json;
  if (auto st = google::protobuf::util::MessageToJsonString(fields, &json); !st.ok()) {
    return absl::InternalError(absl::StrCat("result to JSON: ", st.ToString()));
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  if (auto st = google::protobuf::util::JsonStringToMessage(json, &out, options); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("as ", out.GetDescriptor()->full_name(), ": ", st.ToString()));
  }
  return absl::OkStatus();
}

// The conversion with `detail` as the kind's detail type (null: none).
absl::StatusOr<v1::JobOutput> Convert(const Struct& result, const Descriptor* detail) {
  Struct common, own;
  for (const auto& [key, value] : result.fields()) {
    const bool to_detail = detail != nullptr && detail->FindFieldByName(key) != nullptr;
    (*(to_detail ? own : common).mutable_fields())[key] = value;
  }
  v1::JobOutput output;
  TAILOR_RETURN_IF_ERROR(ParseStrict(common, output));
  if (detail != nullptr) {
    std::unique_ptr<Message> message(
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(detail)->New());
    TAILOR_RETURN_IF_ERROR(ParseStrict(own, *message));
    output.mutable_detail()->PackFrom(*message);
  }
  return output;
}

}  // namespace

std::vector<const Descriptor*> DetailTypesOf(const std::string& kind) {
  std::vector<const Descriptor*> types;
  auto add = [&](const JobKind& k) {
    if (k.name == kind && k.detail != nullptr &&
        std::find(types.begin(), types.end(), k.detail) == types.end()) {
      types.push_back(k.detail);
    }
  };
  for (const JobKind& k : SharedJobKinds()) add(k);
  for (const auto& method : BuiltinMethods().all()) {
    for (const JobKind& k : method->JobKinds()) add(k);
  }
  return types;
}

absl::StatusOr<v1::JobOutput> UpgradeLegacyResult(const std::string& kind,
                                                  const Struct& result) {
  absl::StatusOr<v1::JobOutput> plain = Convert(result, nullptr);
  if (plain.ok()) return plain;
  std::vector<std::string> tried = {std::string(plain.status().message())};
  for (const Descriptor* detail : DetailTypesOf(kind)) {
    absl::StatusOr<v1::JobOutput> typed = Convert(result, detail);
    if (typed.ok()) return typed;
    tried.push_back(std::string(typed.status().message()));
  }
  std::vector<std::string> keys;
  for (const auto& [key, value] : result.fields()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  return absl::InvalidArgumentError(
      absl::StrCat("result keys {", absl::StrJoin(keys, ", "), "} fit no typed output (",
                   absl::StrJoin(tried, "; "), ")"));
}

}  // namespace tailor::methods
