#include "coordinator/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"

namespace tailor::coordinator {

std::optional<std::string> AgentMismatch(const v1::AgentInfo& agent, const v1::Job& job) {
  const v1::ResourceSpec& r = job.resources();
  if (r.placement() == "launcher") return std::string("job is started by a launcher");
  if (agent.device_kind() != r.device_kind()) {
    return absl::StrCat("device kind '", agent.device_kind(), "' != '", r.device_kind(), "'");
  }
  // An agent that registered no engine (a scripted test agent) serves whatever is asked.
  if (!r.engine().empty() && !agent.engine().empty() &&
      (r.engine() != agent.engine() ||
       (!r.engine_version().empty() && r.engine_version() != agent.engine_version()))) {
    return absl::StrCat("agent serves ", agent.engine(), " ", agent.engine_version(),
                        ", the job needs ", r.engine(), " ", r.engine_version());
  }
  if (std::find(agent.job_kinds().begin(), agent.job_kinds().end(), job.kind()) ==
      agent.job_kinds().end()) {
    return absl::StrCat("agent does not run '", job.kind(), "' jobs");
  }
  if (r.gpus_per_node() > agent.gpus()) {
    return absl::StrCat("needs ", r.gpus_per_node(), " GPUs, agent has ", agent.gpus());
  }
  if (!r.gpu_type().empty() && r.gpu_type() != agent.gpu_type()) {
    return absl::StrCat("needs GPU type '", r.gpu_type(), "', agent has '", agent.gpu_type(),
                        "'");
  }
  if (r.memory_mib() > 0 && agent.memory_mib() > 0 && r.memory_mib() > agent.memory_mib()) {
    return absl::StrCat("needs ", r.memory_mib(), " MiB, agent has ", agent.memory_mib());
  }
  return std::nullopt;
}

void RunnableQueue::Add(const v1::Job& job, absl::Time now) {
  Remove(job.id());
  Entry e;
  e.bucket = job.resources().placement() == "launcher" ? std::string(kLauncherBucket)
                                                        : job.resources().device_kind();
  e.key = Key(-job.resources().priority(), absl::ToUnixMicros(FromProto(job.created_at())),
              job.id());
  e.not_before = job.has_not_before() ? FromProto(job.not_before()) : absl::InfinitePast();
  e.delayed = e.not_before > now;
  if (e.delayed) {
    delayed_.emplace(e.not_before, job.id());
  } else {
    ready_[e.bucket].insert(e.key);
  }
  entries_[job.id()] = std::move(e);
}

void RunnableQueue::Remove(const std::string& job_id) {
  auto it = entries_.find(job_id);
  if (it == entries_.end()) return;
  const Entry& e = it->second;
  if (e.delayed) {
    delayed_.erase({e.not_before, job_id});
  } else {
    auto bucket = ready_.find(e.bucket);
    if (bucket != ready_.end()) {
      bucket->second.erase(e.key);
      if (bucket->second.empty()) ready_.erase(bucket);
    }
  }
  entries_.erase(it);
}

void RunnableQueue::Promote(absl::Time now) {
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    const std::string id = delayed_.begin()->second;
    delayed_.erase(delayed_.begin());
    Entry& e = entries_[id];
    e.delayed = false;
    ready_[e.bucket].insert(e.key);
  }
}

std::vector<std::string> RunnableQueue::LauncherJobs(size_t limit) const {
  std::vector<std::string> out;
  auto it = ready_.find(kLauncherBucket);
  if (it == ready_.end()) return out;
  for (const Key& key : it->second) {
    if (out.size() >= limit) break;
    out.push_back(std::get<2>(key));
  }
  return out;
}

int RunnableQueue::Position(const std::string& job_id) const {
  auto it = entries_.find(job_id);
  if (it == entries_.end() || it->second.delayed) return 0;
  const auto& set = ready_.at(it->second.bucket);
  return static_cast<int>(std::distance(set.begin(), set.find(it->second.key))) + 1;
}

std::optional<absl::Time> RunnableQueue::NextPromotion() const {
  if (delayed_.empty()) return std::nullopt;
  return delayed_.begin()->first;
}

}  // namespace tailor::coordinator
