#ifndef TAILOR_STORAGE_COORDINATOR_STORE_H_
#define TAILOR_STORAGE_COORDINATOR_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/database.h"
#include "storage/schema.h"
#include "tailor/v1/admin.pb.h"
#include "tailor/v1/agent.pb.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::storage {

// One attempt of a job: the lease row.
struct AttemptRow {
  std::string lease_id;
  std::string job_id;
  int attempt = 0;
  std::string holder;  // agent id, or "launcher:<name>"
  std::string state;   // active, succeeded, failed, expired, cancelled
  absl::Time started_at;
  absl::Time expires_at;
  std::string launcher;
  std::string external_id;
};

// An API token as stored: only the SHA-256 (hex) of the secret is kept.
struct TokenRow {
  std::string id;          // "tok-..."
  std::string token_hash;  // sha256 hex of the bearer secret
  std::string team;
  std::string role;  // submitter | admin | agent
  std::string description;
  absl::Time created_at;
  std::optional<absl::Time> revoked_at;  // nullopt while active
  std::optional<absl::Time> expires_at;  // nullopt: never expires
};

// One use of an admin verb.
struct AuditRow {
  int64_t id = 0;  // assigned on insert
  absl::Time time;
  std::string token_id;  // empty when authentication is off
  std::string verb;
  std::string target;
  std::string detail;
};

// Typed access to the coordinator's tables. Not thread-safe: the coordinator core calls it
// under its own mutex and wraps multi-row changes in a Transaction from Begin().
class CoordinatorStore {
 public:
  // Opens (creating if needed) and migrates the database. With external_checkpoints the
  // connection never checkpoints the WAL itself (no fsync inside a request); the owner must
  // run Checkpointer below.
  // `convert` types the job results of a schema-5 database (storage/schema.h).
  static absl::StatusOr<std::unique_ptr<CoordinatorStore>> Open(
      const std::string& path, bool external_checkpoints = false,
      LegacyResultConverter convert = nullptr);

  // A second connection to the same file for the group committer (storage/group_commit.h),
  // so that its transactions can run while this connection serves reads. It checkpoints as
  // this one does, and its commits are reported to this connection's commit observer.
  // FAILED_PRECONDITION for an in-memory database (another connection would see another one).
  absl::StatusOr<std::unique_ptr<CoordinatorStore>> OpenWriter();

  Database* db() { return db_.get(); }
  absl::StatusOr<Transaction> Begin() { return Transaction::Begin(db_.get()); }

  // Campaigns. Stored without jobs and report (those live in their own tables).
  absl::Status InsertCampaign(const v1::Campaign& campaign, const std::string& contract_hash);
  absl::Status UpdateCampaign(const v1::Campaign& campaign);
  // Deletes a campaign's rows (attempts, jobs, events, artifact rows, the campaign) inside the
  // caller's transaction; NOT_FOUND when there is no such campaign. Blobs are not touched.
  absl::StatusOr<v1::DeleteCampaignResponse> DeleteCampaign(const std::string& id);
  // The campaign `team`'s request id created, with its contract hash; nullopt when that team
  // has not used it (request ids are scoped per team).
  absl::StatusOr<std::optional<std::pair<v1::Campaign, std::string>>> FindByRequestId(
      const std::string& team, const std::string& request_id);
  absl::StatusOr<v1::Campaign> GetCampaign(const std::string& id);  // NOT_FOUND
  // Newest first; ids < before_id when before_id is non-empty.
  absl::StatusOr<std::vector<v1::Campaign>> ListCampaigns(const std::string& team,
                                                          const std::vector<int>& states,
                                                          const std::string& before_id,
                                                          int limit);
  // Every queued or running campaign, in no particular order.
  absl::StatusOr<std::vector<v1::Campaign>> LoadNonFinalCampaigns();
  // Every campaign whose contract says recurring, oldest first.
  absl::StatusOr<std::vector<v1::Campaign>> ListRecurringCampaigns();

  // Jobs (the proto is the record; `ord` keeps the planner's topological order).
  absl::Status InsertJob(const v1::Job& job, int ord);
  absl::Status UpdateJob(const v1::Job& job);
  absl::StatusOr<std::vector<v1::Job>> JobsOfCampaign(const std::string& campaign_id);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);  // NOT_FOUND
  // Jobs of every campaign that is not final, in campaign then graph order.
  absl::StatusOr<std::vector<v1::Job>> LoadJobsOfNonFinalCampaigns();

  // Attempts / leases.
  absl::Status InsertAttempt(const AttemptRow& row);
  absl::Status ExtendAttempt(const std::string& lease_id, absl::Time expires_at);
  absl::Status EndAttempt(const std::string& lease_id, const std::string& state,
                          absl::Time ended_at, const std::string& error);
  absl::Status SetAttemptExternal(const std::string& lease_id, const std::string& launcher,
                                  const std::string& external_id);
  absl::StatusOr<std::vector<AttemptRow>> LoadActiveAttempts();
  absl::StatusOr<std::vector<AttemptRow>> AttemptsOfJob(const std::string& job_id);
  absl::StatusOr<std::optional<AttemptRow>> FindAttempt(const std::string& lease_id);

  // Events.
  absl::Status AppendEvent(const v1::Event& event);
  absl::StatusOr<std::vector<v1::Event>> ReadEvents(const std::string& campaign_id,
                                                    int64_t after_seq, int limit);
  absl::StatusOr<int64_t> MaxEventSeq(const std::string& campaign_id);
  // campaign id -> last event seq, for every campaign that is not final (one query at start).
  absl::StatusOr<std::map<std::string, int64_t>> LastEventSeqOfNonFinalCampaigns();

  // Agents.
  absl::Status UpsertAgent(const v1::Agent& agent);
  absl::StatusOr<std::optional<v1::Agent>> FindAgentByName(const std::string& name);
  absl::StatusOr<std::vector<v1::Agent>> ListAgents();

  // Cost tables.
  absl::Status InsertCostTable(const v1::CostTable& table);
  // Rewrites a stored table's record (its key columns never change). NOT_FOUND when absent.
  absl::Status UpdateCostTable(const v1::CostTable& table);
  // The newest table for a target fingerprint and parent architecture, or nullopt (always
  // for an empty architecture: an unknown parent reuses nothing).
  absl::StatusOr<std::optional<v1::CostTable>> FindCostTable(
      const std::string& fingerprint, const std::string& parent_architecture);
  absl::StatusOr<v1::CostTable> GetCostTable(const std::string& id);  // NOT_FOUND
  absl::StatusOr<std::vector<v1::CostTable>> ListCostTables(const std::string& device_kind);

  // Artifacts.
  absl::Status InsertArtifact(const v1::Artifact& artifact);
  absl::StatusOr<std::vector<v1::Artifact>> ListArtifacts(const std::string& campaign_id);
  absl::StatusOr<bool> ArtifactKnown(const std::string& digest);

  // API tokens. InsertToken: ALREADY_EXISTS when the id or hash is taken.
  absl::Status InsertToken(const TokenRow& row);
  absl::StatusOr<std::optional<TokenRow>> FindTokenByHash(const std::string& token_hash);
  absl::StatusOr<TokenRow> GetToken(const std::string& id);  // NOT_FOUND
  // Oldest first. Revoked tokens, and those expired at `now`, only with include_inactive.
  absl::StatusOr<std::vector<TokenRow>> ListTokens(bool include_inactive, absl::Time now);
  // Sets revoked_at unless already set (the first revocation time is kept) and returns the
  // row. NOT_FOUND for an unknown id.
  absl::StatusOr<TokenRow> RevokeToken(const std::string& id, absl::Time at);

  // Audit log. InsertAuditEvent returns the new row's id.
  absl::StatusOr<int64_t> InsertAuditEvent(const AuditRow& row);
  absl::StatusOr<std::vector<AuditRow>> ListAuditEvents(int limit);  // newest first

  // Ownership, for authorization. CampaignTeam: NOT_FOUND "campaign '<id>' not found" (the
  // same words as GetCampaign). TeamsOfArtifact: the teams of every campaign that recorded
  // the digest (empty when none did).
  absl::StatusOr<std::string> CampaignTeam(const std::string& campaign_id);
  absl::StatusOr<std::vector<std::string>> TeamsOfArtifact(const std::string& digest);

 private:
  CoordinatorStore(std::unique_ptr<Database> db, bool external_checkpoints)
      : db_(std::move(db)), external_checkpoints_(external_checkpoints) {}
  std::unique_ptr<Database> db_;
  bool external_checkpoints_;
};

// Copies the WAL back into the database from its own connection, so the fsyncs of a
// checkpoint happen off the request path. PASSIVE never blocks writers.
class Checkpointer {
 public:
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Open(const std::string& path);
  absl::Status RunOnce();
  static constexpr uintmax_t kTruncateAboveBytes = 64ull << 20;

 private:
  explicit Checkpointer(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  std::unique_ptr<Database> db_;
};

// Unix microseconds, the unit of every time column.
int64_t ToMicros(absl::Time t);
absl::Time FromMicros(int64_t us);

}  // namespace tailor::storage

#endif  // TAILOR_STORAGE_COORDINATOR_STORE_H_
