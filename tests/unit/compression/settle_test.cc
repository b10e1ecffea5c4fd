// The measured settle's choice (compression/autocompress/settle.h): which rungs are measured,
// the measurements made monotone along the ladder, and the largest rung that fits every
// contract budget less the margin with its own measurement within the budget.

#include "compression/autocompress/settle.h"

#include <vector>

#include "gtest/gtest.h"

namespace tailor::autocompress {
namespace {

TEST(SettleTest, RungsToMeasureSpreadEvenlyAndKeepBothEnds) {
  EXPECT_EQ(RungsToMeasure(5, 8), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(RungsToMeasure(13, 4), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(RungsToMeasure(10, 4), (std::vector<int>{0, 3, 6, 9}));
  EXPECT_EQ(RungsToMeasure(1, 8), (std::vector<int>{0}));
  EXPECT_EQ(RungsToMeasure(7, 1), (std::vector<int>{0}));
  EXPECT_EQ(RungsToMeasure(7, 2), (std::vector<int>{0, 6}));
  EXPECT_TRUE(RungsToMeasure(0, 8).empty());
  EXPECT_TRUE(RungsToMeasure(5, 0).empty());
}

// The second pass: the budget (22 less 2% = 21.56) falls between served rungs 4 (20.1 ms)
// and 8 (23.5): only rungs 5-7 can use more of it, and only they are served, evenly spaced
// within the cap. Nothing when the top is within, nothing is, or the gap is empty.
TEST(SettleTest, RungsToRefineServeTheGapWhereTheBudgetFalls) {
  Budgets b;
  b.latency_ms = 22.0;
  b.memory_mib = 3.0;
  auto figures = [](const std::vector<double>& ms) {
    std::vector<costmodel::Prediction> out;
    for (double m : ms) {
      costmodel::Prediction& p = out.emplace_back();
      p.latency_ms = m;
      p.memory_mib = m > 0 ? 2.5 : 0;
    }
    return out;
  };
  const std::vector<bool> served = {true, false, false, false, true, false, false, false, true};
  const std::vector<costmodel::Prediction> measured =
      figures({16.0, 0, 0, 0, 20.1, 0, 0, 0, 23.5});
  EXPECT_EQ(RungsToRefine(served, measured, b, 0.02, 4), (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(RungsToRefine(served, measured, b, 0.02, 2), (std::vector<int>{5, 7}));
  EXPECT_EQ(RungsToRefine(served, measured, b, 0.02, 1), (std::vector<int>{6}));  // the middle
  // Rung 4 at 21.7 is over 21.56: the gap is below it, between rungs 0 and 4.
  EXPECT_EQ(RungsToRefine(served, figures({16.0, 0, 0, 0, 21.7, 0, 0, 0, 23.5}), b, 0.02, 4),
            (std::vector<int>{1, 2, 3}));
  // Memory over its budget counts the same as latency; memory takes no margin (2.99 of 3.0
  // is within: it does not move between serves).
  std::vector<costmodel::Prediction> heavy = measured;
  heavy[4].memory_mib = 3.01;
  EXPECT_EQ(RungsToRefine(served, heavy, b, 0.02, 4), (std::vector<int>{1, 2, 3}));
  heavy[4].memory_mib = 2.99;
  EXPECT_EQ(RungsToRefine(served, heavy, b, 0.02, 4), (std::vector<int>{5, 6, 7}));
  EXPECT_TRUE(RungsToRefine(served, figures({16.0, 0, 0, 0, 20.1, 0, 0, 0, 21.0}), b, 0.02, 4)
                  .empty());  // the top is within
  EXPECT_TRUE(RungsToRefine(served, figures({22.5, 0, 0, 0, 23.0, 0, 0, 0, 24.0}), b, 0.02, 4)
                  .empty());  // nothing served is
  EXPECT_TRUE(RungsToRefine({true, true, true}, figures({18, 20, 23}), b, 0.02, 4).empty());
}

MeasuredRung Rung(double predicted_ms, double measured_ms, double predicted_mib = 1.0,
                  double measured_mib = 1.0) {
  MeasuredRung r;
  r.predicted.latency_ms = predicted_ms;
  r.measured.latency_ms = measured_ms;
  r.predicted.memory_mib = predicted_mib;
  r.measured.memory_mib = measured_mib;
  return r;
}

// The table is 10% optimistic around the choice: the measurements, not the predictions,
// decide, so the student is the rung measured under 97% of the budget; the ratio is reported.
// A rung that stands for many unserved fine steps reads as the widths it changed: the steps
// of one axis merged at the place of its first, anything else as written.
TEST(SettleTest, JoinStepsMergesTheStepsOfOneAxis) {
  EXPECT_EQ(JoinSteps({"layers[2].mlp_ffn 64 -> 80", "layers[2].mlp_ffn 80 -> 96",
                       "layers[7].mlp_ffn 64 -> 80", "layers[2].mlp_ffn 96 -> 112",
                       "hidden 96 -> 128 (grown back)", "layers[7].mlp_ffn 80 -> 96"}),
            "layers[2].mlp_ffn 64 -> 112, layers[7].mlp_ffn 64 -> 96, "
            "hidden 96 -> 128 (grown back)");
  EXPECT_EQ(JoinSteps({"mamba_heads 2 -> 4"}), "mamba_heads 2 -> 4");
  EXPECT_EQ(JoinSteps({}), "");
}

TEST(SettleTest, ChoosesTheLargestRungTheMeasurementsFit) {
  Budgets b;
  b.latency_ms = 22.0;
  const std::vector<MeasuredRung> rungs = {Rung(16, 17.6), Rung(17, 18.7), Rung(18, 19.8),
                                           Rung(19, 20.9), Rung(20, 22.0)};
  const SettleDecision d = ChooseRung(rungs, b, 0.03);
  EXPECT_NEAR(d.latency_scale, 1.1, 1e-12);
  EXPECT_DOUBLE_EQ(d.memory_scale, 1.0);
  ASSERT_EQ(d.corrected.size(), 5u);
  EXPECT_DOUBLE_EQ(d.corrected[3].latency_ms, 20.9);  // already monotone: the measurement
  // Against 22 x 0.97 = 21.34: 20.9 fits, 22.0 does not.
  EXPECT_EQ(d.fits, (std::vector<bool>{true, true, true, true, false}));
  EXPECT_EQ(d.chosen, 3);
  EXPECT_NE(d.reason.find("rung 4 of 5"), std::string::npos) << d.reason;
}

// One lucky low measurement does not take a rung: a wider rung never costs less, so rung 4's
// 20.1 ms is averaged with rung 3's 22.9 (pool adjacent violators) to 21.5, over 21.34.
TEST(SettleTest, OneNoisyMeasurementDoesNotDecide) {
  Budgets b;
  b.latency_ms = 22.0;
  const std::vector<MeasuredRung> rungs = {Rung(17, 18.7), Rung(18, 19.8), Rung(19, 22.9),
                                           Rung(20, 20.1), Rung(21, 23.0)};
  const SettleDecision d = ChooseRung(rungs, b, 0.03);
  EXPECT_DOUBLE_EQ(d.corrected[1].latency_ms, 19.8);
  EXPECT_DOUBLE_EQ(d.corrected[2].latency_ms, 21.5);
  EXPECT_DOUBLE_EQ(d.corrected[3].latency_ms, 21.5);
  EXPECT_DOUBLE_EQ(d.corrected[4].latency_ms, 23.0);
  EXPECT_EQ(d.fits, (std::vector<bool>{true, true, false, false, false}));
  EXPECT_EQ(d.chosen, 1);
  EXPECT_NE(d.reason.find("rung 2 of 5"), std::string::npos) << d.reason;
}

// A rung whose own measurement is over the budget never fits, whatever the fit says; and
// every budgeted resource must fit (memory here).
TEST(SettleTest, EveryBudgetAndTheRungsOwnMeasurementMustFit) {
  Budgets b;
  b.latency_ms = 22.0;
  b.memory_mib = 3.0;
  const std::vector<MeasuredRung> rungs = {Rung(18, 18, 2.5, 2.5), Rung(19, 19, 2.6, 2.6),
                                           Rung(20, 22.5, 2.7, 2.7), Rung(21, 20.1, 2.8, 3.02)};
  const SettleDecision d = ChooseRung(rungs, b, 0.03);
  // rung 3: fitted 21.3 <= 21.34 but measured 22.5 > 22; rung 4: memory 3.02 > 3.
  EXPECT_DOUBLE_EQ(d.corrected[2].latency_ms, 21.3);
  EXPECT_EQ(d.fits, (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(d.chosen, 1);
}

// Memory takes no margin (the 2026-12-05 llama.cpp settle: rung 5 at 2.96 of 3.0 MiB was
// refused for a 3% margin memory does not need; its latency fitted 21.13 of 22 less 3%).
TEST(SettleTest, MemoryTakesNoMargin) {
  Budgets b;
  b.latency_ms = 22.0;
  b.memory_mib = 3.0;
  const std::vector<MeasuredRung> rungs = {Rung(21.55, 21.59, 2.96, 2.9),
                                           Rung(21.7, 20.67, 3.02, 2.96)};
  const SettleDecision d = ChooseRung(rungs, b, 0.03);
  EXPECT_DOUBLE_EQ(d.corrected[1].latency_ms, 21.13);
  EXPECT_EQ(d.fits, (std::vector<bool>{true, true}));
  EXPECT_EQ(d.chosen, 1);
}

// A resource the engine did not measure reads 0: never a fit, however far under the budget.
TEST(SettleTest, AnUnmeasuredBudgetNeverFits) {
  Budgets b;
  b.latency_ms = 22.0;
  b.memory_mib = 3.0;
  const SettleDecision d =
      ChooseRung({Rung(18, 18, 2.5, 2.5), Rung(19, 19, 2.6, 0.0)}, b, 0.03);
  EXPECT_EQ(d.fits, (std::vector<bool>{true, false}));
  EXPECT_EQ(d.chosen, 0);
}

TEST(SettleTest, NoRungFitsKeepsTheSearchsChoice) {
  Budgets b;
  b.latency_ms = 15.0;
  const SettleDecision d = ChooseRung({Rung(16, 17), Rung(17, 18)}, b, 0.03);
  EXPECT_EQ(d.fits, (std::vector<bool>{false, false}));
  EXPECT_EQ(d.chosen, 0);
  EXPECT_NE(d.reason.find("kept the search's choice"), std::string::npos) << d.reason;
}

// With a descent below the search's choice (step < 0), nothing fitting takes the smallest
// rung, which is not the search's choice, and the reason says so.
TEST(SettleTest, NoRungFitsTakesTheBottomOfTheDescent) {
  Budgets b;
  b.latency_ms = 15.0;
  MeasuredRung bottom = Rung(15, 16), choice = Rung(16, 17);
  bottom.step = -3;
  const SettleDecision d = ChooseRung({bottom, choice}, b, 0.03);
  EXPECT_EQ(d.chosen, 0);
  EXPECT_NE(d.reason.find("took the smallest, below the search's choice"), std::string::npos)
      << d.reason;
}

// Nothing fits and a wider rung measured no dearer than the bottom: the fit pools them, and
// of the rungs least over the budget the widest is taken (the quickstart's parent in
// llama.cpp, 2026-12-07: the descent's bottom 11.47 ms, the search's choice 10.59, the next
// 11.42, all over 10.32 less 2%).
TEST(SettleTest, NoRungFitsTakesTheWidestOfTheRungsLeastOver) {
  Budgets b;
  b.latency_ms = 10.32;
  b.memory_mib = 2.81;
  MeasuredRung bottom = Rung(8.2, 11.47, 1.97, 1.87), choice = Rung(9.16, 10.59, 2.29, 2.19);
  MeasuredRung above = Rung(11.22, 11.42, 2.48, 2.4), top = Rung(11.27, 12.06, 2.49, 2.42);
  bottom.step = -20;
  above.step = 1;
  top.step = 2;
  SettleDecision d = ChooseRung({bottom, choice, above, top}, b, 0.02);
  EXPECT_EQ(d.fits, (std::vector<bool>{false, false, false, false}));
  EXPECT_NEAR(d.corrected[0].latency_ms, 11.03, 1e-9);  // the bottom and the choice pooled
  EXPECT_NEAR(d.corrected[1].latency_ms, 11.03, 1e-9);
  EXPECT_EQ(d.chosen, 1);
  EXPECT_NE(d.reason.find("took rung 2 (the search's choice), the largest of those the "
                          "measurements place least over them"),
            std::string::npos)
      << d.reason;
  // Told apart (the choice measured dearer), the bottom is least over.
  choice.measured.latency_ms = 11.6;
  d = ChooseRung({bottom, choice, above, top}, b, 0.02);
  EXPECT_EQ(d.chosen, 0);
  // A budgeted resource measured on no rung: none is least over, the smallest stays.
  for (MeasuredRung* r : {&bottom, &choice, &above, &top}) r->measured.memory_mib = 0;
  d = ChooseRung({bottom, choice, above, top}, b, 0.02);
  EXPECT_EQ(d.chosen, 0);
  EXPECT_NE(d.reason.find("took the smallest, below the search's choice"), std::string::npos)
      << d.reason;
}

// The throughput floor is raised by the margin; throughput falls along the ladder.
TEST(SettleTest, ThroughputFloorIsRaisedByTheMargin) {
  Budgets b;
  b.throughput = 1000.0;
  std::vector<MeasuredRung> rungs(3);
  const double predicted[] = {1200, 1100, 1000};
  for (int i = 0; i < 3; ++i) {
    rungs[i].predicted.throughput_tokens_per_s = predicted[i];
    rungs[i].measured.throughput_tokens_per_s = predicted[i] * 0.95;
  }
  const SettleDecision d = ChooseRung(rungs, b, 0.03);
  EXPECT_DOUBLE_EQ(d.throughput_scale, 0.95);
  // 1100 x 0.95 = 1045 >= 1030 fits; 1000 x 0.95 = 950 does not.
  EXPECT_EQ(d.fits, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(d.chosen, 1);
}

MeasuredRung OnLadder(int ladder, double predicted_ms, double measured_ms) {
  MeasuredRung r = Rung(predicted_ms, measured_ms);
  r.ladder = ladder;
  return r;
}

// Each ladder is fitted on its own (a branch's first rung is narrower elsewhere, so it may
// cost less than the search's top rung without being noise), and each ladder's largest
// fitting rung is a pick; the search's own pick is chosen until losses compare the picks.
TEST(SettleTest, EachLadderIsFittedAloneAndGivesOnePick) {
  Budgets b;
  b.latency_ms = 22.0;
  const std::vector<MeasuredRung> rungs = {
      OnLadder(0, 16, 17.6), OnLadder(0, 17, 18.7),                        // search's ladder
      OnLadder(1, 17, 17.0), OnLadder(1, 19, 19.9), OnLadder(1, 21, 21.2),  // branch 1
      OnLadder(1, 22, 22.4),
      OnLadder(2, 23, 23.5)};  // branch 2: nothing fits
  SettleDecision d = ChooseRung(rungs, b, 0.03);
  // Fitted alone, branch 1's 17.0 is not pooled with the search ladder's 18.7.
  EXPECT_DOUBLE_EQ(d.corrected[2].latency_ms, 17.0);
  EXPECT_EQ(d.fits, (std::vector<bool>{true, true, true, true, true, false, false}));
  EXPECT_EQ(d.picks, (std::vector<int>{1, 4}));
  EXPECT_EQ(d.chosen, 1);
  // Branch 1's pick has the lower held-out KD loss: it is the student.
  ChooseAmongPicks({0.31, 0.27}, d);
  EXPECT_EQ(d.chosen, 4);
  EXPECT_NE(d.reason.find("rung 2 0.3100, rung 5 0.2700"), std::string::npos) << d.reason;
  // A tie keeps the earlier ladder; losses that do not match the picks change nothing.
  ChooseAmongPicks({0.25, 0.25}, d);
  EXPECT_EQ(d.chosen, 1);
  ChooseAmongPicks({0.1}, d);
  EXPECT_EQ(d.chosen, 1);
}

// When only a branch fits, its pick is the student and the reason says where it came from.
TEST(SettleTest, ABranchPickStandsWhenTheSearchsLadderHasNone) {
  Budgets b;
  b.latency_ms = 20.0;
  const SettleDecision d =
      ChooseRung({OnLadder(0, 20, 21.0), OnLadder(1, 18, 18.5), OnLadder(1, 19, 20.5)}, b, 0.03);
  EXPECT_EQ(d.fits, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(d.picks, (std::vector<int>{1}));
  EXPECT_EQ(d.chosen, 1);
  EXPECT_NE(d.reason.find("rung 2 of 3 is the largest"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("on branch 1"), std::string::npos) << d.reason;
}

}  // namespace
}  // namespace tailor::autocompress
