#ifndef TAILOR_COMMON_STRUCT_VALUES_H_
#define TAILOR_COMMON_STRUCT_VALUES_H_

// One-line builders for google.protobuf.Value, the currency of job results and report details
// (google.protobuf.Struct fields).
#include <string>

#include "google/protobuf/struct.pb.h"

namespace tailor::struct_values {

inline google::protobuf::Value Num(double v) {
  google::protobuf::Value out;
  out.set_number_value(v);
  return out;
}

inline google::protobuf::Value Str(const std::string& v) {
  google::protobuf::Value out;
  out.set_string_value(v);
  return out;
}

inline google::protobuf::Value Bool(bool v) {
  google::protobuf::Value out;
  out.set_bool_value(v);
  return out;
}

}  // namespace tailor::struct_values

#endif  // TAILOR_COMMON_STRUCT_VALUES_H_
