#include "storage/coordinator_store.h"

#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "storage/schema.h"

namespace tailor::storage {

int64_t ToMicros(absl::Time t) { return absl::ToUnixMicros(t); }
absl::Time FromMicros(int64_t us) { return absl::FromUnixMicros(us); }

namespace {

std::string Serialize(const google::protobuf::Message& m) {
  std::string out;
  m.SerializeToString(&out);
  return out;
}

absl::Status NotParsed(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("stored ", what, " record does not parse"));
}

template <typename T>
absl::StatusOr<T> ParseBlob(const std::string& bytes, absl::string_view what) {
  T msg;
  if (!msg.ParseFromString(bytes)) return NotParsed(what);
  return msg;
}

// Below this many rows a query's protos are parsed on the calling thread.
constexpr size_t kParallelParseRows = 4096;

// Parses blobs[begin, end) into out[begin, end); false at the first that does not parse.
template <typename T>
bool ParseRange(const std::vector<std::string>& blobs, size_t begin, size_t end,
                std::vector<T>& out) {
  for (size_t i = begin; i < end; ++i) {
    if (!out[i].ParseFromString(blobs[i])) return false;
  }
  return true;
}

// Runs a query whose single column is a serialized T and returns every row. Large results
// (a coordinator recovering 100k queued campaigns) are parsed on two threads: parsing, not
// SQLite, is most of a restart's CPU time (docs/benchmarks.md, "Restart-to-serving and a
// quiet machine").
template <typename T>
absl::StatusOr<std::vector<T>> CollectProtos(Statement& stmt, absl::string_view what) {
  std::vector<std::string> blobs;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    blobs.push_back(stmt.ColumnBlob(0));
  }
  std::vector<T> out(blobs.size());
  bool parsed = true;
  if (blobs.size() < kParallelParseRows || std::thread::hardware_concurrency() < 2) {
    parsed = ParseRange(blobs, 0, blobs.size(), out);
  } else {
    const size_t half = blobs.size() / 2;
    bool first_half = true;
    std::thread helper([&] { first_half = ParseRange(blobs, 0, half, out); });
    parsed = ParseRange(blobs, half, blobs.size(), out);
    helper.join();
    parsed = parsed && first_half;
  }
  if (!parsed) return NotParsed(what);
  return out;
}

// The first row's serialized T, or nullopt when the query returns no row.
template <typename T>
absl::StatusOr<std::optional<T>> FirstProto(Statement& stmt, absl::string_view what) {
  TAILOR_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<T>();
  TAILOR_ASSIGN_OR_RETURN(T msg, ParseBlob<T>(stmt.ColumnBlob(0), what));
  return std::make_optional(std::move(msg));
}

// Like FirstProto, but a missing row is NOT_FOUND "<what> '<id>' not found".
template <typename T>
absl::StatusOr<T> RequiredProto(Statement& stmt, absl::string_view what, const std::string& id) {
  TAILOR_ASSIGN_OR_RETURN(std::optional<T> msg, FirstProto<T>(stmt, what));
  if (!msg.has_value()) return absl::NotFoundError(absl::StrCat(what, " '", id, "' not found"));
  return *std::move(msg);
}

v1::Campaign StrippedCampaign(const v1::Campaign& c) {
  v1::Campaign copy = c;
  copy.clear_jobs();
  copy.clear_report();
  return copy;
}

AttemptRow ReadAttempt(const Statement& s) {
  AttemptRow r;
  r.lease_id = s.ColumnText(0);
  r.job_id = s.ColumnText(1);
  r.attempt = static_cast<int>(s.ColumnInt(2));
  r.holder = s.ColumnText(3);
  r.state = s.ColumnText(4);
  r.started_at = FromMicros(s.ColumnInt(5));
  r.expires_at = FromMicros(s.ColumnInt(6));
  r.launcher = s.ColumnText(7);
  r.external_id = s.ColumnText(8);
  return r;
}

constexpr char kAttemptColumns[] =
    "lease_id, job_id, attempt, holder, state, started_at, expires_at, launcher, external_id";

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorStore>> CoordinatorStore::Open(
    const std::string& path, bool external_checkpoints, LegacyResultConverter convert) {
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path));
  TAILOR_RETURN_IF_ERROR(db->Migrate(CoordinatorMigrations(std::move(convert))));
  if (external_checkpoints) TAILOR_RETURN_IF_ERROR(db->Exec("PRAGMA wal_autocheckpoint = 0"));
  return std::unique_ptr<CoordinatorStore>(
      new CoordinatorStore(std::move(db), external_checkpoints));
}

absl::StatusOr<std::unique_ptr<CoordinatorStore>> CoordinatorStore::OpenWriter() {
  const std::string& path = db_->path();
  if (path.empty() || path == ":memory:" || absl::StrContains(path, "mode=memory") ||
      absl::StartsWith(path, "file::memory:")) {
    return absl::FailedPreconditionError(
        absl::StrCat("database '", path, "' is in memory: a second connection cannot share it"));
  }
  // The schema is current: Open migrated it through the first connection.
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path));
  if (external_checkpoints_) {
    TAILOR_RETURN_IF_ERROR(db->Exec("PRAGMA wal_autocheckpoint = 0"));
  }
  Database* watched = db_.get();
  db->set_commit_observer([watched](absl::Duration took) { watched->ReportCommit(took); });
  return std::unique_ptr<CoordinatorStore>(
      new CoordinatorStore(std::move(db), external_checkpoints_));
}

absl::Status CoordinatorStore::InsertCampaign(const v1::Campaign& c,
                                              const std::string& contract_hash) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("INSERT INTO campaigns (id, request_id, contract_hash, name, team, method, "
                   "state, fingerprint, recurring, created_at, updated_at, error, contract) "
                   "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  s.Bind(1, c.id())
      .Bind(2, c.request_id())
      .Bind(3, contract_hash)
      .Bind(4, c.name())
      .Bind(5, c.team())
      .Bind(6, static_cast<int64_t>(c.contract().method()))
      .Bind(7, static_cast<int64_t>(c.state()))
      .Bind(8, c.fingerprint())
      .Bind(9, static_cast<int64_t>(c.contract().recurring() ? 1 : 0))
      .Bind(10, ToMicros(FromProto(c.created_at())))
      .Bind(11, ToMicros(FromProto(c.updated_at())))
      .Bind(12, c.error())
      .BindBlob(13, Serialize(StrippedCampaign(c)));
  return s.Run();
}

absl::Status CoordinatorStore::UpdateCampaign(const v1::Campaign& c) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("UPDATE campaigns SET state = ?, updated_at = ?, error = ?, "
                                "contract = ? WHERE id = ?"));
  s.Bind(1, static_cast<int64_t>(c.state()))
      .Bind(2, ToMicros(FromProto(c.updated_at())))
      .Bind(3, c.error())
      .BindBlob(4, Serialize(StrippedCampaign(c)))
      .Bind(5, c.id());
  TAILOR_RETURN_IF_ERROR(s.Run());
  if (db_->Changes() != 1) return absl::NotFoundError(absl::StrCat("campaign ", c.id()));
  return absl::OkStatus();
}

absl::StatusOr<v1::DeleteCampaignResponse> CoordinatorStore::DeleteCampaign(
    const std::string& id) {
  // Children first: attempts reference jobs, jobs reference the campaign.
  static constexpr const char* kDeletes[] = {
      "DELETE FROM job_attempts WHERE job_id IN (SELECT id FROM jobs WHERE campaign_id = ?)",
      "DELETE FROM jobs WHERE campaign_id = ?",
      "DELETE FROM events WHERE campaign_id = ?",
      "DELETE FROM artifacts WHERE campaign_id = ?",
      "DELETE FROM campaigns WHERE id = ?",
  };
  int changes[5] = {0, 0, 0, 0, 0};
  for (size_t i = 0; i < 5; ++i) {
    TAILOR_ASSIGN_OR_RETURN(Statement s, db_->Prepare(kDeletes[i]));
    s.Bind(1, id);
    TAILOR_RETURN_IF_ERROR(s.Run());
    changes[i] = db_->Changes();
  }
  if (changes[4] != 1) return absl::NotFoundError(absl::StrCat("campaign ", id));
  v1::DeleteCampaignResponse out;
  out.set_campaign_id(id);
  out.set_jobs(changes[1]);
  out.set_events(changes[2]);
  out.set_artifacts(changes[3]);
  return out;
}

absl::StatusOr<std::optional<std::pair<v1::Campaign, std::string>>>
CoordinatorStore::FindByRequestId(const std::string& team, const std::string& request_id) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT contract, contract_hash FROM campaigns WHERE team = ? "
                                "AND request_id = ?"));
  s.Bind(1, team).Bind(2, request_id);
  TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<std::pair<v1::Campaign, std::string>>();
  TAILOR_ASSIGN_OR_RETURN(v1::Campaign c, ParseBlob<v1::Campaign>(s.ColumnBlob(0), "campaign"));
  return std::make_optional(std::make_pair(std::move(c), s.ColumnText(1)));
}

absl::StatusOr<v1::Campaign> CoordinatorStore::GetCampaign(const std::string& id) {
  TAILOR_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT contract FROM campaigns WHERE id = ?"));
  s.Bind(1, id);
  return RequiredProto<v1::Campaign>(s, "campaign", id);
}

absl::StatusOr<std::vector<v1::Campaign>> CoordinatorStore::ListCampaigns(
    const std::string& team, const std::vector<int>& states, const std::string& before_id,
    int limit) {
  // Built from fixed fragments only; values are bound.
  std::string sql = "SELECT contract FROM campaigns WHERE 1";
  if (!team.empty()) sql += " AND team = ?1";
  if (!before_id.empty()) sql += " AND id < ?2";
  if (!states.empty()) {
    sql += " AND state IN (" + absl::StrJoin(states, ",") + ")";
  }
  sql += " ORDER BY id DESC LIMIT ?3";
  TAILOR_ASSIGN_OR_RETURN(Statement s, db_->Prepare(sql));
  if (!team.empty()) s.Bind(1, team);
  if (!before_id.empty()) s.Bind(2, before_id);
  s.Bind(3, static_cast<int64_t>(limit));
  return CollectProtos<v1::Campaign>(s, "campaign");
}

absl::StatusOr<std::vector<v1::Campaign>> CoordinatorStore::LoadNonFinalCampaigns() {
  TAILOR_ASSIGN_OR_RETURN(
      // In no particular order: sorting the contracts by id was a tenth of a restart.
      Statement s, db_->Prepare("SELECT contract FROM campaigns WHERE state IN (?, ?)"));
  s.Bind(1, static_cast<int64_t>(v1::CAMPAIGN_QUEUED))
      .Bind(2, static_cast<int64_t>(v1::CAMPAIGN_RUNNING));
  return CollectProtos<v1::Campaign>(s, "campaign");
}

absl::StatusOr<std::vector<v1::Campaign>> CoordinatorStore::ListRecurringCampaigns() {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT contract FROM campaigns WHERE recurring = 1 ORDER BY created_at, rowid"));
  return CollectProtos<v1::Campaign>(s, "campaign");
}

absl::Status CoordinatorStore::InsertJob(const v1::Job& job, int ord) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("INSERT INTO jobs (id, campaign_id, key, kind, state, ord, updated_at, proto) "
                   "VALUES (?,?,?,?,?,?,?,?)"));
  s.Bind(1, job.id())
      .Bind(2, job.campaign_id())
      .Bind(3, job.key())
      .Bind(4, job.kind())
      .Bind(5, static_cast<int64_t>(job.state()))
      .Bind(6, static_cast<int64_t>(ord))
      .Bind(7, ToMicros(FromProto(job.updated_at())))
      .BindBlob(8, Serialize(job));
  return s.Run();
}

absl::Status CoordinatorStore::UpdateJob(const v1::Job& job) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("UPDATE jobs SET state = ?, updated_at = ?, proto = ? WHERE id = ?"));
  s.Bind(1, static_cast<int64_t>(job.state()))
      .Bind(2, ToMicros(FromProto(job.updated_at())))
      .BindBlob(3, Serialize(job))
      .Bind(4, job.id());
  TAILOR_RETURN_IF_ERROR(s.Run());
  if (db_->Changes() != 1) return absl::NotFoundError(absl::StrCat("job ", job.id()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Job>> CoordinatorStore::JobsOfCampaign(
    const std::string& campaign_id) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT proto FROM jobs WHERE campaign_id = ? ORDER BY ord"));
  s.Bind(1, campaign_id);
  return CollectProtos<v1::Job>(s, "job");
}

absl::StatusOr<v1::Job> CoordinatorStore::GetJob(const std::string& job_id) {
  TAILOR_ASSIGN_OR_RETURN(Statement s, db_->Prepare("SELECT proto FROM jobs WHERE id = ?"));
  s.Bind(1, job_id);
  return RequiredProto<v1::Job>(s, "job", job_id);
}

absl::StatusOr<std::vector<v1::Job>> CoordinatorStore::LoadJobsOfNonFinalCampaigns() {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("SELECT j.proto FROM jobs j JOIN campaigns c ON c.id = j.campaign_id "
                   "WHERE c.state IN (?, ?) ORDER BY j.campaign_id, j.ord"));
  s.Bind(1, static_cast<int64_t>(v1::CAMPAIGN_QUEUED))
      .Bind(2, static_cast<int64_t>(v1::CAMPAIGN_RUNNING));
  return CollectProtos<v1::Job>(s, "job");
}

absl::Status CoordinatorStore::InsertAttempt(const AttemptRow& r) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare(absl::StrCat("INSERT INTO job_attempts (", kAttemptColumns,
                                ") VALUES (?,?,?,?,?,?,?,?,?)")));
  s.Bind(1, r.lease_id)
      .Bind(2, r.job_id)
      .Bind(3, static_cast<int64_t>(r.attempt))
      .Bind(4, r.holder)
      .Bind(5, r.state)
      .Bind(6, ToMicros(r.started_at))
      .Bind(7, ToMicros(r.expires_at))
      .Bind(8, r.launcher)
      .Bind(9, r.external_id);
  return s.Run();
}

absl::Status CoordinatorStore::ExtendAttempt(const std::string& lease_id, absl::Time expires_at) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("UPDATE job_attempts SET expires_at = ? WHERE lease_id = ?"));
  s.Bind(1, ToMicros(expires_at)).Bind(2, lease_id);
  return s.Run();
}

absl::Status CoordinatorStore::EndAttempt(const std::string& lease_id, const std::string& state,
                                          absl::Time ended_at, const std::string& error) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("UPDATE job_attempts SET state = ?, ended_at = ?, error = ? "
                                "WHERE lease_id = ?"));
  s.Bind(1, state).Bind(2, ToMicros(ended_at)).Bind(3, error).Bind(4, lease_id);
  return s.Run();
}

absl::Status CoordinatorStore::SetAttemptExternal(const std::string& lease_id,
                                                  const std::string& launcher,
                                                  const std::string& external_id) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("UPDATE job_attempts SET launcher = ?, external_id = ? "
                                "WHERE lease_id = ?"));
  s.Bind(1, launcher).Bind(2, external_id).Bind(3, lease_id);
  return s.Run();
}

absl::StatusOr<std::vector<AttemptRow>> CoordinatorStore::LoadActiveAttempts() {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare(absl::StrCat("SELECT ", kAttemptColumns,
                                             " FROM job_attempts WHERE state = 'active'")));
  std::vector<AttemptRow> out;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadAttempt(s));
  }
  return out;
}

absl::StatusOr<std::vector<AttemptRow>> CoordinatorStore::AttemptsOfJob(
    const std::string& job_id) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare(absl::StrCat("SELECT ", kAttemptColumns,
                                " FROM job_attempts WHERE job_id = ? ORDER BY attempt")));
  s.Bind(1, job_id);
  std::vector<AttemptRow> out;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadAttempt(s));
  }
  return out;
}

absl::StatusOr<std::optional<AttemptRow>> CoordinatorStore::FindAttempt(
    const std::string& lease_id) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare(absl::StrCat("SELECT ", kAttemptColumns,
                                             " FROM job_attempts WHERE lease_id = ?")));
  s.Bind(1, lease_id);
  TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<AttemptRow>();
  return std::make_optional(ReadAttempt(s));
}

absl::Status CoordinatorStore::AppendEvent(const v1::Event& e) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("INSERT INTO events (campaign_id, seq, time, job_id, type, proto) "
                                "VALUES (?,?,?,?,?,?)"));
  s.Bind(1, e.campaign_id())
      .Bind(2, e.seq())
      .Bind(3, ToMicros(FromProto(e.time())))
      .Bind(4, e.job_id())
      .Bind(5, e.type())
      .BindBlob(6, Serialize(e));
  return s.Run();
}

absl::StatusOr<std::vector<v1::Event>> CoordinatorStore::ReadEvents(
    const std::string& campaign_id, int64_t after_seq, int limit) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT proto FROM events WHERE campaign_id = ? AND seq > ? "
                                "ORDER BY seq LIMIT ?"));
  s.Bind(1, campaign_id).Bind(2, after_seq).Bind(3, static_cast<int64_t>(limit));
  return CollectProtos<v1::Event>(s, "event");
}

absl::StatusOr<int64_t> CoordinatorStore::MaxEventSeq(const std::string& campaign_id) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT COALESCE(MAX(seq), 0) FROM events WHERE campaign_id = ?"));
  s.Bind(1, campaign_id);
  TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return 0;
  return s.ColumnInt(0);
}

absl::StatusOr<std::map<std::string, int64_t>>
CoordinatorStore::LastEventSeqOfNonFinalCampaigns() {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      // One primary-key lookup per campaign: a join grouped by campaign sorted every event of
      // every open campaign in a temporary b-tree (3x slower at 100k queued).
      db_->Prepare("SELECT c.id, (SELECT MAX(e.seq) FROM events e WHERE e.campaign_id = c.id) "
                   "FROM campaigns c WHERE c.state IN (?, ?)"));
  s.Bind(1, static_cast<int64_t>(v1::CAMPAIGN_QUEUED))
      .Bind(2, static_cast<int64_t>(v1::CAMPAIGN_RUNNING));
  std::map<std::string, int64_t> out;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out[s.ColumnText(0)] = s.ColumnInt(1);
  }
  return out;
}

absl::Status CoordinatorStore::UpsertAgent(const v1::Agent& a) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("INSERT INTO agents (id, name, state, registered_at, last_heartbeat, info) "
                   "VALUES (?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET state = excluded.state, "
                   "last_heartbeat = excluded.last_heartbeat, info = excluded.info"));
  s.Bind(1, a.id())
      .Bind(2, a.info().name())
      .Bind(3, static_cast<int64_t>(a.state()))
      .Bind(4, ToMicros(FromProto(a.registered_at())))
      .Bind(5, ToMicros(FromProto(a.last_heartbeat())))
      .BindBlob(6, Serialize(a));
  return s.Run();
}

absl::StatusOr<std::optional<v1::Agent>> CoordinatorStore::FindAgentByName(
    const std::string& name) {
  TAILOR_ASSIGN_OR_RETURN(Statement s, db_->Prepare("SELECT info FROM agents WHERE name = ?"));
  s.Bind(1, name);
  return FirstProto<v1::Agent>(s, "agent");
}

absl::StatusOr<std::vector<v1::Agent>> CoordinatorStore::ListAgents() {
  TAILOR_ASSIGN_OR_RETURN(Statement s, db_->Prepare("SELECT info FROM agents ORDER BY name"));
  return CollectProtos<v1::Agent>(s, "agent");
}

absl::Status CoordinatorStore::InsertCostTable(const v1::CostTable& t) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("INSERT INTO cost_tables (id, fingerprint, device_kind, engine, "
                   "engine_version, created_at, proto, parent_architecture) "
                   "VALUES (?,?,?,?,?,?,?,?)"));
  s.Bind(1, t.id())
      .Bind(2, t.fingerprint())
      .Bind(3, t.device_kind())
      .Bind(4, t.engine())
      .Bind(5, t.engine_version())
      .Bind(6, ToMicros(FromProto(t.created_at())))
      .BindBlob(7, Serialize(t))
      .Bind(8, t.parent_architecture());
  return s.Run();
}

absl::Status CoordinatorStore::UpdateCostTable(const v1::CostTable& t) {
  TAILOR_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("UPDATE cost_tables SET proto = ? WHERE id = ?"));
  s.BindBlob(1, Serialize(t)).Bind(2, t.id());
  TAILOR_RETURN_IF_ERROR(s.Run());
  if (db_->Changes() == 0) {
    return absl::NotFoundError(absl::StrCat("cost table '", t.id(), "' not found"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::CostTable>> CoordinatorStore::FindCostTable(
    const std::string& fingerprint, const std::string& parent_architecture) {
  if (parent_architecture.empty()) return std::optional<v1::CostTable>();
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("SELECT proto FROM cost_tables WHERE fingerprint = ? AND "
                   "parent_architecture = ? ORDER BY created_at DESC, id DESC LIMIT 1"));
  s.Bind(1, fingerprint).Bind(2, parent_architecture);
  TAILOR_ASSIGN_OR_RETURN(std::optional<v1::CostTable> newest,
                          FirstProto<v1::CostTable>(s, "cost table"));
  // The newest table of a key speaks for it: once a verification caught it lying, the key is
  // profiled again rather than falling back to an older measurement of the same stack.
  if (newest.has_value() && !newest->suspect_reason().empty()) return std::nullopt;
  return newest;
}

absl::StatusOr<v1::CostTable> CoordinatorStore::GetCostTable(const std::string& id) {
  TAILOR_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT proto FROM cost_tables WHERE id = ?"));
  s.Bind(1, id);
  return RequiredProto<v1::CostTable>(s, "cost table", id);
}

absl::StatusOr<std::vector<v1::CostTable>> CoordinatorStore::ListCostTables(
    const std::string& device_kind) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT proto FROM cost_tables WHERE (?1 = '' OR device_kind = ?1) "
                                "ORDER BY created_at DESC, id DESC"));
  s.Bind(1, device_kind);
  return CollectProtos<v1::CostTable>(s, "cost table");
}

absl::Status CoordinatorStore::InsertArtifact(const v1::Artifact& a) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("INSERT INTO artifacts (digest, size_bytes, kind, name, campaign_id, job_id, "
                   "created_at, attempt) VALUES (?,?,?,?,?,?,?,?)"));
  s.Bind(1, a.digest())
      .Bind(2, a.size_bytes())
      .Bind(3, a.kind())
      .Bind(4, a.name())
      .Bind(5, a.campaign_id())
      .Bind(6, a.job_id())
      .Bind(7, ToMicros(FromProto(a.created_at())))
      .Bind(8, a.attempt());
  return s.Run();
}

absl::StatusOr<std::vector<v1::Artifact>> CoordinatorStore::ListArtifacts(
    const std::string& campaign_id) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("SELECT digest, size_bytes, kind, name, campaign_id, job_id, created_at, "
                   "attempt FROM artifacts WHERE campaign_id = ? ORDER BY id"));
  s.Bind(1, campaign_id);
  std::vector<v1::Artifact> out;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    v1::Artifact a;
    a.set_digest(s.ColumnText(0));
    a.set_size_bytes(s.ColumnInt(1));
    a.set_kind(s.ColumnText(2));
    a.set_name(s.ColumnText(3));
    a.set_campaign_id(s.ColumnText(4));
    a.set_job_id(s.ColumnText(5));
    *a.mutable_created_at() = ToProto(FromMicros(s.ColumnInt(6)));
    a.set_attempt(static_cast<int32_t>(s.ColumnInt(7)));
    out.push_back(std::move(a));
  }
  return out;
}

absl::StatusOr<bool> CoordinatorStore::ArtifactKnown(const std::string& digest) {
  TAILOR_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT 1 FROM artifacts WHERE digest = ? LIMIT 1"));
  s.Bind(1, digest);
  return s.Step();
}

namespace {

constexpr char kTokenColumns[] =
    "id, token_hash, team, role, description, created_at, revoked_at, expires_at";

// NULL for nullopt: "not revoked", "never expires".
void BindOptionalTime(Statement& s, int index, const std::optional<absl::Time>& t) {
  if (t.has_value()) {
    s.Bind(index, ToMicros(*t));
  } else {
    s.BindNull(index);
  }
}

TokenRow ReadToken(const Statement& s) {
  TokenRow r;
  r.id = s.ColumnText(0);
  r.token_hash = s.ColumnText(1);
  r.team = s.ColumnText(2);
  r.role = s.ColumnText(3);
  r.description = s.ColumnText(4);
  r.created_at = FromMicros(s.ColumnInt(5));
  if (!s.ColumnIsNull(6)) r.revoked_at = FromMicros(s.ColumnInt(6));
  if (!s.ColumnIsNull(7)) r.expires_at = FromMicros(s.ColumnInt(7));
  return r;
}

}  // namespace

absl::Status CoordinatorStore::InsertToken(const TokenRow& row) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare(absl::StrCat("INSERT INTO api_tokens (", kTokenColumns,
                                ") VALUES (?,?,?,?,?,?,?,?)")));
  s.Bind(1, row.id)
      .Bind(2, row.token_hash)
      .Bind(3, row.team)
      .Bind(4, row.role)
      .Bind(5, row.description)
      .Bind(6, ToMicros(row.created_at));
  BindOptionalTime(s, 7, row.revoked_at);
  BindOptionalTime(s, 8, row.expires_at);
  return s.Run();
}

absl::StatusOr<std::optional<TokenRow>> CoordinatorStore::FindTokenByHash(
    const std::string& token_hash) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare(absl::StrCat("SELECT ", kTokenColumns,
                                             " FROM api_tokens WHERE token_hash = ?")));
  s.Bind(1, token_hash);
  TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<TokenRow>();
  return std::make_optional(ReadToken(s));
}

absl::StatusOr<TokenRow> CoordinatorStore::GetToken(const std::string& id) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare(absl::StrCat("SELECT ", kTokenColumns, " FROM api_tokens WHERE id = ?")));
  s.Bind(1, id);
  TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("token '", id, "' not found"));
  return ReadToken(s);
}

absl::StatusOr<std::vector<TokenRow>> CoordinatorStore::ListTokens(bool include_inactive,
                                                                  absl::Time now) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare(absl::StrCat(
          "SELECT ", kTokenColumns, " FROM api_tokens",
          include_inactive ? "" : " WHERE revoked_at IS NULL AND "
                                  "(expires_at IS NULL OR expires_at > ?)",
          " ORDER BY created_at, id")));
  if (!include_inactive) s.Bind(1, ToMicros(now));
  std::vector<TokenRow> out;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadToken(s));
  }
  return out;
}

absl::StatusOr<TokenRow> CoordinatorStore::RevokeToken(const std::string& id, absl::Time at) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("UPDATE api_tokens SET revoked_at = ? "
                                "WHERE id = ? AND revoked_at IS NULL"));
  s.Bind(1, ToMicros(at)).Bind(2, id);
  TAILOR_RETURN_IF_ERROR(s.Run());
  return GetToken(id);
}

absl::StatusOr<int64_t> CoordinatorStore::InsertAuditEvent(const AuditRow& row) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("INSERT INTO audit_events (time, token_id, verb, target, "
                                "detail) VALUES (?,?,?,?,?)"));
  s.Bind(1, ToMicros(row.time))
      .Bind(2, row.token_id)
      .Bind(3, row.verb)
      .Bind(4, row.target)
      .Bind(5, row.detail);
  TAILOR_RETURN_IF_ERROR(s.Run());
  return db_->LastInsertRowId();
}

absl::StatusOr<std::vector<AuditRow>> CoordinatorStore::ListAuditEvents(int limit) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT id, time, token_id, verb, target, detail "
                                "FROM audit_events ORDER BY id DESC LIMIT ?"));
  s.Bind(1, static_cast<int64_t>(limit));
  std::vector<AuditRow> out;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    AuditRow r;
    r.id = s.ColumnInt(0);
    r.time = FromMicros(s.ColumnInt(1));
    r.token_id = s.ColumnText(2);
    r.verb = s.ColumnText(3);
    r.target = s.ColumnText(4);
    r.detail = s.ColumnText(5);
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::string> CoordinatorStore::CampaignTeam(const std::string& campaign_id) {
  TAILOR_ASSIGN_OR_RETURN(Statement s, db_->Prepare("SELECT team FROM campaigns WHERE id = ?"));
  s.Bind(1, campaign_id);
  TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("campaign '", campaign_id, "' not found"));
  return s.ColumnText(0);
}

absl::StatusOr<std::vector<std::string>> CoordinatorStore::TeamsOfArtifact(
    const std::string& digest) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT DISTINCT c.team FROM artifacts a "
                                "JOIN campaigns c ON c.id = a.campaign_id WHERE a.digest = ?"));
  s.Bind(1, digest);
  std::vector<std::string> out;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(s.ColumnText(0));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Open(const std::string& path) {
  Database::Options options;
  options.create_if_missing = false;
  TAILOR_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path, options));
  return std::unique_ptr<Checkpointer>(new Checkpointer(std::move(db)));
}

absl::Status Checkpointer::RunOnce() {
  // A PASSIVE checkpoint racing a steady stream of commits never catches up with the end of
  // the WAL, so SQLite never rewinds it and the file grows without bound. Past a size cap,
  // TRUNCATE: writers wait (busy timeout) for the few milliseconds the copy takes, and the
  // WAL starts over.
  std::error_code ec;
  const auto wal_size = std::filesystem::file_size(db_->path() + "-wal", ec);
  if (!ec && wal_size > kTruncateAboveBytes) {
    return db_->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  return db_->Exec("PRAGMA wal_checkpoint(PASSIVE)");
}

}  // namespace tailor::storage
