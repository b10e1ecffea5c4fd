#ifndef TAILOR_COMPRESSION_TASKS_SUITES_H_
#define TAILOR_COMPRESSION_TASKS_SUITES_H_

// Eight deterministic synthetic task suites that lean on different capacities:
//   copy       letters -> the same letters            (attention: induction / copying)
//   reverse    letters -> reversed                    (position-aware attention)
//   sort       digits -> ascending                    (counting / comparison, MLP)
//   add        two 1-3 digit numbers -> sum; zero-padded to 3 (sum 4) digits, least
//              significant first, so the carry flows with generation  (carries: MLP)
//   brackets   an unfinished bracket sequence -> the closers that complete it (stack)
//   recall     k:v pairs, then ?k -> v                (associative recall: attention)
//   count      letters over a small alphabet, ?x -> occurrences of x  (aggregation)
//   pattern    a periodic sequence -> its next 4 tokens  (periodicity: SSM/conv or attention)
// Train and evaluation samples are disjoint by construction: a sample belongs to the
// evaluation split iff a hash of its prompt falls in 1/8 of the hash space, and each split
// only ever yields its own samples.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/tasks/tokenizer.h"

namespace tailor::tasks {

// SplitMix64: tiny, fast and identical on every platform (std distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform integer in [lo, hi] (inclusive), unbiased.
  int64_t Uniform(int64_t lo, int64_t hi);

 private:
  uint64_t state_;
};

enum class Split { kTrain, kEval };

struct Sample {
  int task = 0;               // index into AllSuites() order
  std::vector<Token> tokens;  // <bos> <task> question '>' answer <eos>
  int64_t answer_begin = 0;   // first answer token; the answer runs to the end (<eos> incl.)

  std::vector<Token> Prompt() const;  // tokens[0, answer_begin): ends with '>'
  std::vector<Token> Answer() const;  // tokens[answer_begin, end): ends with <eos>
};

class TaskSuite {
 public:
  virtual ~TaskSuite() = default;
  virtual absl::string_view name() const = 0;
  virtual int id() const = 0;  // 0..7, also selects the task token
  // Upper bound on Sample::tokens.size().
  virtual int64_t max_length() const = 0;
  // A sample of the requested split; deterministic in the rng state.
  Sample Generate(Rng& rng, Split split = Split::kTrain) const;

 protected:
  // Question and answer tokens (without <bos>, task, '>' and <eos>), either split.
  virtual void Make(Rng& rng, std::vector<Token>& question, std::vector<Token>& answer) const = 0;
};

// The eight suites in id order.
std::vector<std::unique_ptr<TaskSuite>> AllSuites();
absl::StatusOr<std::unique_ptr<TaskSuite>> MakeSuite(absl::string_view name);
bool InEvalSplit(const std::vector<Token>& prompt);

// An endless seeded stream mixing suites uniformly.
class TaskMixture {
 public:
  TaskMixture(std::vector<const TaskSuite*> suites, uint64_t seed, Split split = Split::kTrain);
  Sample Next();

 private:
  std::vector<const TaskSuite*> suites_;
  Rng rng_;
  Split split_;
};

}  // namespace tailor::tasks

#endif  // TAILOR_COMPRESSION_TASKS_SUITES_H_
