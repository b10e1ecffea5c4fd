// Synthetic tasks: determinism, split disjointness, correct answers, batching, evaluation.

#include <torch/torch.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "compression/tasks/suites.h"
#include "compression/tasks/tokenizer.h"
#include "compression/tasks/training.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::tasks {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

std::vector<Token> Question(const Sample& s) {
  // Between <bos> <task> and '>'.
  return std::vector<Token>(s.tokens.begin() + 2, s.tokens.begin() + s.answer_begin - 1);
}
std::vector<Token> AnswerBody(const Sample& s) {  // without <eos>
  std::vector<Token> a = s.Answer();
  a.pop_back();
  return a;
}

int64_t LsbNumber(const std::vector<Token>& digits) {
  int64_t v = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) v = v * 10 + DigitValue(*it);
  return v;
}

TEST(TasksTest, TokenizerRoundTrip) {
  TAILOR_ASSERT_OK_AND_ASSIGN(std::vector<Token> t, Encode("<bos><add>12+3>42<eos>"));
  EXPECT_EQ(t.size(), 10u);
  EXPECT_EQ(t[0], kBos);
  EXPECT_EQ(t[1], TaskToken(3));
  EXPECT_EQ(t[5], DigitToken(3));
  EXPECT_EQ(Decode(t), "<bos><add>12+3>42<eos>");
  EXPECT_THAT(Encode("<nope>").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("<nope>")));
  EXPECT_THAT(Encode("A").status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'A'")));
}

TEST(TasksTest, DeterministicForASeed) {
  for (const auto& suite : AllSuites()) {
    Rng a(42), b(42), c(43);
    std::vector<std::vector<Token>> x, y, z;
    for (int i = 0; i < 20; ++i) {
      x.push_back(suite->Generate(a).tokens);
      y.push_back(suite->Generate(b).tokens);
      z.push_back(suite->Generate(c).tokens);
    }
    EXPECT_EQ(x, y) << suite->name();
    EXPECT_NE(x, z) << suite->name();
  }
  auto suites = AllSuites();
  std::vector<const TaskSuite*> views;
  for (const auto& s : suites) views.push_back(s.get());
  TaskMixture a(views, 7), b(views, 7);
  std::set<int> seen;
  for (int i = 0; i < 100; ++i) {
    Sample sa = a.Next(), sb = b.Next();
    EXPECT_EQ(sa.tokens, sb.tokens);
    seen.insert(sa.task);
  }
  EXPECT_EQ(seen.size(), 8u);  // the mixture reaches every task
}

// Pinned values: a change in generation would silently change every evaluation number.
TEST(TasksTest, StreamIsStableAcrossBuilds) {
  Rng rng(1);
  EXPECT_EQ(rng.Next(), 0x910a2dec89025cc1ull);
  TAILOR_ASSERT_OK_AND_ASSIGN(auto add, MakeSuite("add"));
  Rng r(123);
  const Sample s = add->Generate(r);
  EXPECT_EQ(s.tokens.front(), kBos);
  EXPECT_EQ(s.tokens.back(), kEos);
}

TEST(TasksTest, SplitsAreDisjoint) {
  for (const auto& suite : AllSuites()) {
    Rng rng(5);
    for (int i = 0; i < 200; ++i) {
      EXPECT_FALSE(InEvalSplit(suite->Generate(rng, Split::kTrain).Prompt())) << suite->name();
      EXPECT_TRUE(InEvalSplit(suite->Generate(rng, Split::kEval).Prompt())) << suite->name();
    }
  }
}

TEST(TasksTest, AnswersAreCorrect) {
  auto suites = AllSuites();
  ASSERT_EQ(suites.size(), 8u);
  Rng rng(9);
  for (int i = 0; i < 300; ++i) {
    for (const auto& suite : suites) {
      const Sample s = suite->Generate(rng);
      const std::string text = Decode(s.tokens);
      ASSERT_LE(static_cast<int64_t>(s.tokens.size()), suite->max_length()) << text;
      ASSERT_EQ(s.tokens[s.answer_begin - 1], kAnswer) << text;
      ASSERT_EQ(s.tokens.back(), kEos) << text;
      ASSERT_EQ(s.task, suite->id());
      const std::vector<Token> q = Question(s), a = AnswerBody(s);
      ASSERT_FALSE(a.empty()) << text;
      const absl::string_view name = suite->name();
      if (name == "copy") {
        EXPECT_EQ(a, q) << text;
      } else if (name == "reverse") {
        EXPECT_EQ(a, std::vector<Token>(q.rbegin(), q.rend())) << text;
      } else if (name == "sort") {
        std::vector<Token> sorted = q;
        std::sort(sorted.begin(), sorted.end());
        EXPECT_EQ(a, sorted) << text;
      } else if (name == "add") {
        auto plus = std::find(q.begin(), q.end(), PunctToken('+'));
        ASSERT_NE(plus, q.end()) << text;
        const int64_t x = LsbNumber({q.begin(), plus}), y = LsbNumber({plus + 1, q.end()});
        EXPECT_EQ(LsbNumber(a), x + y) << text;
        EXPECT_LE(x, 999);
        EXPECT_EQ(q.size(), 7u) << text;  // fixed width: 3 digits + 3 digits
        EXPECT_EQ(a.size(), 4u) << text;
      } else if (name == "brackets") {
        // question + answer is balanced, and the answer is only closers.
        std::string stack;
        for (Token t : q) {
          const std::string c = Decode({t});
          if (c == "(" || c == "[" || c == "{") {
            stack += c;
          } else {
            ASSERT_FALSE(stack.empty()) << text;
            stack.pop_back();
          }
        }
        std::string closers;
        for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
          closers += *it == '(' ? ')' : *it == '[' ? ']' : '}';
        }
        EXPECT_EQ(Decode(a), closers) << text;
      } else if (name == "recall") {
        const Token key = q.back();
        Token value = kPad;
        for (size_t j = 0; j + 2 < q.size(); ++j) {
          if (q[j] == key && q[j + 1] == PunctToken(':')) value = q[j + 2];
        }
        EXPECT_EQ(a, std::vector<Token>{value}) << text;
      } else if (name == "count") {
        const Token target = q.back();
        const int64_t n = std::count(q.begin(), q.end() - 2, target);
        EXPECT_EQ(Decode(a), std::to_string(n)) << text;
      } else if (name == "pattern") {
        // Some period p <= 4 explains the question and the continuation.
        std::vector<Token> all = q;
        all.insert(all.end(), a.begin(), a.end());
        bool explained = false;
        for (size_t p = 1; p <= 4 && !explained; ++p) {
          bool ok = true;
          for (size_t j = p; j < all.size(); ++j) ok = ok && all[j] == all[j - p];
          explained = ok && q.size() >= 2 * p;
        }
        EXPECT_TRUE(explained) << text;
        EXPECT_EQ(a.size(), 4u);
      } else {
        ADD_FAILURE() << "unchecked task " << name;
      }
    }
  }
}

TEST(TasksTest, KnownAdditionSample) {
  // 12 + 9 = 21, zero-padded, digits least significant first.
  TAILOR_ASSERT_OK_AND_ASSIGN(std::vector<Token> t, Encode("<bos><add>210+900>1200<eos>"));
  Sample s;
  s.tokens = t;
  s.answer_begin = 10;
  EXPECT_EQ(LsbNumber(AnswerBody(s)), 12 + 9);
  // And the generator writes exactly this form.
  TAILOR_ASSERT_OK_AND_ASSIGN(auto add, MakeSuite("add"));
  Rng rng(3);
  for (int i = 0; i < 50; ++i) {
    const Sample g = add->Generate(rng);
    const std::string text = Decode(g.tokens);
    EXPECT_EQ(text.size(), std::string("<bos><add>210+900>1200<eos>").size()) << text;
  }
}

TEST(TasksTest, BatchMasksEverythingButAnswers) {
  TAILOR_ASSERT_OK_AND_ASSIGN(std::vector<Token> t1, Encode("<bos><copy>ab>ab<eos>"));
  TAILOR_ASSERT_OK_AND_ASSIGN(std::vector<Token> t2, Encode("<bos><count>aab?a>2<eos>"));
  Sample a{0, t1, 5}, b{6, t2, 8};
  Batch batch = MakeBatch({a, b});
  ASSERT_EQ(batch.inputs.sizes(), (c10::IntArrayRef{2, 9}));
  // Sample a: positions 4..6 predict 'a', 'b', <eos>; the rest is ignored or padding.
  auto tg = batch.targets.accessor<int64_t, 2>();
  auto in = batch.inputs.accessor<int64_t, 2>();
  EXPECT_EQ(tg[0][3], -100);
  EXPECT_EQ(tg[0][4], LetterToken(0));
  EXPECT_EQ(tg[0][6], kEos);
  EXPECT_EQ(tg[0][7], -100);
  EXPECT_EQ(in[0][7], kPad);
  EXPECT_EQ(tg[1][7], DigitToken(2));
  EXPECT_EQ(tg[1][8], kEos);
  EXPECT_EQ(MakeBatch({a}).targets.size(1), 7);  // 8 tokens -> 7 inputs
}

TEST(TasksTest, DefaultParentMixesAllKinds) {
  model::HybridConfig c = DefaultParentConfig();
  TAILOR_EXPECT_OK(model::ValidateHybridConfig(c));
  std::set<model::LayerKind> kinds;
  for (const auto& l : c.layers) kinds.insert(l.kind);
  EXPECT_EQ(kinds.size(), 4u);
  for (const auto& s : AllSuites()) EXPECT_LE(s->max_length(), c.max_seq + 1) << s->name();
}

// A few steps on one task: the loss falls, and evaluation runs through the cache path.
TEST(TasksTest, TrainingReducesLossAndEvaluates) {
  model::HybridConfig c = DefaultParentConfig();
  c.hidden = 32;
  c.layers = {model::LayerSpec::Attention(2, 1, 16), model::LayerSpec::Mamba(2, 16, 8, 4, 8),
              model::LayerSpec::Moe(2, 1, 32, 16), model::LayerSpec::Mlp(64)};
  TAILOR_ASSERT_OK_AND_ASSIGN(model::HybridLM m, model::CreateHybridLM(c, 3));
  TAILOR_ASSERT_OK_AND_ASSIGN(auto copy, MakeSuite("copy"));
  std::vector<double> losses;
  TrainOptions o;
  o.steps = 40;
  o.batch_size = 16;
  o.warmup_steps = 5;
  o.log_every = 1;
  o.on_progress = [&losses](const TrainProgress& p) { losses.push_back(p.loss); };
  TAILOR_ASSERT_OK_AND_ASSIGN(TrainResult r, TrainOnTasks(m, {copy.get()}, o));
  EXPECT_EQ(r.steps, 40);
  ASSERT_EQ(losses.size(), 40u);
  EXPECT_LT(losses.back(), losses.front());
  TAILOR_ASSERT_OK_AND_ASSIGN(EvalResult e, Evaluate(m, *copy, 30, 11));
  EXPECT_EQ(e.total, 30);
  EXPECT_EQ(e.task, "copy");
  EXPECT_GE(e.accuracy(), 0.0);
  EXPECT_THAT(MakeSuite("nope").status(), StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
}

}  // namespace
}  // namespace tailor::tasks
