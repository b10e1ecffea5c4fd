#include "compression/tasks/suites.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tailor::tasks {

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int64_t Rng::Uniform(int64_t lo, int64_t hi) {
  const uint64_t range = static_cast<uint64_t>(hi - lo) + 1;
  if (range == 0) return static_cast<int64_t>(Next());  // full 64-bit range
  // Reject the top partial bucket so every value is equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  uint64_t v;
  do {
    v = Next();
  } while (v >= limit);
  return lo + static_cast<int64_t>(v % range);
}

std::vector<Token> Sample::Prompt() const {
  return std::vector<Token>(tokens.begin(), tokens.begin() + answer_begin);
}

std::vector<Token> Sample::Answer() const {
  return std::vector<Token>(tokens.begin() + answer_begin, tokens.end());
}

bool InEvalSplit(const std::vector<Token>& prompt) {
  // FNV-1a over the prompt; 1 in 8 prompts are evaluation-only.
  uint64_t h = 0xcbf29ce484222325ull;
  for (Token t : prompt) {
    h ^= static_cast<uint64_t>(t);
    h *= 0x100000001b3ull;
  }
  return (h >> 29) % 8 == 0;
}

Sample TaskSuite::Generate(Rng& rng, Split split) const {
  while (true) {
    std::vector<Token> question, answer;
    Make(rng, question, answer);
    Sample s;
    s.task = id();
    s.tokens = {kBos, TaskToken(id())};
    s.tokens.insert(s.tokens.end(), question.begin(), question.end());
    s.tokens.push_back(kAnswer);
    s.answer_begin = static_cast<int64_t>(s.tokens.size());
    s.tokens.insert(s.tokens.end(), answer.begin(), answer.end());
    s.tokens.push_back(kEos);
    if (InEvalSplit(s.Prompt()) == (split == Split::kEval)) return s;
  }
}

namespace {

std::vector<Token> RandomLetters(Rng& rng, int64_t n, int alphabet = 26) {
  std::vector<Token> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(LetterToken(static_cast<int>(rng.Uniform(0, alphabet - 1))));
  return out;
}

// Least-significant digit first.
std::vector<Token> DigitsLsbFirst(int64_t v) {
  std::vector<Token> out;
  do {
    out.push_back(DigitToken(static_cast<int>(v % 10)));
    v /= 10;
  } while (v > 0);
  return out;
}

class CopySuite : public TaskSuite {
 public:
  absl::string_view name() const override { return "copy"; }
  int id() const override { return 0; }
  int64_t max_length() const override { return 4 + 2 * kMax; }

 protected:
  void Make(Rng& rng, std::vector<Token>& q, std::vector<Token>& a) const override {
    q = RandomLetters(rng, rng.Uniform(2, kMax));
    a = q;
  }
  static constexpr int64_t kMax = 8;
};

class ReverseSuite : public TaskSuite {
 public:
  absl::string_view name() const override { return "reverse"; }
  int id() const override { return 1; }
  int64_t max_length() const override { return 4 + 2 * kMax; }

 protected:
  void Make(Rng& rng, std::vector<Token>& q, std::vector<Token>& a) const override {
    q = RandomLetters(rng, rng.Uniform(2, kMax));
    a.assign(q.rbegin(), q.rend());
  }
  static constexpr int64_t kMax = 8;
};

class SortSuite : public TaskSuite {
 public:
  absl::string_view name() const override { return "sort"; }
  int id() const override { return 2; }
  int64_t max_length() const override { return 4 + 2 * kMax; }

 protected:
  void Make(Rng& rng, std::vector<Token>& q, std::vector<Token>& a) const override {
    const int64_t n = rng.Uniform(2, kMax);
    for (int64_t i = 0; i < n; ++i) q.push_back(DigitToken(static_cast<int>(rng.Uniform(0, 9))));
    a = q;
    std::sort(a.begin(), a.end());  // digit tokens are contiguous and ordered
  }
  static constexpr int64_t kMax = 8;
};

class AddSuite : public TaskSuite {
 public:
  absl::string_view name() const override { return "add"; }
  int id() const override { return 3; }
  int64_t max_length() const override { return 4 + kDigits + 1 + kDigits + kDigits + 1; }

 protected:
  void Make(Rng& rng, std::vector<Token>& q, std::vector<Token>& a) const override {
    // Digit counts first, then values, so short and long operands are equally common.
    auto number = [&rng]() {
      const int64_t digits = rng.Uniform(1, kDigits);
      int64_t lo = 1, hi = 9;
      for (int64_t i = 1; i < digits; ++i) lo *= 10, hi = hi * 10 + 9;
      return rng.Uniform(digits == 1 ? 0 : lo, hi);
    };
    const int64_t x = number(), y = number();
    // Fixed width (zero padded): digit i of both operands and of the sum sit at fixed
    // offsets, so the task measures carrying rather than aligning variable-length numbers.
    q = Digits(x, kDigits);
    q.push_back(PunctToken('+'));
    for (Token t : Digits(y, kDigits)) q.push_back(t);
    a = Digits(x + y, kDigits + 1);
  }

 private:
  static std::vector<Token> Digits(int64_t v, int64_t width) {
    std::vector<Token> out = DigitsLsbFirst(v);
    while (static_cast<int64_t>(out.size()) < width) out.push_back(DigitToken(0));
    return out;
  }
  static constexpr int64_t kDigits = 3;
};

class BracketsSuite : public TaskSuite {
 public:
  absl::string_view name() const override { return "brackets"; }
  int id() const override { return 4; }
  int64_t max_length() const override { return 4 + 2 * kMax; }

 protected:
  void Make(Rng& rng, std::vector<Token>& q, std::vector<Token>& a) const override {
    static constexpr char kOpen[] = "([{";
    static constexpr char kClose[] = ")]}";
    const int64_t n = rng.Uniform(2, kMax);
    std::vector<int> stack;
    for (int64_t i = 0; i < n; ++i) {
      // Never close the last open bracket on the last step: the answer must be non-empty.
      const bool can_close = !stack.empty() && !(stack.size() == 1 && i == n - 1);
      if (can_close && rng.Uniform(0, 2) == 0) {
        q.push_back(PunctToken(kClose[stack.back()]));
        stack.pop_back();
      } else {
        const int kind = static_cast<int>(rng.Uniform(0, 2));
        q.push_back(PunctToken(kOpen[kind]));
        stack.push_back(kind);
      }
    }
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) a.push_back(PunctToken(kClose[*it]));
  }
  static constexpr int64_t kMax = 10;
};

class RecallSuite : public TaskSuite {
 public:
  absl::string_view name() const override { return "recall"; }
  int id() const override { return 5; }
  int64_t max_length() const override { return 4 + 4 * kMaxPairs + 2 + 1; }

 protected:
  void Make(Rng& rng, std::vector<Token>& q, std::vector<Token>& a) const override {
    const int64_t pairs = rng.Uniform(2, kMaxPairs);
    std::vector<int> keys;
    while (static_cast<int64_t>(keys.size()) < pairs) {
      const int k = static_cast<int>(rng.Uniform(0, 25));
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
    std::vector<int> values;
    for (int64_t i = 0; i < pairs; ++i) {
      values.push_back(static_cast<int>(rng.Uniform(0, 9)));
      if (i > 0) q.push_back(PunctToken(','));
      q.push_back(LetterToken(keys[i]));
      q.push_back(PunctToken(':'));
      q.push_back(DigitToken(values[i]));
    }
    const int64_t pick = rng.Uniform(0, pairs - 1);
    q.push_back(PunctToken('?'));
    q.push_back(LetterToken(keys[pick]));
    a = {DigitToken(values[pick])};
  }
  static constexpr int64_t kMaxPairs = 6;
};

class CountSuite : public TaskSuite {
 public:
  absl::string_view name() const override { return "count"; }
  int id() const override { return 6; }
  int64_t max_length() const override { return 4 + kMax + 2 + 2; }

 protected:
  void Make(Rng& rng, std::vector<Token>& q, std::vector<Token>& a) const override {
    q = RandomLetters(rng, rng.Uniform(3, kMax), kAlphabet);
    const Token target = LetterToken(static_cast<int>(rng.Uniform(0, kAlphabet - 1)));
    const int64_t count = std::count(q.begin(), q.end(), target);
    q.push_back(PunctToken('?'));
    q.push_back(target);
    // Most significant digit first here: a count is read, not computed digit by digit.
    if (count >= 10) a.push_back(DigitToken(static_cast<int>(count / 10)));
    a.push_back(DigitToken(static_cast<int>(count % 10)));
  }
  static constexpr int64_t kMax = 12;
  static constexpr int kAlphabet = 5;
};

class PatternSuite : public TaskSuite {
 public:
  absl::string_view name() const override { return "pattern"; }
  int id() const override { return 7; }
  int64_t max_length() const override { return 4 + 12 + kContinue; }

 protected:
  void Make(Rng& rng, std::vector<Token>& q, std::vector<Token>& a) const override {
    const int64_t period = rng.Uniform(1, 4);
    std::vector<Token> unit = RandomLetters(rng, period);
    // At least two full periods so the period is identifiable.
    const int64_t shown = rng.Uniform(std::max<int64_t>(2 * period, 5), 12);
    for (int64_t i = 0; i < shown; ++i) q.push_back(unit[i % period]);
    for (int64_t i = 0; i < kContinue; ++i) a.push_back(unit[(shown + i) % period]);
  }
  static constexpr int64_t kContinue = 4;
};

}  // namespace

std::vector<std::unique_ptr<TaskSuite>> AllSuites() {
  std::vector<std::unique_ptr<TaskSuite>> out;
  out.push_back(std::make_unique<CopySuite>());
  out.push_back(std::make_unique<ReverseSuite>());
  out.push_back(std::make_unique<SortSuite>());
  out.push_back(std::make_unique<AddSuite>());
  out.push_back(std::make_unique<BracketsSuite>());
  out.push_back(std::make_unique<RecallSuite>());
  out.push_back(std::make_unique<CountSuite>());
  out.push_back(std::make_unique<PatternSuite>());
  return out;
}

absl::StatusOr<std::unique_ptr<TaskSuite>> MakeSuite(absl::string_view name) {
  for (auto& s : AllSuites()) {
    if (s->name() == name) return std::move(s);
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown task \"", name, "\" (copy, reverse, sort, add, brackets, recall, count, pattern)"));
}

TaskMixture::TaskMixture(std::vector<const TaskSuite*> suites, uint64_t seed, Split split)
    : suites_(std::move(suites)), rng_(seed), split_(split) {}

Sample TaskMixture::Next() {
  const TaskSuite* s = suites_[rng_.Uniform(0, static_cast<int64_t>(suites_.size()) - 1)];
  return s->Generate(rng_, split_);
}

}  // namespace tailor::tasks
