#ifndef TAILOR_CLI_ENV_H_
#define TAILOR_CLI_ENV_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "cli/render.h"
#include "common/clock.h"
#include "google/protobuf/message.h"
#include "grpcpp/grpcpp.h"
#include "tailor/v1/admin.grpc.pb.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "tailor/v1/campaign.grpc.pb.h"

namespace tailor::cli {

// Everything a command touches outside itself: output streams, stubs, the clock and sleep.
// main() fills it from the process; tests point it at string streams and an in-process
// server, and replace sleep so reconnect backoff costs no time.
struct CliEnv {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  v1::CampaignService::StubInterface* campaigns = nullptr;
  v1::AgentService::StubInterface* agents = nullptr;  // artifact downloads
  v1::AdminService::StubInterface* admin = nullptr;
  v1::TokenService::StubInterface* tokens = nullptr;  // tailor tokens ...

  std::string address;  // for error hints
  std::string token;    // bearer token; empty = none
  absl::Duration timeout = absl::Seconds(30);

  bool out_is_tty = false;  // live redraws on stdout (watch)
  bool err_is_tty = false;  // progress bars on stderr (artifacts get)
  size_t width = 0;         // terminal columns; 0 = do not fit tables
  absl::TimeZone tz = absl::UTCTimeZone();
  Clock* clock = Clock::Real();
  std::function<void(absl::Duration)> sleep;  // null = absl::SleepFor
  // How long a stream may stay broken (coordinator restarting) before the CLI gives up.
  absl::Duration reconnect_window = absl::Seconds(60);

  // A unary call's context: deadline `timeout` from now, bearer token.
  std::unique_ptr<grpc::ClientContext> CallContext() const;
  // A stream's context: the token but no deadline (watch, logs and downloads last as long as
  // the server keeps them open).
  std::unique_ptr<grpc::ClientContext> StreamContext() const;
  RenderOptions Render() const;
  void Sleep(absl::Duration d) const;
};

// Writes `message` as protobuf JSON with the .proto field names and every field, defaults
// included, so scripts can rely on keys being present.
void PrintJson(std::ostream& out, const google::protobuf::Message& message);

// Reconnect policy shared by streams that outlive a coordinator restart: exponential backoff
// from 250 ms to 5 s, giving up once the outage has lasted env.reconnect_window.
class Reconnector {
 public:
  explicit Reconnector(const CliEnv& env);
  // Progress was made on the stream: the outage, if any, is over.
  void Progress();
  // Sleeps before the next attempt; false when the window is used up.
  bool Wait();
  bool in_outage() const { return in_outage_; }

 private:
  const CliEnv& env_;
  bool in_outage_ = false;
  absl::Time outage_start_;
  absl::Duration slept_;
  absl::Duration backoff_;
};

}  // namespace tailor::cli

#endif  // TAILOR_CLI_ENV_H_
