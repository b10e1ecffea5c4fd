#include "common/proto_json.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/wrappers.pb.h"

namespace tailor {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool KnownType(const std::string& type_url) {
  const std::string name = type_url.substr(type_url.rfind('/') + 1);
  return google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(name) !=
         nullptr;
}

// Replaces, in place, every Any below `m` whose type this binary does not know.
void ReplaceUnknownAnys(Message& m) {
  const Reflection* r = m.GetReflection();
  if (m.GetDescriptor() == google::protobuf::Any::descriptor()) {
    auto& any = static_cast<google::protobuf::Any&>(m);
    if (any.type_url().empty() || KnownType(any.type_url())) return;
    google::protobuf::StringValue note;
    note.set_value(absl::StrCat(any.type_url(), " (not known to this build of tailor)"));
    any.PackFrom(note);
    return;
  }
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        ReplaceUnknownAnys(*r->MutableRepeatedMessage(&m, f, i));
      }
    } else {
      ReplaceUnknownAnys(*r->MutableMessage(&m, f));
    }
  }
}

}  // namespace

std::string ProtoJson(const Message& message, bool add_whitespace) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = add_whitespace;
  std::string json;
  if (google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return json;
  // Only an Any of an unknown type makes printing a well-formed message fail.
  std::unique_ptr<Message> copy(message.New());
  copy->CopyFrom(message);
  ReplaceUnknownAnys(*copy);
  json.clear();
  (void)google::protobuf::util::MessageToJsonString(*copy, &json, options);
  return json;
}

}  // namespace tailor
