#include "coordinator/metrics.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "common/proto_time.h"
#include "prometheus/text_serializer.h"

namespace tailor::coordinator {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Queue waits span from milliseconds (an idle agent long-polling) to hours (a busy cluster).
const prometheus::Histogram::BucketBoundaries kLeaseWaitBuckets = {
    0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400};
// Unary calls take milliseconds; AcquireJob long-polls and log follows take up to minutes.
const prometheus::Histogram::BucketBoundaries kGrpcBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
// A WAL commit with synchronous=NORMAL is usually sub-millisecond; a checkpoint or a slow
// disk shows up in the tail.
const prometheus::Histogram::BucketBoundaries kCommitBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};

std::string DeviceKindOf(const v1::Job& job) {
  return job.resources().placement() == "launcher" ? "(launcher)" : job.resources().device_kind();
}

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

ClientMetric Sample(std::vector<ClientMetric::Label> labels, double value, MetricType type) {
  ClientMetric m;
  m.label = std::move(labels);
  if (type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return m;
}

// Times one call from the moment the server sees it until it sends the status. Latency is
// wall time on the steady clock: it is about this process, not about the coordinator's
// (injectable) business clock.
class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(CoordinatorMetrics* metrics, const char* method)
      : metrics_(metrics),
        method_(method != nullptr ? method : "unknown"),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      metrics_->ObserveGrpc(method_, GrpcCodeName(methods->GetSendStatus().error_code()),
                            seconds);
    }
    methods->Proceed();
  }

 private:
  CoordinatorMetrics* const metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
};

class MetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(CoordinatorMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, info->method());
  }

 private:
  CoordinatorMetrics* const metrics_;
};

}  // namespace

CoordinatorMetrics::CoordinatorMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      lease_wait_(BuildHistogram()
                      .Name("tailor_lease_wait_seconds")
                      .Help("Seconds a runnable job waited for its lease (from becoming runnable "
                            "or the end of its retry backoff), by device kind")
                      .Register(*registry_)),
      job_outcomes_(BuildCounter()
                        .Name("tailor_job_outcomes_total")
                        .Help("Jobs that reached a final state, by job kind and outcome")
                        .Register(*registry_)),
      job_retries_(BuildCounter()
                       .Name("tailor_job_retries_total")
                       .Help("Failed attempts that were retried, by job kind")
                       .Register(*registry_)),
      grpc_requests_(BuildCounter()
                         .Name("tailor_grpc_requests_total")
                         .Help("gRPC calls served, by full method name and status code")
                         .Register(*registry_)),
      grpc_latency_(BuildHistogram()
                        .Name("tailor_grpc_request_duration_seconds")
                        .Help("gRPC call duration until the status is sent, by method")
                        .Register(*registry_)),
      commit_latency_(BuildHistogram()
                          .Name("tailor_sqlite_commit_duration_seconds")
                          .Help("Duration of SQLite COMMITs of the coordinator database")
                          .Register(*registry_)
                          .Add({}, kCommitBuckets)) {}

void CoordinatorMetrics::OnEvent(const v1::Event& event, const v1::Job* before,
                                 const v1::Job* after) {
  const v1::Job* job = after != nullptr ? after : before;
  if (job == nullptr) return;
  const std::string& type = event.type();
  if (type == "job_leased") {
    if (before == nullptr) return;
    // A runnable job's updated_at is when it became runnable; a retry waits for not_before.
    absl::Time since = FromProto(before->updated_at());
    if (before->has_not_before()) since = std::max(since, FromProto(before->not_before()));
    const double wait = std::max(0.0, absl::ToDoubleSeconds(FromProto(event.time()) - since));
    lease_wait_.Add({{"device_kind", DeviceKindOf(*job)}}, kLeaseWaitBuckets).Observe(wait);
  } else if (type == "job_retry") {
    job_retries_.Add({{"kind", job->kind()}}).Increment();
  } else if (type == "job_succeeded" || type == "job_failed" || type == "job_cancelled" ||
             type == "job_skipped") {
    job_outcomes_.Add({{"kind", job->kind()}, {"outcome", type.substr(4)}}).Increment();
  }
}

void CoordinatorMetrics::ObserveGrpc(const std::string& method, const std::string& code,
                                     double seconds) {
  grpc_requests_.Add({{"method", method}, {"code", code}}).Increment();
  grpc_latency_.Add({{"method", method}}, kGrpcBuckets).Observe(seconds);
}

void CoordinatorMetrics::ObserveCommit(absl::Duration d) {
  commit_latency_.Observe(absl::ToDoubleSeconds(d));
}

std::string CoordinatorMetrics::Render(const MetricsSnapshot& snapshot) const {
  std::vector<MetricFamily> families = registry_->Collect();

  MetricFamily queue{"tailor_queue_jobs",
                     "Jobs of live campaigns by state (pending: waiting for dependencies) and "
                     "device kind ((launcher) for launcher-placed jobs)",
                     MetricType::Gauge,
                     {}};
  for (const v1::QueueSummary& s : snapshot.queue.summary()) {
    for (const auto& [state, n] : {std::pair<const char*, int64_t>{"pending", s.pending()},
                                   {"runnable", s.runnable()},
                                   {"leased", s.leased()}}) {
      queue.metric.push_back(Sample({{"device_kind", s.device_kind()}, {"state", state}},
                                    static_cast<double>(n), MetricType::Gauge));
    }
  }
  families.push_back(std::move(queue));

  MetricFamily agents{"tailor_agents", "Registered agents by device kind and state",
                      MetricType::Gauge, {}};
  std::map<std::pair<std::string, std::string>, int> agent_counts;
  for (const v1::Agent& a : snapshot.agents.agents()) {
    std::string state = v1::AgentState_Name(a.state());
    if (state.rfind("AGENT_", 0) == 0) state = state.substr(6);
    std::transform(state.begin(), state.end(), state.begin(), ::tolower);
    ++agent_counts[{a.info().device_kind(), state}];
  }
  for (const auto& [key, n] : agent_counts) {
    agents.metric.push_back(
        Sample({{"device_kind", key.first}, {"state", key.second}}, n, MetricType::Gauge));
  }
  families.push_back(std::move(agents));

  if (snapshot.slurm.has_value()) {
    MetricFamily slurm{"tailor_slurm_calls_total",
                       "Calls to the Slurm controller (squeue and sacct are the polls)",
                       MetricType::Counter,
                       {}};
    const auto& c = *snapshot.slurm;
    for (const auto& [call, n] : {std::pair<const char*, int64_t>{"sbatch", c.sbatch},
                                  {"squeue", c.squeue},
                                  {"sacct", c.sacct},
                                  {"scancel", c.scancel}}) {
      slurm.metric.push_back(Sample({{"call", call}}, static_cast<double>(n), MetricType::Counter));
    }
    families.push_back(std::move(slurm));
  }
  return prometheus::TextSerializer().Serialize(families);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
CoordinatorMetrics::GrpcInterceptorFactory() {
  return std::make_unique<MetricsInterceptorFactory>(this);
}

}  // namespace tailor::coordinator
