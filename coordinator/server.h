#ifndef TAILOR_COORDINATOR_SERVER_H_
#define TAILOR_COORDINATOR_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/coordinator.h"
#include "coordinator/http/http_server.h"
#include "coordinator/launchers/local_launcher.h"
#include "coordinator/launchers/slurm_launcher.h"
#include "coordinator/metrics.h"
#include "coordinator/services.h"
#include "coordinator/token_auth.h"
#include "grpcpp/grpcpp.h"
#include "storage/blob_store.h"
#include "storage/coordinator_store.h"
#include "storage/data_dir_guard.h"

namespace tailor::coordinator {

struct ServerOptions {
  std::string data_dir = "./tailor-data";
  std::string listen = "127.0.0.1:50051";  // port 0 picks a free port (tests)
  CoordinatorOptions core;
  absl::Duration tick_interval = absl::Milliseconds(100);
  int max_message_bytes = 16 * 1024 * 1024;
  std::string launcher = "local";  // local | slurm | none
  std::string worker_bin;          // default: tailor-worker next to this executable
  // --launcher slurm: worker_bin, coordinator and data_dir are filled in by Start() when
  // empty (the worker next to this binary, this server's address, the data dir).
  SlurmLauncherOptions slurm;
  std::string slurm_bin_dir;  // where sbatch/squeue/sacct/scancel are; empty = PATH
  // Authentication and TLS (docs/operations.md). With auth_tokens every call needs a bearer
  // token, and the launchers hand their ranks an agent token (data_dir/launcher.token).
  bool auth_tokens = false;
  std::string tls_cert;  // PEM certificate chain; TLS when set (tls_key is then required)
  std::string tls_key;   // PEM private key
  // The CA the launchers' ranks verify this coordinator with (TAILOR_CA_CERT); default:
  // tls_cert, which works when it holds the full chain (deploy/dev-ca.sh writes it so).
  std::string tls_ca;
  // The HTTP port (dashboard, /metrics, /healthz, /readyz) on the --listen host: 0 picks a
  // free port (tests), -1 serves none. HTTPS with the gRPC certificate when tls_cert is set.
  int http_port = -1;
  std::string web_dir;  // the dashboard's dashboard.js/.css; without them: plain tables
};

// Composition root: opens the database and blob store under data_dir, recovers state, serves
// the three gRPC services and runs the ticker thread (lease expiry, backoff, long-poll
// timeouts).
class CoordinatorServer {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Create(const ServerOptions& options,
                                                                   Clock* clock);
  ~CoordinatorServer();

  // Binds and starts serving; returns the bound port.
  absl::StatusOr<int> Start();
  // Stops accepting calls, finishes in-flight ones (up to `grace`), stops the ticker.
  void Shutdown(absl::Duration grace = absl::Seconds(2));
  void Wait();

  Coordinator* core() { return core_.get(); }
  // Who is calling (for the HTTP dashboard): tokens with auth_tokens, else allow-all.
  Authenticator* authenticator() { return authenticator_.get(); }
  TokenRegistry* tokens() { return tokens_.get(); }
  // The bound HTTP port after Start(); -1 when off.
  int http_port() const { return http_port_; }

 private:
  // What the ranks a launcher starts need to reach this coordinator.
  struct RankAccess {
    std::string token;    // agent token of the launcher principal (--auth tokens)
    std::string launcher_token_id;  // its id, the only caller launcher leases answer to
    std::string ca_cert;  // CA to verify TLS with (TLS on)
    std::string worker_bin;
  };
  absl::StatusOr<int> StartGrpc(const RankAccess& access);
  absl::StatusOr<RankAccess> RankAccessOf();
  void StartLocalLauncher(int port, const RankAccess& access);
  void StartSlurmLauncher(int port, const RankAccess& access);
  void StartBackgroundThreads();
  absl::Status StartHttp();

  CoordinatorServer(ServerOptions options, Clock* clock) : options_(std::move(options)), clock_(clock) {}
  std::string LauncherTokenPath() const { return options_.data_dir + "/launcher.token"; }

  ServerOptions options_;
  Clock* clock_;
  // Declared first, so destroyed last: the data dir stays ours until everything is closed.
  std::unique_ptr<storage::DataDirLock> data_dir_lock_;
  // Before the store and the core, which report to it, so it is destroyed after them.
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<storage::CoordinatorStore> store_;
  std::unique_ptr<storage::BlobStore> blobs_;
  std::unique_ptr<Coordinator> core_;
  std::unique_ptr<CampaignServiceImpl> campaign_service_;
  std::unique_ptr<AgentServiceImpl> agent_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<TokenRegistry> tokens_;
  std::unique_ptr<Authenticator> authenticator_;
  std::unique_ptr<TokenServiceImpl> token_service_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<SlurmClient> slurm_client_;
  std::unique_ptr<SlurmAttemptSink> slurm_sink_;
  std::unique_ptr<Launcher> launcher_;
  std::atomic<bool> stop_{false};
  std::thread ticker_;
  std::unique_ptr<storage::Checkpointer> checkpointer_;
  std::thread checkpoint_thread_;
  std::unique_ptr<http::HttpServer> http_;
  int http_port_ = -1;
  std::atomic<bool> serving_{false};  // /readyz
};

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_SERVER_H_
