// Human views of the queue, agents, artifacts, cost tables and recompression.
#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/render.h"
#include "cli/table.h"

namespace tailor::cli {
namespace {

// Cost-model errors are stored as fractions (0.032 = 3.2%).
std::string FractionAsPercent(double v) { return absl::StrFormat("%.1f%%", v * 100); }

std::string EngineCell(absl::string_view engine, absl::string_view version) {
  if (engine.empty() && version.empty()) return "-";
  return absl::StrCat(engine, "@", version);
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

}  // namespace

std::string RenderQueue(const v1::ListQueueResponse& queue, const RenderOptions& options) {
  std::string out;
  if (queue.summary_size() > 0) {
    Table summary({{"DEVICE"},
                   {"PENDING", Align::kRight},
                   {"RUNNABLE", Align::kRight},
                   {"LEASED", Align::kRight}});
    for (const v1::QueueSummary& s : queue.summary()) {
      summary.AddRow({OrDash(s.device_kind()), absl::StrCat(s.pending()),
                      absl::StrCat(s.runnable()), absl::StrCat(s.leased())});
    }
    absl::StrAppend(&out, summary.Render(options.width), "\n");
  }
  if (queue.entries_size() == 0) return absl::StrCat(out, "queue is empty\n");
  Table table({{"POS", Align::kRight},
               {"JOB"},
               {"KIND"},
               {"CAMPAIGN", Align::kLeft, 32},
               {"TEAM", Align::kLeft, 20},
               {"DEVICE"},
               {"PRIO", Align::kRight},
               {"STATE"},
               {"ATTEMPT", Align::kRight},
               {"DETAIL", Align::kLeft, 0, true}});
  for (const v1::QueueEntry& e : queue.entries()) {
    const v1::Job& job = e.job();
    std::string detail = job.waiting_reason();
    if (job.state() == v1::JOB_LEASED) {
      // A launcher job shows where it runs and what that system says, e.g.
      // "slurm 1234 PENDING (Resources)"; agent jobs show their agent.
      if (!job.external_id().empty()) {
        detail = absl::StrCat(job.launcher().empty() ? "launcher" : job.launcher(), " ",
                              job.external_id());
        if (!job.external_state().empty()) absl::StrAppend(&detail, " ", job.external_state());
        if (!job.external_reason().empty()) {
          absl::StrAppend(&detail, " (", job.external_reason(), ")");
        }
      } else if (job.agent_id().rfind("launcher:", 0) == 0) {
        detail = absl::StrCat(job.agent_id().substr(9), " (submitting)");
      } else {
        detail = job.agent_id().empty() ? "" : absl::StrCat("agent ", job.agent_id());
      }
    }
    table.AddRow({e.position() > 0 ? absl::StrCat(e.position()) : "-", job.id(), job.kind(),
                  e.campaign_name(), e.team(), OrDash(job.resources().device_kind()),
                  absl::StrCat(job.resources().priority()), JobStateName(job.state()),
                  absl::StrCat(job.attempt()), detail});
  }
  return absl::StrCat(out, table.Render(options.width));
}

std::string RenderAgents(const v1::ListAgentsResponse& agents, const RenderOptions& options) {
  if (agents.agents_size() == 0) return "no agents\n";
  Table table({{"ID"},
               {"NAME", Align::kLeft, 32},
               {"HOST", Align::kLeft, 32},
               {"DEVICE KIND"},
               {"DEVICE"},
               {"MEMORY", Align::kRight},
               {"ENGINE"},
               {"STATE"},
               {"JOBS", Align::kRight},
               {"HEARTBEAT"}});
  for (const v1::Agent& a : agents.agents()) {
    const v1::AgentInfo& i = a.info();
    table.AddRow({a.id(), i.name(), i.hostname(), i.device_kind(), i.device(),
                  i.memory_mib() > 0 ? FormatBytes(i.memory_mib() * 1024 * 1024) : "-",
                  EngineCell(i.engine(), i.engine_version()), AgentStateName(a.state()),
                  absl::StrCat(a.current_job_ids_size()),
                  FormatAge(a.last_heartbeat(), options.now)});
  }
  return table.Render(options.width);
}

std::string RenderArtifacts(const std::vector<v1::Artifact>& artifacts,
                            const RenderOptions& options) {
  if (artifacts.empty()) return "no artifacts\n";
  Table table({{"DIGEST"},
               {"KIND"},
               {"NAME", Align::kLeft, 48, true},
               {"SIZE", Align::kRight},
               {"JOB"},
               {"CREATED"}});
  // A retried job's earlier attempts keep their rows; they are marked, not hidden.
  std::map<std::string, int> latest_attempt;
  for (const v1::Artifact& a : artifacts) {
    int& latest = latest_attempt[a.job_id()];
    latest = std::max(latest, a.attempt());
  }
  for (const v1::Artifact& a : artifacts) {
    std::string job = OrDash(a.job_id());
    if (a.attempt() > 0 && a.attempt() < latest_attempt[a.job_id()]) {
      absl::StrAppend(&job, " (attempt ", a.attempt(), ", superseded)");
    }
    table.AddRow({ShortHash(a.digest()), a.kind(), a.name(), FormatBytes(a.size_bytes()), job,
                  FormatTimestamp(a.created_at(), options.tz)});
  }
  return table.Render(options.width);
}

namespace {

// "suspect" (a verification disagreed with it), "stale" (a newer engine version exists) or
// empty.
std::string TableState(const v1::CostTable& t) {
  if (!t.suspect_reason().empty()) return t.stale() ? "suspect, stale" : "suspect";
  return t.stale() ? "stale" : "";
}

}  // namespace

std::string RenderCostTables(const v1::ListCostTablesResponse& tables,
                             const RenderOptions& options) {
  if (tables.tables_size() == 0) return "no cost tables\n";
  Table table({{"FINGERPRINT"},
               {"PARENT"},
               {"DEVICE"},
               {"ENGINE"},
               {"PRECISION"},
               {"B/IN/OUT/PREFIX"},
               {"LATENCY MAPE", Align::kRight},
               {"MEMORY MAPE", Align::kRight},
               {"CREATED"},
               {"STATE"}});
  for (const v1::CostTable& t : tables.tables()) {
    const bool validated = t.validated_architectures() > 0;
    const std::string parent =
        t.parent_architecture().empty() ? "-" : ShortHash(t.parent_architecture());
    table.AddRow({ShortHash(t.fingerprint()), parent, t.device_kind(),
                  EngineCell(t.engine(), t.engine_version()), PrecisionName(t.precision()),
                  FormatWorkload(t.workload()),
                  validated ? FractionAsPercent(t.latency_mape()) : "-",
                  validated ? FractionAsPercent(t.memory_mape()) : "-",
                  FormatTimestamp(t.created_at(), options.tz), TableState(t)});
  }
  return table.Render(options.width);
}

std::string RenderCostTable(const v1::CostTable& t, const RenderOptions& options) {
  std::string validation = "-";
  if (t.validated_architectures() > 0) {
    validation = absl::StrCat("latency MAPE ", FractionAsPercent(t.latency_mape()),
                              " (max ", FractionAsPercent(t.latency_max_error()),
                              "), memory MAPE ", FractionAsPercent(t.memory_mape()), " over ",
                              t.validated_architectures(), " architectures");
  }
  std::vector<std::pair<std::string, std::string>> fields = {
      {"fingerprint", t.fingerprint()},
      {"parent architecture", OrDash(t.parent_architecture())},
      {"device", t.device_kind()},
      {"engine", EngineCell(t.engine(), t.engine_version())},
      {"precision", PrecisionName(t.precision())},
      {"workload", absl::StrCat(FormatWorkload(t.workload()),
                                " (batch/input/output/cached prefix)")},
      {"layer family", OrDash(t.layer_family_version())},
      {"t0", absl::StrCat(FormatNumber(t.t0_ms(), 3), " ms")},
      {"validation", validation},
      {"produced by", absl::StrCat("campaign ", OrDash(t.campaign_id()), " job ",
                                   OrDash(t.job_id()))},
      {"created", FormatTimestamp(t.created_at(), options.tz)},
  };
  if (t.stale()) fields.emplace_back("stale", "yes (a newer engine version exists)");
  if (!t.suspect_reason().empty()) {
    fields.emplace_back("suspect", absl::StrCat("yes, not reused: ", t.suspect_reason()));
  }
  std::string out = RenderFields(fields);
  if (t.entries_size() == 0) return absl::StrCat(out, "\nno layer entries\n");
  Table table({{"LAYER"},
               {"CONFIG", Align::kLeft, 0, true},
               {"PHASE"},
               {"TIME MS", Align::kRight},
               {"MEMORY MIB", Align::kRight}});
  for (const v1::CostEntry& e : t.entries()) {
    table.AddRow({e.layer_kind(), e.config(), e.phase(), FormatNumber(e.time_ms(), 4),
                  FormatNumber(e.memory_mib(), 3)});
  }
  return absl::StrCat(out, "\n", table.Render(options.width));
}

std::string RenderRecompress(const v1::RecompressRequest& request,
                             const v1::RecompressResponse& response) {
  const std::string target =
      absl::StrCat(request.engine().empty() ? "every engine" : request.engine(),
                   " at version ", request.engine_version());
  if (response.entries_size() == 0) {
    return absl::StrCat("nothing to recompress for ", target, "\n");
  }
  Table table({{"SOURCE CAMPAIGN"}, {"OLD VERSION"}, {"NEW CAMPAIGN"}, {"SUBMITTED"}});
  int submitted = 0;
  for (const v1::RecompressEntry& e : response.entries()) {
    submitted += e.submitted() ? 1 : 0;
    table.AddRow({e.source_campaign_id(), OrDash(e.old_engine_version()),
                  OrDash(e.new_campaign_id()),
                  request.dry_run() ? "dry run" : (e.submitted() ? "yes" : "already")});
  }
  std::string summary =
      request.dry_run()
          ? absl::StrCat("dry run: ", response.entries_size(),
                         " campaign(s) would be recompressed for ", target, "\n")
          : absl::StrCat(submitted, " of ", response.entries_size(),
                         " campaign(s) submitted for ", target, "\n");
  return absl::StrCat(table.Render(), "\n", summary);
}

}  // namespace tailor::cli
