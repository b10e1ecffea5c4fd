#include "tests/e2e/cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tailor::e2e {

Cluster::Cluster(const std::string& name, Options options) : options_(options) {
  dir_ = absl::StrCat(std::filesystem::temp_directory_path().string(), "/tailor-e2e-", name, "-",
                      getpid());
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_ + "/data");
}

Cluster::~Cluster() {
  agents_.clear();
  coordinator_.reset();
  if (std::getenv("TAILOR_E2E_KEEP") == nullptr) std::filesystem::remove_all(dir_);
}

bool Cluster::StartCoordinator() {
  const std::string log = absl::StrCat(dir_, "/coordinator-", restarts_, ".log");
  // The bound ports come from the coordinator's --port-file (written once it serves, renamed
  // into place), not from its log: "listening on port" also matches the HTTP line.
  std::string port_file = absl::StrCat(dir_, "/coordinator-", restarts_++, ".port");
  std::vector<std::string> argv = {
      BinDir() + "/" + options_.coordinator_bin, "--data-dir", dir_ + "/data", "--listen",
      absl::StrCat("127.0.0.1:", port_), "--http-port", "0", "--lease-ttl",
      absl::StrCat(options_.lease_ttl_s), "--heartbeat-interval",
      absl::StrCat(options_.heartbeat_s), "--backoff-base",
      absl::StrCat(options_.backoff_base_s), "--log-level", "debug"};
  const std::vector<std::string>& extra = options_.coordinator_args;
  const auto given = std::find(extra.begin(), extra.end(), "--port-file");
  if (given != extra.end() && given + 1 != extra.end()) {
    port_file = *(given + 1);  // the caller reads it too
  } else {
    argv.insert(argv.end(), {"--port-file", port_file});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::filesystem::remove(port_file);
  coordinator_ = std::make_unique<Process>(argv, log, options_.coordinator_env);
  return WaitFor(
      [&] {
        const nlohmann::json ports =
            nlohmann::json::parse(ReadFile(port_file), nullptr, /*allow_exceptions=*/false);
        if (!ports.is_object() || !ports.contains("grpc_port")) return false;
        port_ = ports["grpc_port"].get<int>();
        http_port_ = ports.value("http_port", 0);
        return port_ > 0;
      },
      absl::Seconds(20));
}

void Cluster::KillCoordinator() {
  if (coordinator_) coordinator_->Kill();
}

Process* Cluster::StartAgent(const std::string& name, const std::vector<std::string>& extra_args) {
  std::filesystem::create_directories(dir_ + "/work-" + name);
  std::vector<std::string> argv = {BinDir() + "/" + options_.agent_bin, "--coordinator",
                                   absl::StrCat("127.0.0.1:", port_), "--device", "cpu", "--name",
                                   name, "--work-dir", dir_ + "/work-" + name, "--log-level",
                                   "debug"};
  // Close calls served back to back: a pause of a minute (the agent's default, for the host's
  // slow minutes) would only lengthen the tests, whose budgets judge no host.
  if (std::find(extra_args.begin(), extra_args.end(), "--close-call-pause-s") ==
      extra_args.end()) {
    argv.insert(argv.end(), {"--close-call-pause-s", "0"});
  }
  // The same for a slow host's second look at the settle's rungs: the tests' tiny tables
  // validate loosely and their rungs' measured / predicted is node's jitter, not the host.
  if (std::find(extra_args.begin(), extra_args.end(), "--slow-host-pause-s") ==
      extra_args.end()) {
    argv.insert(argv.end(), {"--slow-host-pause-s", "0"});
  }
  // One profile round: the tests' tiny models are timed for plumbing, not a table to trust.
  if (std::find(extra_args.begin(), extra_args.end(), "--profile-max-rounds") ==
      extra_args.end()) {
    argv.insert(argv.end(), {"--profile-max-rounds", "1"});
  }
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  auto p = std::make_unique<Process>(argv, absl::StrCat(dir_, "/agent-", name, ".log"));
  Process* raw = p.get();
  agents_[name] = std::move(p);
  return raw;
}

void Cluster::KillAgent(const std::string& name) {
  auto it = agents_.find(name);
  if (it != agents_.end()) it->second->Kill();
}

RunResult Cluster::Cli(std::vector<std::string> args, absl::Duration timeout) {
  std::vector<std::string> argv = {BinDir() + "/tailor", "--coordinator",
                                   absl::StrCat("127.0.0.1:", port_)};
  argv.insert(argv.end(), cli_args_.begin(), cli_args_.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, timeout);
}

nlohmann::json Cluster::Status(const std::string& campaign_id) {
  RunResult r = Cli({"status", campaign_id, "--json"}, absl::Seconds(20));
  if (r.exit_code != 0) return nullptr;
  return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

nlohmann::json Cluster::Report(const std::string& campaign_id) {
  RunResult r = Cli({"report", campaign_id, "--json"});
  if (r.exit_code != 0) {
    ADD_FAILURE() << "tailor report " << campaign_id << " exited " << r.exit_code << ": "
                  << r.err;
    return nullptr;
  }
  return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

std::string Cluster::Submit(const std::string& contract_path, const std::string& request_id) {
  std::vector<std::string> args = {"submit", contract_path, "--json"};
  if (!request_id.empty()) {
    args.push_back("--request-id");
    args.push_back(request_id);
  }
  RunResult r = Cli(args, absl::Seconds(30));
  if (r.exit_code != 0) return "";
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) return "";
  if (j.contains("campaign")) j = j["campaign"];
  return j.value("id", "");
}

bool Cluster::WaitForState(const std::string& campaign_id, const std::string& state,
                           absl::Duration timeout) {
  return WaitFor(
      [&] {
        nlohmann::json s = Status(campaign_id);
        return !s.is_null() && !s.is_discarded() && s.value("state", "") == state;
      },
      timeout);
}

std::string Cluster::WriteFile(const std::string& name, const std::string& content) {
  const std::string path = dir_ + "/" + name;
  std::ofstream(path) << content;
  return path;
}

std::string Cluster::TrainTinyParent(const std::string& layout) {
  const std::string parent = dir_ + "/parent";
  RunResult train = Run({BinDir() + "/tailor-train-parent", "--out", parent, "--steps", "2",
                         "--eval-samples", "1", "--layout", layout},
                        absl::Seconds(300));
  EXPECT_EQ(train.exit_code, 0) << train.out << train.err;
  return train.exit_code == 0 ? parent : "";
}

nlohmann::json JobOf(const nlohmann::json& campaign, const std::string& key) {
  if (!campaign.is_object() || !campaign.contains("jobs")) return nullptr;
  for (const auto& j : campaign["jobs"]) {
    if (j["key"] == key) return j;
  }
  return nullptr;
}

int64_t Int64Of(const nlohmann::json& v) {
  return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>();
}


pid_t FindWorkerRank(const std::string& job_id, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadFile((entry.path() / "cmdline").string()).find("tailor-worker") ==
        std::string::npos) {
      continue;
    }
    std::stringstream vars(ReadFile((entry.path() / "environ").string()));
    bool rank_ok = false;
    bool job_ok = false;
    for (std::string kv; std::getline(vars, kv, '\0');) {
      rank_ok |= kv == absl::StrCat("RANK=", rank);
      job_ok |= kv.rfind("TAILOR_WORK_DIR=", 0) == 0 && kv.find(job_id) != std::string::npos;
    }
    if (rank_ok && job_ok) return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

std::string Diagnose(Cluster& cluster, const std::string& campaign_id, const std::string& job_id) {
  std::string out = absl::StrCat("campaign: ", cluster.Status(campaign_id).dump(2), "\n");
  const std::string logs = absl::StrCat(cluster.dir(), "/data/logs/", job_id);
  std::error_code ec;
  if (job_id.empty() || !std::filesystem::is_directory(logs, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(logs, ec)) {
    const std::string text = ReadFile(entry.path().string());
    const size_t from = text.size() > 3000 ? text.size() - 3000 : 0;
    absl::StrAppend(&out, "--- ", entry.path().filename().string(), " (last ",
                    text.size() - from, " bytes)\n", text.substr(from), "\n");
  }
  return out;
}

std::string KillRankAtStep(Cluster& cluster, const std::string& campaign_id,
                           const std::string& key, int64_t step, int rank,
                           absl::Duration timeout) {
  std::string job_id;
  nlohmann::json job;
  bool ended_early = false;
  const bool reached = WaitFor(
      [&] {
        job = JobOf(cluster.Status(campaign_id), key);
        if (job.is_null()) return false;
        job_id = job["id"];
        const nlohmann::json& state = job["state"];
        if (state == "JOB_SUCCEEDED" || state == "JOB_FAILED" || state == "JOB_CANCELLED" ||
            state == "JOB_SKIPPED") {
          ended_early = true;
          return true;
        }
        // A launched job stays JOB_LEASED while its ranks run.
        if (state != "JOB_LEASED" && state != "JOB_RUNNING") return false;
        return job["progress"].contains("step") && Int64Of(job["progress"]["step"]) >= step;
      },
      timeout);
  if (!reached || ended_early) {
    ADD_FAILURE() << key << (ended_early ? " ended before it could be killed\n"
                                         : absl::StrCat(" did not reach step ", step, "\n"))
                  << Diagnose(cluster, campaign_id, job_id);
    return "";
  }
  EXPECT_EQ(job["attempt"], 1) << job.dump(2);
  const pid_t victim = FindWorkerRank(job_id, rank);
  if (victim <= 0 || kill(victim, SIGKILL) != 0) {
    ADD_FAILURE() << "no rank " << rank << " of " << job_id << " to kill";
    return "";
  }
  return job_id;
}
}  // namespace tailor::e2e
