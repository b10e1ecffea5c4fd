#ifndef TAILOR_TESTS_TESTING_LLAMA_CPP_AGREEMENT_H_
#define TAILOR_TESTS_TESTING_LLAMA_CPP_AGREEMENT_H_

// What the tests comparing tailor's next-token distribution with llama.cpp's share: whether
// the sidecar can run here, deterministic prompts, and the KL / argmax agreement tally.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/gguf/llama_cpp_sidecar.h"

namespace tailor::testing {

// Why the llama.cpp sidecar cannot run here, or "" when it can; tests skip naming it.
std::string LlamaCppSidecarMissing();

// Prompt i: deterministic ids spread over [0, vocab).
std::vector<int32_t> TestPrompt(int i, int length, int vocab);

struct Agreement {
  bool strict = true;  // false: a control that is expected to disagree
  double kl_bound = 1e-4;  // with `strict`, on every position
  int positions = 0;
  int argmax_agree = 0;
  double max_kl = 0;
};

// KL(tailor || llama.cpp) and argmax agreement at every position of one prompt; with
// `strict`, a position over `kl_bound` fails the test (gtest assertions).
void CompareLogprobs(const std::vector<std::vector<float>>& ours,
                     const gguf::NextTokenLogprobs& theirs, Agreement& a);

// tailor's next-token log-probabilities of `tokens` at `positions` (the model under test).
using LogprobsFn = std::function<absl::StatusOr<std::vector<std::vector<float>>>(
    const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions)>;

// A deliberately wrong variant of the model under test (say, the RoPE scaling ignored): the
// test weights are small and the distributions flat, so a control shows the comparison tells
// such a mistake apart from the real model.
struct LlamaCppControl {
  std::string label;  // what is wrong, printed with its figure
  LogprobsFn logprobs;
};

struct LlamaCppComparison {
  int prompts = 64;  // TestPrompts 0..prompts-1
  int length = 32;   // ids per prompt, every position compared
  int vocab = 64;    // the ids are drawn from [0, vocab)
  // FP32 expectations; a BF16 GGUF needs looser ones.
  double max_kl = 1e-4;                // on every position
  double min_argmax_agreement = 0.99;  // fraction of the positions
  // Each must score a max KL over 10x the real model's.
  std::vector<LlamaCppControl> controls;
};

// `ours` against llama.cpp on `gguf` over `c.prompts` TestPrompts, all evaluated by llama.cpp
// in one sidecar run: every position's KL within `c.max_kl`, argmax agreement on at least
// `c.min_argmax_agreement` of them, every control over 10x the real max KL. Prints the
// figures under `label` (the release notes quote them).
void ExpectAgreesWithLlamaCpp(const LogprobsFn& ours, const std::string& gguf,
                              const LlamaCppComparison& c, const std::string& label);

}  // namespace tailor::testing

#endif  // TAILOR_TESTS_TESTING_LLAMA_CPP_AGREEMENT_H_
