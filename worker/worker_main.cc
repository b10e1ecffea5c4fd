#include "worker/worker_main.h"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/agent_runtime.h"
#include "common/finished_result.h"
#include "common/grpc_util.h"
#include "common/logging.h"
#include "common/rank_env.h"
#include "spdlog/spdlog.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "worker/dist.h"
#include "worker/worker_context.h"

namespace tailor::worker {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// The coordinator may be restarting when a rank starts: retry transient errors for a while.
absl::StatusOr<v1::AcquireJobResponse> FetchAssignment(const RankEnv& env) {
  auto channel = MakeChannel(env.coordinator, ChannelOptions());
  auto stub = v1::AgentService::NewStub(channel);
  v1::GetAssignmentRequest req;
  req.set_lease_id(env.lease_id);
  // The lease answers only to its holder: this launcher's ranks.
  req.set_agent_id(absl::StrCat("launcher:", env.launcher));
  absl::Duration backoff = absl::Milliseconds(100);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    auto ctx = MakeContext(absl::Seconds(10));
    v1::AcquireJobResponse resp;
    absl::Status st = FromGrpcStatus(stub->GetAssignment(ctx.get(), req, &resp));
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

constexpr char kUsage[] =
    "tailor-worker: one rank of a launcher-started job (started by the coordinator's local or\n"
    "Slurm launcher, not by hand). It reads its place from the environment (TAILOR_COORDINATOR,\n"
    "TAILOR_LEASE_ID, RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT or SLURM_*), fetches the\n"
    "assignment by lease id, joins the c10d group and runs the job kind's handler; rank 0\n"
    "reports to the coordinator. TAILOR_LOG_LEVEL and TAILOR_COLLECTIVE_TIMEOUT_S tune it;\n"
    "TAILOR_GIVE_UP_AFTER_S bounds how long rank 0 calls an unreachable coordinator (default\n"
    "20 lease TTLs), keeping a finished result for the job's next attempt.\n"
    "Exit codes: 0 ok, 1 failed, 2 usage.\n";

// A kind this build has no handler for fails the job (rank 0 completes it with the reason),
// so the coordinator retries elsewhere or reports it, instead of the lease running out.
int RefuseUnknownKind(const RankEnv& env, const v1::AcquireJobResponse& assignment,
                      AgentRuntime& runtime) {
  const std::string why =
      absl::StrCat("this tailor-worker has no handler for '", assignment.job().kind(),
                   "' jobs (built without the ML libraries?)");
  spdlog::error("{}", why);
  if (env.rank == 0) {
    (void)runtime.RunAssigned(assignment,
                              [&](JobContext&) -> absl::StatusOr<v1::JobOutput> {
                                return absl::FailedPreconditionError(why);
                              });
  }
  return kExitFailed;
}

// How long rank 0 keeps calling an unreachable coordinator before it exits, leaving its
// finished result in the checkpoint dir: TAILOR_GIVE_UP_AFTER_S, else kGiveUpLeases leases.
// A restart takes seconds and a recovered lease waits for its holder; a coordinator gone this
// long is not coming back for this attempt (docs/reliability.md).
constexpr int kGiveUpLeases = 20;
absl::Duration GiveUpAfter(const v1::Lease& lease) {
  const char* v = std::getenv("TAILOR_GIVE_UP_AFTER_S");
  int seconds = 0;
  if (v != nullptr && absl::SimpleAtoi(v, &seconds) && seconds > 0) return absl::Seconds(seconds);
  const int64_t ttl_ms = lease.ttl_ms() > 0 ? lease.ttl_ms() : 15000;
  return absl::Milliseconds(ttl_ms) * kGiveUpLeases;
}

// An earlier attempt of this job finished but its completion never reached the coordinator:
// rank 0 reports the stored result; no rank runs the job again.
int ReportStoredResult(const RankEnv& env, const v1::AcquireJobResponse& assignment,
                       const v1::JobOutput& stored, AgentRuntime& runtime) {
  const std::string& job_id = assignment.job().id();
  spdlog::info("job {}: an earlier attempt finished but its completion never reached the "
               "coordinator; reporting its stored result (attempt {})",
               job_id, assignment.lease().attempt());
  if (env.rank != 0) return kExitOk;
  const absl::Status st = runtime.RunAssigned(
      assignment, [&](JobContext&) -> absl::StatusOr<v1::JobOutput> { return stored; });
  if (!st.ok()) {
    spdlog::warn("job ended: {}", st.ToString());
    return kExitFailed;
  }
  DropFinishedResult(env.checkpoint_dir, job_id);
  return kExitOk;
}

// Rank 0's stored result of an earlier attempt, if any, known to every rank. Only rank 0
// decides: its checkpoint dir may be on another host, and a rank that looked for itself
// could start after rank 0 had reported and dropped the file, then wait in the group for a
// rank 0 that never comes. Only rank 0 reports it, so the others learn just whether it
// exists (one byte: an empty result would serialize to nothing).
absl::StatusOr<std::optional<v1::JobOutput>> AgreeOnStoredResult(const RankEnv& env,
                                                                  const std::string& job_id,
                                                                  Dist& dist) {
  std::optional<v1::JobOutput> stored;
  if (env.rank == 0) {
    absl::StatusOr<v1::JobOutput> loaded = LoadFinishedResult(env.checkpoint_dir, job_id);
    if (loaded.ok()) {
      stored = *std::move(loaded);
    } else if (loaded.status().code() != absl::StatusCode::kNotFound) {
      spdlog::warn("{}; running the job again", std::string(loaded.status().message()));
    }
  }
  std::string found(1, stored.has_value() ? '1' : '0');
  if (absl::Status st = dist.BroadcastBytes(found, 0); !st.ok()) return st;
  if (env.rank != 0 && found == "1") stored.emplace();  // a stand-in: only rank 0 reports it
  return stored;
}

// Joins the process group and runs `handler` on this rank; rank 0 reports through `runtime`,
// keeping a successful result in the checkpoint dir until the coordinator has accepted it.
int RunRank(const RankEnv& env, const v1::AcquireJobResponse& assignment,
            const WorkerHandler& handler, AgentRuntime& runtime) {
  const std::string& job_id = assignment.job().id();
  auto dist = Dist::Connect(env, CollectiveTimeout());
  if (!dist.ok()) {
    spdlog::error("{}", dist.status().ToString());
    return kExitFailed;
  }
  auto stored = AgreeOnStoredResult(env, job_id, **dist);
  if (!stored.ok()) {
    spdlog::error("{}", stored.status().ToString());
    return kExitFailed;
  }
  if (stored->has_value()) return ReportStoredResult(env, assignment, **stored, runtime);
  absl::Status handler_status;
  auto run = [&](JobContext* job) -> absl::StatusOr<v1::JobOutput> {
    WorkerContext ctx{env, assignment, dist->get(), job, env.work_dir};
    auto result = handler(ctx);
    handler_status = result.status();
    if (result.ok() && job != nullptr) {
      const absl::Status kept = StoreFinishedResult(env.checkpoint_dir, job_id, *result);
      if (!kept.ok()) spdlog::warn("{}", std::string(kept.message()));
    }
    return result;
  };
  if (env.rank == 0) {
    absl::Status st = runtime.RunAssigned(assignment, [&](JobContext& job) { return run(&job); });
    if (st.ok()) {
      DropFinishedResult(env.checkpoint_dir, job_id);
    } else {
      spdlog::warn("job ended: {}", st.ToString());
    }
  } else {
    (void)run(nullptr);
  }
  if (!handler_status.ok()) {
    spdlog::error("rank {} failed: {}", env.rank, handler_status.ToString());
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

int WorkerMain(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << kUsage;
      return kExitOk;
    }
  }
  auto env = ReadRankEnv([](const char* name) { return std::getenv(name); });
  if (!env.ok()) {
    std::cerr << "tailor-worker: " << env.status().message() << "\n";
    return kExitUsage;
  }
  const char* level = std::getenv("TAILOR_LOG_LEVEL");
  (void)InitLogging(absl::StrCat("worker-r", env->rank), level ? level : "info");
  if (env->coordinator.empty()) {
    std::cerr << "tailor-worker: TAILOR_COORDINATOR is not set\n";
    return kExitUsage;
  }
  RegisterBuiltinHandlers();
  auto assignment = FetchAssignment(*env);
  if (!assignment.ok()) {
    spdlog::error("lease={} cannot get the assignment: {}", env->lease_id,
                  assignment.status().ToString());
    return kExitFailed;
  }
  const std::string kind = assignment->job().kind();
  spdlog::info("job={} kind={} rank {}/{} attempt {}", assignment->job().id(), kind, env->rank,
               env->world_size, assignment->lease().attempt());
  AgentRuntimeOptions options;
  options.coordinator = env->coordinator;
  options.agent_id = absl::StrCat("launcher:", env->launcher);
  options.work_dir = env->work_dir;
  options.unreachable_give_up = GiveUpAfter(assignment->lease());
  AgentRuntime runtime(options);
  const WorkerHandler* handler = FindWorkerHandler(kind);
  if (handler == nullptr) return RefuseUnknownKind(*env, *assignment, runtime);
  return RunRank(*env, *assignment, *handler, runtime);
}

}  // namespace tailor::worker
