#ifndef TAILOR_COORDINATOR_COORDINATOR_H_
#define TAILOR_COORDINATOR_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/planner.h"
#include "coordinator/scheduler.h"
#include "storage/blob_store.h"
#include "storage/coordinator_store.h"
#include "storage/group_commit.h"
#include "tailor/v1/admin.pb.h"
#include "tailor/v1/agent.pb.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::coordinator {

struct CoordinatorOptions {
  absl::Duration lease_ttl = absl::Seconds(15);
  absl::Duration heartbeat_interval = absl::Seconds(2);
  // An agent without a heartbeat for this long is shown offline (its leases expire by TTL).
  absl::Duration agent_offline_after = absl::Seconds(10);
  // Retry delay after attempt n fails: min(backoff_base * 2^(n-1), backoff_max).
  absl::Duration backoff_base = absl::Seconds(2);
  absl::Duration backoff_max = absl::Minutes(5);
  absl::Duration max_poll_wait = absl::Seconds(30);
  int64_t max_upload_bytes = int64_t{16} << 30;
  int64_t max_result_bytes = 1 << 20;
  // A ListCampaigns page stops before it would pass this many encoded bytes (at least one
  // campaign per page): with summaries of a few KiB, far under the 16 MiB message limit.
  int64_t max_listing_bytes = 4 << 20;
  std::string data_dir;  // logs live under data_dir/logs
  // Agent jobs (measurements on the target: profile, verify, ...) and launcher jobs never run
  // at the same time. For a single host where the local launcher's workers share the CPU with
  // the profiler agent: a distillation running beside a verify job would inflate the latency
  // it measures. Off for clusters, where the launcher's jobs run on other machines.
  bool isolate_measurements = false;
  // How long a commit waits for submissions that are still being validated, so that they
  // share its transaction (storage/group_commit.h, "Lingering"). Zero: never waits.
  absl::Duration commit_linger = absl::Milliseconds(1);
};

// An active attempt held by a launcher, as the database knows it (for reconciliation after a
// coordinator restart).
struct LaunchedAttempt {
  std::string lease_id;
  std::string job_id;
  std::string campaign_id;
  int attempt = 0;
  // What RecordLaunch stored (e.g. the Slurm job id); empty when the coordinator stopped
  // between handing the attempt to the launcher and recording it.
  std::string external_id;
};

// Starts launcher-placed jobs (multi-rank workers, Slurm). The coordinator leases the job to
// the launcher ("launcher:<name>") before calling Launch; the launched workers then use that
// lease exactly like an agent would. Implementations must not call back into the Coordinator
// from Launch while it holds its lock: Launch is called without the lock held.
class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::string name() const = 0;
  virtual absl::Status Launch(const v1::AcquireJobResponse& assignment) = 0;
  virtual void Cancel(const std::string& lease_id) = 0;
  // Called once by SetLauncher with this launcher's attempts that are still active (after a
  // restart: those it launched before). Launchers that can find their work again (Slurm)
  // reconcile them; the default leaves them to their workers' heartbeats and lease expiry.
  virtual void Adopt(const std::vector<LaunchedAttempt>& attempts) { (void)attempts; }
};

// Sees every committed event, for metrics (job outcomes, retries, how long runnable jobs wait
// for a lease). Called with the coordinator's lock held, right after the transaction that
// wrote the event committed: implementations must be quick and must not call the Coordinator.
class CoordinatorObserver {
 public:
  virtual ~CoordinatorObserver() = default;
  // `before`: the event's job as it was before the operation (null for campaign events and
  // new jobs); `after`: as committed (null for campaign events).
  virtual void OnEvent(const v1::Event& event, const v1::Job* before, const v1::Job* after) = 0;
};

// Where a lease came from and what it may touch (for uploads and cost tables).
struct LeaseInfo {
  std::string lease_id;
  int attempt = 0;
  std::string job_id;
  std::string job_kind;
  std::string campaign_id;
  std::string fingerprint;
};

// Who makes a lease-bearing call, as the services established it from the request and its
// authenticated principal (docs/operations.md "Leases are bound to their holder").
struct LeaseCaller {
  // The request's agent id: an agent id from Register, or "launcher:<name>" for the ranks of a
  // launcher-held lease.
  std::string agent_id;
  // Set for agent tokens under token auth: the token's id, which must be the token the
  // holder registered with. Empty (auth off, admin tokens): the agent id alone decides.
  std::string token_id;
  // Whether `token_id` is the coordinator's own launcher token, the only token that may act
  // for "launcher:<name>".
  bool launcher_token = false;
};

// The coordinator's state machine: campaigns, their job graphs, leases, agents and the event
// log. Every change is committed to SQLite first and mirrored in memory second, so a crash at
// any point leaves the database consistent and Recover() rebuilds memory from it. Changes go
// through a group committer (storage/group_commit.h) on a second connection: concurrent
// submissions share transactions (docs/architecture.md "Group commit").
// Thread-safe; gRPC services are thin wrappers over these methods.
class Coordinator {
 public:
  Coordinator(storage::CoordinatorStore* store, storage::BlobStore* blobs, Clock* clock,
              CoordinatorOptions options);
  ~Coordinator();

  // Loads non-final campaigns, their jobs, active leases and agents. Leases get a fresh TTL:
  // their holders could not heartbeat while the coordinator was down.
  absl::Status Recover();
  // Attaches the launcher (nullptr detaches) and hands it, through Launcher::Adopt, the active
  // attempts held as "launcher:<name>" (after Recover: those launched before a restart).
  void SetLauncher(Launcher* launcher);
  // Attaches the metrics observer (nullptr detaches); it must outlive the Coordinator or be
  // detached first.
  void SetObserver(CoordinatorObserver* observer);

  // --- campaigns ---
  // Validates, plans and stores a campaign in one transaction. Idempotent by request id.
  // `origin` (Recompress): the campaign recompresses another, and starts with a drift check.
  absl::StatusOr<std::pair<v1::Campaign, bool>> Submit(
      const v1::DeploymentContract& contract, const std::string& request_id,
      const v1::RecompressOrigin* origin = nullptr);
  using SubmitCallback = std::function<void(absl::StatusOr<std::pair<v1::Campaign, bool>>)>;
  // Submit without blocking the caller on the commit: `done` is called exactly once, maybe
  // before this returns, and otherwise from the coordinator's completion thread once the
  // campaign is durable (never before). For gRPC handlers: their threads are few, and a
  // handler waiting for its commit would keep the next submissions from joining the batch.
  void SubmitAsync(const v1::DeploymentContract& contract, const std::string& request_id,
                   SubmitCallback done, const v1::RecompressOrigin* origin = nullptr);
  absl::StatusOr<v1::Campaign> GetCampaign(const std::string& id);
  absl::StatusOr<v1::ListCampaignsResponse> ListCampaigns(const v1::ListCampaignsRequest& req);
  absl::StatusOr<v1::Campaign> Cancel(const std::string& id, const std::string& reason);
  absl::StatusOr<v1::CampaignReport> GetReport(const std::string& id);
  // Events with seq > after_seq (at most limit); *final is set when the campaign is final and
  // the returned events reach its last event.
  absl::StatusOr<std::vector<v1::Event>> ReadEvents(const std::string& campaign_id,
                                                    int64_t after_seq, int limit, bool* final);
  // Calls `fn` (without locks held) whenever the campaign gets new events.
  uint64_t Subscribe(const std::string& campaign_id, std::function<void()> fn);
  void Unsubscribe(uint64_t token);

  // --- agents ---
  // `token_id`: the agent token the agent registers with; its leases then answer only to that
  // token (CheckLeaseHolder). Empty (auth off, admin tokens) keeps the previous binding.
  // `secret`: the agent's registration secret. A live agent's name is refused (ALREADY_EXISTS
  // naming it) to a registration that does not prove to be that agent: another agent token,
  // or a secret other than the one it registered with. An offline agent's name may be taken.
  absl::StatusOr<v1::RegisterAgentResponse> Register(const v1::AgentInfo& info,
                                                     const std::string& token_id = "",
                                                     const std::string& secret = "");
  // OK when `caller` is the holder `lease_id` was granted to, and when no such lease was ever
  // granted (the call itself then answers NOT_FOUND or FAILED_PRECONDITION). INVALID_ARGUMENT
  // naming `field` for an empty agent id with a known lease; PERMISSION_DENIED for anyone
  // else. A lease's holder
  // never changes, so a call checked here may go on without holding the lock.
  absl::Status CheckLeaseHolder(const std::string& lease_id, const LeaseCaller& caller,
                                absl::string_view field);
  // OK when `caller` may act as agent `caller.agent_id` (Heartbeat, AcquireJob): under token
  // auth an agent token acts only for the agents it registered, and only the launcher token
  // for "launcher:<name>". NOT_FOUND when the agent registered without a token (before token
  // auth was turned on): the agent then registers again, with its token.
  absl::Status CheckAgentCaller(const LeaseCaller& caller);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& req);
  using AcquireCallback = std::function<void(absl::StatusOr<v1::AcquireJobResponse>)>;
  // `done` is called exactly once, maybe before this returns: with a job, with assigned=false
  // when the wait runs out, or with an error. Returns a waiter id for CancelAcquire.
  uint64_t AcquireJob(const v1::AcquireJobRequest& req, AcquireCallback done);
  // True if the waiter was still waiting (its callback will never be called).
  bool CancelAcquire(uint64_t waiter_id);
  absl::StatusOr<v1::ReportProgressResponse> ReportProgress(const v1::ReportProgressRequest& req);
  absl::StatusOr<v1::CompleteJobResponse> CompleteJob(const v1::CompleteJobRequest& req);
  absl::StatusOr<v1::CostTable> PutCostTable(const v1::PutCostTableRequest& req);
  absl::StatusOr<LeaseInfo> CheckLease(const std::string& lease_id);
  // The assignment of an active lease, as AcquireJob returned it (for launcher-started ranks).
  absl::StatusOr<v1::AcquireJobResponse> GetAssignment(const std::string& lease_id);
  // Records an uploaded blob for the lease's job; a LeaseInfo without a lease id records an
  // admin upload, which belongs to no campaign.
  absl::StatusOr<v1::Artifact> RecordArtifact(const LeaseInfo& lease, const std::string& kind,
                                              const std::string& name,
                                              const storage::BlobInfo& blob);
  // --- launcher bookkeeping ---
  // Records where a launcher-held attempt runs (e.g. the Slurm job id) and what that system
  // says about it (state, reason; shown by `tailor queue` and `tailor status`). The id goes
  // to the attempt row and the job in one transaction, with a `job_launched` event the first
  // time and a `job_external_state` event when the state changes; a reason-only change updates
  // the job silently. FAILED_PRECONDITION when the lease is not an active launcher lease.
  absl::Status RecordLaunch(const std::string& lease_id, const std::string& external_id,
                            const std::string& state, const std::string& reason);

  // --- reads for users ---
  absl::StatusOr<v1::ListArtifactsResponse> ListArtifacts(const std::string& campaign_id);
  absl::StatusOr<v1::ListCostTablesResponse> ListCostTables(const std::string& device_kind);
  absl::StatusOr<v1::CostTable> GetCostTable(const v1::GetCostTableRequest& req);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);

  // --- admin ---
  absl::StatusOr<v1::ListQueueResponse> ListQueue(const v1::ListQueueRequest& req);
  absl::StatusOr<v1::ListAgentsResponse> ListAgents(const v1::ListAgentsRequest& req);
  absl::StatusOr<v1::Agent> DrainAgent(const v1::DrainAgentRequest& req);
  absl::StatusOr<v1::RecompressResponse> Recompress(const v1::RecompressRequest& req);
  // A finished campaign's record, deleted in one transaction (AdminService.DeleteCampaign);
  // FAILED_PRECONDITION for one still queued or running, NOT_FOUND for an unknown id.
  absl::StatusOr<v1::DeleteCampaignResponse> DeleteCampaign(const std::string& campaign_id);

  // Time-driven work: expire leases and waiters, promote backoffs, mark agents offline, hand
  // launcher jobs to the launcher. Called by the server's ticker thread; tests call it after
  // advancing a FakeClock.
  void Tick();

  storage::BlobStore* blobs() { return blobs_; }
  Clock* clock() { return clock_; }
  const CoordinatorOptions& options() const { return options_; }
  size_t RunnableCountForTest();

 private:
  struct LiveCampaign {
    v1::Campaign campaign;  // without jobs
    int64_t last_seq = 0;
    std::vector<std::string> job_ids;  // graph order
  };
  // Whether a live lease is held by a launcher (true) or by an agent (false), for
  // isolate_measurements.
  bool AnyLeaseHeldLocked(bool by_launcher) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK when a registration with `token_id` and `secret` may use `agent`'s name: the agent is
  // offline, or the registration proves to be that agent (Register).
  absl::Status CheckSameAgentLocked(const v1::Agent& agent, const std::string& token_id,
                                    const std::string& secret, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct LiveLease {
    std::string lease_id;
    std::string job_id;
    std::string holder;  // agent id or launcher:<name>
    int attempt = 0;
    absl::Time expires_at;
    bool cancelled = false;
    std::string external_id;  // launcher's id for the attempt (RecordLaunch)
  };
  struct Waiter {
    uint64_t id;
    std::string agent_id;
    absl::Time deadline;
    AcquireCallback done;
  };
  class UnitOfWork;
  // Deferred side effects, run after the lock is released.
  struct Effects {
    std::vector<std::function<void()>> calls;
    void Run() {
      for (auto& c : calls) c();
    }
  };

  // The new campaign, its planned jobs and their first events, into `uow`.
  // A profile job is skipped when a table for the campaign's fingerprint and
  // `parent_architecture` (ResolveParentArchitecture; empty: none) is stored.
  absl::Status InsertSubmissionLocked(UnitOfWork& uow, const v1::Campaign& campaign,
                                      const std::string& contract_hash,
                                      const std::vector<PlannedJob>& plan,
                                      const std::string& parent_architecture)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A submission whose unit is queued for commit; answered by the completion thread.
  struct PendingSubmission;
  // Validated and planned submission into `pending`'s unit of work, queued for commit
  // (`expected`: it keeps the call's announcement, GroupCommitter::Expect). Returns the
  // existing campaign instead when `request_id` was already used with the same contract.
  absl::StatusOr<std::optional<v1::Campaign>> StageSubmissionLocked(
      const std::shared_ptr<PendingSubmission>& pending, const ValidatedContract& validated,
      const std::string& request_id, const std::string& contract_hash,
      const std::vector<PlannedJob>& plan, const std::string& parent_architecture,
      bool expected, const v1::RecompressOrigin* origin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The completion thread: mirrors committed submissions and answers their callers.
  void RunCompletions() ABSL_LOCKS_EXCLUDED(mu_, completions_mu_);
  void FinishSubmissions(const std::vector<std::shared_ptr<PendingSubmission>>& batch)
      ABSL_LOCKS_EXCLUDED(mu_, completions_mu_);
  // Writes `uow` (waiting, under mu_, for the batch that carries it), then mirrors it in
  // memory and notifies watchers.
  absl::Status CommitLocked(UnitOfWork& uow, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The in-memory half of CommitLocked, once `uow` is durable.
  void ApplyCommittedLocked(const UnitOfWork& uow, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every row of `uow`, through `store` (the committer's connection, inside its transaction).
  static absl::Status Persist(const UnitOfWork& uow, storage::CoordinatorStore& store);
  // Writes outside a UnitOfWork through the committer. Callers hold mu_, which orders their
  // write after every unit queued before.
  absl::Status CommitWrite(storage::GroupCommitter::Write write);
  // Logs the events and tells the observer, before the mirroring changes `jobs_`.
  void ObserveLocked(const UnitOfWork& uow) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MirrorLocked(const UnitOfWork& uow) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Final campaigns leave memory; reads fall back to the database.
  void EvictFinalLocked(const UnitOfWork& uow) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Dependency release, campaign completion/failure after job changes in `uow`.
  // After the student's verify succeeded: compares its measurement with the prediction of the
  // campaign's cost table (cost_table_check.h), records the check on the campaign and, when
  // the table is suspect, marks it so it is never reused.
  void CheckCostTableLocked(UnitOfWork& uow, const v1::Job& verify)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After the student's distill job succeeded with data.eval: judges the contract's quality
  // floors (quality_check.h), records the check on the campaign and fails the campaign when a
  // floor is missed (the student's artifacts are already stored).
  void CheckQualityLocked(UnitOfWork& uow, const v1::Job& distill)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails the campaign with `error`: every job not yet final is cancelled ("not run: ...").
  void FailCampaignLocked(UnitOfWork& uow, const std::string& campaign_id,
                          const std::string& error, const std::string& cause)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a recompression's drift check succeeded: carries the source's cost table over (its
  // profile job skipped) when it still holds, and skips the compression when the source's
  // student still meets every budget (coordinator/drift.cc).
  void ApplyDriftCheckLocked(UnitOfWork& uow, const v1::Job& drift_check)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The drift check's assignment: the source's table and its student's producing job output.
  void AddDriftCheckInputsLocked(const v1::Campaign& campaign, v1::AcquireJobResponse& resp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdvanceCampaignLocked(UnitOfWork& uow, const std::string& campaign_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailJobAttemptLocked(UnitOfWork& uow, const std::string& job_id, const std::string& error,
                            bool retryable, const std::string& attempt_state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelCampaignJobsLocked(UnitOfWork& uow, const std::string& campaign_id,
                                const std::string& reason, Effects& fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::AcquireJobResponse> LeaseJobLocked(const std::string& job_id,
                                                        const std::string& holder,
                                                        Effects& fx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::AcquireJobResponse AssignmentLocked(const LiveLease& lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<std::string> PickForAgentLocked(const std::string& agent_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DispatchLocked(Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLeasesLocked(Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int ActiveLeasesOfLocked(const std::string& holder) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string WaitingReasonLocked(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::Campaign ViewLocked(const v1::Campaign& stored, std::vector<v1::Job> jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a target's measurements are out of date ("" when current): the newest-registered
  // agent for its device kind and engine runs another engine version.
  std::string StaleReasonLocked(const v1::Target& target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkStaleLocked(v1::CostTable& table) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::Campaign> CampaignWithJobsLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The contract `job` of `campaign` is handed: its budgets relative to the parent resolved
  // (coordinator/relative_budget.h).
  v1::DeploymentContract ContractForJobLocked(const v1::Campaign& campaign, const v1::Job& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifyLocked(const std::string& campaign_id, Effects& fx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration BackoffFor(int attempt) const;

  // Not thread-safe (storage/coordinator_store.h): every query runs under mu_. Writes go
  // through committer_, on its own connection.
  storage::CoordinatorStore* const store_ ABSL_PT_GUARDED_BY(mu_);
  // Thread-safe. Null only when its connection could not be opened: then every write fails
  // with committer_status_ (Recover does, so a server refuses to start).
  std::unique_ptr<storage::GroupCommitter> committer_;
  absl::Status committer_status_;
  storage::BlobStore* const blobs_;
  Clock* const clock_;
  const CoordinatorOptions options_;

  absl::Mutex mu_;
  Launcher* launcher_ ABSL_GUARDED_BY(mu_) = nullptr;
  CoordinatorObserver* observer_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<std::string, LiveCampaign> campaigns_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, LiveLease> leases_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Agent> agents_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> agent_by_name_ ABSL_GUARDED_BY(mu_);
  RunnableQueue queue_ ABSL_GUARDED_BY(mu_);
  std::list<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // (team, request id) of submissions queued for commit and not yet mirrored: a second
  // submission with the same id waits for the first to land or fail (Submit), since the
  // database cannot show it a campaign that is not committed yet.
  std::set<std::pair<std::string, std::string>> submitting_ ABSL_GUARDED_BY(mu_);
  absl::CondVar submitted_;

  // Submissions whose batch ended, for the completion thread. Never held with mu_: the
  // committer fills it while operations holding mu_ wait for that committer.
  absl::Mutex completions_mu_;
  absl::CondVar completions_ready_;
  std::vector<std::shared_ptr<PendingSubmission>> completions_ ABSL_GUARDED_BY(completions_mu_);
  bool stop_completions_ ABSL_GUARDED_BY(completions_mu_) = false;
  std::thread completion_thread_;
  uint64_t next_waiter_id_ ABSL_GUARDED_BY(mu_) = 1;

  absl::Mutex sub_mu_;
  std::map<uint64_t, std::pair<std::string, std::function<void()>>> subscribers_
      ABSL_GUARDED_BY(sub_mu_);
  uint64_t next_sub_ ABSL_GUARDED_BY(sub_mu_) = 1;
};

// What a campaign listing carries of a campaign: enough for a table row (the contract's name,
// team, method and target; each job's identity, state, attempt and progress without metrics),
// never job results, the report or the contract's sections, so that no stored row can push a
// listing past the message limit (GetCampaign has the rest).
v1::Campaign ListingSummary(v1::Campaign campaign);

bool IsFinal(v1::CampaignState state);
bool IsFinal(v1::JobState state);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_COORDINATOR_H_
