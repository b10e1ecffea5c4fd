#ifndef TAILOR_COMMON_GRPC_UTIL_H_
#define TAILOR_COMMON_GRPC_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace tailor {

// The coordinator address: the flag if non-empty, else $TAILOR_COORDINATOR, else
// 127.0.0.1:50051.
std::string ResolveCoordinatorAddress(const std::string& flag_value);

struct ChannelOptions {
  std::string token;       // bearer token; empty = $TAILOR_TOKEN if set
  // TLS when non-empty (PEM of the CA that signed the coordinator's certificate); empty =
  // $TAILOR_CA_CERT if set, else plaintext.
  std::string ca_cert_path;
  int max_message_bytes = 16 * 1024 * 1024;
};

// A channel to `address`. An unreadable CA file gives a channel whose calls fail with
// UNAVAILABLE; check it up front with ReadCaCert when a clear error matters.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ChannelOptions& options);

// The PEM text of a CA file; INVALID_ARGUMENT naming the path when unreadable or not PEM.
absl::StatusOr<std::string> ReadCaCert(const std::string& path);

// A ClientContext with a deadline `timeout` from now and the bearer token, if any.
std::unique_ptr<grpc::ClientContext> MakeContext(absl::Duration timeout,
                                                 const std::string& token = "");

// Lossless both ways for the canonical codes and messages.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tailor

#endif  // TAILOR_COMMON_GRPC_UTIL_H_
