#include "coordinator/coordinator_main.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/duration_flag.h"
#include "common/logging.h"
#include "coordinator/server.h"
#include "coordinator/token_auth.h"
#include "spdlog/spdlog.h"

#ifndef TAILOR_WEB_DIST_DIR
#define TAILOR_WEB_DIST_DIR ""
#endif

namespace tailor::coordinator {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

// Partition and account names end up on #SBATCH lines.
std::string SlurmName(const std::string& v) {
  if (v.empty() || v.size() > 128) return "must be 1..128 characters";
  for (char c : v) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
          c == ',')) {
      return "must be characters of [A-Za-z0-9_.,-], got '" + v + "'";
    }
  }
  return "";
}

std::string HostPort(const std::string& v) {
  const size_t colon = v.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(v.substr(colon + 1), &port) ||
      port < 1 || port > 65535) {
    return "must be HOST:PORT with a port in 1..65535, got '" + v + "'";
  }
  return "";
}

std::string SbatchArg(const std::string& v) {
  if (v.rfind("--", 0) != 0 || v.size() < 3 || v.find_first_of(" \t\n#") != std::string::npos) {
    return "must be one --option[=value] without blanks, got '" + v + "'";
  }
  return "";
}

// --create-token: writes a token into the database without a server and prints it once.
int CreateTokenOffline(const std::string& data_dir, const std::string& role_name,
                       const std::string& team, const std::string& description,
                       const std::string& expires_in_text) {
  if (role_name.empty()) {
    std::cerr << "tailor-coordinator: --create-token needs --role submitter|admin|agent\n";
    return 2;
  }
  auto role = ParseRole(role_name);
  if (!role.ok()) {
    std::cerr << "tailor-coordinator: --" << role.status().message() << "\n";
    return 2;
  }
  std::optional<absl::Duration> expires_in;
  if (!expires_in_text.empty()) {
    absl::StatusOr<absl::Duration> parsed = ParseDurationFlag(expires_in_text);
    if (!parsed.ok()) {
      std::cerr << "tailor-coordinator: --expires-in: " << parsed.status().message() << "\n";
      return 2;
    }
    expires_in = *parsed;
  }
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  auto registry = TokenRegistry::Open(data_dir + "/tailor.db", Clock::Real());
  if (!registry.ok()) {
    std::cerr << "tailor-coordinator: " << registry.status().message() << "\n";
    return 1;
  }
  auto issued = (*registry)->Create(*role, team, description, expires_in);
  if (!issued.ok()) {
    std::cerr << "tailor-coordinator: --create-token: " << issued.status().message() << "\n";
    return issued.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  (void)(*registry)->Audit(Principal{}, "CreateToken", issued->row.id,
                           absl::StrCat(CreateTokenAuditDetail(issued->row), " offline"));
  std::cerr << "created " << issued->row.role << " token " << issued->row.id
            << (team.empty() ? "" : " for team " + team)
            << (issued->row.expires_at.has_value()
                    ? " expiring " + Rfc3339Utc(*issued->row.expires_at)
                    : "")
            << "; the secret below is shown once and never stored:\n";
  std::cout << issued->secret << std::endl;
  return 0;
}

bool IsLoopback(const std::string& listen) {
  return listen.rfind("127.", 0) == 0 || listen.rfind("localhost:", 0) == 0 ||
         listen.rfind("[::1]:", 0) == 0;
}

// Every flag's value; DeclareFlags binds them, Configure turns them into ServerOptions.
struct Flags {
  ServerOptions options;
  int http_port = 8080;
  std::string launcher = "local";
  std::string log_level = "info";
  double lease_ttl_s = 15, heartbeat_s = 2, backoff_base_s = 2;
  bool insecure = false;
  std::string isolate = "auto";
  double slurm_poll_s = 10;
  std::string web_dir;
  std::string port_file;
  std::string auth = "off";
  bool create_token = false;
  std::string token_role, token_team, token_description, token_expires_in;
};

void DeclareServerFlags(CLI::App& app, Flags& f) {
  ServerOptions& options = f.options;
  app.add_option("--data-dir", options.data_dir, "database, blobs and logs")->capture_default_str();
  app.add_option("--listen", options.listen, "gRPC address HOST:PORT")->capture_default_str();
  app.add_option("--http-port", f.http_port,
                 "dashboard, /metrics, /healthz and /readyz port on the --listen host (0 picks "
                 "a free port, -1 = off)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--web-dir", f.web_dir,
                 "the dashboard's built script and styles (default: the build's web/dist, "
                 "else web/ next to this binary)");
  app.add_option("--launcher", f.launcher, "how cluster jobs start: local or slurm")
      ->check(CLI::IsMember({"local", "slurm", "none"}))
      ->capture_default_str();
  app.add_option("--lease-ttl", f.lease_ttl_s, "seconds a lease lives without a heartbeat")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--heartbeat-interval", f.heartbeat_s, "seconds between agent heartbeats")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  app.add_option("--backoff-base", f.backoff_base_s, "seconds before the first retry")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--worker-bin", options.worker_bin,
                 "tailor-worker for the local launcher (default: next to this binary)");
  app.add_option("--isolate-measurements", f.isolate,
                 "never run agent measurements beside launcher jobs: on, off, or auto (on with "
                 "the local launcher, whose workers share this host's CPU with the agents)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--port-file", f.port_file,
                 "once serving, write {\"grpc_port\": N, \"http_port\": M} here (atomically): "
                 "what scripts read instead of scraping the log");
}

void DeclareSlurmFlags(CLI::App& app, Flags& f) {
  SlurmLauncherOptions& slurm = f.options.slurm;
  app.add_option("--slurm-partition", slurm.partition,
                 "--launcher slurm: partition for cluster jobs (default: the cluster's default)")
      ->check(SlurmName);
  app.add_option("--slurm-account", slurm.account,
                 "--launcher slurm: account charged for cluster jobs")
      ->check(SlurmName);
  app.add_option("--slurm-worker-bin", slurm.worker_bin,
                 "--launcher slurm: tailor-worker as the compute nodes see it (default: "
                 "--worker-bin, else next to this binary)");
  app.add_option("--slurm-coordinator-address", slurm.coordinator,
                 "--launcher slurm: HOST:PORT the ranks dial to reach this coordinator "
                 "(default: the --listen host and bound port; 127.0.0.1 for a wildcard)")
      ->check(HostPort);
  app.add_option("--slurm-poll-interval", f.slurm_poll_s,
                 "--launcher slurm: seconds between the batched squeue calls")
      ->check(CLI::Range(0.2, 3600.0))
      ->capture_default_str();
  app.add_option("--slurm-sbatch-arg", slurm.sbatch_args,
                 "--launcher slurm: extra sbatch option for every job, e.g. --qos=high "
                 "(repeatable)")
      ->check(SbatchArg);
  app.add_flag("--slurm-requeue", slurm.requeue,
               "--launcher slurm: submit with --requeue, so Slurm requeues jobs that lose a "
               "node or are preempted under the same attempt (default: every loss is a tailor "
               "retry with backoff)");
  app.add_option("--slurm-bin-dir", f.options.slurm_bin_dir,
                 "--launcher slurm: directory of sbatch/squeue/sacct/scancel (default: PATH)");
}

void DeclareAuthFlags(CLI::App& app, Flags& f) {
  ServerOptions& options = f.options;
  app.add_flag("--insecure", f.insecure,
               "allow plaintext, or --auth off, on a non-loopback address");
  app.add_option("--auth", f.auth,
                 "off: every caller is an admin (loopback only, unless --insecure); tokens: "
                 "every call needs a bearer token (tailor tokens create)")
      ->check(CLI::IsMember({"off", "tokens"}))
      ->capture_default_str();
  app.add_option("--tls-cert", options.tls_cert, "PEM certificate chain; serve gRPC over TLS")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", options.tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-ca", options.tls_ca,
                 "CA the launchers' ranks verify this coordinator with (default: --tls-cert, "
                 "which then must hold the full chain)")
      ->check(CLI::ExistingFile);
  app.add_flag("--create-token", f.create_token,
               "create a token in --data-dir's database offline (no server), print its secret "
               "once and exit: bootstraps the first admin");
  app.add_option("--role", f.token_role, "--create-token: submitter, admin or agent")
      ->check(CLI::IsMember({"submitter", "admin", "agent"}));
  app.add_option("--team", f.token_team, "--create-token: the token's team (submitters)");
  app.add_option("--description", f.token_description, "--create-token: what the token is for");
  app.add_option("--expires-in", f.token_expires_in,
                 "--create-token: lifetime like 90d, 12h, 30m or 3600s (at most 3650d; default: "
                 "never expires)");
}

// The flag combinations no single flag's check can see; a usage message or "".
std::string FlagConflict(const Flags& f) {
  const ServerOptions& o = f.options;
  if (!f.token_role.empty() || !f.token_team.empty() || !f.token_description.empty() ||
      !f.token_expires_in.empty()) {
    return "--role, --team, --description and --expires-in need --create-token";
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) return "--tls-cert and --tls-key go together";
  if (!o.tls_ca.empty() && o.tls_cert.empty()) return "--tls-ca needs --tls-cert and --tls-key";
  if (!IsLoopback(o.listen) && !f.insecure) {
    if (o.tls_cert.empty()) {
      return absl::StrCat("refusing plaintext gRPC on non-loopback address ", o.listen,
                          "; pass --tls-cert/--tls-key, or --insecure to allow it");
    }
    if (f.auth != "tokens") {
      return absl::StrCat("refusing --auth off on non-loopback address ", o.listen,
                          "; pass --auth tokens, or --insecure to allow it");
    }
  }
  const SlurmLauncherOptions& s = o.slurm;
  if (f.launcher != "slurm" && (!s.partition.empty() || !s.account.empty() ||
                                !s.coordinator.empty() || !s.sbatch_args.empty())) {
    return "--slurm-* options need --launcher slurm";
  }
  return "";
}

// ServerOptions from validated flags.
ServerOptions Configure(Flags f) {
  ServerOptions options = std::move(f.options);
  options.auth_tokens = f.auth == "tokens";
  options.core.lease_ttl = absl::Seconds(f.lease_ttl_s);
  options.core.heartbeat_interval = absl::Seconds(f.heartbeat_s);
  options.core.agent_offline_after = absl::Seconds(std::max(5 * f.heartbeat_s, 3.0));
  options.core.backoff_base = absl::Seconds(f.backoff_base_s);
  options.http_port = f.http_port;
  options.web_dir = f.web_dir;
  if (options.web_dir.empty()) {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
    options.web_dir = std::filesystem::exists(self / "web" / "dashboard.js", ec)
                          ? (self / "web").string()
                          : std::string(TAILOR_WEB_DIST_DIR);
  }
  options.launcher = f.launcher;
  options.slurm.poll_interval = absl::Milliseconds(static_cast<int64_t>(f.slurm_poll_s * 1000));
  options.core.isolate_measurements =
      f.isolate == "on" || (f.isolate == "auto" && f.launcher == "local");
  return options;
}

// Writes the bound ports as one JSON object, atomically (a reader never sees half a file).
absl::Status WritePortFile(const std::string& path, int grpc_port, int http_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "{\"grpc_port\": " << grpc_port << ", \"http_port\": " << http_port << "}\n";
    if (!out.good()) return absl::InternalError(absl::StrCat("--port-file: cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("--port-file: ", path, ": ", ec.message()));
  return absl::OkStatus();
}

// Starts the server, prints the bound ports and serves until SIGTERM or SIGINT.
int Serve(const ServerOptions& options, const std::string& port_file) {
  auto server = CoordinatorServer::Create(options, Clock::Real());
  if (!server.ok()) {
    std::cerr << "tailor-coordinator: " << server.status().message() << "\n";
    return 1;
  }
  auto port = (*server)->Start();
  if (!port.ok()) {
    std::cerr << "tailor-coordinator: " << port.status().message() << "\n";
    return 1;
  }
  // Scripts read the bound port from stdout (useful with --listen 127.0.0.1:0).
  std::cout << "listening on port " << *port << std::endl;
  if ((*server)->http_port() >= 0) {
    std::cout << "http listening on port " << (*server)->http_port() << std::endl;
  }
  if (!port_file.empty()) {
    if (absl::Status st = WritePortFile(port_file, *port, (*server)->http_port()); !st.ok()) {
      std::cerr << "tailor-coordinator: " << st.message() << "\n";
      (*server)->Shutdown(absl::ZeroDuration());
      return 1;
    }
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  spdlog::info("shutting down");
  (*server)->Shutdown(absl::Seconds(5));
  return 0;
}

}  // namespace

int CoordinatorMain(int argc, char** argv) {
  CLI::App app{"tailor-coordinator: accepts deployment contracts and runs compression campaigns"};
  Flags flags;
  DeclareServerFlags(app, flags);
  DeclareSlurmFlags(app, flags);
  DeclareAuthFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  if (auto st = InitLogging("coordinator", flags.log_level); !st.ok()) {
    std::cerr << "tailor-coordinator: " << st.message() << "\n";
    return 2;
  }
  if (flags.create_token) {
    return CreateTokenOffline(flags.options.data_dir, flags.token_role, flags.token_team,
                              flags.token_description, flags.token_expires_in);
  }
  if (const std::string conflict = FlagConflict(flags); !conflict.empty()) {
    std::cerr << "tailor-coordinator: " << conflict << "\n";
    return 2;
  }
  const std::string port_file = flags.port_file;
  return Serve(Configure(std::move(flags)), port_file);
}

}  // namespace tailor::coordinator
