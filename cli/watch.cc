#include "cli/watch.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/format.h"
#include "cli/render.h"
#include "cli/table.h"
#include "common/grpc_util.h"
#include "common/proto_time.h"

namespace tailor::cli {
namespace {

constexpr int kBarWidth = 22;
// Progress events can arrive hundreds per second while replaying; state changes always
// redraw, progress at most this often.
constexpr absl::Duration kRedrawInterval = absl::Milliseconds(100);

bool HasTime(const google::protobuf::Timestamp& ts) { return ts.seconds() != 0 || ts.nanos() != 0; }

}  // namespace

void WatchModel::AddRow(const v1::Job& job, const std::string& label, bool with_state) {
  Row row;
  row.id = job.id();
  row.label = label;
  if (with_state) {
    row.state = job.state();
    row.attempt = job.attempt();
    row.has_progress = job.has_progress();
    row.progress = job.progress();
    row.message = JobDetail(job);
  }
  index_[row.id] = rows_.size();
  rows_.push_back(std::move(row));
}

void WatchModel::Reset(const v1::Campaign& campaign, bool from_start) {
  campaign_id_ = campaign.id();
  name_ = campaign.name();
  state_ = from_start ? v1::CAMPAIGN_QUEUED : campaign.state();
  started_ = HasTime(campaign.created_at()) ? FromProto(campaign.created_at()) : absl::InfinitePast();
  ended_ = (!from_start && IsFinal(campaign.state()) && HasTime(campaign.updated_at()))
               ? FromProto(campaign.updated_at())
               : absl::InfiniteFuture();
  error_ = from_start ? "" : campaign.error();
  rows_.clear();
  index_.clear();
  const std::vector<std::string> labels = JobLabels(campaign);
  for (int i = 0; i < campaign.jobs_size(); ++i) AddRow(campaign.jobs(i), labels[i], !from_start);
}

void WatchModel::AddMissingJobs(const v1::Campaign& campaign) {
  const std::vector<std::string> labels = JobLabels(campaign);
  for (int i = 0; i < campaign.jobs_size(); ++i) {
    if (!Knows(campaign.jobs(i).id())) AddRow(campaign.jobs(i), labels[i], true);
  }
}

void WatchModel::Apply(const v1::Event& e) {
  if (e.campaign_state() != v1::CAMPAIGN_STATE_UNSPECIFIED) {
    state_ = e.campaign_state();
    if (IsFinal(state_) && HasTime(e.time())) ended_ = FromProto(e.time());
  }
  if (e.job_id().empty()) return;
  auto it = index_.find(e.job_id());
  if (it == index_.end()) return;
  Row& row = rows_[it->second];
  if (e.job_state() != v1::JOB_STATE_UNSPECIFIED) {
    // Every lease starts an attempt, so attempts are counted from transitions into LEASED.
    if (e.job_state() == v1::JOB_LEASED && row.state != v1::JOB_LEASED) ++row.attempt;
    row.state = e.job_state();
  }
  if (e.has_progress()) {
    row.has_progress = true;
    row.progress = e.progress();
  }
  if (!e.message().empty()) {
    row.message = e.message();
  } else if (e.has_progress() && !e.progress().message().empty()) {
    row.message = e.progress().message();
  }
}

void WatchModel::SetFinal(const v1::Campaign& campaign) {
  state_ = campaign.state();
  error_ = campaign.error();
  if (IsFinal(state_) && HasTime(campaign.updated_at())) ended_ = FromProto(campaign.updated_at());
  AddMissingJobs(campaign);
  for (const v1::Job& job : campaign.jobs()) {
    Row& row = rows_[index_[job.id()]];
    row.state = job.state();
    row.attempt = job.attempt();
    row.has_progress = job.has_progress();
    row.progress = job.progress();
    row.message = JobDetail(job);
  }
}

std::string WatchModel::Label(const std::string& job_id) const {
  if (job_id.empty()) return "-";
  auto it = index_.find(job_id);
  return it == index_.end() ? job_id : rows_[it->second].label;
}

std::vector<std::string> WatchModel::Render(absl::Time now, size_t width) const {
  std::string header = absl::StrCat("campaign ", campaign_id_);
  if (!name_.empty()) absl::StrAppend(&header, " (", name_, ")");
  absl::StrAppend(&header, "  ", CampaignStateName(state_));
  if (started_ != absl::InfinitePast()) {
    const absl::Time end = ended_ != absl::InfiniteFuture() ? ended_ : now;
    absl::StrAppend(&header, "  elapsed ", FormatElapsed(end - started_));
  }
  if (!notice_.empty()) absl::StrAppend(&header, "  ", notice_);

  Table table({{"JOB"},
               {"STATE"},
               {"ATTEMPT", Align::kRight},
               {"PROGRESS"},
               {"STEP", Align::kRight},
               {"MESSAGE", Align::kLeft, 0, true}});
  for (const Row& row : rows_) {
    std::string progress;
    if (row.has_progress || row.state == v1::JOB_SUCCEEDED) {
      const double f = row.state == v1::JOB_SUCCEEDED ? 1.0 : row.progress.fraction();
      progress = absl::StrFormat("%s %4s", ProgressBar(f, kBarWidth), FormatPercent(f));
    }
    const std::string step =
        row.progress.total_steps() > 0
            ? absl::StrCat(row.progress.step(), "/", row.progress.total_steps())
            : "";
    table.AddRow({row.label, JobStateName(row.state), absl::StrCat(row.attempt), progress, step,
                  row.message});
  }
  // One column short of the terminal: a line exactly as wide as the screen wraps on some
  // terminals, which would break moving the cursor back over the frame.
  const size_t fit = width > 1 ? width - 1 : 0;
  std::vector<std::string> lines = {header, ""};
  if (!rows_.empty()) {
    const std::string rendered = table.Render(fit);
    size_t start = 0;
    for (size_t nl; (nl = rendered.find('\n', start)) != std::string::npos; start = nl + 1) {
      lines.push_back(rendered.substr(start, nl - start));
    }
  }
  if (fit > 0) {
    for (std::string& line : lines) line = TruncateToWidth(line, fit);
  }
  return lines;
}

namespace {

// Draws frames in place: back to the first line of the previous frame, clear to the end of
// the screen, write the new frame.
class Screen {
 public:
  explicit Screen(std::ostream& out) : out_(out) {}
  void Draw(const std::vector<std::string>& frame) {
    std::string s;
    if (drawn_ > 0) absl::StrAppend(&s, "\x1b[", drawn_, "F");
    s += "\x1b[J";
    for (const std::string& line : frame) absl::StrAppend(&s, line, "\n");
    out_ << s << std::flush;
    drawn_ = frame.size();
  }

 private:
  std::ostream& out_;
  size_t drawn_ = 0;
};

class Watcher {
 public:
  Watcher(const CliEnv& env, std::string id, const WatchOptions& options)
      : env_(env), id_(std::move(id)), options_(options), screen_(*env.out) {}

  int Run();

 private:
  bool live() const { return env_.out_is_tty && !options_.quiet; }
  void Show(const v1::Event& event);
  void Redraw(bool force);
  // Reads one stream to its end; returns its final status.
  grpc::Status Follow(int64_t* last_seq, Reconnector* reconnector);

  const CliEnv& env_;
  const std::string id_;
  const WatchOptions options_;
  WatchModel model_;
  Screen screen_;
  absl::Time last_draw_ = absl::InfinitePast();
};

void Watcher::Redraw(bool force) {
  const absl::Time now = env_.clock->Now();
  if (!force && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  screen_.Draw(model_.Render(now, env_.width));
}

void Watcher::Show(const v1::Event& event) {
  if (options_.quiet) return;
  if (live()) {
    Redraw(/*force=*/!event.has_progress());
  } else {
    *env_.out << RenderEventLine(event, model_.Label(event.job_id()), env_.tz) << "\n"
              << std::flush;
  }
}

grpc::Status Watcher::Follow(int64_t* last_seq, Reconnector* reconnector) {
  auto ctx = env_.StreamContext();
  v1::WatchCampaignRequest request;
  request.set_campaign_id(id_);
  request.set_from_seq(*last_seq);
  auto reader = env_.campaigns->WatchCampaign(ctx.get(), request);
  v1::Event event;
  while (reader->Read(&event)) {
    // The server replays strictly after from_seq; the guard keeps a reconnect from ever
    // showing an event twice even if it did not.
    if (event.seq() <= *last_seq) continue;
    *last_seq = event.seq();
    if (reconnector->in_outage()) model_.set_notice("");
    reconnector->Progress();
    if (!event.job_id().empty() && !model_.Knows(event.job_id())) {
      if (auto c = FetchCampaign(env_, id_); c.ok()) model_.AddMissingJobs(*c);
    }
    model_.Apply(event);
    Show(event);
    if (!env_.out->good()) {
      // Nobody reads our output any more (e.g. `tailor watch ID | head` ended): stop
      // instead of following a stream that may last for hours.
      ctx->TryCancel();
      (void)reader->Finish();
      return grpc::Status(grpc::StatusCode::ABORTED, "standard output was closed");
    }
  }
  return reader->Finish();
}

int Watcher::Run() {
  absl::StatusOr<v1::Campaign> initial = FetchCampaign(env_, id_);
  if (!initial.ok()) {
    return ReportError(*env_.err, absl::StrCat("cannot watch campaign ", id_), initial.status(),
                       env_.address);
  }
  model_.Reset(*initial, options_.from_seq == 0);
  if (live()) Redraw(true);
  int64_t last_seq = options_.from_seq;
  Reconnector reconnector(env_);
  while (true) {
    const grpc::Status status = Follow(&last_seq, &reconnector);
    absl::Status broken = FromGrpcStatus(status);
    if (status.ok()) {
      if (IsFinal(model_.state())) break;
      // Ended without a final event (e.g. the server shut down cleanly): check, and follow
      // on if the campaign is still going.
      absl::StatusOr<v1::Campaign> c = FetchCampaign(env_, id_);
      if (c.ok() && IsFinal(c->state())) break;
      broken = absl::UnavailableError("the event stream ended before the campaign did");
    } else if (status.error_code() == grpc::StatusCode::ABORTED && !env_.out->good()) {
      return kExitFailure;
    } else if (status.error_code() != grpc::StatusCode::UNAVAILABLE) {
      return ReportError(*env_.err, absl::StrCat("watching campaign ", id_, " failed"), broken,
                         env_.address);
    }
    if (!reconnector.in_outage()) {
      if (live()) {
        model_.set_notice("(coordinator unavailable, reconnecting…)");
        Redraw(true);
      } else {
        *env_.err << "tailor: lost the event stream from " << env_.address << " ("
                  << broken.message() << "); reconnecting after event " << last_seq << "\n";
      }
    }
    if (!reconnector.Wait()) {
      return ReportError(*env_.err,
                         absl::StrCat("gave up watching campaign ", id_, " after ",
                                      absl::FormatDuration(env_.reconnect_window),
                                      " without the coordinator"),
                         broken, env_.address);
    }
  }
  if (absl::StatusOr<v1::Campaign> final_campaign = FetchCampaign(env_, id_);
      final_campaign.ok()) {
    model_.SetFinal(*final_campaign);
  }
  model_.set_notice("");
  if (live()) Redraw(true);
  const v1::CampaignState state = model_.state();
  if (state != v1::CAMPAIGN_SUCCEEDED) {
    *env_.err << "tailor: campaign " << id_ << " ended " << CampaignStateName(state);
    if (!model_.error().empty()) *env_.err << ": " << model_.error();
    *env_.err << "\n";
    if (state == v1::CAMPAIGN_FAILED) {
      *env_.err << "  hint: `tailor status " << id_
                << "` shows which job failed and why; `tailor logs JOB` prints its log\n";
    }
  }
  return ExitCodeForCampaign(state);
}

}  // namespace

int RunWatch(const CliEnv& env, const std::string& campaign_id, const WatchOptions& options) {
  Watcher watcher(env, campaign_id, options);
  return watcher.Run();
}

}  // namespace tailor::cli
