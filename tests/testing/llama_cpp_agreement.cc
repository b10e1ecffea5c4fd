#include "tests/testing/llama_cpp_agreement.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gtest/gtest.h"

namespace tailor::testing {

std::string LlamaCppSidecarMissing() {
  const std::string script = gguf::DefaultSidecarScript();
  const std::string dir = script.substr(0, script.find_last_of('/'));
  if (access(script.c_str(), R_OK) != 0) return "no " + script;
  if (access((dir + "/node_modules/node-llama-cpp/package.json").c_str(), R_OK) != 0) {
    return "node-llama-cpp is not installed in " + dir + " (run deploy/install-deps.sh)";
  }
  if (std::system("command -v node >/dev/null 2>&1") != 0) return "node is not on PATH";
  return "";
}

std::vector<int32_t> TestPrompt(int i, int length, int vocab) {
  std::vector<int32_t> out;
  uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);
  for (int t = 0; t < length; ++t) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    out.push_back(static_cast<int32_t>(x % vocab));
  }
  return out;
}

void CompareLogprobs(const std::vector<std::vector<float>>& ours,
                     const gguf::NextTokenLogprobs& theirs, Agreement& a) {
  ASSERT_EQ(ours.size(), theirs.logprobs.size());
  for (size_t t = 0; t < ours.size(); ++t) {
    ASSERT_EQ(static_cast<int64_t>(ours[t].size()), theirs.vocab_size);
    double kl = 0;
    size_t a_ours = 0, a_theirs = 0;
    for (size_t v = 0; v < ours[t].size(); ++v) {
      const double lp = theirs.logprobs[t][v];
      ASSERT_TRUE(std::isfinite(lp)) << "position " << t << " token " << v;
      kl += std::exp(ours[t][v]) * (ours[t][v] - lp);
      if (ours[t][v] > ours[t][a_ours]) a_ours = v;
      if (lp > theirs.logprobs[t][a_theirs]) a_theirs = v;
    }
    if (a.strict) {
      EXPECT_LE(kl, 1e-4) << "position " << t;
    }
    a.max_kl = std::max(a.max_kl, kl);
    a.argmax_agree += a_ours == a_theirs;
    ++a.positions;
  }
}

void ExpectAgreesWithLlamaCpp(const LogprobsFn& ours, const std::string& gguf, int prompts,
                              int length, int vocab, const std::string& label) {
  std::vector<int64_t> positions(length);
  for (int t = 0; t < length; ++t) positions[t] = t;
  Agreement agreement;
  for (int i = 0; i < prompts; ++i) {
    const std::vector<int32_t> prompt = TestPrompt(i, length, vocab);
    absl::StatusOr<gguf::NextTokenLogprobs> theirs =
        gguf::RunNextTokenLogprobs(gguf, prompt, positions);
    ASSERT_TRUE(theirs.ok()) << theirs.status();
    auto mine = ours(std::vector<int64_t>(prompt.begin(), prompt.end()), positions);
    ASSERT_TRUE(mine.ok()) << mine.status();
    CompareLogprobs(*mine, *theirs, agreement);
  }
  std::printf("%s: tailor vs llama.cpp over %d prompts x %d positions: max KL %.3g, argmax "
              "agreement %d/%d\n",
              label.c_str(), prompts, length, agreement.max_kl, agreement.argmax_agree,
              agreement.positions);
  EXPECT_EQ(agreement.positions, prompts * length);
  EXPECT_LE(agreement.max_kl, 1e-4);
  EXPECT_GE(agreement.argmax_agree, 0.99 * agreement.positions);
}

}  // namespace tailor::testing
