#ifndef TAILOR_COMMON_PROTO_JSON_H_
#define TAILOR_COMMON_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace tailor {

// The protobuf JSON mapping of `message` as tailor prints it everywhere (`--json`, the
// dashboard's JSON, artifacts): proto field names, every primitive field.
//
// Job outputs carry their kind's result as a google.protobuf.Any, and a binary built
// without a method (an older CLI, a dashboard before an upgrade) does not know that
// method's types. Rather than fail the whole document, such an Any prints as a
// google.protobuf.StringValue naming the type it could not show.
std::string ProtoJson(const google::protobuf::Message& message, bool add_whitespace = true);

}  // namespace tailor

#endif  // TAILOR_COMMON_PROTO_JSON_H_
