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
  int positions = 0;
  int argmax_agree = 0;
  double max_kl = 0;
};

// KL(tailor || llama.cpp) and argmax agreement at every position of one prompt; with
// `strict`, a position over 1e-4 fails the test (gtest assertions).
void CompareLogprobs(const std::vector<std::vector<float>>& ours,
                     const gguf::NextTokenLogprobs& theirs, Agreement& a);

// tailor's next-token log-probabilities of `tokens` at `positions` (the model under test).
using LogprobsFn = std::function<absl::StatusOr<std::vector<std::vector<float>>>(
    const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions)>;

// `prompts` TestPrompts of `length` ids over [0, vocab), every position compared between
// `ours` and llama.cpp on `gguf`: FP32 expectations (KL <= 1e-4 per position, argmax agreement
// >= 99%), the figures printed under `label`.
void ExpectAgreesWithLlamaCpp(const LogprobsFn& ours, const std::string& gguf, int prompts,
                              int length, int vocab, const std::string& label);

}  // namespace tailor::testing

#endif  // TAILOR_TESTS_TESTING_LLAMA_CPP_AGREEMENT_H_
