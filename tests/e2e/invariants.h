#ifndef TAILOR_TESTS_E2E_INVARIANTS_H_
#define TAILOR_TESTS_E2E_INVARIANTS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tailor::e2e {

// What the fault harness checks after every run, read straight from the coordinator's data
// directory (the SQLite file and the blob store) and /proc; nothing goes through the
// coordinator, so a coordinator that lies about its own state cannot hide a violation.
struct InvariantOptions {
  std::string data_dir;  // holds tailor.db and blobs/
  // Campaign ids the coordinator accepted (submit returned an id): each must exist and be in a
  // final state. Every campaign in the database must be final too when `all_final` is set.
  std::set<std::string> accepted;
  bool all_final = true;
  // Processes (tailor-* binaries, or anything whose command line or environment mentions
  // `process_marker`) still alive count as leaked. Empty: no process check.
  std::string process_marker;
};

struct InvariantReport {
  std::vector<std::string> violations;  // empty when every invariant holds
  int campaigns = 0;
  int final_campaigns = 0;
  int jobs = 0;
  int attempts = 0;
  int artifacts = 0;
  int events = 0;
  std::map<std::string, int> campaigns_by_state;  // "SUCCEEDED" -> n
  bool ok() const { return violations.empty(); }
  std::string Summary() const;
};

// 1. PRAGMA integrity_check says ok.
// 2. Every accepted campaign exists and is final (SUCCEEDED, FAILED or CANCELLED); with
//    all_final, every campaign in the file is.
// 3. No job completed twice: at most one succeeded attempt and at most one job_succeeded event
//    per job; a job in state SUCCEEDED has exactly one of each.
// 4. Every artifact row names a blob whose bytes hash to its digest and whose size matches.
// 5. The event log has no gaps: per campaign, seq is exactly 1..count.
// 6. No attempt is still 'active' for a job that is final.
// 7. No leaked processes (see process_marker).
InvariantReport CheckInvariants(const InvariantOptions& options);

// Live (non-zombie) processes, other than this one and its ancestors, whose command line or
// environment contains `marker`. The map value is the command line.
std::map<pid_t, std::string> ProcessesMentioning(const std::string& marker);

// Campaign id -> CampaignState number, read from the database (empty on error).
std::map<std::string, int> CampaignStates(const std::string& db_path);
bool IsFinalCampaignState(int state);

// One job of a campaign and its attempts, read from the database.
struct AttemptRow {
  int attempt = 0;
  std::string holder;
  std::string state;  // active, succeeded, failed, ...
  std::string error;
};
struct JobRow {
  std::string id;
  std::string key;
  std::string kind;
  int state = 0;                     // JobState number
  std::vector<AttemptRow> attempts;  // by attempt number
  bool succeeded() const;
};
// The jobs of `campaign_id` (by plan order) with their attempts; empty on error.
std::vector<JobRow> JobsOfCampaign(const std::string& db_path, const std::string& campaign_id);

// Every row of the tables that hold what the coordinator acknowledged (campaigns, jobs,
// attempts, events, artifacts), one line each in a fixed order after a line counting the
// schema's objects: two databases with the same content give the same text. "" when the
// database cannot be read.
std::string ContentFingerprint(const std::string& db_path);

// Resident set size (kB) and open file descriptors of a process; -1 when unreadable.
int64_t RssKb(pid_t pid);
int FdCount(pid_t pid);

}  // namespace tailor::e2e

#endif  // TAILOR_TESTS_E2E_INVARIANTS_H_
