// Fault injection through real processes on loopback (issue #9): a coordinator, profiler agents
// and launcher-started tailor-worker ranks, with faults injected at points chosen by a seed:
// SIGKILL/SIGTERM of the coordinator, of an agent and of a worker rank, the coordinator
// unreachable for a while (stopped, or down and restarted later; down for 1-5 s timed to land in
// an artifact upload; down for longer than a worker's bounded wait), a second coordinator on the
// data dir, a damaged database restored from tailor-backup, and a data directory on a tmpfs
// that fills up. After every run the invariants of tests/e2e/invariants.h are checked straight
// from the SQLite file, the blob store and /proc.
//
// Knobs (environment):
//   TAILOR_FAULT_RUNS    seeded runs of SeededFaultRuns (default 36)
//   TAILOR_FAULT_SEED    first seed (default 1); run i uses seed + i
//   TAILOR_FAULT_BATCH   PROBE campaigns per run (default 3)
//   TAILOR_FAULT_LANES   independent clusters the seeded runs are spread over (default 2)
//   TAILOR_FAULT_ONLY    only the fault types whose name contains this (e.g. "upload")
//   TAILOR_FAULT_REPORT  write a JSON summary of the seeded runs to this path
//   TAILOR_FAULT_WORKER_RUNS  worker-job runs of WorkerFaults (default 4; 0 skips)
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/database.h"
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
  kUploadOutage,       // SIGKILL timed to land in a probe's artifact upload, down 1-5 s
  kDamagedDatabase,    // SIGKILL, backup, tailor.db damaged: refused; restored from the backup
  kCoordinatorNeverReturns,  // SIGKILL, down until the ranks gave up (worker runs only)
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
    case Fault::kUploadOutage:
      return "coordinator down 1-5 s during an upload";
    case Fault::kDamagedDatabase:
      return "damaged database, restored from tailor-backup";
    case Fault::kCoordinatorNeverReturns:
      return "coordinator never returns (ranks give up)";
  }
  return "?";
}

// `path` from byte `offset` on ("" when shorter).
std::string ReadFrom(const std::string& path, size_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool HasAnyFile(const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec)) return true;
  }
  return false;
}

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

// What an upload outage did (Injector::UploadOutage), for the checks once its campaign is final.
struct UploadOutageRun {
  std::string campaign_id;  // "" when the submission was never accepted
  std::string job_id;
  std::string agent;        // the agent that ran the probe
  size_t log_offset = 0;    // where this run starts in that agent's log
  int attempt = 0;          // the attempt that was running when the coordinator went down
  int duration_ms = 0;      // the probe's measurement
  int outage_ms = 0;
  bool timed = false;       // the probe was seen starting and the outage was timed against it
};

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
      case Fault::kUploadOutage:             // UploadOutage: it needs a campaign of its own
      case Fault::kDamagedDatabase:          // DamageDatabase
      case Fault::kCoordinatorNeverReturns:  // WorkerFaults: it needs the job's ranks
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

  // A PROBE campaign of its own whose report upload meets a dead coordinator. The probe
  // measures for `duration_ms`, then sends its final progress report and uploads probe.json at
  // once. Once its job has started (the agent logs "job ID (probe, attempt N, lease L)
  // started" when it picks the lease up), the coordinator is SIGKILLed 300 ms before the
  // measurement ends, stays down 1-5 s and is restarted on the same port and data dir: the
  // final report and the upload meet the outage, and the upload must ride it out (the agent
  // logs "upload of probe.json failed (...); retrying" for each try that met it).
  UploadOutageRun UploadOutage(std::mt19937& rng, const std::string& tag,
                               const std::vector<std::string>& agents) {
    UploadOutageRun r;
    r.duration_ms = std::uniform_int_distribution<int>(1000, 2000)(rng);
    r.outage_ms = std::uniform_int_distribution<int>(1000, 5000)(rng);
    std::map<std::string, size_t> offsets;
    for (const std::string& a : agents) offsets[a] = ReadFile(c_.agent(a)->log_path()).size();
    const std::string name = absl::StrCat(tag, "-upload");
    r.campaign_id = SubmitWithRetry(
        c_, c_.WriteFile(absl::StrCat(name, ".textproto"), ProbeContract(name, r.duration_ms)),
        name);
    if (r.campaign_id.empty()) return r;
    WaitFor(
        [&] {
          const std::vector<JobRow> jobs = JobsOfCampaign(c_.db_path(), r.campaign_id);
          if (!jobs.empty()) r.job_id = jobs[0].id;
          return !r.job_id.empty();
        },
        absl::Seconds(30));
    if (r.job_id.empty()) return r;
    const std::string needle = absl::StrCat("job ", r.job_id, " (");
    const absl::Time deadline = absl::Now() + absl::Seconds(90);
    while (!r.timed && absl::Now() < deadline) {
      for (const std::string& a : agents) {
        const std::string log = ReadFrom(c_.agent(a)->log_path(), offsets[a]);
        const size_t at = log.find(needle);
        if (at == std::string::npos) continue;
        const std::string line = log.substr(at, log.find('\n', at) - at);
        if (line.find(") started") == std::string::npos) continue;
        const size_t n = line.find("attempt ");
        r.attempt = n == std::string::npos ? 0 : std::atoi(line.c_str() + n + 8);
        r.agent = a;
        r.log_offset = offsets[a];
        r.timed = true;
        break;
      }
      if (!r.timed) SleepMs(10);
    }
    if (!r.timed) return r;
    SleepMs(std::max(0, r.duration_ms - 300));
    c_.KillCoordinator();
    SleepMs(r.outage_ms);
    RestartCoordinator();
    return r;
  }

  // A damaged database. The coordinator is SIGKILLed and, while it is down, backed up with
  // the real tailor-backup (the restore point: nothing acknowledged is newer than it). Then
  // tailor.db is damaged in a seeded way: a b-tree page of a table or index overwritten with
  // garbage, the file header overwritten, or the file truncated to 0 bytes beside the blob
  // store. A coordinator started on it must exit 1 naming the problem and the recovery step
  // (restore from tailor-backup) and write nothing; the harness then does what the message
  // says (moves the data dir aside, restores the backup into an empty one, docs/operations.md)
  // and restarts the coordinator. The restored database must hold exactly what the damaged one
  // held before the damage. Returns what was damaged.
  std::string DamageDatabase(std::mt19937& rng, int seed) {
    namespace fs = std::filesystem;
    const std::string data = c_.dir() + "/data";
    const std::string backup = c_.dir() + "/backup";  // incremental over the lane's runs
    c_.KillCoordinator();
    const RunResult b = e2e::Run(
        {BinDir() + "/tailor-backup", "--data-dir", data, "--out", backup, "--json"},
        absl::Seconds(120));
    EXPECT_EQ(b.exit_code, 0) << "tailor-backup: " << b.out << b.err;
    // Fold the WAL into tailor.db, so that damage to the file is damage to the database.
    {
      auto db = storage::Database::Open(c_.db_path());
      EXPECT_TRUE(db.ok()) << db.status();
      if (db.ok()) {
        const absl::Status st = (*db)->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
        EXPECT_TRUE(st.ok()) << st;
      }
    }
    const std::string before = ContentFingerprint(c_.db_path());
    EXPECT_FALSE(before.empty());

    // A truncated file is refused only beside blobs (without any, it is a new data dir).
    const int kind = std::uniform_int_distribution<int>(0, HasAnyFile(data + "/blobs") ? 2 : 1)(rng);
    std::string how, expected;
    if (kind == 0) {
      // The root page of a seeded table or index: every root page is a b-tree page.
      std::vector<std::pair<std::string, int64_t>> roots;
      int64_t page_size = 4096;
      {
        storage::Database::Options ro;
        ro.read_only = true;
        ro.create_if_missing = false;
        auto db = storage::Database::Open(c_.db_path(), ro);
        EXPECT_TRUE(db.ok()) << db.status();
        if (db.ok()) {
          auto s = (*db)->Prepare(
              "SELECT name, rootpage FROM sqlite_schema WHERE rootpage > 1 ORDER BY name");
          while (s.ok()) {
            auto more = s->Step();
            if (!more.ok() || !*more) break;
            roots.emplace_back(s->ColumnText(0), s->ColumnInt(1));
          }
          auto ps = (*db)->Prepare("PRAGMA page_size");
          if (ps.ok()) {
            auto more = ps->Step();
            if (more.ok() && *more) page_size = ps->ColumnInt(0);
          }
        }
      }
      EXPECT_FALSE(roots.empty());
      if (roots.empty()) roots.emplace_back("?", 2);
      const auto& [name, page] =
          roots[std::uniform_int_distribution<size_t>(0, roots.size() - 1)(rng)];
      std::string garbage(static_cast<size_t>(page_size), '\0');
      for (char& ch : garbage) ch = static_cast<char>(rng() & 0xff);
      garbage[0] = '\0';  // not a b-tree page type
      std::fstream f(c_.db_path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp((page - 1) * page_size);
      f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
      how = absl::StrCat("b-tree page overwritten (page ", page, ", root of ", name, ")");
      expected = "failed its start check";
    } else if (kind == 1) {
      std::string garbage(100, '\0');
      for (char& ch : garbage) ch = static_cast<char>(rng() & 0xff);
      std::fstream f(c_.db_path(), std::ios::in | std::ios::out | std::ios::binary);
      f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
      how = "file header overwritten";
      expected = "failed its start check";
    } else {
      for (const char* suffix : {"", "-wal", "-shm"}) {
        std::error_code ec;
        if (fs::exists(c_.db_path() + suffix, ec)) fs::resize_file(c_.db_path() + suffix, 0, ec);
      }
      how = "truncated to 0 bytes beside the blobs";
      expected = "tailor.db is empty (0 bytes) but blobs/ holds artifacts";
    }
    const std::string damaged = ReadFile(c_.db_path());
    const RunResult start =
        e2e::Run({BinDir() + "/tailor-coordinator", "--data-dir", data, "--listen",
                  "127.0.0.1:0", "--http-port", "-1", "--launcher", "none"},
                 absl::Seconds(30));
    EXPECT_EQ(start.exit_code, 1) << how << ": " << start.err;
    EXPECT_NE(start.err.find(expected), std::string::npos) << how << ": " << start.err;
    EXPECT_NE(start.err.find("restore the latest tailor-backup"), std::string::npos)
        << how << ": " << start.err;
    EXPECT_TRUE(ReadFile(c_.db_path()) == damaged) << how << ": the refused start wrote to it";
    last_refusal_ = start.err.substr(0, 600);
    std::replace(last_refusal_.begin(), last_refusal_.end(), '\n', ' ');

    // The recovery the message names: the damaged directory aside, the backup restored into
    // an empty one.
    const std::string aside = absl::StrCat(c_.dir(), "/data-damaged-", seed);
    std::error_code ec;
    fs::rename(data, aside, ec);
    EXPECT_FALSE(ec) << ec.message();
    fs::create_directories(data);
    fs::copy_file(backup + "/tailor.db", data + "/tailor.db", ec);
    EXPECT_FALSE(ec) << ec.message();
    fs::copy(backup + "/blobs", data + "/blobs", fs::copy_options::recursive, ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(ContentFingerprint(c_.db_path()), before)
        << how << ": the restored database differs from the one before the damage";
    if (std::getenv("TAILOR_E2E_KEEP") == nullptr) fs::remove_all(aside, ec);
    RestartCoordinator();
    return how;
  }

  // The start of the last refused start's message (DamageDatabase), on one line.
  const std::string& last_refusal() const { return last_refusal_; }

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
  std::string last_refusal_;
};

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
  // Upload outages: how many were timed against a running probe, how many met its upload
  // (the agent logged a failed upload try), and, by outage shorter / not shorter than the
  // lease TTL, how many there were and how many lost the attempt that was running.
  int upload_timed = 0, upload_hit = 0;
  int upload_short = 0, upload_short_lost = 0, upload_long = 0, upload_long_lost = 0;
  std::map<std::string, int> damage_by_kind;
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
  const int ttl_ms = static_cast<int>(options.lease_ttl_s * 1000);
  for (const int run : runs) {
    const int seed = seed0 + run;
    std::mt19937 rng(seed);
    const Fault fault = plan[run];
    const int fault_at = std::uniform_int_distribution<int>(0, batch)(rng);
    const int delay_ms = std::uniform_int_distribution<int>(0, 1500)(rng);
    std::vector<std::string> ids;
    UploadOutageRun upload;
    std::string damage;
    const absl::Time run_start = absl::Now();
    for (int k = 0; k <= batch; ++k) {
      if (k == fault_at) {
        SleepMs(delay_ms);
        if (fault == Fault::kUploadOutage) {
          upload = injector.UploadOutage(rng, absl::StrCat("seed", seed), agents);
          if (upload.campaign_id.empty() || !upload.timed) {
            ADD_FAILURE() << "seed " << seed << ": the upload outage's probe "
                          << (upload.campaign_id.empty() ? "was never accepted"
                                                         : "never started");
            ++out->violations;
          }
          if (!upload.campaign_id.empty()) accepted.insert(upload.campaign_id);
        } else if (fault == Fault::kDamagedDatabase) {
          damage = injector.DamageDatabase(rng, seed);
          ++out->damage_by_kind[damage.substr(0, damage.find(" ("))];
        } else {
          injector.Inject(fault, rng, agents);
        }
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
    std::vector<std::string> waited = ids;
    if (!upload.campaign_id.empty()) waited.push_back(upload.campaign_id);
    const bool all_final = WaitAllFinal(cluster.db_path(), waited, absl::Seconds(180), &pending);
    EXPECT_TRUE(all_final) << "seed " << seed << " (" << FaultName(fault)
                           << "): campaigns not final: " << pending;
    InvariantOptions inv;
    inv.data_dir = cluster.dir() + "/data";
    inv.accepted = accepted;
    const InvariantReport report = CheckInvariants(inv);
    EXPECT_TRUE(report.ok()) << "seed " << seed << " (" << FaultName(fault)
                             << "): " << report.Summary();
    int bad = static_cast<int>(report.violations.size()) + (all_final ? 0 : 1);
    nlohmann::json detail = {{"seed", seed},
                             {"lane", lane},
                             {"fault", FaultName(fault)},
                             {"before_submission", fault_at},
                             {"delay_ms", delay_ms},
                             {"campaigns", waited.size()}};
    if (fault == Fault::kUploadOutage && upload.timed) {
      // The attempt that was running when the coordinator went down must be the one that
      // succeeded, when the outage was shorter than the lease TTL: no attempt lost to it.
      const std::string agent_log =
          ReadFrom(cluster.agent(upload.agent)->log_path(), upload.log_offset);
      const bool hit = agent_log.find(absl::StrCat("job ", upload.job_id,
                                                   ": upload of probe.json failed")) !=
                       std::string::npos;
      JobRow job;
      for (const JobRow& j : JobsOfCampaign(cluster.db_path(), upload.campaign_id)) {
        if (j.id == upload.job_id) job = j;
      }
      const int last = job.attempts.empty() ? 0 : job.attempts.back().attempt;
      const bool kept = job.succeeded() && last == upload.attempt &&
                        job.attempts.back().state == "succeeded";
      std::vector<std::string> attempts;
      for (const AttemptRow& a : job.attempts) {
        attempts.push_back(absl::StrCat(a.attempt, " ", a.state, a.error.empty() ? "" : ": ",
                                        a.error));
      }
      ++out->upload_timed;
      out->upload_hit += hit ? 1 : 0;
      if (upload.outage_ms < ttl_ms) {
        ++out->upload_short;
        out->upload_short_lost += kept ? 0 : 1;
        EXPECT_TRUE(kept) << "seed " << seed << ": an outage of " << upload.outage_ms
                          << " ms (lease TTL " << ttl_ms << " ms) during attempt "
                          << upload.attempt << " of " << upload.job_id
                          << " cost the attempt; attempts: " << absl::StrJoin(attempts, "; ");
        bad += kept ? 0 : 1;
      } else {
        ++out->upload_long;
        out->upload_long_lost += kept ? 0 : 1;
      }
      detail["outage_ms"] = upload.outage_ms;
      detail["probe_ms"] = upload.duration_ms;
      detail["upload_met_outage"] = hit;
      detail["attempt_kept"] = kept;
      detail["attempts"] = attempts;
    }
    if (!damage.empty()) {
      detail["damage"] = damage;
      detail["refused_with"] = injector.last_refusal();
    }
    detail["seconds"] = absl::ToDoubleSeconds(absl::Now() - run_start);
    detail["violations"] = bad;
    out->violations += bad;
    out->runs.push_back(detail);
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
  const int runs = EnvInt("TAILOR_FAULT_RUNS", 36);
  const int seed0 = EnvInt("TAILOR_FAULT_SEED", 1);
  const int batch = std::max(1, EnvInt("TAILOR_FAULT_BATCH", 3));
  const int lanes = std::max(1, std::min(runs, EnvInt("TAILOR_FAULT_LANES", 2)));
  const std::vector<Fault> kinds = {Fault::kCoordinatorSigkill, Fault::kCoordinatorSigterm,
                                    Fault::kCoordinatorDown,    Fault::kCoordinatorPause,
                                    Fault::kAgentSigkill,       Fault::kAgentSigterm,
                                    Fault::kSecondCoordinator,  Fault::kUploadOutage,
                                    Fault::kDamagedDatabase};
  // TAILOR_FAULT_ONLY=upload (say) keeps the fault types whose name contains it.
  std::vector<Fault> chosen;
  const char* only = std::getenv("TAILOR_FAULT_ONLY");
  for (const Fault f : kinds) {
    if (only == nullptr || std::string(FaultName(f)).find(only) != std::string::npos) {
      chosen.push_back(f);
    }
  }
  ASSERT_FALSE(chosen.empty()) << "TAILOR_FAULT_ONLY=" << only << " matches no fault type";
  std::vector<Fault> plan;
  for (int i = 0; i < runs; ++i) plan.push_back(chosen[i % chosen.size()]);
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
  std::map<std::string, int> damage_by_kind;
  int upload_timed = 0, upload_hit = 0, upload_short = 0, upload_short_lost = 0,
      upload_long = 0, upload_long_lost = 0;
  int campaigns = 0, cancelled = 0, violations = 0, jobs = 0, attempts = 0, artifacts = 0,
      events = 0;
  nlohmann::json run_log = nlohmann::json::array();
  for (const LaneResult& r : results) {
    for (const auto& [k, v] : r.faults_by_type) faults_by_type[k] += v;
    for (const auto& [k, v] : r.damage_by_kind) damage_by_kind[k] += v;
    upload_timed += r.upload_timed;
    upload_hit += r.upload_hit;
    upload_short += r.upload_short;
    upload_short_lost += r.upload_short_lost;
    upload_long += r.upload_long;
    upload_long_lost += r.upload_long_lost;
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
  std::cout << "  upload outages: " << upload_timed << " timed, " << upload_hit
            << " met the upload; shorter than the lease TTL " << upload_short << " ("
            << upload_short_lost << " attempts lost), not shorter " << upload_long << " ("
            << upload_long_lost << " attempts lost)\n";
  for (const auto& [k, v] : damage_by_kind) std::cout << "  damage: " << k << ": " << v << "\n";
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
                        {"upload_outages",
                         {{"timed", upload_timed},
                          {"met_upload", upload_hit},
                          {"shorter_than_ttl", upload_short},
                          {"shorter_than_ttl_attempts_lost", upload_short_lost},
                          {"not_shorter", upload_long},
                          {"not_shorter_attempts_lost", upload_long_lost}}},
                        {"damage", damage_by_kind},
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

// Files created in (or renamed into) a directory, seen through inotify from the moment the
// object exists: what a poll of the directory would see milliseconds too late.
class CreateWatch {
 public:
  explicit CreateWatch(const std::string& dir) : dir_(dir) {
    fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd_ >= 0 && inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~CreateWatch() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // Waits until a file whose name starts with `prefix` has been created since the watch began
  // (or exists already), `stop` says to stop waiting, or `timeout` passes.
  bool Wait(const std::string& prefix, absl::Duration timeout, const std::function<bool()>& stop) {
    const absl::Time deadline = absl::Now() + timeout;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
    }
    alignas(inotify_event) char buf[4096];
    while (absl::Now() < deadline) {
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        const ssize_t n = read(fd_, buf, sizeof(buf));
        for (ssize_t at = 0; n > 0 && at < n;) {
          const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
          if (ev->len > 0 && std::string(ev->name).rfind(prefix, 0) == 0) return true;
          at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        }
      } else if (stop()) {
        return false;
      }
    }
    return false;
  }

 private:
  std::string dir_;
  int fd_ = -1;
};

std::string RankContract(const std::string& name, const std::string& parent) {
  return absl::StrCat(
      "name: \"", name, "\"\nmethod: AUTOCOMPRESS\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { latency_ms_max: 40 }\n", "ranking { calibration_samples: 512 }\n",
      "resources { rank { ranks_per_node: 2 } }\n");
}

// After the coordinator was killed the moment rank 0 began storing its result: true when the
// job's completion was committed before the kill (read from the database, the only witness).
bool CompletionWonTheRace(Cluster& cluster, const std::string& campaign_id,
                          const std::string& job_id) {
  for (const JobRow& job : JobsOfCampaign(cluster.db_path(), campaign_id)) {
    if (job.id == job_id) return job.succeeded();
  }
  return false;
}

// Launcher-started worker ranks under faults: a rank SIGKILLed mid-job (the attempt fails and
// the retry succeeds), the coordinator stopped mid-job (the ranks ride it out), the
// coordinator SIGKILLed mid-job and restarted (the orphaned ranks report to the new one, or the
// lease expires and the job is retried) and the coordinator SIGKILLed mid-job and not
// restarted until the ranks have given up: rank 0 keeps its result in the job's checkpoint dir
// and exits after TAILOR_GIVE_UP_AFTER_S of unanswered calls, and once the coordinator is back
// the job's next attempt reports the stored result without running the job again
// (docs/reliability.md "A coordinator that never returns"). The campaign is cancelled once its
// rank job is done; only the rank job matters here.
TEST(FaultInjection, WorkerFaults) {
  const int runs = EnvInt("TAILOR_FAULT_WORKER_RUNS", 4);
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
  // The ranks' bounded wait for an unreachable coordinator (20 lease TTLs by default), short
  // here; longer than a restart, so only the coordinator that never returns meets it.
  constexpr int kGiveUpS = 6;
  options.coordinator_env = {{"TAILOR_GIVE_UP_AFTER_S", absl::StrCat(kGiveUpS)}};
  Cluster cluster("worker-faults", options);
  const std::string parent = cluster.TrainTinyParent();
  ASSERT_FALSE(parent.empty());
  ASSERT_TRUE(cluster.StartCoordinator());
  Injector injector(cluster, options, /*max_pause_ms=*/3000);
  const std::vector<Fault> kinds = {Fault::kWorkerRankSigkill, Fault::kCoordinatorPause,
                                    Fault::kCoordinatorSigkill,
                                    Fault::kCoordinatorNeverReturns};
  const std::string data = cluster.dir() + "/data";
  std::set<std::string> accepted;
  // The coordinator-never-returns kill is timed by a file event and can lose the race to rank
  // 0's completion on a loaded host (then the scenario did not happen, nothing is wrong); such
  // a run is repeated with a new submission, at most this many times in all.
  int lost_races_left = 3;
  for (int run = 0, try_no = 0; run < runs; ++run, ++try_no) {
    const int seed = seed0 + run;
    std::mt19937 rng(seed);
    const Fault fault = kinds[run % kinds.size()];
    const std::string id = SubmitWithRetry(
        cluster, cluster.WriteFile(absl::StrCat("rank", seed, ".textproto"),
                                   RankContract(absl::StrCat("wf", seed), parent)),
        absl::StrCat("worker-seed", seed, "-", try_no));
    ASSERT_FALSE(id.empty());
    accepted.insert(id);
    // Wait for both ranks to be up and rank 0 to have started the job (it talked to the
    // coordinator), then a seeded moment more.
    std::string job_id;
    int attempt = 1;
    // Never returns: the watch on the job's checkpoint dir starts as soon as the job is known,
    // so that it sees rank 0 start writing its finished result (the worker creates the dir
    // too; creating it first changes nothing).
    std::unique_ptr<CreateWatch> watch;
    ASSERT_TRUE(WaitFor(
        [&] {
          nlohmann::json j = JobOf(cluster.Status(id), "rank");
          if (j.is_null() || j["state"] != "JOB_LEASED") return false;
          job_id = j["id"];
          attempt = j.value("attempt", 1);
          if (fault == Fault::kCoordinatorNeverReturns && watch == nullptr) {
            const std::string dir = absl::StrCat(data, "/work/", job_id, "/checkpoints");
            std::filesystem::create_directories(dir);
            watch = std::make_unique<CreateWatch>(dir);
          }
          const std::string log = ReadFile(absl::StrCat(cluster.dir(), "/data/logs/", job_id,
                                                        "/attempt-", attempt, ".log"));
          return log.find(") started") != std::string::npos && FindWorkerRank(job_id, 0) > 0 &&
                 FindWorkerRank(job_id, 1) > 0;
        },
        absl::Minutes(3)))
        << "seed " << seed << ": rank job never started";
    const int delay_ms = std::uniform_int_distribution<int>(0, 300)(rng);
    const std::string stored_result =
        absl::StrCat(data, "/work/", job_id, "/checkpoints/finished-", job_id, ".pb");
    if (fault == Fault::kCoordinatorNeverReturns) {
      // The coordinator goes the moment rank 0 starts writing its finished result: the job
      // ran and uploaded its output with the coordinator up, and its completion (which
      // follows the fsync and rename of that file) cannot reach it.
      ASSERT_TRUE(watch != nullptr && watch->ok()) << "cannot watch the checkpoint dir";
      const bool finishing = watch->Wait(
          absl::StrCat("finished-", job_id, ".pb"), absl::Minutes(3),
          [&] { return FindWorkerRank(job_id, 0) == 0; });
      const absl::Time killed = absl::Now();
      cluster.KillCoordinator();
      EXPECT_TRUE(finishing) << "seed " << seed << ": rank 0 of " << job_id
                             << " never started to store its result";
      if (CompletionWonTheRace(cluster, id, job_id)) {
        ASSERT_GT(lost_races_left--, 0) << "the kill lost the race to the completion every time";
        std::cout << "worker run seed " << seed << ": rank 0's completion reached the "
                  << "coordinator before the kill; the run is repeated\n";
        injector.RestartCoordinator();
        RunResult cancel = cluster.Cli({"cancel", id, "--reason", "repeated run"});
        EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
        --run;
        continue;
      }
      // The ranks finish the job; rank 0 then calls CompleteJob for TAILOR_GIVE_UP_AFTER_S and
      // exits; no rank may outlive that bound by more than the job itself takes.
      const bool gone = WaitFor(
          [&] { return ProcessesMentioning(absl::StrCat("/work/", job_id, "/")).empty(); },
          absl::Seconds(kGiveUpS) + absl::Minutes(3));
      const double waited = absl::ToDoubleSeconds(absl::Now() - killed);
      EXPECT_TRUE(gone) << "seed " << seed << ": ranks of " << job_id
                        << " still running with the coordinator gone for " << waited << " s";
      const std::string rank0_log =
          ReadFile(absl::StrCat(data, "/logs/", job_id, "/attempt-", attempt, ".log"));
      EXPECT_THAT(rank0_log, ::testing::HasSubstr("giving up on completing"))
          << "seed " << seed << ": rank 0 did not give up:\n" << rank0_log;
      EXPECT_GE(waited, kGiveUpS - 1) << "seed " << seed << ": the ranks exited before the "
                                      << "bounded wait:\n" << rank0_log;
      // The bound, plus one backoff step past it (at most 5 s) and the ranks' exit.
      EXPECT_LE(waited, kGiveUpS + 5 + 20) << "seed " << seed << ": the ranks outlived the "
                                           << "bounded wait:\n" << rank0_log;
      EXPECT_TRUE(std::filesystem::exists(stored_result))
          << "seed " << seed << ": rank 0 gave up without keeping its result";
      std::cout << "worker run seed " << seed << ": ranks gone " << waited
                << " s after the coordinator (give-up bound " << kGiveUpS << " s)\n";
      injector.RestartCoordinator();
    } else {
      SleepMs(delay_ms);
    }
    if (fault == Fault::kCoordinatorNeverReturns) {
      // Handled above.
    } else if (fault == Fault::kWorkerRankSigkill) {
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
    if (fault == Fault::kCoordinatorNeverReturns) {
      // The next attempt (the lease expired once the coordinator was back) reported the
      // stored result instead of running the job again, and dropped the file.
      const int next = attempt + 1;
      EXPECT_EQ(job.value("attempt", 0), next) << job.dump(2);
      const std::string next_log =
          ReadFile(absl::StrCat(data, "/logs/", job_id, "/attempt-", next, ".log"));
      EXPECT_THAT(next_log, ::testing::HasSubstr("reporting its stored result"))
          << "seed " << seed << ": attempt " << next << " ran the job again:\n" << next_log;
      EXPECT_FALSE(std::filesystem::exists(stored_result))
          << "seed " << seed << ": the stored result outlived its successful report";
    }
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
