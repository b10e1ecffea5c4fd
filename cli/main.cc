// tailor: the command-line client of tailor-coordinator (see docs/architecture.md).
#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/env.h"
#include "cli/parse.h"
#include "common/grpc_util.h"

namespace {

size_t TerminalWidth() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* cols = std::getenv("COLUMNS"); cols != nullptr) {
    const long n = std::strtol(cols, nullptr, 10);
    if (n > 0) return static_cast<size_t>(n);
  }
  return 100;
}

}  // namespace

int main(int argc, char** argv) {
  using tailor::cli::CliEnv;
  std::ios::sync_with_stdio(false);
  const std::vector<std::string> args(argv + 1, argv + argc);
  tailor::cli::ParseOutcome parsed = tailor::cli::ParseCommandLine(args, std::cout, std::cerr);
  if (!parsed.run) return parsed.exit_code;
  const tailor::cli::GlobalOptions& g = parsed.invocation.global;

  CliEnv env;
  env.out = &std::cout;
  env.err = &std::cerr;
  env.address = tailor::ResolveCoordinatorAddress(g.coordinator);
  env.token = g.token;
  if (env.token.empty()) {
    if (const char* t = std::getenv("TAILOR_TOKEN"); t != nullptr) env.token = t;
  }
  env.timeout = absl::Milliseconds(std::llround(g.timeout_s * 1000));
  env.out_is_tty = ::isatty(STDOUT_FILENO) != 0;
  env.err_is_tty = ::isatty(STDERR_FILENO) != 0;
  env.width = env.out_is_tty ? TerminalWidth() : 0;
  env.tz = absl::LocalTimeZone();

  tailor::ChannelOptions channel_options;
  channel_options.token = env.token;
  channel_options.ca_cert_path = g.ca_cert;  // empty: $TAILOR_CA_CERT, else plaintext
  auto channel = tailor::MakeChannel(env.address, channel_options);
  auto campaigns = tailor::v1::CampaignService::NewStub(channel);
  auto agents = tailor::v1::AgentService::NewStub(channel);
  auto admin = tailor::v1::AdminService::NewStub(channel);
  env.campaigns = campaigns.get();
  env.agents = agents.get();
  env.admin = admin.get();
  auto tokens = tailor::v1::TokenService::NewStub(channel);
  env.tokens = tokens.get();
  return tailor::cli::Execute(parsed.invocation, env);
}
