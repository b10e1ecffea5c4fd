#ifndef TAILOR_COMMON_PROTO_TIME_H_
#define TAILOR_COMMON_PROTO_TIME_H_

#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"

namespace tailor {

inline google::protobuf::Timestamp ToProto(absl::Time t) {
  google::protobuf::Timestamp ts;
  const int64_t ns = absl::ToUnixNanos(t);
  ts.set_seconds(ns / 1'000'000'000);
  ts.set_nanos(static_cast<int32_t>(ns % 1'000'000'000));
  return ts;
}

inline absl::Time FromProto(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

}  // namespace tailor

#endif  // TAILOR_COMMON_PROTO_TIME_H_
