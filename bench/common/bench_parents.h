#ifndef TAILOR_BENCH_COMMON_BENCH_PARENTS_H_
#define TAILOR_BENCH_COMMON_BENCH_PARENTS_H_

// The decoder parents the llama.cpp benches serve, one size for all of them so their figures
// compare: layer costs dominate the fixed ones (embedding, head, node's request overhead) and
// a request takes ~20 ms on 2 cores, about the quickstart student's.

#include <string>

#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"

namespace tailor::bench {

// A decoder family's tiny test config at the benches' size: hidden 256, 8 layers of 8 heads /
// 4 KV heads of 32, FFN 768; `quick` (the smoke runs in the tests): the tiny config itself.
inline nlohmann::json DecoderParent(const std::string& architecture, bool quick) {
  nlohmann::json c = testing::TinyHfConfig(architecture);
  if (quick) return c;
  c["hidden_size"] = 256;
  c["intermediate_size"] = 768;
  c["num_hidden_layers"] = 8;
  c["num_attention_heads"] = 8;
  c["num_key_value_heads"] = 4;
  if (c.contains("head_dim")) c["head_dim"] = 32;
  return c;
}

}  // namespace tailor::bench

#endif  // TAILOR_BENCH_COMMON_BENCH_PARENTS_H_
