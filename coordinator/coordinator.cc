// Campaign lifecycle: submission, planning into jobs, dependency release, completion,
// cancellation, recovery, and the commit path every change goes through.
#include "coordinator/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/contract_io.h"
#include "common/ids.h"
#include "common/job_output.h"
#include "common/proto_time.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "coordinator/contract_validation.h"
#include "coordinator/dataset_ingest.h"
#include "coordinator/parent_architecture.h"
#include "coordinator/planner.h"
#include "coordinator/relative_budget.h"
#include "coordinator/unit_of_work.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "methods/api/job_kinds.h"
#include "methods/registry.h"
#include "spdlog/spdlog.h"

namespace tailor::coordinator {

bool IsFinal(v1::CampaignState s) {
  return s == v1::CAMPAIGN_SUCCEEDED || s == v1::CAMPAIGN_FAILED || s == v1::CAMPAIGN_CANCELLED;
}

bool IsFinal(v1::JobState s) {
  return s == v1::JOB_SUCCEEDED || s == v1::JOB_FAILED || s == v1::JOB_CANCELLED ||
         s == v1::JOB_SKIPPED;
}

namespace {

bool IsDone(v1::JobState s) { return s == v1::JOB_SUCCEEDED || s == v1::JOB_SKIPPED; }

// Deterministic bytes of the defaulted contract: two submissions with the same request id are
// "the same" exactly when these hashes match (map fields are sorted by deterministic mode).
std::string ContractHash(const v1::DeploymentContract& contract) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    contract.SerializeToCodedStream(&coded);
  }
  return Sha256::Hex(bytes);
}

// A submission's announcement to the committer (GroupCommitter::Expect): made when the call
// starts, kept by queueing its unit, withdrawn when it ends without one (refused, idempotent
// repeat, or waiting for a submission with the same request id).
class ExpectedUnit {
 public:
  explicit ExpectedUnit(storage::GroupCommitter* committer) : committer_(committer) {
    if (committer_ != nullptr) committer_->Expect();
  }
  ~ExpectedUnit() { Drop(); }
  ExpectedUnit(const ExpectedUnit&) = delete;
  ExpectedUnit& operator=(const ExpectedUnit&) = delete;

  bool held() const { return committer_ != nullptr; }
  // An Enqueue(..., /*expected=*/true) settled it.
  void Kept() { committer_ = nullptr; }
  void Drop() {
    if (committer_ != nullptr) std::exchange(committer_, nullptr)->Unexpect();
  }

 private:
  storage::GroupCommitter* committer_;
};

// The campaign row of a new submission; its jobs come from the plan.
v1::Campaign NewCampaign(const ValidatedContract& validated, const std::string& request_id,
                         absl::Time now) {
  const v1::DeploymentContract& defaulted = validated.contract();
  v1::Campaign campaign;
  campaign.set_id(NewId("c", now));
  campaign.set_request_id(request_id);
  campaign.set_name(defaulted.name());
  campaign.set_team(defaulted.team());
  *campaign.mutable_contract() = defaulted;
  campaign.set_state(v1::CAMPAIGN_QUEUED);
  *campaign.mutable_created_at() = ToProto(now);
  *campaign.mutable_updated_at() = ToProto(now);
  campaign.set_fingerprint(TargetFingerprint(validated));
  return campaign;
}

bool PlansProfile(const std::vector<PlannedJob>& plan) {
  for (const PlannedJob& p : plan) {
    if (p.kind == methods::jobs::kProfile) return true;
  }
  return false;
}

// A PENDING job for a planned one; a profile job is SKIPPED when `reusable` already holds the
// table for the same target fingerprint.
v1::Job NewJob(const PlannedJob& p, const std::string& campaign_id,
               const std::optional<v1::CostTable>& reusable, absl::Time now) {
  v1::Job job;
  job.set_id(NewId("j", now));
  job.set_campaign_id(campaign_id);
  job.set_key(p.key);
  job.set_kind(p.kind);
  job.set_state(v1::JOB_PENDING);
  for (const auto& d : p.depends_on) job.add_depends_on(d);
  *job.mutable_resources() = p.resources;
  *job.mutable_created_at() = ToProto(now);
  *job.mutable_updated_at() = ToProto(now);
  if (p.kind == methods::jobs::kProfile && reusable.has_value()) {
    job.set_state(v1::JOB_SKIPPED);
    job.set_skipped_reason(absl::StrCat("cost table ", reusable->id(), " reused"));
    SetDetail(*job.mutable_output(), ProfileOfTable(*reusable));
    job.mutable_progress()->set_fraction(1.0);
  }
  return job;
}

// Why `table` cannot serve `contract`'s budgets relative to the parent ("" when it can, or
// the contract has none): a table stored before the parent was measured, or measured over
// too few requests for the contract's percentile.
std::string RelativeBudgetsUnresolvable(const v1::DeploymentContract& contract,
                                        const v1::CostTable& table) {
  if (!HasRelativeBudget(contract.budget())) return "";
  if (!table.has_parent_measured()) return "it holds no measurement of the parent";
  absl::StatusOr<v1::Budget> b =
      ResolveRelativeBudgets(contract.budget(), table.parent_measured());
  return b.ok() ? "" : std::string(b.status().message());
}

}  // namespace

absl::Status Coordinator::InsertSubmissionLocked(UnitOfWork& uow, const v1::Campaign& campaign,
                                                 const std::string& contract_hash,
                                                 const std::vector<PlannedJob>& plan,
                                                 const std::string& parent_architecture) {
  uow.InsertCampaign(campaign, contract_hash);
  std::optional<v1::CostTable> reusable;
  if (PlansProfile(plan)) {
    TAILOR_ASSIGN_OR_RETURN(reusable,
                            store_->FindCostTable(campaign.fingerprint(), parent_architecture));
  }
  std::string not_reused;
  if (reusable.has_value()) {
    not_reused = RelativeBudgetsUnresolvable(campaign.contract(), *reusable);
    if (!not_reused.empty()) {
      not_reused = absl::StrCat("cost table ", reusable->id(), " not reused for the budgets "
                                "relative to the parent: ", not_reused, "; profiling again");
      reusable.reset();
    }
  }
  for (const PlannedJob& p : plan) uow.InsertJob(NewJob(p, campaign.id(), reusable, uow.now()));
  const methods::Method* method = methods::BuiltinMethods().Find(campaign.contract().method());
  uow.Emit(campaign.id(), "", "campaign_submitted",
           absl::StrCat(method != nullptr ? method->name() : "", " campaign '", campaign.name(),
                        "' with ", plan.size(), " jobs"));
  for (const std::string& id : uow.JobIds(campaign.id())) {
    if (uow.JobView(id).state() == v1::JOB_SKIPPED) {
      uow.Emit(campaign.id(), id, "job_skipped", uow.JobView(id).skipped_reason());
    }
  }
  if (!not_reused.empty()) uow.Emit(campaign.id(), "", "cost_table_not_reused", not_reused);
  return absl::OkStatus();
}

Coordinator::Coordinator(storage::CoordinatorStore* store, storage::BlobStore* blobs,
                         Clock* clock, CoordinatorOptions options)
    : store_(store), blobs_(blobs), clock_(clock), options_(std::move(options)) {
  // Its own connection, so that a batch is written while `store` serves reads under mu_.
  absl::StatusOr<std::unique_ptr<storage::CoordinatorStore>> writer = store->OpenWriter();
  if (writer.ok()) {
    storage::GroupCommitter::Options committer_options;
    committer_options.linger = options_.commit_linger;
    committer_ = std::make_unique<storage::GroupCommitter>(*std::move(writer), committer_options);
  } else {
    committer_status_ = writer.status();
    spdlog::error("cannot open the commit connection, every write will fail: {}",
                  committer_status_.ToString());
  }
  completion_thread_ = std::thread([this] { RunCompletions(); });
}

absl::Status Coordinator::CommitWrite(storage::GroupCommitter::Write write) {
  if (committer_ == nullptr) return committer_status_;
  return committer_->Commit(std::move(write));
}

Coordinator::~Coordinator() {
  // Done callbacks run in queue order on the committer thread: once an empty unit's has run,
  // every submission queued before it has reached the completion thread, which answers them
  // before it stops (and may still commit, e.g. a lease for a parked agent). Not Commit(): it
  // may write the empty unit on this thread while the committer still hands over the last
  // batch.
  if (committer_ != nullptr) {
    absl::Notification flushed;
    committer_->Enqueue([](storage::CoordinatorStore&) { return absl::OkStatus(); },
                        [&flushed](absl::Status) { flushed.Notify(); });
    flushed.WaitForNotification();
  }
  {
    absl::MutexLock lock(&completions_mu_);
    stop_completions_ = true;
    completions_ready_.Signal();
  }
  completion_thread_.join();
  committer_.reset();
  // Answer every parked long-poll so no gRPC reactor is left without a Finish.
  std::list<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    waiters.swap(waiters_);
  }
  for (auto& w : waiters) w.done(absl::UnavailableError("coordinator shutting down"));
}

void Coordinator::SetLauncher(Launcher* launcher) {
  std::vector<LaunchedAttempt> held;
  {
    absl::MutexLock lock(&mu_);
    launcher_ = launcher;
    if (launcher == nullptr) return;
    const std::string holder = absl::StrCat("launcher:", launcher->name());
    for (const auto& [id, lease] : leases_) {
      if (lease.holder != holder || lease.cancelled) continue;
      held.push_back({lease.lease_id, lease.job_id, jobs_.at(lease.job_id).campaign_id(),
                      lease.attempt, lease.external_id});
    }
  }
  // Outside the lock: the launcher may call back (e.g. to fail an attempt it cannot find).
  launcher->Adopt(held);
}

absl::Duration Coordinator::BackoffFor(int attempt) const {
  absl::Duration d = options_.backoff_base;
  for (int i = 1; i < attempt && d < options_.backoff_max; ++i) d *= 2;
  return std::min(d, options_.backoff_max);
}

void Coordinator::UnitOfWork::Emit(const std::string& campaign_id, const std::string& job_id,
                                   const std::string& type, const std::string& message,
                                   const v1::JobProgress* progress) {
  c_->mu_.AssertHeld();
  auto seq_it = seqs_.find(campaign_id);
  if (seq_it == seqs_.end()) {
    seq_it = seqs_.emplace(campaign_id, c_->campaigns_.at(campaign_id).last_seq).first;
  }
  v1::Event e;
  e.set_seq(++seq_it->second);
  e.set_campaign_id(campaign_id);
  e.set_job_id(job_id);
  *e.mutable_time() = ToProto(now_);
  e.set_type(type);
  e.set_message(message);
  e.set_campaign_state(CampaignView(campaign_id).state());
  if (!job_id.empty()) e.set_job_state(JobView(job_id).state());
  if (progress != nullptr) *e.mutable_progress() = *progress;
  // Logged by CommitLocked once durable: a unit of work that fails to commit (e.g. a full
  // disk) must not leave "campaign_submitted" lines for campaigns that do not exist.
  events_.push_back(std::move(e));
}

absl::Status Coordinator::Persist(const UnitOfWork& uow, storage::CoordinatorStore& store) {
  // The committer's transaction (and this unit's savepoint in it) wraps these writes.
  if (uow.new_campaign_) {
    TAILOR_RETURN_IF_ERROR(store.InsertCampaign(uow.campaigns_.at(uow.new_campaign_->first.id()),
                                                uow.new_campaign_->second));
  }
  int ord = 0;
  for (const std::string& id : uow.new_job_ids_) {
    TAILOR_RETURN_IF_ERROR(store.InsertJob(uow.jobs_.at(id), ord++));
  }
  for (const auto& [id, campaign] : uow.campaigns_) {
    if (uow.new_campaign_ && uow.new_campaign_->first.id() == id) continue;
    TAILOR_RETURN_IF_ERROR(store.UpdateCampaign(campaign));
  }
  for (const auto& [id, job] : uow.jobs_) {
    if (std::find(uow.new_job_ids_.begin(), uow.new_job_ids_.end(), id) !=
        uow.new_job_ids_.end()) {
      continue;
    }
    TAILOR_RETURN_IF_ERROR(store.UpdateJob(job));
  }
  for (const auto& row : uow.new_attempts_) TAILOR_RETURN_IF_ERROR(store.InsertAttempt(row));
  for (const auto& e : uow.ended_attempts_) {
    TAILOR_RETURN_IF_ERROR(store.EndAttempt(e.lease_id, e.state, uow.now(), e.error));
  }
  for (const auto& [lease_id, t] : uow.extended_) {
    TAILOR_RETURN_IF_ERROR(store.ExtendAttempt(lease_id, t));
  }
  for (const auto& x : uow.externals_) {
    TAILOR_RETURN_IF_ERROR(store.SetAttemptExternal(x.lease_id, x.launcher, x.external_id));
  }
  for (const auto& t : uow.new_cost_tables_) TAILOR_RETURN_IF_ERROR(store.InsertCostTable(t));
  for (const auto& t : uow.cost_tables_) TAILOR_RETURN_IF_ERROR(store.UpdateCostTable(t));
  for (const auto& e : uow.events_) TAILOR_RETURN_IF_ERROR(store.AppendEvent(e));
  return absl::OkStatus();
}

void Coordinator::ObserveLocked(const UnitOfWork& uow) {
  for (const auto& e : uow.events_) {
    spdlog::info("campaign={} job={} {}: {}", e.campaign_id(),
                 e.job_id().empty() ? "-" : e.job_id(), e.type(), e.message());
  }
  if (observer_ == nullptr) return;
  // Before the mirroring, so `before` is still the pre-operation job.
  for (const auto& e : uow.events_) {
    const v1::Job* before = nullptr;
    const v1::Job* after = nullptr;
    if (!e.job_id().empty()) {
      auto b = jobs_.find(e.job_id());
      if (b != jobs_.end()) before = &b->second;
      auto a = uow.jobs_.find(e.job_id());
      after = a != uow.jobs_.end() ? &a->second : before;
    }
    observer_->OnEvent(e, before, after);
  }
}

void Coordinator::MirrorLocked(const UnitOfWork& uow) {
  if (uow.new_campaign_) {
    LiveCampaign live;
    live.campaign = uow.campaigns_.at(uow.new_campaign_->first.id());
    live.job_ids = uow.new_job_ids_;
    campaigns_[live.campaign.id()] = std::move(live);
  }
  for (auto& [id, campaign] : uow.campaigns_) campaigns_[id].campaign = campaign;
  for (const auto& [id, seq] : uow.seqs_) campaigns_[id].last_seq = seq;
  for (auto& [id, job] : uow.jobs_) {
    jobs_[id] = job;
    if (job.state() == v1::JOB_RUNNABLE) {
      queue_.Add(job, uow.now());
    } else {
      queue_.Remove(id);
    }
  }
  for (const auto& lease : uow.leases_added_) leases_[lease.lease_id] = lease;
  for (const auto& id : uow.leases_removed_) leases_.erase(id);
  for (const auto& id : uow.leases_cancelled_) {
    auto it = leases_.find(id);
    if (it != leases_.end()) it->second.cancelled = true;
  }
  for (const auto& [id, t] : uow.extended_) {
    auto it = leases_.find(id);
    if (it != leases_.end()) it->second.expires_at = t;
  }
  for (const auto& x : uow.externals_) {
    auto it = leases_.find(x.lease_id);
    if (it != leases_.end()) it->second.external_id = x.external_id;
  }
}

void Coordinator::EvictFinalLocked(const UnitOfWork& uow) {
  for (const auto& [id, campaign] : uow.campaigns_) {
    if (!IsFinal(campaign.state())) continue;
    auto it = campaigns_.find(id);
    if (it == campaigns_.end()) continue;
    for (const std::string& job_id : it->second.job_ids) {
      queue_.Remove(job_id);
      jobs_.erase(job_id);
    }
    campaigns_.erase(it);
  }
}

absl::Status Coordinator::CommitLocked(UnitOfWork& uow, Effects& fx) {
  // Waits under mu_: what this operation read is then still what it changed when the write
  // lands, and units queued before it (other submissions) go first, in the same batch.
  TAILOR_RETURN_IF_ERROR(CommitWrite(
      [&uow](storage::CoordinatorStore& store) { return Persist(uow, store); }));
  ApplyCommittedLocked(uow, fx);
  return absl::OkStatus();
}

void Coordinator::ApplyCommittedLocked(const UnitOfWork& uow, Effects& fx) {
  ObserveLocked(uow);
  // Durable; now mirror it in memory.
  MirrorLocked(uow);
  std::set<std::string> touched;
  for (const auto& e : uow.events_) touched.insert(e.campaign_id());
  for (const std::string& id : touched) NotifyLocked(id, fx);
  // Final campaigns leave memory; reads fall back to the database.
  EvictFinalLocked(uow);
}

void Coordinator::SetObserver(CoordinatorObserver* observer) {
  absl::MutexLock lock(&mu_);
  observer_ = observer;
}

void Coordinator::NotifyLocked(const std::string& campaign_id, Effects& fx) {
  absl::MutexLock lock(&sub_mu_);
  for (const auto& [token, sub] : subscribers_) {
    if (sub.first == campaign_id) fx.calls.push_back(sub.second);
  }
}

uint64_t Coordinator::Subscribe(const std::string& campaign_id, std::function<void()> fn) {
  absl::MutexLock lock(&sub_mu_);
  const uint64_t token = next_sub_++;
  subscribers_[token] = {campaign_id, std::move(fn)};
  return token;
}

void Coordinator::Unsubscribe(uint64_t token) {
  absl::MutexLock lock(&sub_mu_);
  subscribers_.erase(token);
}

void Coordinator::FailCampaignLocked(UnitOfWork& uow, const std::string& campaign_id,
                                     const std::string& error, const std::string& cause) {
  v1::Campaign& campaign = uow.Campaign(campaign_id);
  campaign.set_state(v1::CAMPAIGN_FAILED);
  campaign.set_error(error);
  *campaign.mutable_updated_at() = ToProto(uow.now());
  for (const std::string& id : uow.JobIds(campaign_id)) {
    if (IsFinal(uow.JobView(id).state())) continue;
    v1::Job& job = uow.Job(id);
    if (job.state() == v1::JOB_LEASED) {
      uow.EndAttempt(job.lease_id(), "cancelled", "campaign failed");
    }
    job.set_state(v1::JOB_CANCELLED);
    job.set_error(absl::StrCat("not run: ", cause));
    *job.mutable_updated_at() = ToProto(uow.now());
    uow.Emit(campaign_id, id, "job_cancelled", job.error());
  }
  uow.Emit(campaign_id, "", "campaign_failed", error);
}

void Coordinator::AdvanceCampaignLocked(UnitOfWork& uow, const std::string& campaign_id) {
  if (IsFinal(uow.CampaignView(campaign_id).state())) return;
  const std::vector<std::string>& ids = uow.JobIds(campaign_id);
  std::map<std::string, v1::JobState> by_key;
  std::string failed_key, failed_error;
  for (const std::string& id : ids) {
    const v1::Job& job = uow.JobView(id);
    by_key[job.key()] = job.state();
    if (job.state() == v1::JOB_FAILED && failed_key.empty()) {
      failed_key = job.key();
      failed_error = job.error();
    }
  }
  if (!failed_key.empty()) {
    FailCampaignLocked(uow, campaign_id,
                       absl::StrCat("job ", failed_key, " failed: ", failed_error),
                       absl::StrCat("job ", failed_key, " failed"));
    return;
  }
  bool all_done = true;
  bool started = false;
  for (const std::string& id : ids) {
    const v1::Job& view = uow.JobView(id);
    if (view.state() == v1::JOB_PENDING) {
      bool ready = true;
      for (const std::string& dep : view.depends_on()) ready = ready && IsDone(by_key[dep]);
      if (ready) {
        v1::Job& job = uow.Job(id);
        job.set_state(v1::JOB_RUNNABLE);
        *job.mutable_updated_at() = ToProto(uow.now());
        by_key[job.key()] = v1::JOB_RUNNABLE;
        uow.Emit(campaign_id, id, "job_runnable", "dependencies met");
      }
    }
    const v1::JobState state = uow.JobView(id).state();
    all_done = all_done && IsDone(state);
    started = started || state == v1::JOB_LEASED || state == v1::JOB_SUCCEEDED;
  }
  const v1::CampaignState current = uow.CampaignView(campaign_id).state();
  if (all_done) {
    v1::Campaign& campaign = uow.Campaign(campaign_id);
    campaign.set_state(v1::CAMPAIGN_SUCCEEDED);
    *campaign.mutable_updated_at() = ToProto(uow.now());
    uow.Emit(campaign_id, "", "campaign_succeeded", "all jobs done");
  } else if (started && current == v1::CAMPAIGN_QUEUED) {
    v1::Campaign& campaign = uow.Campaign(campaign_id);
    campaign.set_state(v1::CAMPAIGN_RUNNING);
    *campaign.mutable_updated_at() = ToProto(uow.now());
    uow.Emit(campaign_id, "", "campaign_running", "first job started");
  }
}

struct Coordinator::PendingSubmission {
  std::unique_ptr<UnitOfWork> uow;
  std::pair<std::string, std::string> key;  // (team, request id), in submitting_
  SubmitCallback done;
  absl::Status committed;  // the unit's outcome, set by the committer
  // The committer was idle: SubmitAsync writes the unit itself (GroupCommitter::TryClaim).
  bool claimed = false;
};

absl::StatusOr<std::pair<v1::Campaign, bool>> Coordinator::Submit(
    const v1::DeploymentContract& contract, const std::string& request_id,
    const v1::RecompressOrigin* origin) {
  absl::StatusOr<std::pair<v1::Campaign, bool>> result;
  absl::Notification answered;
  SubmitAsync(contract, request_id, [&](absl::StatusOr<std::pair<v1::Campaign, bool>> r) {
    result = std::move(r);
    answered.Notify();
  }, origin);
  answered.WaitForNotification();
  return result;
}

void Coordinator::SubmitAsync(const v1::DeploymentContract& contract,
                              const std::string& request_id_in, SubmitCallback done,
                              const v1::RecompressOrigin* origin) {
  // First: the committer lingers for this unit while it is validated and planned.
  ExpectedUnit expected(committer_.get());
  const absl::Time now = clock_->Now();
  std::string request_id = request_id_in;
  if (request_id.empty()) {
    request_id = NewId("req", now);
  } else if (!IsSafeToken(request_id, 128)) {
    return done(absl::InvalidArgumentError(
        "request_id: must be 1..128 characters of [A-Za-z0-9._:-]"));
  }
  // The wire limits first, whatever client sent it: nothing oversized or unknown is stored.
  if (absl::Status wire = CheckWireContract(contract); !wire.ok()) return done(wire);
  // Validated and defaulted once; everything below reads the stored, defaulted contract.
  absl::StatusOr<ValidatedContract> validated = ValidatedContract::From(contract);
  if (!validated.ok()) return done(validated.status());
  const v1::DeploymentContract& defaulted = validated->contract();
  // A parent named by digest must be here: jobs would otherwise fail long after the submit.
  const std::string& parent_digest = defaulted.parent().artifact_digest();
  if (!parent_digest.empty() && !blobs_->Exists(parent_digest)) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "parent.artifact_digest: no artifact sha256:", parent_digest,
        " in this coordinator's blob store; upload the parent first (admin upload), or set "
        "parent.path")));
  }
  // The datasets are read through and stored (outside mu_: a large corpus takes a while);
  // bad data is refused here, before anything about the campaign is written.
  if (defaulted.has_data()) {
    v1::DeploymentContract with_data = defaulted;
    if (absl::Status s = IngestDatasets(with_data, *blobs_); !s.ok()) return done(s);
    validated->SetDatasetDigests(with_data.data());
  }
  const std::string hash = ContractHash(defaulted);
  absl::StatusOr<std::vector<PlannedJob>> plan = PlanCampaign(*validated);
  if (plan.ok() && origin != nullptr) plan = WithDriftCheck(defaulted, *std::move(plan));
  if (!plan.ok()) return done(plan.status());
  // Reads the parent's config (a file, or an archive's first entry), so outside mu_.
  const std::string parent_architecture =
      PlansProfile(*plan) ? ResolveParentArchitecture(defaulted.parent(), *blobs_) : "";

  auto pending = std::make_shared<PendingSubmission>();
  pending->key = {defaulted.team(), request_id};
  pending->done = std::move(done);
  absl::StatusOr<std::optional<v1::Campaign>> existing;
  {
    absl::MutexLock lock(&mu_);
    while (submitting_.count(pending->key) > 0) {
      expected.Drop();  // the unit it waits for may be the one the committer lingers for
      submitted_.Wait(&mu_);
    }
    pending->uow = std::make_unique<UnitOfWork>(this, now);
    existing = StageSubmissionLocked(pending, *validated, request_id, hash, *plan,
                                     parent_architecture, expected.held(), origin);
    if (existing.ok() && !existing->has_value()) {
      if (!pending->claimed) expected.Kept();
      submitting_.insert(pending->key);
    }
  }
  if (!existing.ok()) return pending->done(existing.status());
  if (existing->has_value()) return pending->done(std::make_pair(**std::move(existing), false));
  if (pending->claimed) {
    // Alone: nothing to share a transaction with, so no thread switch either.
    expected.Drop();
    UnitOfWork& uow = *pending->uow;
    pending->committed = committer_->WriteClaimed(
        [&uow](storage::CoordinatorStore& store) { return Persist(uow, store); });
    FinishSubmissions({pending});
  }
  // Otherwise queued: the completion thread answers once the unit's batch committed, and
  // this thread serves the next calls meanwhile, whose units join the same or the next batch.
}

absl::StatusOr<std::optional<v1::Campaign>> Coordinator::StageSubmissionLocked(
    const std::shared_ptr<PendingSubmission>& pending, const ValidatedContract& validated,
    const std::string& request_id, const std::string& contract_hash,
    const std::vector<PlannedJob>& plan, const std::string& parent_architecture,
    bool expected, const v1::RecompressOrigin* origin) {
  const v1::DeploymentContract& defaulted = validated.contract();
  TAILOR_ASSIGN_OR_RETURN(auto existing, store_->FindByRequestId(defaulted.team(), request_id));
  if (existing.has_value()) {
    if (existing->second != contract_hash) {
      return absl::AlreadyExistsError(absl::StrCat(
          "request id '", request_id, "' was already used for campaign ", existing->first.id(),
          " with a different contract; use a new request id"));
    }
    TAILOR_ASSIGN_OR_RETURN(v1::Campaign c, CampaignWithJobsLocked(existing->first.id()));
    return std::optional<v1::Campaign>(std::move(c));
  }
  if (committer_ == nullptr) return committer_status_;
  UnitOfWork& uow = *pending->uow;
  v1::Campaign campaign = NewCampaign(validated, request_id, uow.now());
  if (origin != nullptr) *campaign.mutable_recompress() = *origin;
  TAILOR_RETURN_IF_ERROR(
      InsertSubmissionLocked(uow, campaign, contract_hash, plan, parent_architecture));
  AdvanceCampaignLocked(uow, campaign.id());
  // Claimed or queued under mu_, so it is ordered after every unit an earlier operation
  // queued. Nothing else can see this campaign before it is mirrored (FinishSubmissions), so
  // no later unit depends on this one.
  if (committer_->TryClaim()) {
    pending->claimed = true;
    return std::optional<v1::Campaign>();
  }
  committer_->Enqueue(
      [&uow](storage::CoordinatorStore& store) { return Persist(uow, store); },
      [this, pending](absl::Status committed) {
        pending->committed = std::move(committed);
        absl::MutexLock lock(&completions_mu_);
        completions_.push_back(pending);
        completions_ready_.Signal();
      },
      expected);
  return std::optional<v1::Campaign>();
}

void Coordinator::RunCompletions() {
  while (true) {
    std::vector<std::shared_ptr<PendingSubmission>> batch;
    {
      absl::MutexLock lock(&completions_mu_);
      while (completions_.empty() && !stop_completions_) completions_ready_.Wait(&completions_mu_);
      if (completions_.empty()) return;  // stopping, and nobody is owed an answer
      batch.swap(completions_);
    }
    FinishSubmissions(batch);
  }
}

void Coordinator::FinishSubmissions(
    const std::vector<std::shared_ptr<PendingSubmission>>& batch) {
  Effects fx;
  std::vector<absl::StatusOr<std::pair<v1::Campaign, bool>>> results;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& p : batch) {
      submitting_.erase(p->key);
      if (p->committed.ok()) ApplyCommittedLocked(*p->uow, fx);
    }
    submitted_.SignalAll();
    // Once for the whole batch: parked agents get the new jobs.
    DispatchLocked(fx);
    for (const auto& p : batch) {
      if (!p->committed.ok()) {
        results.push_back(p->committed);
        continue;
      }
      auto view = CampaignWithJobsLocked(p->uow->new_campaign_->first.id());
      if (!view.ok()) {
        results.push_back(view.status());
      } else {
        results.push_back(std::make_pair(*std::move(view), true));
      }
    }
  }
  fx.Run();
  for (size_t i = 0; i < batch.size(); ++i) batch[i]->done(std::move(results[i]));
}

absl::StatusOr<v1::Campaign> Coordinator::Cancel(const std::string& id,
                                                 const std::string& reason) {
  Effects fx;
  absl::StatusOr<v1::Campaign> result;
  {
    absl::MutexLock lock(&mu_);
    if (campaigns_.count(id) == 0) {
      TAILOR_ASSIGN_OR_RETURN(v1::Campaign stored, store_->GetCampaign(id));
      if (stored.state() == v1::CAMPAIGN_CANCELLED) return CampaignWithJobsLocked(id);
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", id, " already finished as ",
                       v1::CampaignState_Name(stored.state()), "; nothing to cancel"));
    }
    UnitOfWork uow(this, clock_->Now());
    CancelCampaignJobsLocked(uow, id, reason.empty() ? "cancelled by user" : reason, fx);
    TAILOR_RETURN_IF_ERROR(CommitLocked(uow, fx));
    result = CampaignWithJobsLocked(id);
  }
  fx.Run();
  return result;
}

void Coordinator::CancelCampaignJobsLocked(UnitOfWork& uow, const std::string& campaign_id,
                                           const std::string& reason, Effects& fx) {
  for (const std::string& id : uow.JobIds(campaign_id)) {
    if (IsFinal(uow.JobView(id).state())) continue;
    v1::Job& job = uow.Job(id);
    if (job.state() == v1::JOB_LEASED) {
      uow.EndAttempt(job.lease_id(), "cancelled", reason);
      auto lease = leases_.find(job.lease_id());
      if (lease != leases_.end() && launcher_ != nullptr &&
          lease->second.holder.rfind("launcher:", 0) == 0) {
        Launcher* launcher = launcher_;
        std::string lease_id = job.lease_id();
        fx.calls.push_back([launcher, lease_id] { launcher->Cancel(lease_id); });
      }
    }
    job.set_state(v1::JOB_CANCELLED);
    job.set_error(reason);
    *job.mutable_updated_at() = ToProto(uow.now());
    uow.Emit(campaign_id, id, "job_cancelled", reason);
  }
  v1::Campaign& campaign = uow.Campaign(campaign_id);
  campaign.set_state(v1::CAMPAIGN_CANCELLED);
  campaign.set_error(reason);
  *campaign.mutable_updated_at() = ToProto(uow.now());
  uow.Emit(campaign_id, "", "campaign_cancelled", reason);
}

absl::Status Coordinator::Recover() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::Agent> agents, store_->ListAgents());
  for (auto& a : agents) {
    agent_by_name_[a.info().name()] = a.id();
    agents_[a.id()] = std::move(a);
  }
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::Campaign> campaigns, store_->LoadNonFinalCampaigns());
  TAILOR_ASSIGN_OR_RETURN(auto last_seqs, store_->LastEventSeqOfNonFinalCampaigns());
  for (auto& c : campaigns) {
    LiveCampaign live;
    live.last_seq = last_seqs[c.id()];
    live.campaign = std::move(c);
    campaigns_[live.campaign.id()] = std::move(live);
  }
  TAILOR_ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, store_->LoadJobsOfNonFinalCampaigns());
  for (auto& j : jobs) {
    campaigns_[j.campaign_id()].job_ids.push_back(j.id());
    jobs_[j.id()] = std::move(j);
  }
  TAILOR_ASSIGN_OR_RETURN(std::vector<storage::AttemptRow> attempts,
                          store_->LoadActiveAttempts());
  // Holders could not heartbeat while we were down: give every live lease a fresh TTL rather
  // than expiring work that is probably still running.
  const absl::Time fresh = now + options_.lease_ttl;
  std::vector<storage::AttemptRow> stale;
  std::vector<storage::AttemptRow> extended;
  for (const auto& a : attempts) {
    LiveLease lease{a.lease_id, a.job_id, a.holder, a.attempt, std::max(a.expires_at, fresh),
                    false, a.external_id};
    auto job = jobs_.find(a.job_id);
    if (job == jobs_.end() || job->second.state() != v1::JOB_LEASED ||
        job->second.lease_id() != a.lease_id) {
      // The job moved on in the same transaction that should have ended this attempt; a
      // stale row can only come from an older binary. Close it.
      stale.push_back(a);
      continue;
    }
    extended.push_back(a);
    extended.back().expires_at = lease.expires_at;
    leases_[a.lease_id] = lease;
  }
  TAILOR_RETURN_IF_ERROR(CommitWrite([&](storage::CoordinatorStore& store) -> absl::Status {
    for (const auto& a : stale) {
      TAILOR_RETURN_IF_ERROR(store.EndAttempt(a.lease_id, "expired", now, "stale at recovery"));
    }
    for (const auto& a : extended) {
      TAILOR_RETURN_IF_ERROR(store.ExtendAttempt(a.lease_id, a.expires_at));
    }
    return absl::OkStatus();
  }));
  size_t runnable = 0;
  for (const auto& [id, job] : jobs_) {
    if (job.state() == v1::JOB_RUNNABLE) {
      queue_.Add(job, now);
      ++runnable;
    }
  }
  spdlog::info("recovered {} campaigns, {} jobs ({} runnable), {} leases, {} agents",
               campaigns_.size(), jobs_.size(), runnable, leases_.size(), agents_.size());
  return absl::OkStatus();
}

size_t Coordinator::RunnableCountForTest() {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

}  // namespace tailor::coordinator
