// The parent-architecture key of cost tables: same shape, same key; any width, kind, vocab
// or hidden change, another key; cost-neutral settings ignored.

#include "compression/model/architecture_key.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::model {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

HybridConfig Parent() {
  HybridConfig c;
  c.vocab = 64;
  c.hidden = 128;
  c.max_seq = 96;
  c.layers = {LayerSpec::Attention(4, 2, 32), LayerSpec::Mamba(4, 32, 16, 4, 16),
              LayerSpec::Moe(4, 2, 96, 64), LayerSpec::Mlp(256)};
  return c;
}

TEST(ArchitectureKeyTest, SameShapeSameKeyWhateverTheCostNeutralSettings) {
  HybridConfig other = Parent();
  other.max_seq = 512;
  other.rope_theta = 500000.0;
  other.norm_eps = 1e-6;
  EXPECT_EQ(ArchitectureKey(Parent()), ArchitectureKey(other));
  EXPECT_EQ(ArchitectureKey(Parent()).size(), 64u);
}

TEST(ArchitectureKeyTest, AnyShapeChangeIsAnotherKey) {
  const std::string key = ArchitectureKey(Parent());
  HybridConfig wider = Parent();
  wider.layers[3] = LayerSpec::Mlp(384);
  HybridConfig vocab = Parent();
  vocab.vocab = 128;
  HybridConfig hidden = Parent();
  hidden.hidden = 256;
  HybridConfig kinds = Parent();
  kinds.layers[3] = LayerSpec::Attention(4, 2, 32);
  HybridConfig deeper = Parent();
  deeper.layers.push_back(LayerSpec::Mlp(256));
  for (const HybridConfig* c : {&wider, &vocab, &hidden, &kinds, &deeper}) {
    EXPECT_NE(ArchitectureKey(*c), key);
  }
}

TEST(ArchitectureKeyTest, FromConfigJsonOrTheParseError) {
  absl::StatusOr<std::string> key = ArchitectureKeyOfConfigJson(HybridConfigToJson(Parent()));
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, ArchitectureKey(Parent()));
  EXPECT_THAT(ArchitectureKeyOfConfigJson("{\"format\": \"tailor-hybrid-lm\"}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocab: required")));
}

}  // namespace
}  // namespace tailor::model
