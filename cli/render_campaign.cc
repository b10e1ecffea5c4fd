// Human views of campaigns, jobs, events and reports.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/render.h"
#include "cli/table.h"
#include "common/job_output.h"
#include "compression/costmodel/cost_table.h"
#include "methods/api/job_kinds.h"
#include "methods/registry.h"

namespace tailor::cli {
namespace {

bool IsFinalJob(v1::JobState s) {
  return s == v1::JOB_SUCCEEDED || s == v1::JOB_FAILED || s == v1::JOB_CANCELLED ||
         s == v1::JOB_SKIPPED;
}

std::string StepText(const v1::JobProgress& p) {
  if (p.total_steps() > 0) return absl::StrCat("step ", p.step(), "/", p.total_steps());
  if (p.step() > 0) return absl::StrCat("step ", p.step());
  return "";
}

std::string AgentCell(const v1::Job& job) {
  if (!job.agent_id().empty()) return job.agent_id();
  if (!job.external_id().empty()) {
    return job.launcher().empty() ? job.external_id()
                                  : absl::StrCat(job.launcher(), ":", job.external_id());
  }
  return "-";
}

// Budget ceilings print as "<= 40", floors (throughput) as ">= 1000".
// The gate's KL is a small number of nats: shown in scientific notation, not rounded to 0.
std::string GateOrCost(const std::string& resource, double v) {
  if (resource == "equivalence_max_kl" && std::isfinite(v)) return absl::StrFormat("%.2g", v);
  return FormatNumber(v);
}

// Floors (throughput, the equivalence gate's argmax agreement) read ">=", ceilings "<=".
std::string BudgetCell(const v1::BudgetResult& b) {
  const bool floor = b.resource().find("throughput") != std::string::npos ||
                     b.resource() == "equivalence_argmax_agreement";
  return absl::StrCat(floor ? ">= " : "<= ", GateOrCost(b.resource(), b.budget()));
}

}  // namespace

std::vector<std::string> JobLabels(const v1::Campaign& campaign) {
  std::map<std::string, int> total;
  for (const v1::Job& job : campaign.jobs()) ++total[job.kind()];
  std::map<std::string, int> seen;
  std::vector<std::string> labels;
  labels.reserve(campaign.jobs_size());
  for (const v1::Job& job : campaign.jobs()) {
    const int n = ++seen[job.kind()];
    if (!job.key().empty()) {
      labels.push_back(job.key());
    } else if (job.kind().empty()) {
      labels.push_back(job.id());
    } else {
      // Servers that predate Job.key: make repeated kinds unique by position.
      labels.push_back(total[job.kind()] > 1 && n > 1 ? absl::StrCat(job.kind(), "#", n)
                                                      : job.kind());
    }
  }
  return labels;
}

std::string JobDetail(const v1::Job& job) {
  if (!job.error().empty()) return job.error();
  if (job.state() == v1::JOB_SKIPPED) return job.skipped_reason();
  std::vector<std::string> parts;
  if (!IsFinalJob(job.state()) && !job.waiting_reason().empty()) {
    parts.push_back(job.waiting_reason());
  }
  if (!job.external_state().empty() && !IsFinalJob(job.state())) {
    std::string s = absl::StrCat(job.launcher().empty() ? "launcher" : job.launcher(), " ",
                                 job.external_state());
    if (!job.external_reason().empty()) absl::StrAppend(&s, " (", job.external_reason(), ")");
    parts.push_back(s);
  }
  if (job.has_progress() && job.state() == v1::JOB_LEASED) {
    const std::string step = StepText(job.progress());
    if (!step.empty()) parts.push_back(step);
    if (!job.progress().message().empty()) parts.push_back(job.progress().message());
  }
  return absl::StrJoin(parts, ", ");
}

std::string JobProgressCell(const v1::Job& job) {
  if (job.state() == v1::JOB_SUCCEEDED) return "100%";
  if (job.has_progress()) return FormatPercent(job.progress().fraction());
  return "-";
}

std::string RenderCampaign(const v1::Campaign& c, const RenderOptions& options) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"campaign", c.id()},
      {"name", c.name()},
      {"method", MethodName(c.contract().method())},
      {"state", CampaignStateName(c.state())},
      {"team", c.team()},
      {"created", FormatTimestamp(c.created_at(), options.tz)},
      {"fingerprint", c.fingerprint().empty() ? "-" : c.fingerprint()},
  };
  if (!c.error().empty()) fields.emplace_back("error", c.error());
  if (!c.stale_reason().empty()) fields.emplace_back("stale", c.stale_reason());
  std::string out = RenderFields(fields);
  if (c.jobs_size() == 0) return out;
  Table table({{"JOB"},
               {"STATE"},
               {"ATTEMPT", Align::kRight},
               {"AGENT"},
               {"PROGRESS", Align::kRight},
               {"DETAIL", Align::kLeft, 0, true}});
  const std::vector<std::string> labels = JobLabels(c);
  for (int i = 0; i < c.jobs_size(); ++i) {
    const v1::Job& job = c.jobs(i);
    table.AddRow({labels[i], JobStateName(job.state()), absl::StrCat(job.attempt()),
                  AgentCell(job), JobProgressCell(job), JobDetail(job)});
  }
  absl::StrAppend(&out, "\n", table.Render(options.width));
  return out;
}

std::string RenderCampaignList(const std::vector<v1::Campaign>& campaigns,
                               const RenderOptions& options) {
  if (campaigns.empty()) return "no campaigns\n";
  Table table({{"ID"},
               {"NAME", Align::kLeft, 32},
               {"TEAM", Align::kLeft, 20},
               {"METHOD"},
               {"STATE"},
               {"JOBS", Align::kRight},
               {"CREATED"}});
  for (const v1::Campaign& c : campaigns) {
    int done = 0;
    for (const v1::Job& job : c.jobs()) done += IsFinalJob(job.state()) ? 1 : 0;
    table.AddRow({c.id(), c.name(), c.team(), MethodName(c.contract().method()),
                  CampaignStateName(c.state()), absl::StrCat(done, "/", c.jobs_size()),
                  FormatTimestamp(c.created_at(), options.tz)});
  }
  return table.Render(options.width);
}

namespace {

// The distilled student of an HF parent in the layouts serving engines load, or why not.
std::string RenderStudentExports(const v1::CampaignReport& r, const RenderOptions& options) {
  const auto distill = r.outputs().find(std::string(methods::jobs::kDistill));
  if (distill == r.outputs().end()) return "";
  const std::optional<v1::DistillResult> detail = DetailOf<v1::DistillResult>(distill->second);
  if (!detail.has_value() || detail->exports_size() == 0) return "";
  Table table({{"LAYOUT"}, {"FORMAT"}, {"ARTIFACT", Align::kLeft, 0, true}});
  for (const v1::StudentExport& e : detail->exports()) {
    table.AddRow({e.layout(), e.format().empty() ? "-" : e.format(),
                  e.digest().empty() ? absl::StrCat("unavailable: ", e.unavailable())
                                     : ShortHash(e.digest())});
  }
  return absl::StrCat("\nstudent for serving engines (tailor artifacts get DIGEST -o FILE)\n",
                      table.Render(options.width));
}

// Which engine the student's budgets were measured in, and what the latency figure is.
std::string RenderMeasuredIn(const v1::CampaignReport& r) {
  const auto verify = r.outputs().find(std::string(methods::jobs::kVerify));
  if (verify == r.outputs().end() || !verify->second.has_engine()) return "";
  const v1::JobOutput& v = verify->second;
  // Verify outputs stored before engines reported their statistic render as they did then.
  if (v.measured().latency_statistic().empty() && !v.has_equivalence()) return "";
  std::string out = absl::StrCat("measured in ", v.engine().name(), " ", v.engine().version());
  if (!v.engine().build().empty()) absl::StrAppend(&out, " (", v.engine().build(), ")");
  if (!v.measured().latency_statistic().empty()) {
    absl::StrAppend(&out, "; latency: ", v.measured().latency_statistic());
  }
  if (v.has_equivalence()) {
    const v1::EquivalenceCheck& e = v.equivalence();
    absl::StrAppend(&out, "; equivalence gate ", e.passed() ? "passed" : "FAILED", " over ",
                    e.positions(), " positions");
  }
  return out + "\n";
}

// Budgets the contract states relative to the parent: the factor, the parent's figure the
// profile job measured in the target engine, and the budget every job was held to.
std::string RenderRelativeBudgets(const v1::CampaignReport& r) {
  std::string out;
  for (const v1::RelativeBudget& b : r.relative_budgets()) {
    const bool floor = b.resource().find("throughput") != std::string::npos;
    absl::StrAppend(&out, b.resource(), floor ? " >= " : " <= ", FormatNumber(b.factor()),
                    " x the parent's");
    if (!b.resolved()) {
      absl::StrAppend(&out, " (resolved once the profile job has measured the parent)\n");
      continue;
    }
    absl::StrAppend(&out, " ", FormatNumber(b.parent()), " = ", FormatNumber(b.budget()),
                    " (the parent served in the target engine, cost table ", b.cost_table_id());
    if (!b.parent_statistic().empty()) absl::StrAppend(&out, ": ", b.parent_statistic());
    absl::StrAppend(&out, ")\n");
    if (b.has_verify_budget()) {
      absl::StrAppend(&out, "  verified against the parent served alongside the student: ",
                      FormatNumber(b.factor()), " x ", FormatNumber(b.verify_parent()), " = ",
                      FormatNumber(b.verify_budget()), "\n");
    }
  }
  return out;
}

// A recompression's drift check: what was redone and why.
std::string RenderRecompress(const v1::CampaignReport& r) {
  if (!r.has_recompress()) return "";
  const v1::RecompressOrigin& o = r.recompress();
  if (!o.decided()) {
    return absl::StrCat("recompression of ", o.source_campaign_id(), " (engine ",
                        o.old_engine_version(), "): drift check pending\n");
  }
  return absl::StrCat("recompression of ", o.source_campaign_id(), " (engine ",
                      o.old_engine_version(), "): ", o.reason(), "\n");
}

// How the cost table's prediction held up against the verification; a suspect table is said
// loudly, since the campaign's choice rests on it.
std::string RenderTableCheck(const v1::CampaignReport& r) {
  if (!r.has_cost_table_check()) return "";
  const v1::CostTableCheck& c = r.cost_table_check();
  if (c.suspect()) {
    return absl::StrCat("COST TABLE SUSPECT: ", c.cost_table_id(), " ", c.reason(),
                        "; it will not be reused (the next campaign profiles again)\n");
  }
  if (c.measurement_disturbed() && !c.reason().empty()) {
    return absl::StrCat("cost table ", c.cost_table_id(), " not judged: ", c.reason(), "\n");
  }
  // "Inside" a wide error says little: a table over the 5% held-out MAPE a llama.cpp table is
  // profiled to (docs/costmodel.md, "Rounds until the table holds") is named as such.
  const std::string wide =
      c.validated_mape() > costmodel::kTrustedLatencyMape
          ? absl::StrFormat("; its held-out latency MAPE %.1f%% is over the %.0f%% a table is "
                            "trusted at, so the campaign's choice rests on a rough table",
                            100 * c.validated_mape(), 100 * costmodel::kTrustedLatencyMape)
          : "";
  const std::string footing =
      c.has_host_scale()
          ? absl::StrFormat(" (on the table's footing: the parent served alongside the verify "
                            "ran x%.3f as fast as when the table was profiled)",
                            c.host_scale())
          : "";
  return absl::StrFormat(
      "cost table %s: predicted within %.1f%% of the measurement%s, inside its validated "
      "error (worst %.1f%%)%s\n",
      c.cost_table_id(), 100 * c.error(), footing,
      100 * std::max(c.validated_max_error(), c.validated_mape()), wide);
}

// The quality row of `model` ("student", "baseline"), or null.
const v1::QualityResult* QualityOf(const v1::CampaignReport& r, const std::string& model) {
  for (const v1::QualityResult& q : r.quality()) {
    if (q.model() == model) return &q;
  }
  return nullptr;
}

// A student that distilled to a higher held-out KD loss than the uniform baseline (the same
// budgets, the same recovery) is not what the search is for: the campaign still answers with
// it, so the report says so rather than leave two rows of numbers to be compared by eye.
std::string RenderStudentAgainstBaseline(const v1::CampaignReport& r) {
  const v1::QualityResult* student = QualityOf(r, "student");
  const v1::QualityResult* baseline = QualityOf(r, "baseline");
  if (student == nullptr || baseline == nullptr) return "";
  if (student->kd_loss() <= baseline->kd_loss()) return "";
  return absl::StrFormat(
      "STUDENT BELOW THE UNIFORM BASELINE: KD loss %.4g against the baseline's %.4g, task "
      "accuracy %.4g against %.4g: the searched architecture lost to a uniform one within the "
      "same budgets\n",
      student->kd_loss(), baseline->kd_loss(), student->task_accuracy(),
      baseline->task_accuracy());
}

// The quality rows (perplexity and exact match columns when data.eval measured them), the
// quality floors' verdict and the datasets read.
std::string RenderQuality(const v1::CampaignReport& r, const RenderOptions& options) {
  bool eval = false;
  bool exact = false;
  bool served = false;
  for (const v1::QualityResult& q : r.quality()) {
    eval = eval || q.has_perplexity();
    exact = exact || q.has_exact_match();
    served = served || q.has_served_perplexity();
  }
  std::vector<Column> columns = {{"MODEL"},
                                 {"KD LOSS", Align::kRight},
                                 {"TASK ACCURACY", Align::kRight},
                                 {"PARAMETERS", Align::kRight}};
  if (eval) columns.push_back({"PERPLEXITY", Align::kRight});
  if (exact) columns.push_back({"EXACT MATCH", Align::kRight});
  if (served) columns.push_back({"SERVED PPL", Align::kRight});  // verify, in the engine
  Table quality(columns);
  for (const v1::QualityResult& q : r.quality()) {
    std::vector<std::string> row = {q.model(), FormatNumber(q.kd_loss(), 4),
                                    FormatNumber(q.task_accuracy(), 4),
                                    FormatCount(q.parameters())};
    if (eval) row.push_back(q.has_perplexity() ? FormatNumber(q.perplexity(), 4) : "-");
    if (exact) row.push_back(q.has_exact_match() ? FormatNumber(q.exact_match(), 3) : "-");
    if (served) {
      row.push_back(q.has_served_perplexity() ? FormatNumber(q.served_perplexity(), 4) : "-");
    }
    quality.AddRow(row);
  }
  std::string out = quality.Render(options.width);
  absl::StrAppend(&out, RenderStudentAgainstBaseline(r));
  if (r.has_quality_check()) {
    const v1::QualityCheck& c = r.quality_check();
    absl::StrAppend(&out, c.met() ? "" : "QUALITY FLOOR MISSED: ", c.reason(), " (",
                    FormatCount(c.eval_tokens()), " eval tokens)\n");
  }
  for (const v1::DatasetUse& d : r.datasets()) {
    absl::StrAppend(&out, "data.", d.role(), ": ", d.path().empty() ? "(stored)" : d.path(),
                    " sha256:", d.artifact_digest().substr(0, 12), "\n");
  }
  return out;
}

}  // namespace

std::string RenderReport(const v1::CampaignReport& r, const RenderOptions& options) {
  std::string out = absl::StrCat("campaign ", r.campaign_id(), ": ",
                                 CampaignStateName(r.state()), "\n");
  auto render_budgets = [&](const std::string& title, const std::vector<v1::BudgetResult>& rows) {
    if (rows.empty()) return;
    Table budgets({{"RESOURCE"},
                   {"BUDGET", Align::kRight},
                   {"PREDICTED", Align::kRight},
                   {"MEASURED", Align::kRight},
                   {"MET"}});
    for (const v1::BudgetResult& b : rows) {
      budgets.AddRow({b.resource(), BudgetCell(b), FormatNumber(b.predicted()),
                      b.has_measured() ? GateOrCost(b.resource(), b.measured()) : "-",
                      b.met() ? "✓" : "✗"});
    }
    absl::StrAppend(&out, "\n", title, "\n", budgets.Render(options.width));
  };
  render_budgets("budgets (student)",
                 std::vector<v1::BudgetResult>(r.budgets().begin(), r.budgets().end()));
  absl::StrAppend(&out, RenderRelativeBudgets(r), RenderMeasuredIn(r), RenderTableCheck(r),
                  RenderRecompress(r));
  render_budgets("budgets (uniform baseline)",
                 std::vector<v1::BudgetResult>(r.baseline_budgets().begin(),
                                               r.baseline_budgets().end()));
  if (!r.baseline_unavailable().empty()) {
    absl::StrAppend(&out, "\nuniform baseline: none (", r.baseline_unavailable(), ")\n");
  }
  if (r.quality_size() > 0) absl::StrAppend(&out, "\n", RenderQuality(r, options));
  // Each method renders its own details section, if the report has one.
  for (const auto& method : methods::BuiltinMethods().all()) {
    absl::StrAppend(&out, method->RenderReport(r, options));
  }
  const auto& arch = r.architecture().fields();
  if (arch.contains("description")) {
    absl::StrAppend(&out, "\narchitecture: ", arch.at("description").string_value(), "\n");
    if (arch.contains("layers")) {
      int i = 0;
      for (const auto& layer : arch.at("layers").list_value().values()) {
        absl::StrAppend(&out, "  layer ", i++, ": ", layer.string_value(), "\n");
      }
    }
  }
  absl::StrAppend(&out, "\n",
                  RenderFields({{"search tokens", FormatCount(r.search_tokens())},
                                {"recovery tokens", FormatCount(r.recovery_tokens())}}));
  absl::StrAppend(&out, RenderStudentExports(r, options));
  if (r.artifacts_size() > 0) {
    const std::vector<v1::Artifact> artifacts(r.artifacts().begin(), r.artifacts().end());
    absl::StrAppend(&out, "\n", RenderArtifacts(artifacts, options));
  }
  return out;
}

std::string EventText(const v1::Event& e) {
  std::string text = e.message();
  if (e.has_progress()) {
    const v1::JobProgress& p = e.progress();
    if (text.empty()) text = p.message();
    std::string numbers = FormatPercent(p.fraction());
    const std::string step = StepText(p);
    if (!step.empty()) absl::StrAppend(&numbers, ", ", step);
    text = text.empty() ? numbers : absl::StrCat(text, " (", numbers, ")");
  }
  return text;
}

std::string RenderEventLine(const v1::Event& e, absl::string_view job_label,
                            absl::TimeZone tz) {
  std::string state;
  if (!e.job_id().empty() && e.job_state() != v1::JOB_STATE_UNSPECIFIED) {
    state = JobStateName(e.job_state());
  } else if (e.campaign_state() != v1::CAMPAIGN_STATE_UNSPECIFIED) {
    state = CampaignStateName(e.campaign_state());
  } else {
    state = e.type().empty() ? "-" : e.type();
  }
  std::string line = absl::StrCat(FormatClock(e.time(), tz), " ", e.seq(), " ",
                                  job_label.empty() ? "-" : job_label, " ", state);
  const std::string text = EventText(e);
  if (!text.empty()) absl::StrAppend(&line, " ", text);
  // One event, one line, whatever the server put in the message.
  for (char& ch : line) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  return line;
}

}  // namespace tailor::cli
