#include "storage/schema.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::storage {
namespace {

// Migration 6: each job row's schema-5 Struct result (Job.legacy_result) becomes its typed
// JobOutput (Job.output). All rows or none: the step's transaction holds them.
absl::Status MoveResultsIntoOutputs(Database& db, const LegacyResultConverter& convert) {
  TAILOR_ASSIGN_OR_RETURN(Statement rows, db.Prepare("SELECT id, kind, proto FROM jobs"));
  std::vector<std::pair<std::string, std::string>> rewritten;  // id, new proto
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, rows.Step());
    if (!row) break;
    const std::string id = rows.ColumnText(0);
    const std::string kind = rows.ColumnText(1);
    v1::Job job;
    if (!job.ParseFromString(rows.ColumnBlob(2))) {
      return absl::DataLossError(absl::StrCat("job ", id, ": stored protobuf does not parse"));
    }
    if (!job.has_legacy_result()) continue;
    if (!convert) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id, " keeps a schema-5 result and this program cannot convert it; open the "
          "data directory with tailor-coordinator first"));
    }
    absl::StatusOr<v1::JobOutput> output = convert(kind, job.legacy_result());
    if (!output.ok()) {
      return absl::Status(output.status().code(),
                          absl::StrCat("job ", id, " (", kind, "): ", output.status().message()));
    }
    job.clear_legacy_result();
    *job.mutable_output() = *std::move(output);
    rewritten.emplace_back(id, job.SerializeAsString());
  }
  for (const auto& [id, proto] : rewritten) {
    TAILOR_ASSIGN_OR_RETURN(Statement update,
                            db.Prepare("UPDATE jobs SET proto = ?1 WHERE id = ?2"));
    TAILOR_RETURN_IF_ERROR(update.BindBlob(1, proto).Bind(2, id).Run());
  }
  return absl::OkStatus();
}

}  // namespace

// Schema 1: the tables as the first release created them.
constexpr char kInitialSchema[] = R"sql(
CREATE TABLE campaigns (
  id            TEXT PRIMARY KEY,
  request_id    TEXT NOT NULL UNIQUE,
  contract_hash TEXT NOT NULL,
  name          TEXT NOT NULL,
  team          TEXT NOT NULL,
  method        INTEGER NOT NULL,
  state         INTEGER NOT NULL,
  fingerprint   TEXT NOT NULL,
  recurring     INTEGER NOT NULL DEFAULT 0,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  error         TEXT NOT NULL DEFAULT '',
  contract      BLOB NOT NULL
);
CREATE INDEX campaigns_by_state ON campaigns(state);
CREATE INDEX campaigns_by_team ON campaigns(team, id);

CREATE TABLE jobs (
  id          TEXT PRIMARY KEY,
  campaign_id TEXT NOT NULL REFERENCES campaigns(id),
  key         TEXT NOT NULL,
  kind        TEXT NOT NULL,
  state       INTEGER NOT NULL,
  ord         INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  proto       BLOB NOT NULL,
  UNIQUE (campaign_id, key)
);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE INDEX jobs_by_campaign ON jobs(campaign_id, ord);

-- One row per attempt; the lease id is the attempt's identity.
CREATE TABLE job_attempts (
  lease_id    TEXT PRIMARY KEY,
  job_id      TEXT NOT NULL REFERENCES jobs(id),
  attempt     INTEGER NOT NULL,
  holder      TEXT NOT NULL,
  state       TEXT NOT NULL,
  started_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  ended_at    INTEGER,
  error       TEXT NOT NULL DEFAULT '',
  launcher    TEXT NOT NULL DEFAULT '',
  external_id TEXT NOT NULL DEFAULT '',
  UNIQUE (job_id, attempt)
);
CREATE INDEX attempts_active ON job_attempts(state) WHERE state = 'active';

-- Append-only; seq is per campaign and has no gaps.
CREATE TABLE events (
  campaign_id TEXT NOT NULL,
  seq         INTEGER NOT NULL,
  time        INTEGER NOT NULL,
  job_id      TEXT NOT NULL,
  type        TEXT NOT NULL,
  proto       BLOB NOT NULL,
  PRIMARY KEY (campaign_id, seq)
) WITHOUT ROWID;

CREATE TABLE agents (
  id             TEXT PRIMARY KEY,
  name           TEXT NOT NULL UNIQUE,
  state          INTEGER NOT NULL,
  registered_at  INTEGER NOT NULL,
  last_heartbeat INTEGER NOT NULL,
  info           BLOB NOT NULL
);

CREATE TABLE cost_tables (
  id             TEXT PRIMARY KEY,
  fingerprint    TEXT NOT NULL,
  device_kind    TEXT NOT NULL,
  engine         TEXT NOT NULL,
  engine_version TEXT NOT NULL,
  created_at     INTEGER NOT NULL,
  proto          BLOB NOT NULL
);
CREATE INDEX cost_tables_by_fingerprint ON cost_tables(fingerprint, created_at);

CREATE TABLE artifacts (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  digest      TEXT NOT NULL,
  size_bytes  INTEGER NOT NULL,
  kind        TEXT NOT NULL,
  name        TEXT NOT NULL,
  campaign_id TEXT NOT NULL,
  job_id      TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);
CREATE INDEX artifacts_by_campaign ON artifacts(campaign_id, id);
CREATE INDEX artifacts_by_digest ON artifacts(digest);

CREATE TABLE api_tokens (
  id          TEXT PRIMARY KEY,
  token_hash  TEXT NOT NULL UNIQUE,
  team        TEXT NOT NULL,
  role        TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  created_at  INTEGER NOT NULL,
  revoked_at  INTEGER
);
)sql";

// Times are INTEGER unix microseconds. Rows that the coordinator reads back as a whole keep
// their protobuf in a BLOB; the columns beside it exist for indexes and for people running
// sqlite3 on the file.
std::vector<Migration> CoordinatorMigrations(LegacyResultConverter convert) {
  return std::vector<Migration>{
      {1, kInitialSchema},
      // Admin verbs and the token that used them (coordinator/token_auth.h).
      {2, R"sql(
CREATE TABLE audit_events (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  time     INTEGER NOT NULL,
  token_id TEXT NOT NULL,
  verb     TEXT NOT NULL,
  target   TEXT NOT NULL,
  detail   TEXT NOT NULL DEFAULT ''
);
)sql"},
      // Token expiry (coordinator/token_auth.h). NULL, what every existing token gets, is
      // "never expires", so upgrading changes no token's validity.
      {3, R"sql(
ALTER TABLE api_tokens ADD COLUMN expires_at INTEGER;
)sql"},
      // Request ids scoped per team: one team's id never collides with, nor reveals, another
      // team's campaign. SQLite cannot drop the column's UNIQUE in place, so the table is
      // rebuilt (rows, ids and indexes kept; jobs still reference campaigns(id)).
      {4, R"sql(
CREATE TABLE campaigns_v4 (
  id            TEXT PRIMARY KEY,
  request_id    TEXT NOT NULL,
  contract_hash TEXT NOT NULL,
  name          TEXT NOT NULL,
  team          TEXT NOT NULL,
  method        INTEGER NOT NULL,
  state         INTEGER NOT NULL,
  fingerprint   TEXT NOT NULL,
  recurring     INTEGER NOT NULL DEFAULT 0,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  error         TEXT NOT NULL DEFAULT '',
  contract      BLOB NOT NULL,
  UNIQUE (team, request_id)
);
INSERT INTO campaigns_v4 (id, request_id, contract_hash, name, team, method, state, fingerprint,
                          recurring, created_at, updated_at, error, contract)
  SELECT id, request_id, contract_hash, name, team, method, state, fingerprint, recurring,
         created_at, updated_at, error, contract FROM campaigns;
DROP TABLE campaigns;
ALTER TABLE campaigns_v4 RENAME TO campaigns;
CREATE INDEX campaigns_by_state ON campaigns(state);
CREATE INDEX campaigns_by_team ON campaigns(team, id);
)sql", /*rebuilds_referenced_table=*/true},
      // Artifacts listed with the attempt that uploaded them (0 for the rows before).
      {5, R"sql(
ALTER TABLE artifacts ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
)sql"},
      // Job results typed: Job.legacy_result (Struct) -> Job.output (JobOutput).
      {6, "", /*rebuilds_referenced_table=*/false,
       [convert](Database& db) { return MoveResultsIntoOutputs(db, convert); }},
      // Cost tables keyed by the parent's architecture beside the target fingerprint. The
      // tables before carry no key (''), which matches no submission: each such target
      // profiles once more rather than reuse a table of a parent it cannot tell apart.
      {7, R"sql(
ALTER TABLE cost_tables ADD COLUMN parent_architecture TEXT NOT NULL DEFAULT '';
DROP INDEX cost_tables_by_fingerprint;
CREATE INDEX cost_tables_by_key ON cost_tables(fingerprint, parent_architecture, created_at);
)sql"},
  };
}

}  // namespace tailor::storage
