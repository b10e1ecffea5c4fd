// Bring your own model, through real processes: a Hugging Face checkpoint (tiny, random, in
// the exact Llama layout: config.json, two BF16 shards with their index, tokenizer files) is
// the parent of an AUTOCOMPRESS and a BLOCK_REMOVAL campaign run by a real coordinator, a CPU
// profiler agent and 2-rank tailor-worker jobs. A second parent of another shape (Qwen3) on
// the same target gets its own cost table: before cost tables were keyed by the parent's
// architecture, its profile job was skipped and it was served the Llama parent's table.
// Each distilled student is handed back in the layouts that hold it (Llama: its family's or
// DeciLM's HF folder and `llama` / `deci` GGUF; Qwen3, Mixtral, Qwen3-MoE: the family's, from
// searches restricted to one width per kind), and the GGUF fetched with `tailor artifacts
// get` computes the student in llama.cpp.
#include <torch/torch.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "compression/gguf/gguf_reader.h"
#include "compression/hf/hf_import.h"
#include "compression/hf/parent_architecture.h"
#include "compression/model/config.h"
#include "compression/model/model_archive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/llama_cpp_agreement.h"

namespace tailor::e2e {
namespace {

// The family's tiny test checkpoint, `patch` merged into its config.json.
std::string WriteCheckpoint(Cluster& cluster, const std::string& architecture,
                            const nlohmann::json& patch = nlohmann::json::object()) {
  const std::string dir = cluster.dir() + "/" + architecture;
  std::filesystem::create_directories(dir);
  nlohmann::json config = testing::TinyHfConfig(architecture);
  config.update(patch);
  const absl::Status written = testing::WriteHfCheckpointFiles(
      dir, config, testing::HfTestTensors(config, model::DType::kBF16, 1));
  EXPECT_TRUE(written.ok()) << written;
  return dir;
}

std::string Autocompress(const std::string& name, const std::string& parent) {
  return absl::StrCat(
      "name: \"", name, "\"\nmethod: AUTOCOMPRESS\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { latency_ms_max: 5000 }\n",
      "ranking { calibration_samples: 16 }\n",
      "search { steps: 4 sampled_architectures: 4 batch_sequences: 8 sequence_length: 32 }\n",
      "recovery { tokens: 512 batch_sequences: 8 sequence_length: 32 "
      "checkpoint_every_steps: 2 }\n",
      "resources { search { ranks_per_node: 2 } distill { ranks_per_node: 2 } }\n");
}

std::string BlockRemoval(const std::string& parent) {
  return absl::StrCat(
      "name: \"blocks\"\nmethod: BLOCK_REMOVAL\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "block_removal { blocks_to_remove: 1 calibration_samples: 16 candidates: 2 solver: EXACT "
      "distill: true }\n",
      "recovery { tokens: 512 batch_sequences: 8 sequence_length: 32 "
      "checkpoint_every_steps: 2 }\n",
      "resources { block_select { ranks_per_node: 2 } distill { ranks_per_node: 2 } }\n");
}

std::string KeyOf(const std::string& dir) {
  absl::StatusOr<std::string> text = model::ReadFileToString(dir + "/config.json");
  if (!text.ok()) return text.status().ToString();
  absl::StatusOr<std::string> key = hf::ParentArchitectureKey(*text);
  return key.ok() ? *key : key.status().ToString();
}

// The GGUF artifact, fetched with `tailor artifacts get`, computes in llama.cpp what the
// student artifact computes in tailor: the handed-back file is the model that was verified.
void CheckGgufComputesTheStudent(Cluster& cluster, const std::string& student_digest,
                                 const std::string& gguf_digest, const std::string& name) {
  const std::string gguf = cluster.dir() + "/" + name + ".gguf";
  const std::string tar = cluster.dir() + "/" + name + ".tar";
  ASSERT_EQ(cluster.Cli({"artifacts", "get", gguf_digest, "-o", gguf}).exit_code, 0);
  ASSERT_EQ(cluster.Cli({"artifacts", "get", student_digest, "-o", tar}).exit_code, 0);
  const std::string missing = testing::LlamaCppSidecarMissing();
  if (!missing.empty()) {
    std::printf("llama.cpp sidecar unavailable, GGUF not evaluated: %s\n", missing.c_str());
    return;
  }
  const std::string dir = cluster.dir() + "/" + name;
  ASSERT_TRUE(model::UnpackModelArchive(tar, dir).ok());
  absl::StatusOr<model::HybridLM> student = hf::LoadModelDir(dir);
  ASSERT_TRUE(student.ok()) << student.status();
  // The family arch keeps the parent's dtype for matrices (BF16 here), `deci` is F32: the
  // student's matrices rounded the same way (round to nearest even, as the export does) are
  // the file's weights exactly, so the FP32 bounds apply to the computation itself.
  absl::StatusOr<gguf::GgufFile> file = gguf::GgufFile::Read(gguf);
  ASSERT_TRUE(file.ok()) << file.status();
  int bf16 = 0, matrices = 0;
  for (const gguf::TensorInfo& t : file->tensors()) {
    if (t.ne.size() < 2) continue;
    ++matrices;
    bf16 += t.type == gguf::TensorType::kBF16;
  }
  ASSERT_TRUE(bf16 == 0 || bf16 == matrices) << bf16 << " of " << matrices << " BF16";
  if (bf16 > 0) {
    torch::NoGradGuard no_grad;
    for (at::Tensor& p : (*student)->parameters()) {
      if (p.dim() >= 2) p.copy_(p.to(torch::kBFloat16).to(torch::kFloat32));
    }
  }
  testing::LlamaCppComparison comparison;  // FP32: KL <= 1e-4, argmax >= 99%
  // llama.cpp also rounds the activations entering a BF16 matmul to BF16: a router near-tie
  // then picks another expert at a few positions (Qwen3-MoE's distilled student: max KL
  // 8.8e-5 here). The FP32 bound is shown on F32 files by the unit tests; the BF16 artifact
  // gets 10x the room, the argmax bound unchanged.
  if (bf16 > 0) comparison.max_kl = 1e-3;
  testing::ExpectAgreesWithLlamaCpp(
      [&](const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions) {
        return hf::NextTokenLogprobs(*student, tokens, positions);
      },
      gguf, comparison, name + ": distilled student, exported GGUF");
}

// The campaign's distilled student was handed back as `hf_format` (HF folder) and
// `gguf_format` (GGUF), and the GGUF computes the student in llama.cpp.
void CheckUniformStudentExports(Cluster& cluster, const std::string& id,
                                const std::string& hf_format, const std::string& gguf_format) {
  const nlohmann::json campaign = cluster.Status(id);
  const nlohmann::json exports = JobOf(campaign, "distill")["output"]["detail"]["exports"];
  ASSERT_EQ(exports.size(), 2u) << exports.dump(2);
  std::printf("%s student exports: %s\n", hf_format.c_str(), exports.dump().c_str());
  EXPECT_EQ(exports[0]["format"], hf_format) << exports.dump(2);
  EXPECT_EQ(exports[0].value("digest", "").size(), 64u) << exports.dump(2);
  EXPECT_EQ(exports[1]["format"], gguf_format) << exports.dump(2);
  ASSERT_EQ(exports[1].value("digest", "").size(), 64u) << exports.dump(2);
  CheckGgufComputesTheStudent(cluster, JobOf(campaign, "distill")["output"]["model_digest"],
                              exports[1]["digest"], hf_format + "-student");
}

// One block (an attention or an MLP) removed: the Llama layout cannot hold the student,
// DeciLM's block_configs can (and GGUF `deci`).
void CheckBlockRemovalStudentIsDeciLm(Cluster& cluster, const std::string& id) {
  const nlohmann::json exports =
      JobOf(cluster.Status(id), "distill")["output"]["detail"]["exports"];
  ASSERT_EQ(exports.size(), 2u) << exports.dump(2);
  std::printf("block-removal student exports: %s\n", exports.dump().c_str());
  EXPECT_EQ(exports[0]["format"], "DeciLMForCausalLM") << exports.dump(2);
  EXPECT_EQ(exports[0].value("digest", "").size(), 64u) << exports.dump(2);
  EXPECT_EQ(exports[1]["format"], "deci") << exports.dump(2);
}

TEST(HfParentE2E, LlamaCheckpointCompressesAndAnotherShapeProfilesAgain) {
  Cluster cluster("hfparent", Cluster::WithProductionLeases());
  // MLP width 256, a multiple of 256 like full-size Llamas': the block-removal student fits
  // DeciLM's layout.
  const std::string llama =
      WriteCheckpoint(cluster, "LlamaForCausalLM", {{"intermediate_size", 256}});
  const std::string qwen3 = WriteCheckpoint(cluster, "Qwen3ForCausalLM");
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu0", {"--profile-rounds", "2", "--profile-validation", "4",
                              "--verify-repetitions", "3", "--verify-task-samples", "4"});

  const std::string ac = cluster.Submit(
      cluster.WriteFile("ac.textproto", Autocompress("ac-llama", llama)), "ac-llama");
  const std::string br =
      cluster.Submit(cluster.WriteFile("br.textproto", BlockRemoval(llama)), "br-llama");
  ASSERT_FALSE(ac.empty());
  ASSERT_FALSE(br.empty());
  for (const std::string& id : {ac, br}) {
    const bool done = cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Minutes(10));
    ASSERT_TRUE(done) << cluster.Status(id).dump(2);
  }
  const nlohmann::json campaign = cluster.Status(ac);
  for (const char* key : {"profile", "rank", "search", "distill", "verify"}) {
    EXPECT_EQ(JobOf(campaign, key)["state"], "JOB_SUCCEEDED") << key;
  }
  // The imported parent: 2 decoder layers = 4 internal blocks (attention, MLP per layer).
  EXPECT_EQ(JobOf(cluster.Status(br), "gate_gradients")["output"]["detail"]["blocks"], 4);
  CheckBlockRemovalStudentIsDeciLm(cluster, br);
  // The distilled student handed back for serving engines: GGUF always (a per-layer student
  // as `deci`), the family's HF folder when its widths are uniform, else the reason.
  const nlohmann::json exports = JobOf(campaign, "distill")["output"]["detail"]["exports"];
  ASSERT_EQ(exports.size(), 2u) << exports.dump(2);
  std::printf("student exports: %s\n", exports.dump().c_str());
  EXPECT_EQ(exports[0]["layout"], "hf");
  EXPECT_EQ(exports[1]["layout"], "gguf");
  if (!exports[0].value("digest", "").empty()) {
    EXPECT_THAT(exports[0]["format"].get<std::string>(),
                ::testing::AnyOf("LlamaForCausalLM", "DeciLMForCausalLM"));
  } else {
    EXPECT_THAT(exports[0]["unavailable"].get<std::string>(),
                ::testing::HasSubstr("does not fit the LlamaForCausalLM layout"));
  }
  ASSERT_EQ(exports[1].value("digest", "").size(), 64u) << exports.dump(2);
  EXPECT_THAT(exports[1]["format"].get<std::string>(), ::testing::AnyOf("llama", "deci"));
  CheckGgufComputesTheStudent(cluster, JobOf(campaign, "distill")["output"]["model_digest"],
                              exports[1]["digest"], "llama-student");

  const nlohmann::json report = cluster.Report(ac);
  ASSERT_EQ(report["quality"].size(), 2u) << report.dump(2);
  EXPECT_LE(Int64Of(report["quality"][1]["parameters"]),
            Int64Of(report["quality"][0]["parameters"]));

  // The Qwen3 parent (head_dim 16, q/k norms) on the same target and workload profiles.
  const std::string other = cluster.Submit(
      cluster.WriteFile("ac-qwen3.textproto", Autocompress("ac-qwen3", qwen3)), "ac-qwen3");
  ASSERT_FALSE(other.empty());
  nlohmann::json profile = JobOf(cluster.Status(other), "profile");
  EXPECT_EQ(cluster.Status(other)["fingerprint"], campaign["fingerprint"]);
  EXPECT_NE(profile["state"], "JOB_SKIPPED") << profile.dump(2);
  ASSERT_TRUE(WaitFor(
      [&] {
        profile = JobOf(cluster.Status(other), "profile");
        return profile["state"] == "JOB_SUCCEEDED" || profile["state"] == "JOB_FAILED";
      },
      absl::Minutes(5)));
  ASSERT_EQ(profile["state"], "JOB_SUCCEEDED") << profile.dump(2);
  // Its students can only be carried by the qwen3 layout (one width per kind: `deci` has no
  // q/k norms), so the search space is uniform and the student exports in both layouts.
  ASSERT_TRUE(cluster.WaitForState(other, "CAMPAIGN_SUCCEEDED", absl::Minutes(10)))
      << cluster.Status(other).dump(2);
  CheckUniformStudentExports(cluster, other, "Qwen3ForCausalLM", "qwen3");

  RunResult costs = cluster.Cli({"costs", "list", "--json"});
  ASSERT_EQ(costs.exit_code, 0) << costs.err;
  const nlohmann::json tables = nlohmann::json::parse(costs.out)["tables"];
  ASSERT_EQ(tables.size(), 2u) << costs.out;
  EXPECT_EQ(tables[0]["parent_architecture"], KeyOf(qwen3));  // newest first
  EXPECT_EQ(tables[1]["parent_architecture"], KeyOf(llama));
  EXPECT_EQ(tables[0]["fingerprint"], tables[1]["fingerprint"]);
}

// The MoE families: their only layouts have one expert count and width for all layers, so
// the searches are uniform and the students export as the family's HF folder and GGUF.
TEST(HfParentE2E, MoeCheckpointsCompressToStudentsTheirLayoutsHold) {
  Cluster cluster("hfmoe", Cluster::WithProductionLeases());
  const std::string mixtral = WriteCheckpoint(cluster, "MixtralForCausalLM");
  // Every layer sparse: llama.cpp's qwen3moe has no dense layers.
  const std::string qwen3moe = WriteCheckpoint(cluster, "Qwen3MoeForCausalLM",
                                               {{"mlp_only_layers", nlohmann::json::array()}});
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu0", {"--profile-rounds", "2", "--profile-validation", "4",
                              "--verify-repetitions", "3", "--verify-task-samples", "4"});
  const std::string a = cluster.Submit(
      cluster.WriteFile("mixtral.textproto", Autocompress("ac-mixtral", mixtral)), "ac-mixtral");
  const std::string b = cluster.Submit(
      cluster.WriteFile("qwen3moe.textproto", Autocompress("ac-qwen3moe", qwen3moe)),
      "ac-qwen3moe");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  for (const std::string& id : {a, b}) {
    ASSERT_TRUE(cluster.WaitForState(id, "CAMPAIGN_SUCCEEDED", absl::Minutes(10)))
        << cluster.Status(id).dump(2);
  }
  CheckUniformStudentExports(cluster, a, "MixtralForCausalLM", "llama");
  CheckUniformStudentExports(cluster, b, "Qwen3MoeForCausalLM", "qwen3moe");
}

}  // namespace
}  // namespace tailor::e2e
