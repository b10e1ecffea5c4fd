#ifndef TAILOR_COORDINATOR_SCHEDULER_H_
#define TAILOR_COORDINATOR_SCHEDULER_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "absl/time/time.h"
#include "tailor/v1/agent.pb.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::coordinator {

// Whether an agent can run a job at all (device kind, job kind, GPUs, memory), ignoring load.
// Returns nullopt when it fits, else the reason it does not.
std::optional<std::string> AgentMismatch(const v1::AgentInfo& agent, const v1::Job& job);

// The runnable jobs, ordered by the scheduling policy: higher priority first, then older first
// (creation time, then id). Jobs in backoff wait in a separate set ordered by not_before until
// Promote() moves them over, so picking never scans past them.
class RunnableQueue {
 public:
  void Add(const v1::Job& job, absl::Time now);
  void Remove(const std::string& job_id);
  bool Contains(const std::string& job_id) const { return entries_.count(job_id) > 0; }
  // Moves jobs whose not_before has passed into the runnable order.
  void Promote(absl::Time now);

  // The best job this agent can run, or nullopt. `job_of` resolves ids to jobs.
  template <typename JobLookup>
  std::optional<std::string> Pick(const v1::AgentInfo& agent, const JobLookup& job_of) const {
    auto it = ready_.find(agent.device_kind());
    if (it == ready_.end()) return std::nullopt;
    for (const Key& key : it->second) {
      const v1::Job* job = job_of(std::get<2>(key));
      if (job != nullptr && !AgentMismatch(agent, *job)) return std::get<2>(key);
    }
    return std::nullopt;
  }

  // Launcher-placed jobs in policy order (the launcher starts them in this order).
  std::vector<std::string> LauncherJobs(size_t limit) const;

  size_t size() const { return entries_.size(); }
  // 1-based rank of a ready job within its device kind, 0 if absent or delayed.
  int Position(const std::string& job_id) const;
  // Earliest not_before among delayed jobs, if any.
  std::optional<absl::Time> NextPromotion() const;

 private:
  // (-priority, created_at micros, job id)
  using Key = std::tuple<int, int64_t, std::string>;
  struct Entry {
    std::string bucket;  // device kind, or "\x01launcher" for launcher placement
    Key key;
    bool delayed = false;
    absl::Time not_before;
  };
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::set<Key>> ready_;
  std::set<std::pair<absl::Time, std::string>> delayed_;
};

inline constexpr char kLauncherBucket[] = "\x01launcher";

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_SCHEDULER_H_
