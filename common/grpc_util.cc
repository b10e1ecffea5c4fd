#include "common/grpc_util.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tailor {

std::string ResolveCoordinatorAddress(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("TAILOR_COORDINATOR"); env != nullptr && *env != '\0') {
    return env;
  }
  return "127.0.0.1:50051";
}

namespace {
std::string TokenOrEnv(const std::string& token) {
  if (!token.empty()) return token;
  if (const char* env = std::getenv("TAILOR_TOKEN"); env != nullptr) return env;
  return "";
}
}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  // Reconnect quickly after a coordinator restart instead of gRPC's default of up to 120 s: a
  // waiting call (AgentRuntime's heartbeats during an outage) gets through within this of
  // the coordinator serving again; an attempt against a closed port costs next to nothing.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // gRPC takes this as the minimum time one connection attempt may take (TCP connect plus the
  // TLS handshake and HTTP/2 SETTINGS), not as a delay between attempts: at 100 ms a TLS
  // handshake with a busy coordinator timed out and the call failed UNAVAILABLE.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  std::string ca_path = options.ca_cert_path;
  if (ca_path.empty()) {
    if (const char* env = std::getenv("TAILOR_CA_CERT"); env != nullptr) ca_path = env;
  }
  if (!ca_path.empty()) {
    grpc::SslCredentialsOptions ssl;
    // Unreadable: an empty root set, so every handshake fails (never a silent plaintext).
    absl::StatusOr<std::string> pem = ReadCaCert(ca_path);
    ssl.pem_root_certs = pem.ok() ? *pem : std::string();
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  return grpc::CreateCustomChannel(address, creds, args);
}

absl::StatusOr<std::string> ReadCaCert(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("CA certificate '", path, "' cannot be read"));
  std::stringstream pem;
  pem << in.rdbuf();
  if (pem.str().find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("CA certificate '", path, "' holds no PEM certificate"));
  }
  return pem.str();
}

std::unique_ptr<grpc::ClientContext> MakeContext(absl::Duration timeout,
                                                 const std::string& token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  const std::string t = TokenOrEnv(token);
  if (!t.empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", t));
  return ctx;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace tailor
