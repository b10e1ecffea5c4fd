#include "methods/autocompress/render.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/job_output.h"
#include "methods/autocompress/autocompress_results.pb.h"
#include "methods/autocompress/job_kinds.h"

namespace tailor::methods {
namespace {

using cli::Align;
using cli::Column;
using cli::FormatNumber;
using cli::Table;

// "predicted / measured -> fitted" of one resource; "-" when it was not measured.
std::string Cell(bool has, double predicted, double measured, double corrected) {
  if (!has) return "-";
  return absl::StrCat(FormatNumber(predicted), " / ", FormatNumber(measured), " -> ",
                      FormatNumber(corrected));
}

// The rung's change from the measured rung below it on its ladder, and where the search's
// choice is.
std::string GrownBy(const v1::autocompress::SettleRung& g) {
  std::string where;
  if (g.ladder() == 0 && g.step() == 0) where = "(the search's choice)";
  if (g.ladder() == 0 && g.step() < 0) where = "(below the search's choice)";
  if (g.refined()) where = "(further pass)";
  if (g.change().empty()) return where.empty() ? "-" : where;
  return where.empty() ? g.change() : absl::StrCat(g.change(), " ", where);
}

// The measure job's slow-host check when it served the rungs again: each attempt's scale and
// which one the rungs' figures come from; "" when the host measured within the bound at once.
std::string SlowHostLine(const v1::autocompress::Settle& s) {
  if (s.host_scales_size() < 2) return "";
  std::vector<std::string> attempts;
  for (int i = 0; i < s.host_scales_size(); ++i) {
    attempts.push_back(absl::StrFormat("x%.3f%s", s.host_scales(i),
                                       i == s.kept_attempt() ? " (kept)" : ""));
  }
  const double bound = 1 + s.slow_host_bound();
  std::string line = absl::StrFormat(
      "slow host: the rungs measured over x%.3f of the table as a set (its validated worst "
      "error, or the agent's floor), so they were served again after pauses of %.0f s: %s",
      bound, s.slow_host_pause_s(), absl::StrJoin(attempts, ", "));
  if (s.host_scales(s.kept_attempt()) > bound) {
    absl::StrAppend(&line, "; STILL SLOW on every attempt: the fastest was kept, and verify "
                           "may measure the student faster than the settle did");
  }
  return line + "\n";
}

}  // namespace

std::string RenderSettle(const v1::CampaignReport& r, const cli::RenderOptions& options) {
  auto it = r.outputs().find(jobs::kSettle);
  if (it == r.outputs().end()) return "";
  const std::optional<v1::autocompress::SearchResult> result =
      DetailOf<v1::autocompress::SearchResult>(it->second);
  if (!result.has_value() || result->settle().rungs_size() == 0) return "";
  const v1::autocompress::Settle& s = result->settle();
  // The budgets the report judged: the resources the settle fitted.
  bool latency = false, memory = false, throughput = false;
  for (const v1::BudgetResult& b : r.budgets()) {
    latency = latency || b.resource() == "latency_ms";
    memory = memory || b.resource() == "memory_mib";
    throughput = throughput || b.resource() == "throughput_tokens_per_s";
  }
  bool branches = false;
  for (const v1::autocompress::SettleRung& g : s.rungs()) branches = branches || g.ladder() > 0;
  std::vector<Column> columns = {{"RUNG", Align::kRight}};
  if (branches) columns.push_back({"LADDER"});
  columns.push_back({"STEP", Align::kRight});
  if (latency) columns.push_back({"LATENCY MS (PRED / MEAS -> FIT)", Align::kRight});
  if (memory) columns.push_back({"MEMORY MIB", Align::kRight});
  if (throughput) columns.push_back({"THROUGHPUT TOK/S", Align::kRight});
  columns.push_back({"FITS"});
  if (branches) columns.push_back({"KD (PICKS)", Align::kRight});
  columns.push_back({"GROWN BY"});
  Table table(columns);
  for (int i = 0; i < s.rungs_size(); ++i) {
    const v1::autocompress::SettleRung& g = s.rungs(i);
    std::vector<std::string> row = {absl::StrCat(i + 1, i == s.chosen() ? " *" : "")};
    if (branches) {
      row.push_back(g.ladder() == 0 ? "search" : absl::StrCat("branch ", g.ladder()));
    }
    row.push_back(absl::StrCat(g.step()));
    if (latency) {
      row.push_back(Cell(g.measured().has_latency_ms(), g.predicted().latency_ms(),
                         g.measured().latency_ms(), g.corrected().latency_ms()));
    }
    if (memory) {
      row.push_back(Cell(g.measured().has_memory_mib(), g.predicted().memory_mib(),
                         g.measured().memory_mib(), g.corrected().memory_mib()));
    }
    if (throughput) {
      row.push_back(Cell(g.measured().has_throughput_tokens_per_s(),
                         g.predicted().throughput_tokens_per_s(),
                         g.measured().throughput_tokens_per_s(),
                         g.corrected().throughput_tokens_per_s()));
    }
    row.push_back(g.fits() ? "✓" : "✗");
    if (branches) row.push_back(g.has_kd_loss() ? absl::StrFormat("%.4f", g.kd_loss()) : "-");
    row.push_back(GrownBy(g));
    table.AddRow(row);
  }
  const int ladder = s.descent_steps() + s.ladder_steps() + 1;
  int own = 0, branch_count = 0;
  for (const v1::autocompress::SettleRung& g : s.rungs()) {
    own += g.ladder() == 0 ? 1 : 0;
    branch_count = std::max(branch_count, g.ladder());
  }
  std::string served =
      branch_count == 0
          ? absl::StrFormat("%d of the ladder's %d rungs served", own, ladder)
          : absl::StrFormat("%d rungs served: %d of the search's ladder's %d, %d on %d "
                            "branch%s",
                            s.rungs_size(), own, ladder, s.rungs_size() - own, branch_count,
                            branch_count == 1 ? "" : "es");
  if (s.fine_steps() > 1) {
    absl::StrAppend(&served, ", the ladders in 1/", s.fine_steps(),
                    " steps of the search space's widths");
  }
  std::string out = absl::StrFormat(
      "\nmeasured settle: %s (margin %.1f%%; measured / predicted over them: latency x%.3f, "
      "memory x%.3f; fit: the measurements made monotone along each ladder)\n",
      served, 100 * s.margin(), s.latency_scale(), s.memory_scale());
  absl::StrAppend(&out, SlowHostLine(s), table.Render(options.width), "chosen: rung ",
                  s.chosen() + 1, " (*): ", s.reason(), "\n");
  return out;
}

}  // namespace tailor::methods
