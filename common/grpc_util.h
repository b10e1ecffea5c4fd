#ifndef TAILOR_COMMON_GRPC_UTIL_H_
#define TAILOR_COMMON_GRPC_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace tailor {

// The coordinator address: the flag if non-empty, else $TAILOR_COORDINATOR, else
// 127.0.0.1:50051.
std::string ResolveCoordinatorAddress(const std::string& flag_value);

struct ChannelOptions {
  std::string token;       // bearer token; empty = $TAILOR_TOKEN if set
  std::string ca_cert_path;  // TLS when non-empty (PEM); plaintext otherwise
  int max_message_bytes = 16 * 1024 * 1024;
};

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ChannelOptions& options);

// A ClientContext with a deadline `timeout` from now and the bearer token, if any.
std::unique_ptr<grpc::ClientContext> MakeContext(absl::Duration timeout,
                                                 const std::string& token = "");

// Lossless both ways for the canonical codes and messages.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tailor

#endif  // TAILOR_COMMON_GRPC_UTIL_H_
