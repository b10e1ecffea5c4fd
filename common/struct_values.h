#ifndef TAILOR_COMMON_STRUCT_VALUES_H_
#define TAILOR_COMMON_STRUCT_VALUES_H_

// One-line builders and readers for google.protobuf.Value, the currency of report details
// and JSON artifacts (google.protobuf.Struct fields).
#include <optional>
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

// The value at `key` of `s`; null when `s` is null or the field is absent.
inline const google::protobuf::Value* ValueAt(const google::protobuf::Struct* s,
                                              const std::string& key) {
  if (s == nullptr) return nullptr;
  auto it = s->fields().find(key);
  return it == s->fields().end() ? nullptr : &it->second;
}

// The number at `key` of `s`; nullopt when `s` is null or the field is absent or not a number
// (job results written by older workers may lack newer fields).
inline std::optional<double> NumberAt(const google::protobuf::Struct* s, const std::string& key) {
  if (s == nullptr) return std::nullopt;
  auto it = s->fields().find(key);
  if (it == s->fields().end() ||
      it->second.kind_case() != google::protobuf::Value::kNumberValue) {
    return std::nullopt;
  }
  return it->second.number_value();
}

}  // namespace tailor::struct_values

#endif  // TAILOR_COMMON_STRUCT_VALUES_H_
