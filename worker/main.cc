// tailor-worker: one rank of a launcher-started job. Reads its place from the environment
// (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT or SLURM_*), fetches the assignment by lease id,
// joins the c10d group, runs the job kind's handler; rank 0 reports to the coordinator.
#include <cstdlib>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/agent_runtime.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/rank_env.h"
#include "spdlog/spdlog.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "worker/dist.h"
#include "worker/worker_context.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// The coordinator may be restarting when a rank starts: retry transient errors for a while.
absl::StatusOr<tailor::v1::AcquireJobResponse> FetchAssignment(const tailor::RankEnv& env) {
  auto channel = tailor::MakeChannel(env.coordinator, tailor::ChannelOptions());
  auto stub = tailor::v1::AgentService::NewStub(channel);
  tailor::v1::GetAssignmentRequest req;
  req.set_lease_id(env.lease_id);
  absl::Duration backoff = absl::Milliseconds(100);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    auto ctx = tailor::MakeContext(absl::Seconds(10));
    tailor::v1::AcquireJobResponse resp;
    absl::Status st = tailor::FromGrpcStatus(stub->GetAssignment(ctx.get(), req, &resp));
    if (st.ok()) return resp;
    const bool transient = st.code() == absl::StatusCode::kUnavailable ||
                           st.code() == absl::StatusCode::kDeadlineExceeded;
    if (!transient || absl::Now() > deadline) return st;
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(backoff));
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

absl::Duration CollectiveTimeout() {
  const char* v = std::getenv("TAILOR_COLLECTIVE_TIMEOUT_S");
  int seconds = 0;
  if (v != nullptr && absl::SimpleAtoi(v, &seconds) && seconds > 0) return absl::Seconds(seconds);
  return absl::Seconds(120);
}

}  // namespace

int main(int argc, char** argv) {
  auto env = tailor::ReadRankEnv([](const char* name) { return std::getenv(name); });
  if (!env.ok()) {
    std::cerr << "tailor-worker: " << env.status().message() << "\n";
    return kExitUsage;
  }
  const char* level = std::getenv("TAILOR_LOG_LEVEL");
  (void)tailor::InitLogging(absl::StrCat("worker-r", env->rank), level ? level : "info");
  if (env->coordinator.empty()) {
    std::cerr << "tailor-worker: TAILOR_COORDINATOR is not set\n";
    return kExitUsage;
  }
  tailor::worker::RegisterBuiltinHandlers();
  auto assignment = FetchAssignment(*env);
  if (!assignment.ok()) {
    spdlog::error("lease={} cannot get the assignment: {}", env->lease_id,
                  assignment.status().ToString());
    return kExitFailed;
  }
  const std::string kind = assignment->job().kind();
  spdlog::info("job={} kind={} rank {}/{} attempt {}", assignment->job().id(), kind, env->rank,
               env->world_size, assignment->lease().attempt());

  tailor::AgentRuntimeOptions options;
  options.coordinator = env->coordinator;
  options.agent_id = absl::StrCat("launcher:", env->launcher);
  options.work_dir = env->work_dir;
  tailor::AgentRuntime runtime(options);

  const tailor::worker::WorkerHandler* handler = tailor::worker::FindWorkerHandler(kind);
  if (handler == nullptr) {
    const std::string why = absl::StrCat("this tailor-worker has no handler for '", kind,
                                         "' jobs (built without the ML libraries?)");
    spdlog::error("{}", why);
    if (env->rank == 0) {
      (void)runtime.RunAssigned(*assignment, [&](tailor::JobContext&)
                                    -> absl::StatusOr<google::protobuf::Struct> {
        return absl::FailedPreconditionError(why);
      });
    }
    return kExitFailed;
  }

  auto dist = tailor::worker::Dist::Connect(*env, CollectiveTimeout());
  if (!dist.ok()) {
    spdlog::error("{}", dist.status().ToString());
    return kExitFailed;
  }

  absl::Status handler_status;
  auto run = [&](tailor::JobContext* job) -> absl::StatusOr<google::protobuf::Struct> {
    tailor::worker::WorkerContext ctx{*env, *assignment, dist->get(), job, env->work_dir};
    auto result = (*handler)(ctx);
    handler_status = result.status();
    return result;
  };
  if (env->rank == 0) {
    absl::Status st = runtime.RunAssigned(
        *assignment, [&](tailor::JobContext& job) { return run(&job); });
    if (!st.ok()) spdlog::warn("job ended: {}", st.ToString());
  } else {
    (void)run(nullptr);
  }
  if (!handler_status.ok()) {
    spdlog::error("rank {} failed: {}", env->rank, handler_status.ToString());
    return kExitFailed;
  }
  return kExitOk;
}
