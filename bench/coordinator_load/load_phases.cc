#include "bench/coordinator_load/load_phases.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/coordinator_load/child_process.h"
#include "common/contract_io.h"
#include "common/grpc_util.h"
#include "tailor/v1/admin.grpc.pb.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "tailor/v1/campaign.grpc.pb.h"

namespace tailor::bench {
namespace {

// Same text as examples/contracts/probe-cpu.textproto; embedded so the bench runs from any
// directory.
constexpr char kProbeContract[] = R"pb(
  name: "probe-cpu"
  method: PROBE
  target { device_kind: "cpu" }
  probe { duration_ms: 500 }
)pb";

// Generous: under 64 clients on two shared cores a call can queue for a while, and a timeout
// would turn slowness into an error count instead of a latency sample.
constexpr absl::Duration kCallTimeout = absl::Seconds(60);

using SteadyClock = std::chrono::steady_clock;

double MillisSince(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

// A channel of its own for client `index`. gRPC pools subchannels process-wide by target and
// channel arguments, so identical channels would share one TCP connection; a per-client
// message limit (a few bytes apart, irrelevant to these small messages) keeps the arguments
// distinct and gives each client its own connection, as separate CLI processes would have.
std::shared_ptr<grpc::Channel> ClientChannel(const std::string& address, int index) {
  ChannelOptions options;
  options.max_message_bytes += index;
  return MakeChannel(address, options);
}

bool Connect(const std::shared_ptr<grpc::Channel>& channel) {
  return channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
}

// Runs prepare(i) on `n` threads (untimed: connecting), calls on_release() once all are
// prepared (a phase sets its deadline there, so connect time never eats into it), then
// releases them together into run(i); returns the wall time from release until the last
// run(i) returns.
absl::Duration RunInParallel(
    int n, const std::function<void(int)>& prepare, const std::function<void(int)>& run,
    const std::function<void()>& on_release = [] {}) {
  struct Gate {
    int prepared = 0;
    int want = 0;
    bool go = false;
    static bool AllPrepared(Gate* g) { return g->prepared == g->want; }
  };
  absl::Mutex mu;
  Gate gate;
  gate.want = n;
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      prepare(i);
      {
        absl::MutexLock lock(&mu);
        ++gate.prepared;
        mu.Await(absl::Condition(&gate.go));
      }
      run(i);
    });
  }
  absl::Time start;
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&Gate::AllPrepared, &gate));
    on_release();
    start = absl::Now();
    gate.go = true;
  }
  for (std::thread& t : threads) t.join();
  return absl::Now() - start;
}

// Per-thread counters, merged after the threads join (no sharing while timing).
struct WorkerStats {
  std::vector<double> latency_ms;
  std::vector<double> extra_ms;  // a second latency series (CompleteJob), when used
  std::vector<double> total_ms;  // a third (the whole round trip), when used
  int64_t errors = 0;
  int64_t not_assigned = 0;
  std::string first_error;

  void Fail(const std::string& message) {
    if (errors++ == 0) first_error = message;
  }
};

std::vector<double> Merge(const std::vector<WorkerStats>& stats,
                          std::vector<double> WorkerStats::*series) {
  std::vector<double> all;
  for (const WorkerStats& s : stats) {
    all.insert(all.end(), (s.*series).begin(), (s.*series).end());
  }
  return all;
}

void MergeErrors(const std::vector<WorkerStats>& stats, int64_t* errors, std::string* first_error) {
  for (const WorkerStats& s : stats) {
    *errors += s.errors;
    if (first_error->empty()) *first_error = s.first_error;
  }
}

}  // namespace

LatencySummary Summarize(std::vector<double> samples_ms) {
  LatencySummary s;
  s.count = static_cast<int64_t>(samples_ms.size());
  if (samples_ms.empty()) return s;
  std::sort(samples_ms.begin(), samples_ms.end());
  auto rank = [&](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * samples_ms.size()));
    return samples_ms[std::min(samples_ms.size() - 1, i == 0 ? 0 : i - 1)];
  };
  s.p50_ms = rank(0.50);
  s.p99_ms = rank(0.99);
  s.max_ms = samples_ms.back();
  s.mean_ms = std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / samples_ms.size();
  return s;
}

absl::StatusOr<v1::DeploymentContract> ProbeContract() {
  return ParseContract(kProbeContract, ContractFormat::kTextProto, "probe-cpu.textproto");
}

absl::StatusOr<SubmitLoadResult> RunSubmitLoad(const SubmitLoadOptions& options) {
  absl::StatusOr<v1::DeploymentContract> contract = ProbeContract();
  if (!contract.ok()) return contract.status();
  const int n = options.clients;
  std::vector<std::unique_ptr<v1::CampaignService::Stub>> stubs(n);
  std::vector<WorkerStats> stats(n);
  std::atomic<int64_t> next{0};
  const bool counted = options.total > 0;
  SteadyClock::time_point deadline;

  auto prepare = [&](int i) {
    auto channel = ClientChannel(options.address, i);
    if (!Connect(channel)) stats[i].Fail("could not connect");
    stubs[i] = v1::CampaignService::NewStub(channel);
  };
  auto run = [&](int i) {
    v1::SubmitCampaignRequest req;
    *req.mutable_contract() = *contract;
    for (int64_t k = 0;; ++k) {
      if (counted ? next.fetch_add(1) >= options.total : SteadyClock::now() >= deadline) break;
      req.set_request_id(absl::StrCat(options.request_id_prefix, "-", i, "-", k));
      v1::SubmitCampaignResponse resp;
      auto ctx = MakeContext(kCallTimeout);
      const SteadyClock::time_point start = SteadyClock::now();
      grpc::Status st = stubs[i]->SubmitCampaign(ctx.get(), req, &resp);
      const double ms = MillisSince(start);
      if (st.ok() && resp.created()) {
        stats[i].latency_ms.push_back(ms);
      } else {
        stats[i].Fail(st.ok() ? "request id was not new" : st.error_message());
      }
    }
  };
  const absl::Duration elapsed = RunInParallel(n, prepare, run, [&] {
    deadline = SteadyClock::now() + absl::ToChronoNanoseconds(options.duration);
  });

  SubmitLoadResult result;
  result.clients = n;
  std::vector<double> all = Merge(stats, &WorkerStats::latency_ms);
  result.submitted = static_cast<int64_t>(all.size());
  MergeErrors(stats, &result.errors, &result.first_error);
  result.seconds = absl::ToDoubleSeconds(elapsed);
  result.per_second = result.seconds > 0 ? result.submitted / result.seconds : 0;
  result.latency = Summarize(std::move(all));
  return result;
}

absl::StatusOr<std::vector<std::string>> RegisterAgents(const std::string& address, int count) {
  auto stub = v1::AgentService::NewStub(MakeChannel(address, ChannelOptions()));
  std::vector<std::string> ids;
  ids.reserve(count);
  for (int i = 0; i < count; ++i) {
    v1::RegisterAgentRequest req;
    v1::AgentInfo* info = req.mutable_info();
    info->set_name(absl::StrCat("bench-agent-", i));
    info->set_hostname("bench");
    info->set_device_kind("cpu");
    info->set_device("cpu");
    info->set_engine("tailor-builtin");
    info->set_engine_version("1");
    info->add_job_kinds("probe");
    v1::RegisterAgentResponse resp;
    auto ctx = MakeContext(kCallTimeout);
    grpc::Status st = stub->Register(ctx.get(), req, &resp);
    if (!st.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                          absl::StrCat("registering agent ", i, ": ", st.error_message()));
    }
    ids.push_back(resp.agent_id());
  }
  return ids;
}

absl::StatusOr<LeaseLoadResult> RunLeaseRoundTrips(const std::string& address,
                                                   const std::vector<std::string>& agent_ids,
                                                   int threads, int64_t total, uint64_t seed) {
  if (static_cast<int>(agent_ids.size()) < threads) {
    return absl::InvalidArgumentError(
        absl::StrCat("need at least one agent per thread: ", agent_ids.size(), " agents, ", threads,
                     " threads"));
  }
  std::vector<std::unique_ptr<v1::AgentService::Stub>> stubs(threads);
  std::vector<WorkerStats> stats(threads);
  auto prepare = [&](int i) {
    auto channel = ClientChannel(address, i);
    if (!Connect(channel)) stats[i].Fail("could not connect");
    stubs[i] = v1::AgentService::NewStub(channel);
  };
  auto run = [&](int i) {
    std::vector<const std::string*> mine;  // this thread's slice of the agents
    for (size_t a = i; a < agent_ids.size(); a += threads) mine.push_back(&agent_ids[a]);
    std::mt19937_64 rng(seed + i);
    std::uniform_int_distribution<size_t> pick(0, mine.size() - 1);
    const int64_t quota = total / threads + (i < total % threads ? 1 : 0);
    WorkerStats& s = stats[i];
    for (int64_t tries = 0; static_cast<int64_t>(s.total_ms.size()) < quota && tries < 2 * quota;
         ++tries) {
      v1::AcquireJobRequest acquire;
      acquire.set_agent_id(*mine[pick(rng)]);
      acquire.set_wait_ms(0);
      v1::AcquireJobResponse lease;
      auto ctx = MakeContext(kCallTimeout);
      const SteadyClock::time_point start = SteadyClock::now();
      grpc::Status st = stubs[i]->AcquireJob(ctx.get(), acquire, &lease);
      const double acquire_ms = MillisSince(start);
      if (!st.ok()) {
        s.Fail(absl::StrCat("AcquireJob: ", st.error_message()));
        continue;
      }
      if (!lease.assigned()) {
        ++s.not_assigned;
        continue;
      }
      v1::CompleteJobRequest complete;
      complete.set_lease_id(lease.lease().id());
      complete.set_agent_id(acquire.agent_id());  // a lease answers only to its holder
      complete.set_success(true);
      v1::CompleteJobResponse done;
      auto ctx2 = MakeContext(kCallTimeout);
      const SteadyClock::time_point complete_start = SteadyClock::now();
      st = stubs[i]->CompleteJob(ctx2.get(), complete, &done);
      const double complete_ms = MillisSince(complete_start);
      if (!st.ok()) {
        s.Fail(absl::StrCat("CompleteJob: ", st.error_message()));
        continue;
      }
      s.latency_ms.push_back(acquire_ms);
      s.extra_ms.push_back(complete_ms);
      s.total_ms.push_back(MillisSince(start));
    }
  };
  const absl::Duration elapsed = RunInParallel(threads, prepare, run);

  LeaseLoadResult result;
  result.threads = threads;
  MergeErrors(stats, &result.errors, &result.first_error);
  for (const WorkerStats& s : stats) result.not_assigned += s.not_assigned;
  result.acquire = Summarize(Merge(stats, &WorkerStats::latency_ms));
  result.complete = Summarize(Merge(stats, &WorkerStats::extra_ms));
  result.round_trip = Summarize(Merge(stats, &WorkerStats::total_ms));
  result.round_trips = result.round_trip.count;
  result.seconds = absl::ToDoubleSeconds(elapsed);
  result.per_second = result.seconds > 0 ? result.round_trips / result.seconds : 0;
  return result;
}

ListingResult ListEveryCampaign(const std::string& address) {
  auto stub = v1::CampaignService::NewStub(MakeChannel(address, ChannelOptions()));
  ListingResult result;
  std::vector<double> ms;
  v1::ListCampaignsRequest req;
  req.set_page_size(1000);
  while (true) {
    v1::ListCampaignsResponse resp;
    auto ctx = MakeContext(kCallTimeout);
    const SteadyClock::time_point start = SteadyClock::now();
    grpc::Status st = stub->ListCampaigns(ctx.get(), req, &resp);
    ms.push_back(MillisSince(start));
    if (!st.ok()) {
      result.error = absl::StrCat("ListCampaigns page ", result.pages + 1, ": ",
                                  st.error_message());
      break;
    }
    ++result.pages;
    result.campaigns += resp.campaigns_size();
    result.max_page_bytes =
        std::max(result.max_page_bytes, static_cast<int64_t>(resp.ByteSizeLong()));
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  result.page = Summarize(std::move(ms));
  return result;
}

absl::Status ListQueueOnce(const std::string& address, absl::Duration timeout) {
  auto stub = v1::AdminService::NewStub(MakeChannel(address, ChannelOptions()));
  v1::ListQueueRequest req;
  v1::ListQueueResponse resp;
  auto ctx = MakeContext(timeout);
  return FromGrpcStatus(stub->ListQueue(ctx.get(), req, &resp));
}

SlurmProbe ProbeSlurm() {
  SlurmProbe probe;
  std::optional<std::string> sbatch = FindInPath("sbatch");
  std::optional<std::string> sinfo = FindInPath("sinfo");
  if (!sbatch.has_value() || !sinfo.has_value()) {
    probe.reason = "sbatch/sinfo not on PATH";
    return probe;
  }
  // sinfo answers only when a controller does; 5 s keeps a dead controller from stalling us.
  if (RunCommand({*sinfo, "-h"}, absl::Seconds(5)).exit_code != 0) {
    probe.reason = "sinfo -h failed or did not answer within 5 s";
    return probe;
  }
  probe.available = true;
  probe.sbatch = *sbatch;
  probe.scancel = FindInPath("scancel").value_or("");
  return probe;
}

namespace {

// The submitted jobs would run `true` on the cluster for minutes after the phase, taking the
// CPU from whatever is measured next (the next phase, the next run); they are cancelled as
// soon as the phase ends, in batches of ids.
void CancelSlurmJobs(const std::string& scancel, const std::vector<std::string>& job_ids) {
  constexpr size_t kBatch = 500;
  for (size_t at = 0; !scancel.empty() && at < job_ids.size(); at += kBatch) {
    std::vector<std::string> argv = {scancel, "--quiet"};
    const size_t end = std::min(job_ids.size(), at + kBatch);
    argv.insert(argv.end(), job_ids.begin() + at, job_ids.begin() + end);
    (void)RunCommand(argv, absl::Seconds(60));
  }
}

}  // namespace

SubmitLoadResult RunSlurmLoad(const SlurmProbe& slurm, int clients, absl::Duration duration) {
  std::vector<WorkerStats> stats(clients);
  std::vector<std::vector<std::string>> job_ids(clients);
  SteadyClock::time_point deadline;
  const absl::Duration elapsed = RunInParallel(
      clients, [](int) {},
      [&](int i) {
        const std::vector<std::string> argv = {slurm.sbatch, "--parsable", "--job-name",
                                               "tailor-bench-baseline", "--wrap", "true",
                                               "-o", "/dev/null"};
        while (SteadyClock::now() < deadline) {
          const SteadyClock::time_point start = SteadyClock::now();
          CommandResult r = RunCommand(argv, absl::Seconds(60));
          const double ms = MillisSince(start);
          if (r.exit_code == 0) {
            stats[i].latency_ms.push_back(ms);
            // --parsable prints "<id>" or "<id>;<cluster>".
            job_ids[i].push_back(std::string(absl::StripAsciiWhitespace(
                absl::string_view(r.out).substr(0, r.out.find(';')))));
          } else {
            stats[i].Fail(absl::StrCat("sbatch exited ", r.exit_code));
          }
        }
      },
      [&] { deadline = SteadyClock::now() + absl::ToChronoNanoseconds(duration); });
  std::vector<std::string> all_ids;
  for (const auto& ids : job_ids) all_ids.insert(all_ids.end(), ids.begin(), ids.end());
  CancelSlurmJobs(slurm.scancel, all_ids);
  SubmitLoadResult result;
  result.clients = clients;
  std::vector<double> all = Merge(stats, &WorkerStats::latency_ms);
  result.submitted = static_cast<int64_t>(all.size());
  MergeErrors(stats, &result.errors, &result.first_error);
  result.seconds = absl::ToDoubleSeconds(elapsed);
  result.per_second = result.seconds > 0 ? result.submitted / result.seconds : 0;
  result.latency = Summarize(std::move(all));
  return result;
}

}  // namespace tailor::bench
