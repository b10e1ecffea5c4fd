#include "tests/e2e/invariants.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "storage/database.h"

namespace tailor::e2e {
namespace {

constexpr int kCampaignSucceeded = 3;
constexpr int kCampaignFailed = 4;
constexpr int kCampaignCancelled = 5;
constexpr int kJobSucceeded = 4;

const char* CampaignStateName(int s) {
  switch (s) {
    case 1:
      return "QUEUED";
    case 2:
      return "RUNNING";
    case kCampaignSucceeded:
      return "SUCCEEDED";
    case kCampaignFailed:
      return "FAILED";
    case kCampaignCancelled:
      return "CANCELLED";
  }
  return "UNSPECIFIED";
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `sql`, calling `row` for each result row; a failure is a violation.
template <typename F>
void ForEachRow(storage::Database& db, const std::string& sql, InvariantReport& report, F row) {
  auto s = db.Prepare(sql);
  if (!s.ok()) {
    report.violations.push_back(absl::StrCat("query failed: ", sql, ": ", s.status().ToString()));
    return;
  }
  while (true) {
    auto more = s->Step();
    if (!more.ok()) {
      report.violations.push_back(
          absl::StrCat("query failed: ", sql, ": ", more.status().ToString()));
      return;
    }
    if (!*more) return;
    row(*s);
  }
}

std::set<pid_t> SelfAndAncestors() {
  std::set<pid_t> out;
  pid_t p = getpid();
  while (p > 1 && out.insert(p).second) {
    const std::string stat = Slurp(absl::StrCat("/proc/", p, "/stat"));
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) break;
    std::istringstream rest(stat.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    p = ppid;
  }
  return out;
}

}  // namespace

bool IsFinalCampaignState(int state) {
  return state == kCampaignSucceeded || state == kCampaignFailed || state == kCampaignCancelled;
}

std::string InvariantReport::Summary() const {
  std::vector<std::string> states;
  for (const auto& [k, v] : campaigns_by_state) states.push_back(absl::StrCat(k, "=", v));
  return absl::StrCat(campaigns, " campaigns (", absl::StrJoin(states, " "), "), ", jobs,
                      " jobs, ", attempts, " attempts, ", artifacts, " artifacts, ", events,
                      " events; ", violations.size(), " violations",
                      violations.empty() ? "" : ":\n  ", absl::StrJoin(violations, "\n  "));
}

std::map<std::string, int> CampaignStates(const std::string& db_path) {
  std::map<std::string, int> out;
  storage::Database::Options ro;
  ro.read_only = true;
  ro.create_if_missing = false;
  auto db = storage::Database::Open(db_path, ro);
  if (!db.ok()) return out;
  auto s = (*db)->Prepare("SELECT id, state FROM campaigns");
  if (!s.ok()) return out;
  while (true) {
    auto more = s->Step();
    if (!more.ok() || !*more) break;
    out[s->ColumnText(0)] = static_cast<int>(s->ColumnInt(1));
  }
  return out;
}

InvariantReport CheckInvariants(const InvariantOptions& options) {
  InvariantReport report;
  storage::Database::Options ro;
  ro.read_only = true;
  ro.create_if_missing = false;
  const std::string db_path = options.data_dir + "/tailor.db";
  auto opened = storage::Database::Open(db_path, ro);
  if (!opened.ok()) {
    report.violations.push_back(
        absl::StrCat("cannot open ", db_path, ": ", opened.status().ToString()));
    return report;
  }
  storage::Database& db = **opened;

  // 1. Integrity.
  if (absl::Status st = db.IntegrityCheck(); !st.ok()) {
    report.violations.push_back(absl::StrCat("integrity_check: ", st.ToString()));
  }

  // 2. Final states.
  std::map<std::string, int> states;
  ForEachRow(db, "SELECT id, state, error FROM campaigns", report, [&](storage::Statement& s) {
    const std::string id = s.ColumnText(0);
    const int state = static_cast<int>(s.ColumnInt(1));
    states[id] = state;
    ++report.campaigns;
    ++report.campaigns_by_state[CampaignStateName(state)];
    if (IsFinalCampaignState(state)) {
      ++report.final_campaigns;
    } else if (options.all_final || options.accepted.count(id) > 0) {
      report.violations.push_back(absl::StrCat("campaign ", id, " is not final: ",
                                               CampaignStateName(state)));
    }
  });
  for (const std::string& id : options.accepted) {
    if (states.count(id) == 0) {
      report.violations.push_back(absl::StrCat("accepted campaign ", id, " is missing"));
    }
  }

  // 3. No job completed twice; a succeeded job completed exactly once.
  ForEachRow(db,
             "SELECT j.id, j.state, "
             "(SELECT COUNT(*) FROM job_attempts a WHERE a.job_id = j.id AND "
             "a.state = 'succeeded'), "
             "(SELECT COUNT(*) FROM events e WHERE e.campaign_id = j.campaign_id AND "
             "e.job_id = j.id AND e.type = 'job_succeeded'), "
             "(SELECT COUNT(*) FROM job_attempts a WHERE a.job_id = j.id), "
             "(SELECT COUNT(*) FROM job_attempts a WHERE a.job_id = j.id AND "
             "a.state = 'active'), c.state "
             "FROM jobs j JOIN campaigns c ON c.id = j.campaign_id",
             report, [&](storage::Statement& s) {
               ++report.jobs;
               const std::string id = s.ColumnText(0);
               const int job_state = static_cast<int>(s.ColumnInt(1));
               const int64_t succeeded = s.ColumnInt(2);
               const int64_t events = s.ColumnInt(3);
               report.attempts += static_cast<int>(s.ColumnInt(4));
               const int64_t active = s.ColumnInt(5);
               const int campaign_state = static_cast<int>(s.ColumnInt(6));
               if (succeeded > 1) {
                 report.violations.push_back(
                     absl::StrCat("job ", id, " has ", succeeded, " succeeded attempts"));
               }
               if (events > 1) {
                 report.violations.push_back(
                     absl::StrCat("job ", id, " has ", events, " job_succeeded events"));
               }
               if (job_state == kJobSucceeded && (succeeded != 1 || events != 1)) {
                 report.violations.push_back(absl::StrCat("succeeded job ", id, " has ",
                                                          succeeded, " succeeded attempts and ",
                                                          events, " job_succeeded events"));
               }
               if (IsFinalCampaignState(campaign_state) && active > 0 &&
                   campaign_state != kCampaignCancelled) {
                 report.violations.push_back(absl::StrCat(
                     "job ", id, " of a final campaign still has ", active, " active attempts"));
               }
             });

  // 4. Artifacts hash to their digest.
  ForEachRow(db, "SELECT digest, size_bytes, name FROM artifacts", report,
             [&](storage::Statement& s) {
               ++report.artifacts;
               const std::string digest = s.ColumnText(0);
               const int64_t size = s.ColumnInt(1);
               if (digest.size() != 64) {
                 report.violations.push_back(absl::StrCat("artifact ", s.ColumnText(2),
                                                          " has a malformed digest ", digest));
                 return;
               }
               const std::string path = absl::StrCat(options.data_dir, "/blobs/sha256/",
                                                     digest.substr(0, 2), "/", digest.substr(2));
               if (access(path.c_str(), R_OK) != 0) {
                 report.violations.push_back(
                     absl::StrCat("artifact ", s.ColumnText(2), ": blob ", path, " is missing"));
                 return;
               }
               const std::string bytes = Slurp(path);
               const std::string actual = Sha256::Hex(bytes);
               if (actual != digest || static_cast<int64_t>(bytes.size()) != size) {
                 report.violations.push_back(absl::StrCat(
                     "artifact ", s.ColumnText(2), ": blob ", digest, " hashes to ", actual,
                     " (", bytes.size(), " bytes, recorded ", size, ")"));
               }
             });

  // 5. Event log without gaps.
  ForEachRow(db, "SELECT campaign_id, COUNT(*), MIN(seq), MAX(seq) FROM events GROUP BY 1",
             report, [&](storage::Statement& s) {
               const int64_t count = s.ColumnInt(1);
               report.events += static_cast<int>(count);
               if (s.ColumnInt(2) != 1 || s.ColumnInt(3) != count) {
                 report.violations.push_back(absl::StrCat(
                     "events of ", s.ColumnText(0), ": ", count, " rows with seq ",
                     s.ColumnInt(2), "..", s.ColumnInt(3)));
               }
             });
  ForEachRow(db,
             "SELECT c.id FROM campaigns c WHERE NOT EXISTS (SELECT 1 FROM events e WHERE "
             "e.campaign_id = c.id)",
             report, [&](storage::Statement& s) {
               report.violations.push_back(
                   absl::StrCat("campaign ", s.ColumnText(0), " has no events"));
             });

  // 7. Leaked processes.
  if (!options.process_marker.empty()) {
    for (const auto& [pid, cmd] : ProcessesMentioning(options.process_marker)) {
      report.violations.push_back(absl::StrCat("leaked process ", pid, ": ", cmd));
    }
  }
  return report;
}

std::map<pid_t, std::string> ProcessesMentioning(const std::string& marker) {
  std::map<pid_t, std::string> out;
  const std::set<pid_t> mine = SelfAndAncestors();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (mine.count(pid) > 0) continue;
    const std::string stat = Slurp(absl::StrCat("/proc/", pid, "/stat"));
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;
    if (stat[close + 2] == 'Z') continue;  // exited; only its parent's wait is missing
    std::string cmdline = Slurp(absl::StrCat("/proc/", pid, "/cmdline"));
    const std::string environ = Slurp(absl::StrCat("/proc/", pid, "/environ"));
    if (cmdline.find(marker) == std::string::npos && environ.find(marker) == std::string::npos) {
      continue;
    }
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    out[pid] = cmdline;
  }
  closedir(proc);
  return out;
}

bool JobRow::succeeded() const { return state == kJobSucceeded; }

std::vector<JobRow> JobsOfCampaign(const std::string& db_path, const std::string& campaign_id) {
  std::vector<JobRow> out;
  storage::Database::Options ro;
  ro.read_only = true;
  ro.create_if_missing = false;
  auto db = storage::Database::Open(db_path, ro);
  if (!db.ok()) return out;
  auto s = (*db)->Prepare(
      "SELECT j.id, j.key, j.kind, j.state, a.attempt, a.holder, a.state, a.error FROM jobs j "
      "LEFT JOIN job_attempts a ON a.job_id = j.id WHERE j.campaign_id = ? "
      "ORDER BY j.ord, j.id, a.attempt");
  if (!s.ok()) return out;
  s->Bind(1, campaign_id);
  while (true) {
    auto more = s->Step();
    if (!more.ok() || !*more) break;
    if (out.empty() || out.back().id != s->ColumnText(0)) {
      JobRow job;
      job.id = s->ColumnText(0);
      job.key = s->ColumnText(1);
      job.kind = s->ColumnText(2);
      job.state = static_cast<int>(s->ColumnInt(3));
      out.push_back(std::move(job));
    }
    if (s->ColumnInt(4) > 0) {
      out.back().attempts.push_back({static_cast<int>(s->ColumnInt(4)), s->ColumnText(5),
                                     s->ColumnText(6), s->ColumnText(7)});
    }
  }
  return out;
}

std::string ContentFingerprint(const std::string& db_path) {
  storage::Database::Options ro;
  ro.read_only = true;
  ro.create_if_missing = false;
  auto db = storage::Database::Open(db_path, ro);
  if (!db.ok()) return "";
  std::string out;
  for (const char* sql :
       {"SELECT 'schema', COUNT(*), '', '' FROM sqlite_schema",
        "SELECT 'campaign', id, state, '' FROM campaigns ORDER BY id",
        "SELECT 'job', id, state, updated_at FROM jobs ORDER BY id",
        "SELECT 'attempt', lease_id, state, job_id || '#' || attempt FROM job_attempts "
        "ORDER BY lease_id",
        "SELECT 'event', campaign_id, seq, type FROM events ORDER BY campaign_id, seq",
        "SELECT 'artifact', digest, size_bytes, name FROM artifacts ORDER BY 2, 4"}) {
    auto s = (*db)->Prepare(sql);
    if (!s.ok()) return "";
    while (true) {
      auto more = s->Step();
      if (!more.ok()) return "";
      if (!*more) break;
      absl::StrAppend(&out, s->ColumnText(0), " ", s->ColumnText(1), " ", s->ColumnText(2), " ",
                      s->ColumnText(3), "\n");
    }
  }
  return out;
}

int64_t RssKb(pid_t pid) {
  std::istringstream in(Slurp(absl::StrCat("/proc/", pid, "/status")));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

int FdCount(pid_t pid) {
  DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] == '.' ? 0 : 1;
  closedir(d);
  return n;
}

}  // namespace tailor::e2e
