#ifndef TAILOR_CLI_WATCH_H_
#define TAILOR_CLI_WATCH_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli/env.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::cli {

// What a live (TTY) watch shows: the campaign's state and one row per job, rebuilt from
// events. Pure, so the drawn frame is unit-tested.
class WatchModel {
 public:
  // Takes job identities (and, unless `from_start`, their current state) from a snapshot.
  // With `from_start` the replayed events rebuild every job from PENDING, so counting
  // attempts from leases does not count the snapshot's attempts twice.
  void Reset(const v1::Campaign& campaign, bool from_start);
  // Adds jobs the model has not seen (it saw an event for an unknown job id).
  void AddMissingJobs(const v1::Campaign& campaign);
  void Apply(const v1::Event& event);
  // Final truth from the server once the stream ended.
  void SetFinal(const v1::Campaign& campaign);
  void set_notice(std::string notice) { notice_ = std::move(notice); }

  bool Knows(const std::string& job_id) const { return index_.count(job_id) > 0; }
  // The job's label for event lines: its kind (disambiguated), "-" for campaign events, the
  // id for a job the model does not know.
  std::string Label(const std::string& job_id) const;
  v1::CampaignState state() const { return state_; }
  const std::string& error() const { return error_; }

  // The frame: a header line, a blank line and the job table; every line fits `width`
  // (0 = unlimited) so redrawing by moving the cursor up stays exact.
  std::vector<std::string> Render(absl::Time now, size_t width) const;

 private:
  struct Row {
    std::string id;
    std::string label;
    v1::JobState state = v1::JOB_PENDING;
    int attempt = 0;
    bool has_progress = false;
    v1::JobProgress progress;
    std::string message;
  };
  void AddRow(const v1::Job& job, const std::string& label, bool with_state);

  std::string campaign_id_;
  std::string name_;
  v1::CampaignState state_ = v1::CAMPAIGN_STATE_UNSPECIFIED;
  absl::Time started_ = absl::InfinitePast();
  absl::Time ended_ = absl::InfiniteFuture();  // set when the campaign reached a final state
  std::string error_;
  std::string notice_;  // e.g. "reconnecting…" while the coordinator restarts
  std::vector<Row> rows_;
  std::map<std::string, size_t> index_;
};

struct WatchOptions {
  int64_t from_seq = 0;
  // Print nothing while following (submit --wait --json prints the final campaign instead).
  bool quiet = false;
};

// Follows WatchCampaign until the server ends the stream after the campaign's final state,
// reconnecting from the last seen seq while the coordinator restarts (up to
// env.reconnect_window). Not a TTY: one line per event (RenderEventLine). A TTY: the
// WatchModel frame redrawn in place. Returns 0 for SUCCEEDED, 1 for FAILED, CANCELLED or
// any error (printed to env.err).
int RunWatch(const CliEnv& env, const std::string& campaign_id, const WatchOptions& options);

}  // namespace tailor::cli

#endif  // TAILOR_CLI_WATCH_H_
