#include "cli/render.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/errors.h"
#include "cli/format.h"
#include "cli/watch.h"
#include "common/job_output.h"
#include "common/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "methods/autocompress/autocompress_results.pb.h"

namespace tailor::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);  // 2023-11-14 22:13:20 UTC

RenderOptions Options() {
  RenderOptions o;
  o.tz = absl::UTCTimeZone();
  o.now = kT0 + absl::Minutes(5);
  return o;
}

v1::Job MakeJob(const std::string& key, const std::string& kind, v1::JobState state,
                int attempt) {
  v1::Job job;
  job.set_id("job-" + key);
  job.set_key(key);
  job.set_kind(kind);
  job.set_state(state);
  job.set_attempt(attempt);
  return job;
}

v1::Campaign SampleCampaign() {
  v1::Campaign c;
  c.set_id("cmp-1");
  c.set_name("npc-cpu");
  c.set_team("platform");
  c.mutable_contract()->set_method(v1::AUTOCOMPRESS);
  c.set_state(v1::CAMPAIGN_RUNNING);
  *c.mutable_created_at() = ToProto(kT0);
  c.set_fingerprint("3f2a9c0d1e2b4a5f");
  v1::Job* profile = c.add_jobs();
  *profile = MakeJob("profile", "profile", v1::JOB_SKIPPED, 0);
  profile->set_skipped_reason("cost table reused");
  v1::Job* rank = c.add_jobs();
  *rank = MakeJob("rank", "rank", v1::JOB_SUCCEEDED, 1);
  rank->set_agent_id("agt-cpu-1");
  v1::Job* search = c.add_jobs();
  *search = MakeJob("search", "search", v1::JOB_LEASED, 2);
  search->set_launcher("slurm");
  search->set_external_id("4711");
  search->set_external_state("RUNNING");
  search->mutable_progress()->set_fraction(0.42);
  search->mutable_progress()->set_step(105);
  search->mutable_progress()->set_total_steps(250);
  search->mutable_progress()->set_message("loss 2.31");
  *c.add_jobs() = MakeJob("distill", "distill", v1::JOB_PENDING, 0);
  v1::Job* verify = c.add_jobs();
  *verify = MakeJob("verify", "verify", v1::JOB_RUNNABLE, 0);
  verify->set_waiting_reason("no online agent of device kind cpu");
  v1::Job* baseline = c.add_jobs();
  *baseline = MakeJob("verify_baseline", "verify", v1::JOB_FAILED, 3);
  baseline->set_error("out of memory");
  return c;
}

TEST(RenderCampaignTest, HeaderAndJobTable) {
  EXPECT_EQ(RenderCampaign(SampleCampaign(), Options()),
            "campaign     cmp-1\n"
            "name         npc-cpu\n"
            "method       AUTOCOMPRESS\n"
            "state        RUNNING\n"
            "team         platform\n"
            "created      2023-11-14 22:13:20 UTC\n"
            "fingerprint  3f2a9c0d1e2b4a5f\n"
            "\n"
            "JOB              STATE      ATTEMPT  AGENT       PROGRESS  DETAIL\n"
            "profile          SKIPPED          0  -                  -  cost table reused\n"
            "rank             SUCCEEDED        1  agt-cpu-1       100%\n"
            "search           LEASED           2  slurm:4711       42%  slurm RUNNING, step "
            "105/250, loss 2.31\n"
            "distill          PENDING          0  -                  -\n"
            "verify           RUNNABLE         0  -                  -  no online agent of "
            "device kind cpu\n"
            "verify_baseline  FAILED           3  -                  -  out of memory\n");
}

TEST(RenderCampaignTest, ErrorLineAndNoJobs) {
  v1::Campaign c;
  c.set_id("cmp-2");
  c.set_name("x");
  c.set_state(v1::CAMPAIGN_FAILED);
  c.set_error("verify failed: latency budget missed");
  EXPECT_EQ(RenderCampaign(c, Options()),
            "campaign     cmp-2\n"
            "name         x\n"
            "method       METHOD_UNSPECIFIED\n"
            "state        FAILED\n"
            "team         -\n"
            "created      -\n"
            "fingerprint  -\n"
            "error        verify failed: latency budget missed\n");
}

TEST(RenderCampaignTest, FitsTerminalWidthByShrinkingDetail) {
  RenderOptions o = Options();
  o.width = 70;
  const std::string out = RenderCampaign(SampleCampaign(), o);
  EXPECT_THAT(out, HasSubstr("JOB              STATE      ATTEMPT  AGENT       PROGRESS  DETAIL\n"
                             "profile          SKIPPED          0  -                  -  "
                             "cost table…\n"));
  EXPECT_THAT(out, HasSubstr("search           LEASED           2  slurm:4711       42%  "
                             "slurm RUNN…\n"));
}

TEST(JobLabelsTest, KeysWinAndRepeatedKindsAreNumberedWithoutKeys) {
  v1::Campaign c;
  *c.add_jobs() = MakeJob("", "verify", v1::JOB_PENDING, 0);
  *c.add_jobs() = MakeJob("", "distill", v1::JOB_PENDING, 0);
  *c.add_jobs() = MakeJob("", "verify", v1::JOB_PENDING, 0);
  *c.add_jobs() = MakeJob("verify_baseline", "verify", v1::JOB_PENDING, 0);
  EXPECT_THAT(JobLabels(c), ::testing::ElementsAre("verify", "distill", "verify#2",
                                                   "verify_baseline"));
}

TEST(RenderCampaignListTest, Table) {
  v1::Campaign a = SampleCampaign();
  v1::Campaign b;
  b.set_id("cmp-0");
  b.set_name("old");
  b.set_team("default");
  b.mutable_contract()->set_method(v1::ENTROPY_CODE);
  b.set_state(v1::CAMPAIGN_SUCCEEDED);
  *b.mutable_created_at() = ToProto(kT0 - absl::Hours(24));
  EXPECT_EQ(RenderCampaignList({a, b}, Options()),
            "ID     NAME     TEAM      METHOD        STATE      JOBS  CREATED\n"
            "cmp-1  npc-cpu  platform  AUTOCOMPRESS  RUNNING     3/6  2023-11-14 22:13:20 UTC\n"
            "cmp-0  old      default   ENTROPY_CODE  SUCCEEDED   0/0  2023-11-13 22:13:20 UTC\n");
  EXPECT_EQ(RenderCampaignList({}, Options()), "no campaigns\n");
}

v1::CampaignReport SampleReport() {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-1");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  v1::BudgetResult* latency = r.add_budgets();
  latency->set_resource("latency_ms");
  latency->set_budget(40);
  latency->set_predicted(38.2);
  latency->set_measured(39.1);
  latency->set_has_measured(true);
  latency->set_met(true);
  v1::BudgetResult* throughput = r.add_budgets();
  throughput->set_resource("throughput_tokens_per_s");
  throughput->set_budget(1000);
  throughput->set_predicted(1200);
  throughput->set_met(true);
  v1::BudgetResult* memory = r.add_budgets();
  memory->set_resource("memory_mib");
  memory->set_budget(64);
  memory->set_predicted(60.5);
  memory->set_measured(66.25);
  memory->set_has_measured(true);
  memory->set_met(false);
  v1::QualityResult* parent = r.add_quality();
  parent->set_model("parent");
  parent->set_kd_loss(0);
  parent->set_task_accuracy(0.6123);
  parent->set_parameters(124'000'000);
  v1::QualityResult* student = r.add_quality();
  student->set_model("student");
  student->set_kd_loss(0.41237);
  student->set_task_accuracy(0.5871);
  student->set_parameters(62'500'000);
  r.set_search_tokens(16'000'000);
  r.set_recovery_tokens(2'000'000);
  v1::Artifact* model = r.add_artifacts();
  model->set_digest("ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12");
  model->set_kind("model");
  model->set_name("student.safetensors");
  model->set_size_bytes(250LL << 20);
  model->set_job_id("job-distill");
  *model->mutable_created_at() = ToProto(kT0);
  return r;
}

TEST(RenderReportTest, ArchitectureAndUniformBaseline) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-2");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  auto& arch = *r.mutable_architecture()->mutable_fields();
  arch["description"].set_string_value("hidden=96");
  auto* layers = arch["layers"].mutable_list_value();
  layers->add_values()->set_string_value("attention heads=2,kv=2");
  layers->add_values()->set_string_value("removed");
  // The coordinator's report holds the baseline's judged budgets (methods/autocompress).
  v1::BudgetResult* budget = r.add_baseline_budgets();
  budget->set_resource("latency_ms");
  budget->set_budget(40);
  budget->set_predicted(35);
  budget->set_measured(36.5);
  budget->set_has_measured(true);
  budget->set_met(true);
  EXPECT_EQ(RenderReport(r, Options()),
            "campaign cmp-2: SUCCEEDED\n"
            "\n"
            "budgets (uniform baseline)\n"
            "RESOURCE    BUDGET  PREDICTED  MEASURED  MET\n"
            "latency_ms   <= 40         35      36.5  ✓\n"
            "\n"
            "architecture: hidden=96\n"
            "  layer 0: attention heads=2,kv=2\n"
            "  layer 1: removed\n"
            "\n"
            "search tokens    0\n"
            "recovery tokens  0\n");
}

TEST(RenderReportTest, InfeasibleUniformBaselineSaysWhy) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-3");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  r.set_baseline_unavailable("no uniform architecture of 12 meets the budget");
  EXPECT_EQ(RenderReport(r, Options()),
            "campaign cmp-3: SUCCEEDED\n"
            "\n"
            "uniform baseline: none (no uniform architecture of 12 meets the budget)\n"
            "\n"
            "search tokens    0\n"
            "recovery tokens  0\n");
}

// A student that distilled worse than the uniform baseline is said in words; one that
// distilled at least as well (equal KD loss included) adds nothing.
TEST(RenderReportTest, StudentBelowTheUniformBaselineIsSaid) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-4");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  v1::QualityResult* student = r.add_quality();
  student->set_model("student");
  student->set_kd_loss(0.803);
  student->set_task_accuracy(0.205);
  student->set_parameters(1000);
  v1::QualityResult* baseline = r.add_quality();
  baseline->set_model("baseline");
  baseline->set_kd_loss(0.459);
  baseline->set_task_accuracy(0.504);
  baseline->set_parameters(1200);
  const std::string below = RenderReport(r, Options());
  EXPECT_THAT(below, HasSubstr(
      "STUDENT BELOW THE UNIFORM BASELINE: KD loss 0.803 against the baseline's 0.459, task "
      "accuracy 0.205 against 0.504: the searched architecture lost to a uniform one within "
      "the same budgets\n"));
  student->set_kd_loss(0.459);
  EXPECT_THAT(RenderReport(r, Options()), Not(HasSubstr("UNIFORM BASELINE:")));
  r.mutable_quality()->RemoveLast();
  student->set_kd_loss(0.9);
  EXPECT_THAT(RenderReport(r, Options()), Not(HasSubstr("UNIFORM BASELINE:")));
}

TEST(RenderReportTest, MeasuredInLlamaCppWithTheEquivalenceGate) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-5");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  auto add = [&](const char* resource, double budget, double measured) {
    v1::BudgetResult* b = r.add_budgets();
    b->set_resource(resource);
    b->set_budget(budget);
    b->set_predicted(NAN);
    b->set_has_measured(true);
    b->set_measured(measured);
    b->set_met(true);
  };
  add("equivalence_max_kl", 1e-3, 5.3e-7);
  add("equivalence_argmax_agreement", 0.99, 1);
  v1::JobOutput& verify = (*r.mutable_outputs())["verify"];
  verify.mutable_engine()->set_name("llama.cpp");
  verify.mutable_engine()->set_version("3.21.1");
  verify.mutable_engine()->set_build("llama.cpp v0.4.0 prebuilt");
  verify.mutable_measured()->set_latency_statistic("p90 of 50 whole requests");
  verify.mutable_equivalence()->set_passed(true);
  verify.mutable_equivalence()->set_positions(512);
  const std::string out = RenderReport(r, Options());
  EXPECT_THAT(out, HasSubstr("equivalence_max_kl            <= 0.001          -   5.3e-07  ✓\n"));
  EXPECT_THAT(out, HasSubstr("equivalence_argmax_agreement   >= 0.99          -         1  ✓\n"));
  EXPECT_THAT(out, HasSubstr("measured in llama.cpp 3.21.1 (llama.cpp v0.4.0 prebuilt); latency: "
                             "p90 of 50 whole requests; equivalence gate passed over 512 "
                             "positions\n"));
}

// The measured settle's rungs: predicted / measured -> fitted per budgeted resource, which
// fit, the chosen one starred, and why.
TEST(RenderReportTest, MeasuredSettleRungs) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-8");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  v1::BudgetResult* latency = r.add_budgets();
  latency->set_resource("latency_ms");
  latency->set_budget(22);
  latency->set_predicted(19);
  latency->set_has_measured(true);
  latency->set_measured(21.1);
  latency->set_met(true);
  v1::autocompress::SearchResult result;
  v1::autocompress::Settle& s = *result.mutable_settle();
  s.set_ladder_steps(9);
  s.set_margin(0.03);
  s.set_latency_scale(1.1);
  s.set_memory_scale(1.0);
  s.set_chosen(1);
  s.set_reason("rung 2 of 3 is the largest that fits");
  const double rows[3][4] = {{0, 17, 18.7, 18.7}, {4, 19, 20.9, 20.9}, {9, 21, 23.1, 23.1}};
  for (const auto& row : rows) {
    v1::autocompress::SettleRung& g = *s.add_rungs();
    g.set_step(static_cast<int>(row[0]));
    g.mutable_predicted()->set_latency_ms(row[1]);
    g.mutable_measured()->set_latency_ms(row[2]);
    g.mutable_corrected()->set_latency_ms(row[3]);
    g.set_fits(row[0] < 9);
    if (row[0] > 0) g.set_change(absl::StrCat("layers[2].mlp_ffn step ", row[0]));
  }
  SetDetail((*r.mutable_outputs())["settle"], result);
  const std::string out = RenderReport(r, Options());
  EXPECT_THAT(out, HasSubstr("\nmeasured settle: 3 of the ladder's 10 rungs served (margin 3.0%; "
                             "measured / predicted over them: latency x1.100, memory x1.000; "
                             "fit: the measurements made monotone along each ladder)\n"));
  EXPECT_THAT(out, HasSubstr("17 / 18.7 -> 18.7  ✓     (the search's choice)"));
  EXPECT_THAT(out, HasSubstr(" 2 *     4"));
  EXPECT_THAT(out, HasSubstr("21 / 23.1 -> 23.1  ✗     layers[2].mlp_ffn step 9"));
  EXPECT_THAT(out, HasSubstr("chosen: rung 2 (*): rung 2 of 3 is the largest that fits\n"));
  EXPECT_THAT(out, Not(HasSubstr("MEMORY")));  // not budgeted: no column
  EXPECT_THAT(out, Not(HasSubstr("slow host")));  // no slow-host check ran
  // A rung the measure job served in a further pass says so.
  s.mutable_rungs(2)->set_refined(true);
  SetDetail((*r.mutable_outputs())["settle"], result);
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("21 / 23.1 -> 23.1  ✗     layers[2].mlp_ffn step 9 (further pass)"));
  // Ladders in fine steps say how fine.
  s.set_fine_steps(4);
  SetDetail((*r.mutable_outputs())["settle"], result);
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("3 of the ladder's 10 rungs served, the ladders in 1/4 steps of the "
                        "search space's widths (margin"));

  // The measure job served the rungs again on a slow host: every attempt's scale, the kept
  // one, and whether the host was still slow then.
  s.add_host_scales(1.383);
  s.add_host_scales(1.021);
  s.set_kept_attempt(1);
  s.set_slow_host_bound(0.1);
  s.set_slow_host_pause_s(60);
  SetDetail((*r.mutable_outputs())["settle"], result);
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("\nslow host: the rungs measured over x1.100 of the table as a set (its "
                        "validated worst error, or the agent's floor), so they were served "
                        "again after pauses of 60 s: x1.383, x1.021 (kept)\n"));
  s.set_host_scales(1, 1.2);
  SetDetail((*r.mutable_outputs())["settle"], result);
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("x1.383, x1.200 (kept); STILL SLOW on every attempt: the fastest was "
                        "kept, and verify may measure the student faster than the settle did\n"));
}

// With a branch ladder the table says which ladder each rung is on and the held-out KD loss
// that chose between the ladders' picks.
TEST(RenderReportTest, MeasuredSettleBranchesShowTheirLadderAndLoss) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-9");
  v1::BudgetResult* latency = r.add_budgets();
  latency->set_resource("latency_ms");
  latency->set_budget(22);
  v1::autocompress::SearchResult result;
  v1::autocompress::Settle& s = *result.mutable_settle();
  s.set_chosen(1);
  s.set_reason("the fitting rung of lowest held-out KD loss");
  v1::autocompress::SettleRung& own = *s.add_rungs();
  own.mutable_measured()->set_latency_ms(18.8);
  own.set_fits(true);
  own.set_kd_loss(0.3125);
  v1::autocompress::SettleRung& branch = *s.add_rungs();
  branch.set_ladder(1);
  branch.mutable_measured()->set_latency_ms(21.1);
  branch.set_fits(true);
  branch.set_kd_loss(0.27);
  branch.set_change("hidden 96 -> 128, layers[3].mlp_ffn 256 -> 0");
  SetDetail((*r.mutable_outputs())["settle"], result);
  const std::string out = RenderReport(r, Options());
  EXPECT_THAT(out, HasSubstr("measured settle: 2 rungs served: 1 of the search's ladder's 1, 1 "
                             "on 1 branch (margin"));
  EXPECT_THAT(out, HasSubstr("RUNG  LADDER    STEP"));
  EXPECT_THAT(out, HasSubstr("0.3125  (the search's choice)"));
  EXPECT_THAT(out, HasSubstr(" 2 *  branch 1"));
  EXPECT_THAT(out, HasSubstr("0.2700  hidden 96 -> 128, layers[3].mlp_ffn 256 -> 0"));
}

TEST(RenderReportTest, CostTableCheckHeldOrSuspect) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-6");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  v1::CostTableCheck& c = *r.mutable_cost_table_check();
  c.set_cost_table_id("ct-1");
  c.set_error(0.018);
  c.set_validated_mape(0.014);
  c.set_validated_max_error(0.031);
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("cost table ct-1: predicted within 1.8% of the measurement, inside its "
                        "validated error (worst 3.1%)\n"));
  // A table validated at 24.7% is "inside" almost anything: said so.
  c.set_error(0.202);
  c.set_validated_mape(0.247);
  c.set_validated_max_error(0.669);
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("cost table ct-1: predicted within 20.2% of the measurement, inside its "
                        "validated error (worst 66.9%); its held-out latency MAPE 24.7% is over "
                        "the 5% a table is trusted at, so the campaign's choice rests on a rough "
                        "table\n"));
  // Judged on the table's footing by the parent served alongside.
  c.set_validated_mape(0.014);
  c.set_validated_max_error(0.031);
  c.set_host_scale(0.912);
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("cost table ct-1: predicted within 20.2% of the measurement (on the "
                        "table's footing: the parent served alongside the verify ran x0.912 as "
                        "fast as when the table was profiled), inside its validated error"));
  c.clear_host_scale();
  c.set_error(0.018);
  c.set_validated_mape(0.014);
  c.set_validated_max_error(0.031);
  c.set_measurement_disturbed(true);  // within the bound: judged all the same
  EXPECT_THAT(RenderReport(r, Options()), HasSubstr("cost table ct-1: predicted within 1.8%"));
  c.set_error(0.058);
  c.set_reason("campaign cmp-6: predicted 38.30 ms, measured 36.20 ms (5.8% off), but ...");
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("cost table ct-1 not judged: campaign cmp-6: predicted 38.30 ms, "
                        "measured 36.20 ms (5.8% off), but ...\n"));
  c.set_measurement_disturbed(false);
  c.set_suspect(true);
  c.set_reason("campaign cmp-6: predicted 38.30 ms, measured 36.20 ms (5.8% off; ...)");
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("COST TABLE SUSPECT: ct-1 campaign cmp-6: predicted 38.30 ms, measured "
                        "36.20 ms (5.8% off; ...); it will not be reused (the next campaign "
                        "profiles again)\n"));
}

TEST(RenderReportTest, PerplexityExactMatchFloorsAndDatasets) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-9");
  r.set_state(v1::CAMPAIGN_FAILED);
  for (const auto& [model, ppl] : {std::pair<const char*, double>{"parent", 12.5},
                                   {"student", 17.25}}) {
    v1::QualityResult* q = r.add_quality();
    q->set_model(model);
    q->set_parameters(1000);
    q->set_perplexity(ppl);
  }
  r.mutable_quality(1)->set_exact_match(0.25);
  v1::QualityCheck& c = *r.mutable_quality_check();
  c.set_eval_tokens(12345);
  c.set_reason("quality floor missed on data.eval: student perplexity 17.25 is +38.0% ...");
  v1::DatasetUse* d = r.add_datasets();
  d->set_role("eval");
  d->set_path("/data/eval.jsonl");
  d->set_artifact_digest("bcff78d7cc176cbf690dbda058653729694b2adcce7e59822a98e17a7333c8d4");
  const std::string out = RenderReport(r, Options());
  EXPECT_THAT(out, HasSubstr("PERPLEXITY  EXACT MATCH"));
  EXPECT_THAT(out, HasSubstr("17.25"));
  EXPECT_THAT(out, HasSubstr("0.25"));
  EXPECT_THAT(out, HasSubstr("QUALITY FLOOR MISSED: quality floor missed on data.eval: student "
                             "perplexity 17.25 is +38.0% ... (12.3k eval tokens)\n"));
  EXPECT_THAT(out, HasSubstr("data.eval: /data/eval.jsonl sha256:bcff78d7cc17\n"));
}

TEST(RenderReportTest, RecompressionSaysWhatWasRedoneAndWhy) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-7");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  v1::RecompressOrigin& o = *r.mutable_recompress();
  o.set_source_campaign_id("cmp-1");
  o.set_old_engine_version("3.20.0");
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("recompression of cmp-1 (engine 3.20.0): drift check pending\n"));
  o.set_decided(true);
  o.set_reason("cost table ct-1 still holds in llama.cpp 3.21.1: ...; not recompressed");
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("recompression of cmp-1 (engine 3.20.0): cost table ct-1 still holds "
                        "in llama.cpp 3.21.1: ...; not recompressed\n"));
}

// Budgets relative to the parent: the factor, the parent's measured figure and the budget
// the jobs were held to, under the student's budgets; "resolved once ..." before the profile.
TEST(RenderReportTest, RelativeBudgetsShowTheParentsFigure) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-8");
  r.set_state(v1::CAMPAIGN_RUNNING);
  v1::RelativeBudget* latency = r.add_relative_budgets();
  latency->set_resource("latency_ms");
  latency->set_factor(0.7);
  v1::RelativeBudget* throughput = r.add_relative_budgets();
  throughput->set_resource("throughput_tokens_per_s");
  throughput->set_factor(1.25);
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("latency_ms <= 0.7 x the parent's (resolved once the profile job has "
                        "measured the parent)\nthroughput_tokens_per_s >= 1.25 x the parent's "
                        "(resolved once the profile job has measured the parent)\n"));
  latency->set_resolved(true);
  latency->set_parent(13.9);
  latency->set_budget(9.73);
  latency->set_cost_table_id("ct-1");
  latency->set_parent_statistic("p50 of 15 whole requests");
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("latency_ms <= 0.7 x the parent's 13.9 = 9.73 (the parent served in "
                        "the target engine, cost table ct-1: p50 of 15 whole requests)\n"));
  // The verify judged it against the parent served alongside the student.
  latency->set_verify_parent(15.1);
  latency->set_verify_budget(10.57);
  EXPECT_THAT(RenderReport(r, Options()),
              HasSubstr("p50 of 15 whole requests)\n  verified against the parent served "
                        "alongside the student: 0.7 x 15.1 = 10.57\n"));
}

TEST(RenderReportTest, StudentExportsOfAnHfParent) {
  v1::CampaignReport r;
  r.set_campaign_id("cmp-4");
  r.set_state(v1::CAMPAIGN_SUCCEEDED);
  v1::DistillResult distill;
  v1::StudentExport* hf = distill.add_exports();
  hf->set_layout("hf");
  hf->set_unavailable("decoder layer 1 has 2/1 attention/KV heads");
  v1::StudentExport* gguf = distill.add_exports();
  gguf->set_layout("gguf");
  gguf->set_format("deci");
  gguf->set_digest("5b0672b0c60843729c3badc548948738b20dadc9d77b01f5737b873bb5220594");
  SetDetail((*r.mutable_outputs())["distill"], distill);
  EXPECT_EQ(RenderReport(r, Options()),
            "campaign cmp-4: SUCCEEDED\n"
            "\n"
            "search tokens    0\n"
            "recovery tokens  0\n"
            "\n"
            "student for serving engines (tailor artifacts get DIGEST -o FILE)\n"
            "LAYOUT  FORMAT  ARTIFACT\n"
            "hf      -       unavailable: decoder layer 1 has 2/1 attention/KV heads\n"
            "gguf    deci    5b0672b0c608\n");
}

TEST(RenderReportTest, BudgetsQualityTokensArtifacts) {
  EXPECT_EQ(RenderReport(SampleReport(), Options()),
            "campaign cmp-1: SUCCEEDED\n"
            "\n"
            "budgets (student)\n"
            "RESOURCE                  BUDGET  PREDICTED  MEASURED  MET\n"
            "latency_ms                 <= 40       38.2      39.1  ✓\n"
            "throughput_tokens_per_s  >= 1000       1200         -  ✓\n"
            "memory_mib                 <= 64       60.5     66.25  ✗\n"
            "\n"
            "MODEL    KD LOSS  TASK ACCURACY  PARAMETERS\n"
            "parent         0         0.6123     124.00M\n"
            "student   0.4124         0.5871      62.50M\n"
            "\n"
            "search tokens    16.00M\n"
            "recovery tokens  2.00M\n"
            "\n"
            "DIGEST        KIND   NAME                      SIZE  JOB          CREATED\n"
            "ab12cd34ef56  model  student.safetensors  250.0 MiB  job-distill  2023-11-14 "
            "22:13:20 UTC\n");
}

// A retried job's earlier attempts keep their artifact rows, marked as superseded.
TEST(RenderArtifactsTest, EarlierAttemptsAreMarkedSuperseded) {
  std::vector<v1::Artifact> artifacts(3);
  for (int i = 0; i < 3; ++i) {
    artifacts[i].set_digest(std::string(64, 'a' + i));
    artifacts[i].set_kind("model");
    artifacts[i].set_name(absl::StrCat("m", i, ".tar"));
    artifacts[i].set_size_bytes(1024);
    artifacts[i].set_job_id(i < 2 ? "job-distill" : "job-rank");
    artifacts[i].set_attempt(i == 0 ? 1 : 2);
    artifacts[i].mutable_created_at()->set_seconds(1700000000);
  }
  EXPECT_EQ(RenderArtifacts(artifacts, Options()),
            "DIGEST        KIND   NAME       SIZE  JOB                                  "
            "CREATED\n"
            "aaaaaaaaaaaa  model  m0.tar  1.0 KiB  job-distill (attempt 1, superseded)  "
            "2023-11-14 22:13:20 UTC\n"
            "bbbbbbbbbbbb  model  m1.tar  1.0 KiB  job-distill                          "
            "2023-11-14 22:13:20 UTC\n"
            "cccccccccccc  model  m2.tar  1.0 KiB  job-rank                             "
            "2023-11-14 22:13:20 UTC\n");
}

v1::Event MakeEvent(int64_t seq, int seconds, const std::string& job_id, v1::JobState js,
                    v1::CampaignState cs, const std::string& message) {
  v1::Event e;
  e.set_seq(seq);
  e.set_campaign_id("cmp-1");
  e.set_job_id(job_id);
  *e.mutable_time() = ToProto(kT0 + absl::Seconds(seconds));
  e.set_job_state(js);
  e.set_campaign_state(cs);
  e.set_message(message);
  return e;
}

TEST(RenderEventLineTest, JobCampaignAndProgressEvents) {
  EXPECT_EQ(RenderEventLine(MakeEvent(1, 0, "", v1::JOB_STATE_UNSPECIFIED, v1::CAMPAIGN_QUEUED,
                                      "campaign submitted"),
                            "-", absl::UTCTimeZone()),
            "22:13:20 1 - QUEUED campaign submitted");
  EXPECT_EQ(RenderEventLine(MakeEvent(2, 1, "job-rank", v1::JOB_LEASED, v1::CAMPAIGN_RUNNING,
                                      "leased by agt-1"),
                            "rank", absl::UTCTimeZone()),
            "22:13:21 2 rank LEASED leased by agt-1");
  v1::Event progress = MakeEvent(3, 62, "job-rank", v1::JOB_LEASED,
                                 v1::CAMPAIGN_STATE_UNSPECIFIED, "");
  progress.mutable_progress()->set_fraction(0.5);
  progress.mutable_progress()->set_step(5);
  progress.mutable_progress()->set_total_steps(10);
  progress.mutable_progress()->set_message("ranking layer 5");
  EXPECT_EQ(RenderEventLine(progress, "rank", absl::UTCTimeZone()),
            "22:14:22 3 rank LEASED ranking layer 5 (50%, step 5/10)");
  v1::Event bare;
  bare.set_seq(4);
  bare.set_type("heartbeat");
  bare.set_message("two\nlines");
  EXPECT_EQ(RenderEventLine(bare, "", absl::UTCTimeZone()), "--:--:-- 4 - heartbeat two lines");
}

TEST(WatchModelTest, RebuildsRowsFromEventsAndDrawsFrame) {
  v1::Campaign c = SampleCampaign();
  c.mutable_jobs()->DeleteSubrange(3, 3);  // profile, rank, search
  WatchModel model;
  model.Reset(c, /*from_start=*/true);
  model.Apply(MakeEvent(1, 0, "", v1::JOB_STATE_UNSPECIFIED, v1::CAMPAIGN_QUEUED, "submitted"));
  model.Apply(MakeEvent(2, 1, "job-profile", v1::JOB_SKIPPED, v1::CAMPAIGN_RUNNING,
                        "cost table reused"));
  model.Apply(MakeEvent(3, 2, "job-rank", v1::JOB_LEASED, v1::CAMPAIGN_STATE_UNSPECIFIED, ""));
  model.Apply(MakeEvent(4, 3, "job-rank", v1::JOB_RUNNABLE, v1::CAMPAIGN_STATE_UNSPECIFIED,
                        "lease expired"));
  model.Apply(MakeEvent(5, 4, "job-rank", v1::JOB_LEASED, v1::CAMPAIGN_STATE_UNSPECIFIED, ""));
  v1::Event p = MakeEvent(6, 5, "job-rank", v1::JOB_STATE_UNSPECIFIED,
                          v1::CAMPAIGN_STATE_UNSPECIFIED, "");
  p.mutable_progress()->set_fraction(0.25);
  p.mutable_progress()->set_step(1);
  p.mutable_progress()->set_total_steps(4);
  p.mutable_progress()->set_message("layer 1");
  model.Apply(p);
  EXPECT_EQ(model.state(), v1::CAMPAIGN_RUNNING);
  EXPECT_EQ(model.Label("job-rank"), "rank");
  EXPECT_EQ(model.Label(""), "-");
  EXPECT_EQ(model.Label("job-unknown"), "job-unknown");
  EXPECT_THAT(
      model.Render(kT0 + absl::Seconds(75), 0),
      ::testing::ElementsAre(
          "campaign cmp-1 (npc-cpu)  RUNNING  elapsed 1:15", "",
          "JOB      STATE    ATTEMPT  PROGRESS                     STEP  MESSAGE",
          "profile  SKIPPED        0                                     cost table reused",
          "rank     LEASED         2  [#####---------------]  25%   1/4  layer 1",
          "search   PENDING        0"));
  // Narrow terminals: every line fits one column short of the width.
  for (const std::string& line : model.Render(kT0, 40)) {
    EXPECT_LE(DisplayWidth(line), 39u) << line;
  }
}

TEST(WatchModelTest, FinalStateStopsTheClock) {
  v1::Campaign c = SampleCampaign();
  c.clear_jobs();
  WatchModel model;
  model.Reset(c, true);
  model.Apply(MakeEvent(9, 90, "", v1::JOB_STATE_UNSPECIFIED, v1::CAMPAIGN_SUCCEEDED, "done"));
  EXPECT_EQ(model.Render(kT0 + absl::Hours(1), 0)[0],
            "campaign cmp-1 (npc-cpu)  SUCCEEDED  elapsed 1:30");
}

TEST(RenderAdminTest, Queue) {
  v1::ListQueueResponse q;
  v1::QueueSummary* s = q.add_summary();
  s->set_device_kind("cpu");
  s->set_pending(2);
  s->set_runnable(1);
  s->set_leased(1);
  v1::QueueEntry* leased = q.add_entries();
  *leased->mutable_job() = MakeJob("rank", "rank", v1::JOB_LEASED, 1);
  leased->mutable_job()->set_agent_id("agt-1");
  leased->mutable_job()->mutable_resources()->set_device_kind("cpu");
  leased->set_campaign_name("npc-cpu");
  leased->set_team("platform");
  v1::QueueEntry* waiting = q.add_entries();
  *waiting->mutable_job() = MakeJob("verify", "verify", v1::JOB_RUNNABLE, 0);
  waiting->mutable_job()->set_waiting_reason("no agent");
  waiting->mutable_job()->mutable_resources()->set_device_kind("NVIDIA H200");
  waiting->mutable_job()->mutable_resources()->set_priority(10);
  waiting->set_campaign_name("big");
  waiting->set_team("ml");
  waiting->set_position(1);
  EXPECT_EQ(RenderQueue(q, Options()),
            "DEVICE  PENDING  RUNNABLE  LEASED\n"
            "cpu           2         1       1\n"
            "\n"
            "POS  JOB         KIND    CAMPAIGN  TEAM      DEVICE       PRIO  STATE     ATTEMPT  "
            "DETAIL\n"
            "  -  job-rank    rank    npc-cpu   platform  cpu             0  LEASED          1  "
            "agent agt-1\n"
            "  1  job-verify  verify  big       ml        NVIDIA H200    10  RUNNABLE        0  "
            "no agent\n");
  EXPECT_EQ(RenderQueue(v1::ListQueueResponse(), Options()), "queue is empty\n");
}

TEST(RenderAdminTest, Agents) {
  v1::ListAgentsResponse r;
  v1::Agent* a = r.add_agents();
  a->set_id("agt-1");
  a->mutable_info()->set_name("host1-cpu");
  a->mutable_info()->set_hostname("host1");
  a->mutable_info()->set_device_kind("cpu");
  a->mutable_info()->set_device("cpu");
  a->mutable_info()->set_memory_mib(16384);
  a->mutable_info()->set_engine("tailor-builtin");
  a->mutable_info()->set_engine_version("1");
  a->set_state(v1::AGENT_ONLINE);
  a->add_current_job_ids("job-rank");
  *a->mutable_last_heartbeat() = ToProto(kT0 + absl::Minutes(5) - absl::Seconds(3));
  EXPECT_EQ(RenderAgents(r, Options()),
            "ID     NAME       HOST   DEVICE KIND  DEVICE    MEMORY  ENGINE            STATE   "
            "JOBS  HEARTBEAT\n"
            "agt-1  host1-cpu  host1  cpu          cpu     16.0 GiB  tailor-builtin@1  ONLINE     "
            "1  3s ago\n");
  EXPECT_EQ(RenderAgents(v1::ListAgentsResponse(), Options()), "no agents\n");
}

v1::CostTable SampleCostTable() {
  v1::CostTable t;
  t.set_fingerprint("3f2a9c0d1e2b4a5f6789");
  t.set_device_kind("cpu");
  t.set_engine("tailor-builtin");
  t.set_engine_version("1");
  t.set_precision(v1::FP32);
  t.mutable_workload()->set_batch_size(1);
  t.mutable_workload()->set_input_tokens(128);
  t.mutable_workload()->set_output_tokens(32);
  t.mutable_workload()->set_cached_prefix_tokens(0);
  t.set_layer_family_version("hybrid-v1");
  t.set_parent_architecture("9d0e1f2a3b4c5d6e");
  t.set_t0_ms(1.25);
  t.set_latency_mape(0.032);
  t.set_latency_max_error(0.071);
  t.set_memory_mape(0.01);
  t.set_validated_architectures(16);
  t.set_campaign_id("cmp-1");
  t.set_job_id("job-profile");
  *t.mutable_created_at() = ToProto(kT0);
  v1::CostEntry* e = t.add_entries();
  e->set_layer_kind("attention");
  e->set_config("heads=8,kv=2");
  e->set_phase("prefill");
  e->set_time_ms(0.4321);
  e->set_memory_mib(12.5);
  return t;
}

TEST(RenderAdminTest, CostTables) {
  v1::ListCostTablesResponse r;
  *r.add_tables() = SampleCostTable();
  r.mutable_tables(0)->set_stale(true);
  EXPECT_EQ(RenderCostTables(r, Options()),
            "FINGERPRINT   PARENT        DEVICE  ENGINE            PRECISION  B/IN/OUT/PREFIX  "
            "LATENCY MAPE  MEMORY MAPE  CREATED                  STATE\n"
            "3f2a9c0d1e2b  9d0e1f2a3b4c  cpu     tailor-builtin@1  FP32       1/128/32/0       "
            "        3.2%         1.0%  2023-11-14 22:13:20 UTC  stale\n");
  r.mutable_tables(0)->clear_parent_architecture();  // stored before schema 7
  EXPECT_THAT(RenderCostTables(r, Options()), HasSubstr("3f2a9c0d1e2b  -       cpu"));
  EXPECT_EQ(RenderCostTable(SampleCostTable(), Options()),
            "fingerprint          3f2a9c0d1e2b4a5f6789\n"
            "parent architecture  9d0e1f2a3b4c5d6e\n"
            "device               cpu\n"
            "engine               tailor-builtin@1\n"
            "precision            FP32\n"
            "workload             1/128/32/0 (batch/input/output/cached prefix)\n"
            "layer family         hybrid-v1\n"
            "t0                   1.25 ms\n"
            "validation           latency MAPE 3.2% (max 7.1%), memory MAPE 1.0% over 16 "
            "architectures\n"
            "produced by          campaign cmp-1 job job-profile\n"
            "created              2023-11-14 22:13:20 UTC\n"
            "\n"
            "LAYER      CONFIG        PHASE    TIME MS  MEMORY MIB\n"
            "attention  heads=8,kv=2  prefill   0.4321        12.5\n");
}

TEST(RenderAdminTest, Recompress) {
  v1::RecompressRequest req;
  req.set_engine_version("2");
  req.set_dry_run(true);
  v1::RecompressResponse resp;
  v1::RecompressEntry* e = resp.add_entries();
  e->set_source_campaign_id("cmp-1");
  e->set_old_engine_version("1");
  EXPECT_EQ(RenderRecompress(req, resp),
            "SOURCE CAMPAIGN  OLD VERSION  NEW CAMPAIGN  SUBMITTED\n"
            "cmp-1            1            -             dry run\n"
            "\n"
            "dry run: 1 campaign(s) would be recompressed for every engine at version 2\n");
  EXPECT_EQ(RenderRecompress(req, v1::RecompressResponse()),
            "nothing to recompress for every engine at version 2\n");
}

TEST(ExitCodeTest, StatusAndCampaignMapping) {
  EXPECT_EQ(ExitCodeForStatus(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeForStatus(absl::UnavailableError("x")), 1);
  EXPECT_EQ(ExitCodeForStatus(absl::InvalidArgumentError("x")), 1);
  EXPECT_EQ(ExitCodeForCampaign(v1::CAMPAIGN_SUCCEEDED), 0);
  EXPECT_EQ(ExitCodeForCampaign(v1::CAMPAIGN_FAILED), 1);
  EXPECT_EQ(ExitCodeForCampaign(v1::CAMPAIGN_CANCELLED), 1);
  EXPECT_EQ(ExitCodeForCampaign(v1::CAMPAIGN_RUNNING), 1);
}

TEST(ExitCodeTest, ErrorsCarryServerMessageAndHint) {
  std::ostringstream err;
  EXPECT_EQ(ReportError(err, "cannot get campaign c-1", absl::UnavailableError("connect failed"),
                        "10.0.0.1:50051"),
            1);
  EXPECT_EQ(err.str(),
            "tailor: cannot get campaign c-1: connect failed\n"
            "  hint: is tailor-coordinator running at 10.0.0.1:50051? start it or pass "
            "--coordinator\n");
  EXPECT_THAT(HintFor(absl::NotFoundError(""), "a", "check the digest"), "check the digest");
  EXPECT_THAT(HintFor(absl::NotFoundError(""), "a"), HasSubstr("tailor list"));
  EXPECT_THAT(HintFor(absl::UnauthenticatedError(""), "a"), HasSubstr("--token"));
  EXPECT_THAT(HintFor(absl::DeadlineExceededError(""), "a"), HasSubstr("--timeout"));
  EXPECT_EQ(HintFor(absl::InternalError(""), "a"), "");
  EXPECT_EQ(HintFor(absl::InvalidArgumentError(""), "a"), "");
  std::ostringstream usage;
  EXPECT_EQ(ReportUsageError(usage, "bad"), 2);
  EXPECT_EQ(usage.str(), "tailor: bad\nRun with --help for more information.\n");
  std::ostringstream empty;
  ReportError(empty, "x", absl::InternalError(""), "a");
  EXPECT_EQ(empty.str(), "tailor: x: INTERNAL\n");
}

}  // namespace
}  // namespace tailor::cli
