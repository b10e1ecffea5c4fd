// Fault injection through real processes on loopback (issue #9): a coordinator, profiler agents
// and launcher-started tailor-worker ranks, with faults injected at points chosen by a seed:
// SIGKILL/SIGTERM of the coordinator, of an agent and of a worker rank, the coordinator
// unreachable for a while (stopped, or down and restarted later), and a data directory on a
// tmpfs that fills up. After every run the invariants of tests/e2e/invariants.h are checked
// straight from the SQLite file, the blob store and /proc.
//
// Knobs (environment):
//   TAILOR_FAULT_RUNS    seeded runs of SeededFaultRuns (default 50)
//   TAILOR_FAULT_SEED    first seed (default 1); run i uses seed + i
//   TAILOR_FAULT_BATCH   PROBE campaigns per run (default 3)
//   TAILOR_FAULT_LANES   independent clusters the seeded runs are spread over (default 2)
//   TAILOR_FAULT_REPORT  write a JSON summary of the seeded runs to this path
//   TAILOR_FAULT_WORKER_RUNS  worker-job runs of WorkerFaults (default 3; 0 skips)
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/invariants.h"

namespace tailor::e2e {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? fallback : std::atoi(v);
}

void SleepMs(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::string ProbeContract(const std::string& name, int duration_ms) {
  return absl::StrCat("name: \"", name, "\"\nmethod: PROBE\n",
                      "target { device_kind: \"cpu\" }\n",
                      "probe { duration_ms: ", duration_ms, " }\n");
}

enum class Fault {
  kCoordinatorSigkill,
  kCoordinatorSigterm,
  kCoordinatorDown,   // SIGKILL, unreachable for 1-3 s, restarted
  kCoordinatorPause,  // SIGSTOP for longer than a heartbeat, shorter than the lease TTL
  kAgentSigkill,
  kAgentSigterm,
  kWorkerRankSigkill,
  kSecondCoordinator,  // another coordinator started on the same data dir (and on the port)
};

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kCoordinatorSigkill:
      return "coordinator SIGKILL";
    case Fault::kCoordinatorSigterm:
      return "coordinator SIGTERM";
    case Fault::kCoordinatorDown:
      return "coordinator down 1-3 s";
    case Fault::kCoordinatorPause:
      return "coordinator SIGSTOP (unreachable)";
    case Fault::kAgentSigkill:
      return "agent SIGKILL";
    case Fault::kAgentSigterm:
      return "agent SIGTERM";
    case Fault::kWorkerRankSigkill:
      return "worker rank SIGKILL";
    case Fault::kSecondCoordinator:
      return "second coordinator on the data dir";
  }
  return "?";
}

// Injects faults into a cluster and brings it back; every call returns with the cluster
// serving again.
class Injector {
 public:
  // Pauses last from two heartbeats to 70% of the lease TTL, at most `max_pause_ms`.
  Injector(Cluster& cluster, Cluster::Options options, double max_pause_ms = 1e9)
      : c_(cluster), options_(options), max_pause_ms_(max_pause_ms) {}

  void Inject(Fault f, std::mt19937& rng, const std::vector<std::string>& agents) {
    switch (f) {
      case Fault::kCoordinatorSigkill:
        c_.KillCoordinator();
        RestartCoordinator();
        break;
      case Fault::kCoordinatorSigterm: {
        c_.coordinator()->Signal(SIGTERM);
        const int code = c_.coordinator()->Wait(absl::Seconds(60));
        EXPECT_EQ(code, 0) << "coordinator did not exit cleanly on SIGTERM";
        if (code < 0) c_.KillCoordinator();
        RestartCoordinator();
        break;
      }
      case Fault::kCoordinatorDown:
        c_.KillCoordinator();
        SleepMs(std::uniform_int_distribution<int>(1000, 3000)(rng));
        RestartCoordinator();
        break;
      case Fault::kCoordinatorPause: {
        const double hb = options_.heartbeat_s * 1000;
        const double ttl = options_.lease_ttl_s * 1000;
        const int ms = std::uniform_int_distribution<int>(
            static_cast<int>(hb * 2), static_cast<int>(std::min(ttl * 0.7, max_pause_ms_)))(rng);
        c_.coordinator()->Signal(SIGSTOP);
        SleepMs(ms);
        c_.coordinator()->Signal(SIGCONT);
        break;
      }
      case Fault::kAgentSigkill:
      case Fault::kAgentSigterm: {
        const std::string& name =
            agents[std::uniform_int_distribution<size_t>(0, agents.size() - 1)(rng)];
        if (f == Fault::kAgentSigkill) {
          c_.KillAgent(name);
        } else {
          Process* p = c_.agent(name);
          // An agent that has not reached main() yet (loading its libraries takes a second or
          // more on a busy host) dies of the signal; from main() on SIGTERM is a clean stop.
          const bool in_main = ReadFile(p->log_path()).find(" serving ", log_offset_[name]) !=
                               std::string::npos;
          p->Signal(SIGTERM);
          const int code = p->Wait(absl::Seconds(60));
          if (in_main) {
            EXPECT_EQ(code, 0) << "agent " << name << " did not exit cleanly on SIGTERM";
          } else {
            EXPECT_TRUE(code == 0 || code == 128 + SIGTERM) << "agent " << name << ": " << code;
          }
          if (code < 0) c_.KillAgent(name);
        }
        log_offset_[name] = ReadFile(c_.agent(name)->log_path()).size();
        c_.StartAgent(name);
        break;
      }
      case Fault::kWorkerRankSigkill:
        break;  // WorkerFaults does this itself: it needs the job's ranks
      case Fault::kSecondCoordinator:
        StartSecondCoordinator();
        break;
    }
  }

  // Another coordinator on the running one's data dir, once on a free port and once on its
  // port: both are refused at start (the data dir lock; no SO_REUSEPORT) and write nothing,
  // and the running coordinator serves on as if nothing happened.
  void StartSecondCoordinator() {
    for (const std::string& listen :
         {std::string("127.0.0.1:0"), absl::StrCat("127.0.0.1:", c_.port())}) {
      RunResult r = e2e::Run({BinDir() + "/tailor-coordinator", "--data-dir", c_.dir() + "/data",
                              "--listen", listen, "--launcher", "none"},
                             absl::Seconds(30));
      EXPECT_EQ(r.exit_code, 1) << listen << ": " << r.err;
      EXPECT_NE(r.err.find("is in use by another tailor-coordinator"), std::string::npos)
          << listen << ": " << r.err;
    }
  }

  void RestartCoordinator() {
    // The port can linger for a moment after a kill; a failed start is retried.
    for (int i = 0; i < 5; ++i) {
      if (c_.StartCoordinator()) return;
      c_.KillCoordinator();
      SleepMs(500);
    }
    ADD_FAILURE() << "coordinator did not come back";
  }

 private:
  Cluster& c_;
  Cluster::Options options_;
  double max_pause_ms_;
  std::map<std::string, size_t> log_offset_;  // agent -> where its current run's log starts
};

// Submits with retries under the same request id until the coordinator accepts (it may be
// down or restarting); "" when it never did.
std::string SubmitWithRetry(Cluster& cluster, const std::string& path, const std::string& rid) {
  std::string id;
  WaitFor(
      [&] {
        id = cluster.Submit(path, rid);
        return !id.empty();
      },
      absl::Seconds(90));
  return id;
}

// Waits until every campaign in `ids` is final in the database.
bool WaitAllFinal(const std::string& db_path, const std::vector<std::string>& ids,
                  absl::Duration timeout, std::string* pending) {
  return WaitFor(
      [&] {
        const std::map<std::string, int> states = CampaignStates(db_path);
        std::vector<std::string> open;
        for (const std::string& id : ids) {
          auto it = states.find(id);
          if (it == states.end() || !IsFinalCampaignState(it->second)) open.push_back(id);
        }
        *pending = absl::StrJoin(open, ",");
        return open.empty();
      },
      timeout);
}

void ShutDownGracefully(Cluster& cluster, const std::vector<std::string>& agents) {
  for (const std::string& name : agents) {
    if (Process* p = cluster.agent(name)) {
      p->Signal(SIGTERM);
      if (p->Wait(absl::Seconds(30)) < 0) p->Kill();
    }
  }
  if (Process* c = cluster.coordinator()) {
    c->Signal(SIGTERM);
    if (c->Wait(absl::Seconds(30)) < 0) c->Kill();
  }
}

// What one lane (one cluster) of SeededFaultRuns did.
struct LaneResult {
  std::map<std::string, int> faults_by_type;
  int campaigns = 0;
  int cancelled = 0;
  int violations = 0;
  InvariantReport final_report;
  nlohmann::json runs = nlohmann::json::array();
};

// Runs `runs` (indexes into `plan`) one after another in a cluster of its own: each run submits
// a batch of PROBE campaigns and injects one fault at a seeded point of the batch (before the
// k-th submission, after a seeded delay). Some campaigns are cancelled. After each run all the
// batch's campaigns must be final and every invariant must hold over the lane's database; after
// the lane a clean shutdown must leave no process behind.
void RunLane(int lane, const std::vector<int>& runs, const std::vector<Fault>& plan, int seed0,
             int batch, LaneResult* out) {
  Cluster::Options options;
  options.lease_ttl_s = 3;
  options.heartbeat_s = 0.5;
  options.backoff_base_s = 0.2;
  Cluster cluster(absl::StrCat("faults", lane), options);
  if (!cluster.StartCoordinator()) {
    ADD_FAILURE() << "lane " << lane << ": the coordinator did not start";
    ++out->violations;
    return;
  }
  const std::vector<std::string> agents = {"cpu-a", "cpu-b"};
  for (const std::string& a : agents) cluster.StartAgent(a);
  Injector injector(cluster, options);
  std::set<std::string> accepted;
  for (const int run : runs) {
    const int seed = seed0 + run;
    std::mt19937 rng(seed);
    const Fault fault = plan[run];
    const int fault_at = std::uniform_int_distribution<int>(0, batch)(rng);
    const int delay_ms = std::uniform_int_distribution<int>(0, 1500)(rng);
    std::vector<std::string> ids;
    const absl::Time run_start = absl::Now();
    for (int k = 0; k <= batch; ++k) {
      if (k == fault_at) {
        SleepMs(delay_ms);
        injector.Inject(fault, rng, agents);
        ++out->faults_by_type[FaultName(fault)];
      }
      if (k == batch) break;
      const int duration = std::uniform_int_distribution<int>(50, 800)(rng);
      const std::string path = cluster.WriteFile(
          absl::StrCat("p", seed, "-", k, ".textproto"),
          ProbeContract(absl::StrCat("fault-", seed, "-", k), duration));
      const std::string id = SubmitWithRetry(cluster, path, absl::StrCat("seed", seed, "-", k));
      if (id.empty()) {
        ADD_FAILURE() << "seed " << seed << ": submission " << k << " never accepted";
        ++out->violations;
        return;
      }
      ids.push_back(id);
      accepted.insert(id);
    }
    // Mixed load: sometimes a campaign of the batch is cancelled while it may be running.
    if (std::uniform_int_distribution<int>(0, 4)(rng) == 0) {
      const std::string victim = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
      RunResult r = cluster.Cli({"cancel", victim, "--reason", "fault harness"});
      // Cancelling a campaign that already finished is refused; either is fine.
      if (r.exit_code == 0) ++out->cancelled;
    }
    std::string pending;
    const bool all_final = WaitAllFinal(cluster.db_path(), ids, absl::Seconds(180), &pending);
    EXPECT_TRUE(all_final) << "seed " << seed << " (" << FaultName(fault)
                           << "): campaigns not final: " << pending;
    InvariantOptions inv;
    inv.data_dir = cluster.dir() + "/data";
    inv.accepted = accepted;
    const InvariantReport report = CheckInvariants(inv);
    EXPECT_TRUE(report.ok()) << "seed " << seed << " (" << FaultName(fault)
                             << "): " << report.Summary();
    const int bad = static_cast<int>(report.violations.size()) + (all_final ? 0 : 1);
    out->violations += bad;
    out->runs.push_back({{"seed", seed},
                         {"lane", lane},
                         {"fault", FaultName(fault)},
                         {"before_submission", fault_at},
                         {"delay_ms", delay_ms},
                         {"campaigns", ids.size()},
                         {"seconds", absl::ToDoubleSeconds(absl::Now() - run_start)},
                         {"violations", bad}});
  }
  // A clean shutdown leaves no process of this cluster behind.
  ShutDownGracefully(cluster, agents);
  InvariantOptions inv;
  inv.data_dir = cluster.dir() + "/data";
  inv.accepted = accepted;
  inv.process_marker = cluster.dir();
  out->final_report = CheckInvariants(inv);
  EXPECT_TRUE(out->final_report.ok()) << "lane " << lane << ": " << out->final_report.Summary();
  out->violations += static_cast<int>(out->final_report.violations.size());
  out->campaigns = static_cast<int>(accepted.size());
}

// TAILOR_FAULT_RUNS seeded runs (see RunLane), spread over TAILOR_FAULT_LANES independent
// clusters that run side by side (most of a run is waiting: for a lease to expire, a
// coordinator to restart, an agent to reconnect). The fault types come from a seeded, balanced
// shuffle, so every type is injected about equally often.
TEST(FaultInjection, SeededFaultRuns) {
  const int runs = EnvInt("TAILOR_FAULT_RUNS", 50);
  const int seed0 = EnvInt("TAILOR_FAULT_SEED", 1);
  const int batch = std::max(1, EnvInt("TAILOR_FAULT_BATCH", 3));
  const int lanes = std::max(1, std::min(runs, EnvInt("TAILOR_FAULT_LANES", 2)));
  const std::vector<Fault> kinds = {Fault::kCoordinatorSigkill, Fault::kCoordinatorSigterm,
                                    Fault::kCoordinatorDown,    Fault::kCoordinatorPause,
                                    Fault::kAgentSigkill,       Fault::kAgentSigterm,
                                    Fault::kSecondCoordinator};
  std::vector<Fault> plan;
  for (int i = 0; i < runs; ++i) plan.push_back(kinds[i % kinds.size()]);
  std::mt19937 plan_rng(seed0);
  std::shuffle(plan.begin(), plan.end(), plan_rng);

  const absl::Time start = absl::Now();
  std::vector<LaneResult> results(lanes);
  std::vector<std::thread> threads;
  for (int lane = 0; lane < lanes; ++lane) {
    std::vector<int> mine;
    for (int r = lane; r < runs; r += lanes) mine.push_back(r);
    threads.emplace_back(RunLane, lane, mine, std::cref(plan), seed0, batch, &results[lane]);
  }
  for (auto& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  std::map<std::string, int> faults_by_type;
  std::map<std::string, int> campaigns_by_state;
  int campaigns = 0, cancelled = 0, violations = 0, jobs = 0, attempts = 0, artifacts = 0,
      events = 0;
  nlohmann::json run_log = nlohmann::json::array();
  for (const LaneResult& r : results) {
    for (const auto& [k, v] : r.faults_by_type) faults_by_type[k] += v;
    for (const auto& [k, v] : r.final_report.campaigns_by_state) campaigns_by_state[k] += v;
    campaigns += r.campaigns;
    cancelled += r.cancelled;
    violations += r.violations;
    jobs += r.final_report.jobs;
    attempts += r.final_report.attempts;
    artifacts += r.final_report.artifacts;
    events += r.final_report.events;
    for (const auto& j : r.runs) run_log.push_back(j);
  }
  int injected = 0;
  for (const auto& [k, v] : faults_by_type) injected += v;
  EXPECT_EQ(injected, runs);
  EXPECT_EQ(violations, 0);
  std::cout << "fault runs: " << runs << " (seeds " << seed0 << ".." << seed0 + runs - 1
            << ", " << lanes << " lanes), " << campaigns << " campaigns, " << cancelled
            << " cancelled, " << jobs << " jobs, " << attempts << " attempts, " << artifacts
            << " artifacts, " << events << " events, " << violations << " violations, "
            << seconds << " s\n";
  for (const auto& [k, v] : faults_by_type) std::cout << "  " << k << ": " << v << "\n";
  for (const auto& [k, v] : campaigns_by_state) std::cout << "  campaigns " << k << ": " << v
                                                          << "\n";
  if (const char* path = std::getenv("TAILOR_FAULT_REPORT"); path != nullptr && *path != '\0') {
    nlohmann::json j = {{"runs", runs},
                        {"first_seed", seed0},
                        {"batch", batch},
                        {"lanes", lanes},
                        {"campaigns", campaigns},
                        {"cancelled", cancelled},
                        {"faults", faults_by_type},
                        {"violations", violations},
                        {"seconds", seconds},
                        {"campaigns_by_state", campaigns_by_state},
                        {"jobs", jobs},
                        {"attempts", attempts},
                        {"artifacts", artifacts},
                        {"events", events},
                        {"runs_detail", run_log}};
    std::ofstream(path) << j.dump(2) << "\n";
  }
}

// The pid of tailor-worker rank `rank` whose work dir names `job_id`, or 0.
pid_t FindWorkerRank(const std::string& job_id, int rank) {
  for (const auto& [pid, cmd] : ProcessesMentioning(absl::StrCat("/work/", job_id, "/"))) {
    if (cmd.find("tailor-worker") == std::string::npos) continue;
    std::ifstream env(absl::StrCat("/proc/", pid, "/environ"));
    std::string environ((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    std::stringstream vars(environ);
    for (std::string kv; std::getline(vars, kv, '\0');) {
      if (kv == absl::StrCat("RANK=", rank)) return pid;
    }
  }
  return 0;
}

std::string RankContract(const std::string& name, const std::string& parent) {
  return absl::StrCat(
      "name: \"", name, "\"\nmethod: AUTOCOMPRESS\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { latency_ms_max: 40 }\n", "ranking { calibration_samples: 512 }\n",
      "resources { rank { ranks_per_node: 2 } }\n");
}

// Launcher-started worker ranks under faults: a rank SIGKILLed mid-job (the attempt fails and
// the retry succeeds), the coordinator stopped mid-job (the ranks ride it out) and the
// coordinator SIGKILLed mid-job and restarted (the orphaned ranks report to the new one, or the
// lease expires and the job is retried). The campaign is cancelled once its rank job is done;
// only the rank job matters here.
TEST(FaultInjection, WorkerFaults) {
  const int runs = EnvInt("TAILOR_FAULT_WORKER_RUNS", 3);
  if (runs <= 0) GTEST_SKIP() << "TAILOR_FAULT_WORKER_RUNS=0";
  if (!std::filesystem::exists(BinDir() + "/tailor-worker")) {
    GTEST_SKIP() << "tailor-worker is not built";
  }
  const int seed0 = EnvInt("TAILOR_FAULT_SEED", 1);
  // Ranks keep their lease alive every third of the TTL; starting a rank (loading LibTorch)
  // takes seconds on a busy host, so the TTL is longer than in the agent runs, and pauses stay
  // under 3 s.
  Cluster::Options options;
  options.lease_ttl_s = 8;
  options.heartbeat_s = 0.5;
  options.backoff_base_s = 0.2;
  Cluster cluster("worker-faults", options);
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  ASSERT_TRUE(cluster.StartCoordinator());
  Injector injector(cluster, options, /*max_pause_ms=*/3000);
  const std::vector<Fault> kinds = {Fault::kWorkerRankSigkill, Fault::kCoordinatorPause,
                                    Fault::kCoordinatorSigkill};
  std::set<std::string> accepted;
  for (int run = 0; run < runs; ++run) {
    const int seed = seed0 + run;
    std::mt19937 rng(seed);
    const Fault fault = kinds[run % kinds.size()];
    const std::string id = SubmitWithRetry(
        cluster, cluster.WriteFile(absl::StrCat("rank", seed, ".textproto"),
                                   RankContract(absl::StrCat("wf", seed), parent)),
        absl::StrCat("worker-seed", seed));
    ASSERT_FALSE(id.empty());
    accepted.insert(id);
    // Wait for both ranks to be up and rank 0 to have started the job (it talked to the
    // coordinator), then a seeded moment more.
    std::string job_id;
    ASSERT_TRUE(WaitFor(
        [&] {
          nlohmann::json j = JobOf(cluster.Status(id), "rank");
          if (j.is_null() || j["state"] != "JOB_LEASED") return false;
          job_id = j["id"];
          const std::string log = ReadFile(absl::StrCat(cluster.dir(), "/data/logs/", job_id,
                                                        "/attempt-", j.value("attempt", 1),
                                                        ".log"));
          return log.find(") started") != std::string::npos && FindWorkerRank(job_id, 0) > 0 &&
                 FindWorkerRank(job_id, 1) > 0;
        },
        absl::Minutes(3)))
        << "seed " << seed << ": rank job never started";
    SleepMs(std::uniform_int_distribution<int>(0, 300)(rng));
    if (fault == Fault::kWorkerRankSigkill) {
      const int rank = std::uniform_int_distribution<int>(0, 1)(rng);
      const pid_t victim = FindWorkerRank(job_id, rank);
      // The job may have finished during the delay; then there is nothing left to kill.
      if (victim > 0) kill(victim, SIGKILL);
    } else {
      injector.Inject(fault, rng, {});
    }
    nlohmann::json job;
    const bool done = WaitFor(
        [&] {
          job = JobOf(cluster.Status(id), "rank");
          return !job.is_null() && (job["state"] == "JOB_SUCCEEDED" || job["state"] == "JOB_FAILED");
        },
        absl::Minutes(4));
    EXPECT_TRUE(done) << "seed " << seed << " (" << FaultName(fault) << "): " << job.dump(2);
    EXPECT_EQ(job["state"], "JOB_SUCCEEDED")
        << "seed " << seed << " (" << FaultName(fault) << "): " << job.dump(2);
    RunResult cancel = cluster.Cli({"cancel", id, "--reason", "rank job done"});
    EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
    std::string pending;
    EXPECT_TRUE(WaitAllFinal(cluster.db_path(), {id}, absl::Minutes(1), &pending));
    // No rank of the job outlives it.
    EXPECT_TRUE(WaitFor([&] { return ProcessesMentioning(absl::StrCat("/work/", job_id, "/")).empty(); },
                        absl::Seconds(60)))
        << "seed " << seed << ": ranks of " << job_id << " still running";
    InvariantOptions inv;
    inv.data_dir = cluster.dir() + "/data";
    inv.accepted = accepted;
    const InvariantReport report = CheckInvariants(inv);
    EXPECT_TRUE(report.ok()) << "seed " << seed << " (" << FaultName(fault)
                             << "): " << report.Summary();
    std::cout << "worker run seed " << seed << " (" << FaultName(fault) << "): attempt "
              << job["attempt"] << ", " << report.Summary() << "\n";
  }
  ShutDownGracefully(cluster, {});
  InvariantOptions inv;
  inv.data_dir = cluster.dir() + "/data";
  inv.accepted = accepted;
  inv.process_marker = cluster.dir();
  const InvariantReport report = CheckInvariants(inv);
  EXPECT_TRUE(report.ok()) << report.Summary();
}

// A small tmpfs mounted over a directory for the life of the object (lazily unmounted).
class TmpfsMount {
 public:
  TmpfsMount(const std::string& dir, const std::string& size) : dir_(dir) {
    if (mount("tmpfs", dir.c_str(), "tmpfs", 0, absl::StrCat("size=", size).c_str()) != 0) {
      error_ = std::strerror(errno);
    } else {
      mounted_ = true;
    }
  }
  ~TmpfsMount() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// Writes `path` until the filesystem is full; returns the bytes written.
int64_t FillDisk(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (f == nullptr) return 0;
  std::setvbuf(f, nullptr, _IONBF, 0);
  const std::string chunk(4096, 'x');
  int64_t total = 0;
  while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size()) total += chunk.size();
  // The last partial page, byte by byte.
  while (std::fwrite("x", 1, 1, f) == 1) ++total;
  std::fclose(f);
  return total;
}

bool MentionsDiskFull(const std::string& text) {
  for (const char* needle : {"RESOURCE_EXHAUSTED", "ResourceExhausted", "disk is full",
                             "No space left", "database or disk is full", "space"}) {
    if (text.find(needle) != std::string::npos) return true;
  }
  return false;
}

// The data directory (database and blob store) on a small tmpfs that is filled up: submissions
// and artifact uploads fail with a clear error instead of crashing the coordinator or
// corrupting the database; once space is freed everything completes and every invariant holds.
TEST(FaultInjection, DiskFullDataDir) {
  Cluster::Options options;
  options.lease_ttl_s = 3;
  options.heartbeat_s = 0.5;
  options.backoff_base_s = 0.5;
  Cluster cluster("diskfull", options);
  const std::string data = cluster.dir() + "/data";
  TmpfsMount mount(data, "16m");
  if (!mount.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs on " << data << " (" << mount.error()
                 << "); the disk-full case needs root or CAP_SYS_ADMIN";
  }
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu-1");
  std::set<std::string> accepted;
  // Space is fine at first.
  const std::string warm = SubmitWithRetry(
      cluster, cluster.WriteFile("warm.textproto", ProbeContract("warm", 100)), "full-warm");
  ASSERT_FALSE(warm.empty());
  accepted.insert(warm);
  ASSERT_TRUE(cluster.WaitForState(warm, "CAMPAIGN_SUCCEEDED", absl::Seconds(90)));

  // A long probe is running when the disk fills: its report upload hits the full blob store.
  const std::string slow = SubmitWithRetry(
      cluster, cluster.WriteFile("slow.textproto", ProbeContract("slow", 2500)), "full-slow");
  ASSERT_FALSE(slow.empty());
  accepted.insert(slow);
  EXPECT_TRUE(WaitFor(
      [&] {
        nlohmann::json s = cluster.Status(slow);
        return !s.is_null() && !s["jobs"].empty() && s["jobs"][0]["state"] == "JOB_LEASED";
      },
      absl::Seconds(60)));
  const std::string filler = data + "/filler";
  const int64_t filled = FillDisk(filler);
  EXPECT_GT(filled, 0);
  std::cout << "filled the data tmpfs with " << filled << " bytes\n";

  // Submissions while full: either refused with a clear error or accepted (SQLite may still
  // have room in its WAL); never a crash.
  std::vector<std::string> errors;
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    RunResult r = cluster.Cli({"submit",
                               cluster.WriteFile(absl::StrCat("full", i, ".textproto"),
                                                 ProbeContract(absl::StrCat("full", i), 100)),
                               "--json", "--request-id", absl::StrCat("full-", i)});
    if (r.exit_code != 0) {
      ++refused;
      errors.push_back(r.err);
      EXPECT_TRUE(MentionsDiskFull(r.err)) << "unclear error for a full disk: " << r.err;
      EXPECT_THAT(r.err, ::testing::HasSubstr("out of space")) << "the hint should say so";
    } else {
      auto j = nlohmann::json::parse(r.out, nullptr, false);
      if (!j.is_discarded()) {
        if (j.contains("campaign")) j = j["campaign"];
        if (!j.value("id", "").empty()) accepted.insert(j.value("id", ""));
      }
    }
  }
  // Give the slow probe time to try its upload against the full disk.
  SleepMs(3500);
  ASSERT_TRUE(cluster.coordinator()->Running())
      << "the coordinator died on a full disk:\n" << ReadFile(cluster.coordinator()->log_path());
  const std::string agent_log = ReadFile(cluster.agent("cpu-1")->log_path());
  const std::string coordinator_log = ReadFile(cluster.coordinator()->log_path());
  const bool upload_refused = MentionsDiskFull(agent_log);
  std::cout << "while full: " << refused << "/5 submissions refused"
            << (errors.empty() ? "" : ", e.g.: " + errors[0]) << "; upload refused: "
            << (upload_refused ? "yes" : "no") << "\n";
  EXPECT_TRUE(refused > 0 || upload_refused)
      << "the disk was full but nothing noticed; coordinator log:\n" << coordinator_log;

  // Free the space: the system recovers without a restart.
  std::filesystem::remove(filler);
  const std::string after = SubmitWithRetry(
      cluster, cluster.WriteFile("after.textproto", ProbeContract("after", 100)), "full-after");
  ASSERT_FALSE(after.empty());
  accepted.insert(after);
  std::string pending;
  std::vector<std::string> ids(accepted.begin(), accepted.end());
  EXPECT_TRUE(WaitAllFinal(cluster.db_path(), ids, absl::Seconds(120), &pending)) << pending;
  EXPECT_EQ(cluster.Status(after).value("state", ""), "CAMPAIGN_SUCCEEDED");
  ShutDownGracefully(cluster, {"cpu-1"});
  InvariantOptions inv;
  inv.data_dir = data;
  inv.accepted = accepted;
  inv.process_marker = cluster.dir();
  const InvariantReport report = CheckInvariants(inv);
  EXPECT_TRUE(report.ok()) << report.Summary();
  std::cout << "disk full: " << report.Summary() << "\n";
}

}  // namespace
}  // namespace tailor::e2e
