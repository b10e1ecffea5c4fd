#ifndef TAILOR_TESTS_TESTING_LLAMA_CPP_AGREEMENT_H_
#define TAILOR_TESTS_TESTING_LLAMA_CPP_AGREEMENT_H_

// What the tests comparing tailor's next-token distribution with llama.cpp's share: whether
// the sidecar can run here, deterministic prompts, and the KL / argmax agreement tally.

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace tailor::testing

#endif  // TAILOR_TESTS_TESTING_LLAMA_CPP_AGREEMENT_H_
