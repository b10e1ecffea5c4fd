#ifndef TAILOR_COORDINATOR_UNIT_OF_WORK_H_
#define TAILOR_COORDINATOR_UNIT_OF_WORK_H_

// Private to the coordinator core (included by its .cc files only).

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "coordinator/coordinator.h"
#include "storage/coordinator_store.h"

namespace tailor::coordinator {

// Staged changes of one coordinator operation. Reads go through it (copy-on-write from the
// live state), writes stay in it until CommitLocked writes them in one transaction and only
// then applies them to memory. A failed commit therefore leaves memory untouched.
//
// A UnitOfWork lives inside one operation of its coordinator, under c->mu_, which the
// constructor requires. Clang's analysis cannot tell that `c_` is the `this` of the *Locked
// methods that use it (it would see `uow.c_->mu_` where they hold `mu_`), so the accessors that
// read the live state assert the lock at run time instead of requiring it.
class Coordinator::UnitOfWork {
 public:
  UnitOfWork(Coordinator* c, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_)
      : c_(c), now_(now) {}

  absl::Time now() const { return now_; }

  // Read-only views do not mark a row dirty; only Job()/Campaign() (mutable) do, so an
  // operation rewrites exactly the rows it changed.
  const v1::Job& JobView(const std::string& id) {
    c_->mu_.AssertHeld();
    auto it = jobs_.find(id);
    return it != jobs_.end() ? it->second : c_->jobs_.at(id);
  }
  const v1::Campaign& CampaignView(const std::string& id) {
    c_->mu_.AssertHeld();
    auto it = campaigns_.find(id);
    return it != campaigns_.end() ? it->second : c_->campaigns_.at(id).campaign;
  }
  v1::Job& Job(const std::string& id) {
    c_->mu_.AssertHeld();
    auto it = jobs_.find(id);
    if (it != jobs_.end()) return it->second;
    return jobs_.emplace(id, c_->jobs_.at(id)).first->second;
  }
  bool HasJob(const std::string& id) {
    c_->mu_.AssertHeld();
    return jobs_.count(id) > 0 || c_->jobs_.count(id) > 0;
  }
  v1::Campaign& Campaign(const std::string& id) {
    c_->mu_.AssertHeld();
    auto it = campaigns_.find(id);
    if (it != campaigns_.end()) return it->second;
    return campaigns_.emplace(id, c_->campaigns_.at(id).campaign).first->second;
  }
  // Job ids of a campaign in graph order.
  const std::vector<std::string>& JobIds(const std::string& campaign_id) {
    c_->mu_.AssertHeld();
    if (new_campaign_ && new_campaign_->first.id() == campaign_id) return new_job_ids_;
    return c_->campaigns_.at(campaign_id).job_ids;
  }

  void InsertCampaign(const v1::Campaign& campaign, const std::string& contract_hash) {
    new_campaign_ = std::make_pair(campaign, contract_hash);
    campaigns_[campaign.id()] = campaign;
    seqs_[campaign.id()] = 0;
  }
  void InsertJob(const v1::Job& job) {
    new_job_ids_.push_back(job.id());
    jobs_[job.id()] = job;
  }

  void Emit(const std::string& campaign_id, const std::string& job_id, const std::string& type,
            const std::string& message, const v1::JobProgress* progress = nullptr);

  void AddAttempt(const storage::AttemptRow& row, const LiveLease& lease) {
    new_attempts_.push_back(row);
    leases_added_.push_back(lease);
  }
  void EndAttempt(const std::string& lease_id, const std::string& state,
                  const std::string& error) {
    ended_attempts_.push_back({lease_id, state, error});
    if (state == "cancelled") {
      leases_cancelled_.push_back(lease_id);
    } else {
      leases_removed_.push_back(lease_id);
    }
  }
  void ExtendLease(const std::string& lease_id, absl::Time expires_at) {
    extended_.push_back({lease_id, expires_at});
  }
  // A stored cost table rewritten (e.g. marked suspect).
  void UpdateCostTable(const v1::CostTable& table) { cost_tables_.push_back(table); }
  void InsertCostTable(const v1::CostTable& table) { new_cost_tables_.push_back(table); }
  void SetAttemptExternal(const std::string& lease_id, const std::string& launcher,
                          const std::string& external_id) {
    externals_.push_back({lease_id, launcher, external_id});
  }

 private:
  friend class Coordinator;
  struct Ended {
    std::string lease_id, state, error;
  };
  struct External {
    std::string lease_id, launcher, external_id;
  };

  Coordinator* c_;
  absl::Time now_;
  std::optional<std::pair<v1::Campaign, std::string>> new_campaign_;
  std::vector<std::string> new_job_ids_;
  std::map<std::string, v1::Job> jobs_;
  std::map<std::string, v1::Campaign> campaigns_;
  std::vector<v1::Event> events_;
  std::map<std::string, int64_t> seqs_;
  std::vector<storage::AttemptRow> new_attempts_;
  std::vector<LiveLease> leases_added_;
  std::vector<Ended> ended_attempts_;
  std::vector<std::string> leases_removed_;
  std::vector<std::string> leases_cancelled_;
  std::vector<std::pair<std::string, absl::Time>> extended_;
  std::vector<External> externals_;
  std::vector<v1::CostTable> cost_tables_;
  std::vector<v1::CostTable> new_cost_tables_;
};

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_UNIT_OF_WORK_H_
