#include "cli/env.h"

#include <algorithm>

#include "common/grpc_util.h"
#include "common/proto_json.h"

namespace tailor::cli {
namespace {
constexpr absl::Duration kInitialBackoff = absl::Milliseconds(250);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
}  // namespace

std::unique_ptr<grpc::ClientContext> CliEnv::CallContext() const {
  return MakeContext(timeout, token);
}

std::unique_ptr<grpc::ClientContext> CliEnv::StreamContext() const {
  return MakeContext(absl::InfiniteDuration(), token);
}

RenderOptions CliEnv::Render() const {
  RenderOptions o;
  o.tz = tz;
  o.now = clock->Now();
  o.width = width;
  return o;
}

void CliEnv::Sleep(absl::Duration d) const {
  if (sleep) {
    sleep(d);
  } else {
    absl::SleepFor(d);
  }
}

void PrintJson(std::ostream& out, const google::protobuf::Message& message) {
  const std::string json = ProtoJson(message);
  out << json;
  if (json.empty() || json.back() != '\n') out << "\n";
}

Reconnector::Reconnector(const CliEnv& env) : env_(env), backoff_(kInitialBackoff) {}

void Reconnector::Progress() {
  in_outage_ = false;
  backoff_ = kInitialBackoff;
}

bool Reconnector::Wait() {
  const absl::Time now = env_.clock->Now();
  if (!in_outage_) {
    in_outage_ = true;
    outage_start_ = now;
    slept_ = absl::ZeroDuration();
  }
  // Counting slept time as well keeps the window finite when tests fake the clock and sleep.
  if (std::max(now - outage_start_, slept_) >= env_.reconnect_window) return false;
  env_.Sleep(backoff_);
  slept_ += backoff_;
  backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  return true;
}

}  // namespace tailor::cli
