// Search spaces restricted to what the export can write: a parent whose students only the
// family's own layout carries (Qwen3, Qwen2, the MoE families) gets one width per kind and
// no removed layers, so every student the search can pick exports; a Llama or Nemotron-H
// parent keeps per-layer widths (GGUF `deci` / `nemotron_h` write them).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/autocompress/extract.h"
#include "compression/autocompress/space.h"
#include "compression/gguf/student_to_gguf.h"
#include "compression/hf/hf_export.h"
#include "compression/hf/hf_import.h"
#include "compression/model/hybrid_lm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/llama_cpp_agreement.h"
#include "tests/testing/status_matchers.h"

namespace tailor {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<hf::HfConfig> ConfigOf(absl::string_view arch) {
  const std::string dir = testing::NewTestDir("exportable_");
  TAILOR_RETURN_IF_ERROR(testing::WriteHfTestCheckpoint(dir, arch));
  return hf::ReadHfConfig(dir + "/config.json");
}

TEST(StudentShapeRulesTest, EachFamilyGetsWhatItsLayoutsExpress) {
  for (const char* arch : {"LlamaForCausalLM", "NemotronHForCausalLM"}) {
    absl::StatusOr<hf::HfConfig> c = ConfigOf(arch);
    ASSERT_THAT(c.status(), IsOk());
    const gguf::StudentShapeRules r = gguf::StudentShapeRulesOf(*c);
    EXPECT_TRUE(r.per_layer_widths) << arch;
    EXPECT_TRUE(r.prune_hidden_and_heads) << arch;
  }
  absl::StatusOr<hf::HfConfig> llama = ConfigOf("LlamaForCausalLM");
  ASSERT_THAT(llama.status(), IsOk());
  EXPECT_EQ(gguf::StudentShapeRulesOf(*llama).why, "");
  EXPECT_FALSE(gguf::StudentShapeRulesOf(*llama).keep_shared_experts);
  // `deci` sizes V rows by the widest block; `nemotron_h` per attention layer.
  EXPECT_EQ(gguf::StudentShapeRulesOf(*llama).kv_cache_layout, model::KvCacheLayout::kDeciBlocks);
  // The tiny Nemotron-H's 'E' layer has a shared expert.
  absl::StatusOr<hf::HfConfig> nemotron = ConfigOf("NemotronHForCausalLM");
  ASSERT_THAT(nemotron.status(), IsOk());
  EXPECT_TRUE(gguf::StudentShapeRulesOf(*nemotron).keep_shared_experts);
  EXPECT_EQ(gguf::StudentShapeRulesOf(*nemotron).kv_cache_layout,
            model::KvCacheLayout::kPerLayer);
  EXPECT_EQ(gguf::StudentShapeRulesOf(*nemotron).why,
            "llama.cpp's `nemotron_h_moe` needs every 'E' layer's shared expert at one width, "
            "so an MoE layer keeps it whole or is removed whole");
  struct Refused {
    const char* arch;
    bool prune_hidden_and_heads;
    const char* why;
  };
  for (const Refused& c : {
           Refused{"Qwen3ForCausalLM", true,
                   "a Qwen3ForCausalLM student with per-layer widths has no GGUF layout: "
                   "`deci` is the Llama family's layout"},
           Refused{"Qwen2ForCausalLM", false,
                   "llama.cpp's `deci` sizes attention biases by the hidden width"},
           Refused{"MixtralForCausalLM", true,
                   "a MixtralForCausalLM student with per-layer widths"},
           Refused{"Qwen3MoeForCausalLM", true,
                   "a Qwen3MoeForCausalLM student with per-layer widths"},
       }) {
    absl::StatusOr<hf::HfConfig> config = ConfigOf(c.arch);
    ASSERT_THAT(config.status(), IsOk());
    const gguf::StudentShapeRules r = gguf::StudentShapeRulesOf(*config);
    EXPECT_FALSE(r.per_layer_widths) << c.arch;
    EXPECT_EQ(r.kv_cache_layout, model::KvCacheLayout::kPerLayer) << c.arch;
    EXPECT_EQ(r.prune_hidden_and_heads, c.prune_hidden_and_heads) << c.arch;
    EXPECT_THAT(r.why, HasSubstr(c.why)) << c.arch;
  }
  absl::StatusOr<hf::HfConfig> qwen2 = ConfigOf("Qwen2ForCausalLM");
  ASSERT_THAT(qwen2.status(), IsOk());
  EXPECT_THAT(gguf::StudentShapeRulesOf(*qwen2).why,
              HasSubstr("; llama.cpp's `qwen2` sizes attn_q by the hidden width, so a Qwen2 "
                        "student keeps its hidden width and attention heads"));
}

struct Imported {
  hf::HfCheckpoint checkpoint;
  model::HybridLM model{nullptr};
};

Imported ImportDir(const std::string& dir) {
  absl::StatusOr<hf::HfCheckpoint> c = hf::HfCheckpoint::Open(dir);
  EXPECT_THAT(c.status(), IsOk());
  absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*c);
  EXPECT_THAT(m.status(), IsOk());
  return {*std::move(c), *std::move(m)};
}

Imported Import(absl::string_view arch) {
  const std::string dir = testing::NewTestDir("exportable_parent_");
  EXPECT_THAT(testing::WriteHfTestCheckpoint(dir, arch), IsOk());
  return ImportDir(dir);
}

// The space the search job builds for `p` (search_job.cc, SpaceOptionsFor).
absl::StatusOr<autocompress::SearchSpace> SpaceFor(const Imported& p) {
  const gguf::StudentShapeRules rules = gguf::StudentShapeRulesOf(p.checkpoint.config());
  autocompress::SpaceOptions options;
  options.uniform_layers = !rules.per_layer_widths;
  options.prune_hidden_and_heads = rules.prune_hidden_and_heads;
  options.keep_shared_experts = rules.keep_shared_experts;
  return autocompress::BuildSearchSpace(p.model->config(), options);
}

// One width per kind over all layers (SpaceOptions::uniform_layers).
absl::StatusOr<autocompress::SearchSpace> UniformSpace(const Imported& p) {
  autocompress::SpaceOptions options;
  options.uniform_layers = true;
  return autocompress::BuildSearchSpace(p.model->config(), options);
}

// Choice `i` of every axis, clamped to the axis: 0 is the narrowest student, a large i the
// parent; `skew` shifts odd axes so that tied and untied spaces differ in the child.
std::vector<int> Choices(const autocompress::SearchSpace& space, int i, int skew) {
  std::vector<int> out;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    const int n = static_cast<int>(space.axes[a].widths.size());
    out.push_back(std::min(n - 1, std::max(0, i + (a % 2 == 1 ? skew : 0))));
  }
  return out;
}

// The child `indices` selects, exported to GGUF: its arch, or the error.
absl::StatusOr<std::string> ExportChild(const Imported& p, const autocompress::SearchSpace& s,
                                        const std::vector<int>& indices) {
  TAILOR_ASSIGN_OR_RETURN(autocompress::Student child,
                          autocompress::ExtractStudent(p.model, s, indices));
  const std::string dir = testing::NewTestDir("exportable_child_");
  TAILOR_RETURN_IF_ERROR(model::SaveHybridLM(child.model, dir));
  TAILOR_ASSIGN_OR_RETURN(gguf::StudentGgufSummary g,
                          gguf::ExportStudentToGguf(dir, p.checkpoint, dir + "/student.gguf"));
  return g.arch;
}

TEST(ExportableSpaceTest, EveryStudentOfAUniformQwen3SpaceExportsInTheFamilyArch) {
  const Imported p = Import("Qwen3ForCausalLM");
  absl::StatusOr<autocompress::SearchSpace> s = UniformSpace(p);
  ASSERT_THAT(s.status(), IsOk());
  // hidden, one attention axis and one MLP axis for both decoder layers, no width 0.
  ASSERT_EQ(s->axes.size(), 3u);
  EXPECT_EQ(s->axes[1].name, "layers[0,2].attention_heads_per_group");
  EXPECT_EQ(s->axes[2].name, "layers[1,3].mlp_ffn");
  for (const autocompress::ChoiceAxis& a : s->axes) EXPECT_GT(a.widths.front(), 0) << a.name;
  for (int i = 0; i < 5; ++i) {
    for (int skew : {-2, 0, 2}) {
      absl::StatusOr<std::string> arch = ExportChild(p, *s, Choices(*s, i, skew));
      ASSERT_THAT(arch.status(), IsOk()) << "choice " << i << " skew " << skew;
      EXPECT_EQ(*arch, "qwen3");
    }
  }
}

TEST(ExportableSpaceTest, TheUnrestrictedQwen3SpaceHoldsStudentsNoLayoutWrites) {
  // What the restriction prevents: per-layer choices of a Qwen3 parent give a student that
  // neither qwen3 (one width per kind) nor deci (no q/k norms) can hold.
  const Imported p = Import("Qwen3ForCausalLM");
  absl::StatusOr<autocompress::SearchSpace> s =
      autocompress::BuildSearchSpace(p.model->config());
  ASSERT_THAT(s.status(), IsOk());
  ASSERT_EQ(s->axes.size(), 5u);  // hidden + attention and MLP axes of both decoder layers
  const std::vector<int> indices = {3, 1, 2, 2, 1};  // layer 0 and layer 1 differ
  EXPECT_THAT(ExportChild(p, *s, indices).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("`deci` is the Llama family's layout")));
}

TEST(ExportableSpaceTest, AQwen2StudentWithAPrunedHiddenWidthIsRefusedAsGguf) {
  // What prune_hidden_and_heads prevents: llama.cpp fails to load such a qwen2 file.
  const Imported p = Import("Qwen2ForCausalLM");
  absl::StatusOr<autocompress::SearchSpace> s = UniformSpace(p);
  ASSERT_THAT(s.status(), IsOk());
  std::vector<int> indices = Choices(*s, 9, 0);
  indices[0] = 0;  // hidden 8 of 32
  EXPECT_THAT(ExportChild(p, *s, indices).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("llama.cpp's `qwen2` sizes attn_q as [hidden, hidden], so "
                                 "num_attention_heads x head_dim (4 x 8) must equal "
                                 "hidden_size (8)")));
  absl::StatusOr<autocompress::SearchSpace> restricted = SpaceFor(p);
  ASSERT_THAT(restricted.status(), IsOk());
  EXPECT_EQ(restricted->axes[0].widths, std::vector<int64_t>{32});
  EXPECT_EQ(restricted->axes[1].widths.size(), 1u);  // every head kept
}

TEST(ExportableSpaceTest, LlamaKeepsPerLayerWidthsAndTheyExportAsDeci) {
  const Imported p = Import("LlamaForCausalLM");
  absl::StatusOr<autocompress::SearchSpace> s =
      autocompress::BuildSearchSpace(p.model->config());
  ASSERT_THAT(s.status(), IsOk());
  // Decoder layer 0 keeps fewer heads, decoder layer 1 a narrower MLP; hidden pruned too.
  ASSERT_EQ(s->axes.size(), 5u);
  std::vector<int> indices = Choices(*s, 9, 0);  // the parent
  indices[0] = 2;
  indices[1] = 1;
  indices[4] = 1;
  absl::StatusOr<std::string> arch = ExportChild(p, *s, indices);
  ASSERT_THAT(arch.status(), IsOk());
  EXPECT_EQ(*arch, "deci");
}

// Nemotron-H with MoE layers (and no dense MLP: `nemotron_h_moe` runs every FFN as MoE): its
// experts are never all removed, its shared experts stay whole and one expert count holds for
// every 'E' layer, so every student of the space the search builds is a `nemotron_h_moe`
// file; without the restriction a student without the shared expert is refused, named.
TEST(ExportableSpaceTest, EveryStudentOfANemotronHMoeSpaceExports) {
  const std::string dir = testing::NewTestDir("exportable_nemotron_moe_");
  const nlohmann::json config = testing::TinyNemotronHConfig("M*EME");
  ASSERT_THAT(testing::WriteHfCheckpointFiles(
                  dir, config, testing::HfTestTensors(config, model::DType::kF32, 1)),
              IsOk());
  const Imported p = ImportDir(dir);
  absl::StatusOr<autocompress::SearchSpace> s = SpaceFor(p);
  ASSERT_THAT(s.status(), IsOk());
  for (const autocompress::ChoiceAxis& a : s->axes) {
    EXPECT_EQ(a.name.find("shared_ffn"), std::string::npos) << a.name;
    if (a.name.find("expert") != std::string::npos) {
      EXPECT_GT(a.widths.front(), 0) << a.name;
    }
  }
  for (int i = 0; i < 5; ++i) {
    for (int skew : {-2, 0, 2}) {
      absl::StatusOr<std::string> arch = ExportChild(p, *s, Choices(*s, i, skew));
      ASSERT_THAT(arch.status(), IsOk()) << i << " " << skew;
      EXPECT_EQ(*arch, "nemotron_h_moe");
    }
  }
  absl::StatusOr<autocompress::SearchSpace> open = autocompress::BuildSearchSpace(
      p.model->config());
  ASSERT_THAT(open.status(), IsOk());
  std::vector<int> indices = Choices(*open, 9, 0);  // the parent, then no shared expert
  for (size_t a = 0; a < open->axes.size(); ++a) {
    if (open->axes[a].name.find("shared_ffn") != std::string::npos) indices[a] = 0;
  }
  EXPECT_THAT(ExportChild(p, *open, indices).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("keeps routed experts without the shared expert")));
}

// Every student of a uniform MoE space exports in the family's HF layout and re-imports to
// exactly the student (F32); Mixtral's also as GGUF `llama`.
TEST(ExportableSpaceTest, EveryStudentOfAUniformMoeSpaceExportsAndReimportsExactly) {
  for (const char* arch : {"MixtralForCausalLM", "Qwen3MoeForCausalLM"}) {
    SCOPED_TRACE(arch);
    const Imported p = Import(arch);
    absl::StatusOr<autocompress::SearchSpace> s = UniformSpace(p);
    ASSERT_THAT(s.status(), IsOk());
    for (int i = 0; i < 4; ++i) {
      const std::vector<int> indices = Choices(*s, i, i % 2 == 0 ? 1 : -1);
      absl::StatusOr<autocompress::Student> child =
          autocompress::ExtractStudent(p.model, *s, indices);
      ASSERT_THAT(child.status(), IsOk());
      const std::string dir = testing::NewTestDir("exportable_moe_");
      ASSERT_THAT(model::SaveHybridLM(child->model, dir), IsOk());
      hf::HfExportOptions f32;
      f32.dtype = model::DType::kF32;
      ASSERT_THAT(hf::ExportStudentAsHf(dir, p.checkpoint, dir + "/hf", f32).status(), IsOk());
      absl::StatusOr<model::HybridLM> back = hf::LoadModelDir(dir + "/hf");
      ASSERT_THAT(back.status(), IsOk());
      EXPECT_EQ((*back)->config().ParameterCount(), child->config.ParameterCount());
      const std::vector<int64_t> tokens = {1, 5, 17, 33, 60, 2, 9};
      auto ours = hf::NextTokenLogprobs(child->model, tokens, {0, 3, 6});
      auto theirs = hf::NextTokenLogprobs(*back, tokens, {0, 3, 6});
      ASSERT_THAT(ours.status(), IsOk());
      ASSERT_THAT(theirs.status(), IsOk());
      EXPECT_EQ(*ours, *theirs) << "choice " << i;
      if (std::string(arch) == "MixtralForCausalLM") {
        absl::StatusOr<gguf::StudentGgufSummary> g =
            gguf::ExportStudentToGguf(dir, p.checkpoint, dir + "/student.gguf");
        ASSERT_THAT(g.status(), IsOk());
        EXPECT_EQ(g->arch, "llama");
      }
    }
  }
}

// Students of each family's search space, hidden width pruned too (a child keeps fewer
// residual channels, so the norms run over fewer), computed by llama.cpp from the GGUF
// tailor exports exactly as tailor computes them (F32, 64 prompts x 32 positions).
TEST(ExportableSpaceLlamaCppTest, SearchSpaceStudentsOfEveryFamilyEqualLlamaCpp) {
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) GTEST_SKIP() << "llama.cpp sidecar unavailable: " << missing;
  struct Case {
    const char* arch;
    const char* gguf_arch;
    bool hidden_pruned;
  };
  for (const Case& c : {Case{"LlamaForCausalLM", "deci", true},
                        Case{"Qwen3ForCausalLM", "qwen3", true},
                        Case{"Qwen2ForCausalLM", "qwen2", false},
                        Case{"MixtralForCausalLM", "llama", true}}) {
    SCOPED_TRACE(c.arch);
    const Imported p = Import(c.arch);
    absl::StatusOr<autocompress::SearchSpace> s = SpaceFor(p);
    ASSERT_THAT(s.status(), IsOk());
    // The first axis (hidden), the second and the last one below their widest: in a
    // per-layer space the first decoder layer's attention and the last one's MLP.
    std::vector<int> indices = Choices(*s, 9, 0);
    for (size_t a : {size_t{0}, size_t{1}, indices.size() - 1}) {
      indices[a] = std::max(0, indices[a] - 1);
    }
    absl::StatusOr<autocompress::Student> child =
        autocompress::ExtractStudent(p.model, *s, indices);
    ASSERT_THAT(child.status(), IsOk());
    EXPECT_EQ(child->config.hidden < p.model->config().hidden, c.hidden_pruned);
    const std::string dir = testing::NewTestDir("exportable_cpp_");
    ASSERT_THAT(model::SaveHybridLM(child->model, dir), IsOk());
    gguf::GgufExportOptions f32;
    f32.all_f32 = true;
    absl::StatusOr<gguf::StudentGgufSummary> g =
        gguf::ExportStudentToGguf(dir, p.checkpoint, dir + "/student.gguf", f32);
    ASSERT_THAT(g.status(), IsOk());
    EXPECT_EQ(g->arch, c.gguf_arch);
    model::HybridLM student = child->model;
    testing::ExpectAgreesWithLlamaCpp(
        [&](const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions) {
          return hf::NextTokenLogprobs(student, tokens, positions);
        },
        dir + "/student.gguf", testing::LlamaCppComparison{},
        absl::StrCat(c.arch, " search-space student (hidden ", child->config.hidden, " of ",
                     p.model->config().hidden, ") as ", g->arch));
  }
}

}  // namespace
}  // namespace tailor
