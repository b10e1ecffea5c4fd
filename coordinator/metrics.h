#ifndef TAILOR_COORDINATOR_METRICS_H_
#define TAILOR_COORDINATOR_METRICS_H_

// The coordinator's Prometheus metrics (served at /metrics by the HTTP server).
//
// Two kinds of numbers: those counted as things happen (lease waits, job outcomes, retries,
// gRPC calls, SQLite commits; held in a prometheus-cpp Registry) and those that describe the
// present (queue depth, agents, Slurm controller calls; computed at scrape time from the
// coordinator's own queries, so they can never drift from what `tailor queue` shows).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/coordinator.h"
#include "grpcpp/support/server_interceptor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "tailor/v1/admin.pb.h"

namespace tailor::coordinator {

// What a scrape reads from the present state of the coordinator.
struct MetricsSnapshot {
  v1::ListQueueResponse queue;    // only the summary is used
  v1::ListAgentsResponse agents;  // with offline agents
  // Calls made to the Slurm controller since start; absent without the Slurm launcher.
  struct SlurmCalls {
    int64_t sbatch = 0, squeue = 0, sacct = 0, scancel = 0;
  };
  std::optional<SlurmCalls> slurm;
};

// Thread-safe: prometheus-cpp metrics lock internally, and the families are created once.
class CoordinatorMetrics : public CoordinatorObserver {
 public:
  CoordinatorMetrics();

  // CoordinatorObserver: job outcomes, retries and lease waits from the committed events.
  void OnEvent(const v1::Event& event, const v1::Job* before, const v1::Job* after) override;

  // One finished gRPC call ("/tailor.v1.AgentService/AcquireJob", "OK", 0.002).
  void ObserveGrpc(const std::string& method, const std::string& code, double seconds);
  // One SQLite COMMIT (the fsync of the write-ahead log dominates it).
  void ObserveCommit(absl::Duration d);

  // The Prometheus text exposition format (version 0.0.4) of every metric.
  std::string Render(const MetricsSnapshot& snapshot) const;

  // Counts and times every call of the server it is registered with (ServerBuilder::
  // experimental().SetInterceptorCreators). Owned by the builder; `this` must outlive it.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> GrpcInterceptorFactory();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& lease_wait_;
  prometheus::Family<prometheus::Counter>& job_outcomes_;
  prometheus::Family<prometheus::Counter>& job_retries_;
  prometheus::Family<prometheus::Counter>& grpc_requests_;
  prometheus::Family<prometheus::Histogram>& grpc_latency_;
  prometheus::Histogram& commit_latency_;
};

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_METRICS_H_
