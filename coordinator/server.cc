#include "coordinator/server.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "methods/legacy_results.h"

namespace tailor::coordinator {

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", path, "' is not a PEM file"));
  }
  return ss.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const ServerOptions& options) {
  if (options.tls_cert.empty() && options.tls_key.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert.empty() || options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both or neither");
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  TAILOR_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(options.tls_cert, "--tls-cert"));
  TAILOR_ASSIGN_OR_RETURN(pair.private_key, ReadPem(options.tls_key, "--tls-key"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Create(
    const ServerOptions& options, Clock* clock) {
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer(options, clock));
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create data dir '", options.data_dir, "': ", ec.message()));
  }
  // Before anything is opened or written: one coordinator per data dir, and no database that
  // was lost beside its blobs.
  TAILOR_ASSIGN_OR_RETURN(s->data_dir_lock_,
                          storage::DataDirLock::Acquire(options.data_dir, clock->Now()));
  TAILOR_RETURN_IF_ERROR(storage::CheckDatabaseNotLost(options.data_dir));
  TAILOR_RETURN_IF_ERROR(storage::CheckDatabaseBeforeOpen(options.data_dir));
  std::filesystem::create_directories(options.data_dir + "/logs", ec);
  const std::string db_path = options.data_dir + "/tailor.db";
  TAILOR_ASSIGN_OR_RETURN(s->store_,
                          storage::CoordinatorStore::Open(db_path, /*external_checkpoints=*/true,
                                                          methods::UpgradeLegacyResult));
  TAILOR_ASSIGN_OR_RETURN(s->checkpointer_, storage::Checkpointer::Open(db_path));
  TAILOR_ASSIGN_OR_RETURN(s->blobs_, storage::BlobStore::Open(options.data_dir + "/blobs"));
  CoordinatorOptions core_options = options.core;
  core_options.data_dir = options.data_dir;
  s->core_ = std::make_unique<Coordinator>(s->store_.get(), s->blobs_.get(), clock, core_options);
  // /metrics counts from the start, recovery included.
  s->metrics_ = std::make_unique<CoordinatorMetrics>();
  CoordinatorMetrics* metrics = s->metrics_.get();
  s->store_->db()->set_commit_observer([metrics](absl::Duration d) { metrics->ObserveCommit(d); });
  s->core_->SetObserver(metrics);
  TAILOR_RETURN_IF_ERROR(s->core_->Recover());
  TAILOR_ASSIGN_OR_RETURN(s->tokens_, TokenRegistry::Open(db_path, clock));
  if (options.auth_tokens) {
    s->authenticator_ = std::make_unique<TokenAuthenticator>(s->tokens_.get());
  } else {
    s->authenticator_ = std::make_unique<AllowAllAuthenticator>();
  }
  TAILOR_ASSIGN_OR_RETURN(s->credentials_, ServerCredentialsFor(options));
  return s;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(absl::ZeroDuration()); }

absl::StatusOr<int> CoordinatorServer::StartGrpc(const RankAccess& access) {
  ServiceAuth auth{authenticator_.get(), tokens_.get()};
  // Launcher leases answer only to the launcher's token (Coordinator::CheckLeaseHolder).
  auth.launcher_token_id = access.launcher_token_id;
  campaign_service_ = std::make_unique<CampaignServiceImpl>(core_.get(), auth);
  agent_service_ = std::make_unique<AgentServiceImpl>(core_.get(), auth);
  admin_service_ = std::make_unique<AdminServiceImpl>(core_.get(), auth);
  token_service_ = std::make_unique<TokenServiceImpl>(auth);
  grpc::ServerBuilder builder;
  int port = 0;
  // No SO_REUSEPORT (gRPC's default on Linux): a second coordinator on this port must fail
  // to listen rather than take half of the calls.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options_.listen, credentials_, &port);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.RegisterService(campaign_service_.get());
  builder.RegisterService(agent_service_.get());
  builder.RegisterService(admin_service_.get());
  builder.RegisterService(token_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(metrics_->GrpcInterceptorFactory());  // counts and times every call
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen, " (address in use or invalid)"));
  }
  return port;
}

absl::StatusOr<CoordinatorServer::RankAccess> CoordinatorServer::RankAccessOf() {
  // The ranks the launchers start authenticate with an agent token and verify TLS with the CA.
  RankAccess access;
  if (options_.auth_tokens && options_.launcher != "none") {
    TAILOR_ASSIGN_OR_RETURN(access.token,
                            EnsureLauncherToken(tokens_.get(), LauncherTokenPath()));
    TAILOR_ASSIGN_OR_RETURN(Principal launcher, tokens_->Lookup(access.token));
    access.launcher_token_id = launcher.token_id;
  }
  if (!options_.tls_cert.empty()) {
    std::error_code ec;
    access.ca_cert = std::filesystem::absolute(
                         options_.tls_ca.empty() ? options_.tls_cert : options_.tls_ca, ec)
                         .string();
  }
  access.worker_bin = options_.worker_bin;
  if (access.worker_bin.empty()) {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    access.worker_bin = (self.parent_path() / "tailor-worker").string();
  }
  return access;
}

void CoordinatorServer::StartLocalLauncher(int port, const RankAccess& access) {
  LocalLauncherOptions lo;
  lo.worker_bin = access.worker_bin;
  lo.coordinator = absl::StrCat("127.0.0.1:", port);
  lo.data_dir = options_.data_dir;
  lo.token = access.token;
  lo.ca_cert = access.ca_cert;
  Coordinator* core = core_.get();
  launcher_ = std::make_unique<LocalLauncher>(
      lo, [core](const std::string& lease_id, const std::string& why) {
        v1::CompleteJobRequest fail;
        fail.set_lease_id(lease_id);
        fail.set_success(false);
        fail.set_retryable(true);
        fail.set_error(why);
        // Rank 0 may already have reported; then the lease is closed and this is a no-op.
        (void)core->CompleteJob(fail);
      });
  core_->SetLauncher(launcher_.get());
}

void CoordinatorServer::StartSlurmLauncher(int port, const RankAccess& access) {
  SlurmLauncherOptions so = options_.slurm;
  if (so.worker_bin.empty()) so.worker_bin = access.worker_bin;
  if (so.data_dir.empty()) {
    std::error_code ec;
    so.data_dir = std::filesystem::absolute(options_.data_dir, ec).string();
  }
  if (so.coordinator.empty()) {
    // Ranks on other nodes cannot use a wildcard or loopback address; this host's name is
    // the best default there, and loopback is right for a single-node cluster.
    const std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
    so.coordinator = absl::StrCat(
        host == "0.0.0.0" || host == "[::]" || host.empty() ? "127.0.0.1" : host, ":", port);
  }
  if (!access.token.empty()) {
    std::error_code ec;
    so.token_file = std::filesystem::absolute(LauncherTokenPath(), ec).string();
  }
  so.ca_cert = access.ca_cert;
  // Pending jobs have no worker to heartbeat for them: the launcher does, well within the TTL.
  so.keepalive_interval = std::min(so.keepalive_interval, options_.core.lease_ttl / 3);
  CommandSlurmClientOptions co;
  co.bin_dir = options_.slurm_bin_dir;
  slurm_client_ = std::make_unique<CommandSlurmClient>(co);
  slurm_sink_ = std::make_unique<CoordinatorSlurmSink>(core_.get());
  launcher_ = std::make_unique<SlurmLauncher>(so, slurm_client_.get(), slurm_sink_.get(), clock_);
  spdlog::info("slurm launcher: partition '{}', account '{}', workers dial {}, worker {}, "
               "squeue every {}",
               so.partition, so.account, so.coordinator, so.worker_bin,
               absl::FormatDuration(so.poll_interval));
  // Hands over the attempts launched before a restart (reconciled at the first poll).
  core_->SetLauncher(launcher_.get());
}

void CoordinatorServer::StartBackgroundThreads() {
  ticker_ = std::thread([this] {
    while (!stop_.load()) {
      core_->Tick();
      std::this_thread::sleep_for(absl::ToChronoMilliseconds(options_.tick_interval));
    }
  });
  checkpoint_thread_ = std::thread([this] {
    while (!stop_.load()) {
      absl::Status st = checkpointer_->RunOnce();
      if (!st.ok()) spdlog::warn("WAL checkpoint: {}", st.ToString());
      for (int i = 0; i < 5 && !stop_.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
}

absl::Status CoordinatorServer::StartHttp() {
  http::HttpServerOptions ho;
  // The same interface as gRPC: loopback by default, every interface for a wildcard.
  std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  ho.host = host.empty() ? "0.0.0.0" : host;
  ho.port = options_.http_port;
  ho.web_dir = options_.web_dir;
  ho.tls_cert = options_.tls_cert;
  ho.tls_key = options_.tls_key;
  ho.ready = [this] {
    return serving_.load() ? absl::OkStatus()
                           : absl::UnavailableError("the coordinator is starting or stopping");
  };
  ho.slurm_calls = [this]() -> std::optional<MetricsSnapshot::SlurmCalls> {
    auto* slurm = dynamic_cast<SlurmLauncher*>(launcher_.get());
    if (slurm == nullptr) return std::nullopt;
    const SlurmLauncher::Stats st = slurm->stats();
    return MetricsSnapshot::SlurmCalls{st.sbatch, st.squeue, st.sacct, st.scancel};
  };
  http_ = std::make_unique<http::HttpServer>(core_.get(), authenticator_.get(), metrics_.get(),
                                             std::move(ho));
  TAILOR_ASSIGN_OR_RETURN(http_port_, http_->Start());
  spdlog::info("dashboard, /metrics, /healthz and /readyz on {}://{}:{}",
               options_.tls_cert.empty() ? "http" : "https", host, http_port_);
  return absl::OkStatus();
}

absl::StatusOr<int> CoordinatorServer::Start() {
  TAILOR_ASSIGN_OR_RETURN(const RankAccess access, RankAccessOf());
  TAILOR_ASSIGN_OR_RETURN(const int port, StartGrpc(access));
  if (options_.launcher == "local") {
    StartLocalLauncher(port, access);
  } else if (options_.launcher == "slurm") {
    StartSlurmLauncher(port, access);
  } else if (options_.launcher != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--launcher: '", options_.launcher, "' is not available in this build"));
  }
  StartBackgroundThreads();
  if (options_.http_port >= 0) TAILOR_RETURN_IF_ERROR(StartHttp());
  serving_ = true;
  spdlog::info("tailor-coordinator serving on port {} (data dir {})", port, options_.data_dir);
  return port;
}

void CoordinatorServer::Shutdown(absl::Duration grace) {
  if (stop_.exchange(true)) return;
  serving_ = false;
  // First: its handlers read the launcher, which goes below.
  if (http_ != nullptr) http_->Stop();
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  if (ticker_.joinable()) ticker_.join();
  if (core_ != nullptr) core_->SetLauncher(nullptr);
  launcher_.reset();
  if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
}

void CoordinatorServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace tailor::coordinator
