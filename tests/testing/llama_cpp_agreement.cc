#include "tests/testing/llama_cpp_agreement.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tailor::testing {

std::string LlamaCppSidecarMissing() {
  return gguf::LlamaCppSidecarMissing(gguf::DefaultSidecarScript());
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
      EXPECT_LE(kl, a.kl_bound) << "position " << t;
    }
    a.max_kl = std::max(a.max_kl, kl);
    a.argmax_agree += a_ours == a_theirs;
    ++a.positions;
  }
}

namespace {

// `fn` over every prompt against llama.cpp's answers, tallied into `a`.
void Tally(const LogprobsFn& fn, const std::vector<std::vector<int32_t>>& prompts,
           const std::vector<int64_t>& positions,
           const std::vector<gguf::NextTokenLogprobs>& theirs, const std::string& what,
           Agreement& a) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto mine = fn(std::vector<int64_t>(prompts[i].begin(), prompts[i].end()), positions);
    ASSERT_TRUE(mine.ok()) << what << ", prompt " << i << ": " << mine.status();
    SCOPED_TRACE(what + ", prompt " + std::to_string(i));
    CompareLogprobs(*mine, theirs[i], a);
  }
}

}  // namespace

void ExpectAgreesWithLlamaCpp(const LogprobsFn& ours, const std::string& gguf,
                              const LlamaCppComparison& c, const std::string& label) {
  std::vector<int64_t> positions(c.length);
  for (int t = 0; t < c.length; ++t) positions[t] = t;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < c.prompts; ++i) prompts.push_back(TestPrompt(i, c.length, c.vocab));
  // One child process for every prompt: the model is loaded once.
  absl::StatusOr<std::vector<gguf::NextTokenLogprobs>> theirs =
      gguf::RunNextTokenLogprobsBatch(gguf, prompts, positions);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  ASSERT_EQ(theirs->size(), prompts.size());
  Agreement real;
  real.kl_bound = c.max_kl;
  Tally(ours, prompts, positions, *theirs, label, real);
  std::vector<Agreement> controls(c.controls.size());
  for (size_t k = 0; k < c.controls.size(); ++k) {
    controls[k].strict = false;  // expected to disagree
    Tally(c.controls[k].logprobs, prompts, positions, *theirs, c.controls[k].label, controls[k]);
  }
  std::string control_figures;
  for (size_t k = 0; k < c.controls.size(); ++k) {
    char figure[64];
    std::snprintf(figure, sizeof(figure), " (max KL %.3g)", controls[k].max_kl);
    control_figures += (k == 0 ? "; controls: " : ", ") + c.controls[k].label + figure;
  }
  std::printf(
      "%s: tailor vs llama.cpp over %d prompts x %d positions: max KL %.3g, argmax "
      "agreement %d/%d%s\n",
      label.c_str(), c.prompts, c.length, real.max_kl, real.argmax_agree, real.positions,
      control_figures.c_str());
  EXPECT_EQ(real.positions, c.prompts * c.length);
  EXPECT_LE(real.max_kl, c.max_kl);
  EXPECT_GE(real.argmax_agree, c.min_argmax_agreement * real.positions);
  for (size_t k = 0; k < c.controls.size(); ++k) {
    EXPECT_GT(controls[k].max_kl, 10 * real.max_kl) << "control " << c.controls[k].label;
  }
}

}  // namespace tailor::testing
