#ifndef TAILOR_COORDINATOR_SERVER_H_
#define TAILOR_COORDINATOR_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/coordinator.h"
#include "coordinator/launchers/local_launcher.h"
#include "coordinator/launchers/slurm_launcher.h"
#include "coordinator/services.h"
#include "grpcpp/grpcpp.h"
#include "storage/blob_store.h"
#include "storage/coordinator_store.h"

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

 private:
  CoordinatorServer(ServerOptions options, Clock* clock) : options_(std::move(options)), clock_(clock) {}

  ServerOptions options_;
  Clock* clock_;
  std::unique_ptr<storage::CoordinatorStore> store_;
  std::unique_ptr<storage::BlobStore> blobs_;
  std::unique_ptr<Coordinator> core_;
  std::unique_ptr<CampaignServiceImpl> campaign_service_;
  std::unique_ptr<AgentServiceImpl> agent_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<SlurmClient> slurm_client_;
  std::unique_ptr<SlurmAttemptSink> slurm_sink_;
  std::unique_ptr<Launcher> launcher_;
  std::atomic<bool> stop_{false};
  std::thread ticker_;
  std::unique_ptr<storage::Checkpointer> checkpointer_;
  std::thread checkpoint_thread_;
};

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_SERVER_H_
