// Your data, your quality bar, through real processes: a Llama-layout parent whose tokenizer
// was trained on Debian's license texts compresses with that text as calibration, training
// and eval data (stored by digest at submission, tokenized by the parent's own tokenizer in
// every job). The report shows the parent's, the student's and the uniform baseline's
// perplexity on the eval set; the same contract with an exact-match floor no student reaches
// FAILS after its student is stored, naming the figures; a corpus with a broken line is
// refused at submission, naming the file and line, and nothing runs.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "compression/data/debian_corpus.h"
#include "compression/tokenizer/bpe_trainer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/testing/hf_test_checkpoint.h"

namespace tailor::e2e {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kVocab = 384;

// The first `train` and `eval` paragraphs of the Debian corpus (and its prompts), in `dir`.
data::DebianCorpus SmallCorpus(const std::string& dir) {
  absl::StatusOr<data::DebianCorpus> full = data::ReadDebianCorpus();
  EXPECT_TRUE(full.ok()) << full.status();
  data::DebianCorpus c = *full;
  c.train.resize(std::min<size_t>(c.train.size(), 160));
  c.eval.resize(std::min<size_t>(c.eval.size(), 24));
  c.prompts.resize(std::min<size_t>(c.prompts.size(), 16));
  EXPECT_TRUE(data::WriteDebianCorpus(c, dir).ok());
  return c;
}

// A tiny random Llama checkpoint whose vocabulary is a BPE trained on `corpus`.
std::string WriteParent(const std::string& dir, const data::DebianCorpus& corpus) {
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::string> tokenizer = tokenizer::TrainByteLevelBpe(
      corpus.train, {.vocab_size = kVocab,
                     .special_tokens = {"<|begin_of_text|>", "<|end_of_text|>"}});
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::ofstream(dir + "/tokenizer.json") << *tokenizer;
  nlohmann::json config = testing::TinyHfConfig("LlamaForCausalLM");
  config["vocab_size"] = kVocab;
  config["bos_token_id"] = kVocab - 2;
  config["eos_token_id"] = kVocab - 1;
  EXPECT_TRUE(testing::WriteHfCheckpointFiles(
                  dir, config, testing::HfTestTensors(config, model::DType::kF32, 3), 1,
                  /*tokenizer=*/false)
                  .ok());
  return dir;
}

std::string Contract(const std::string& name, const std::string& parent,
                     const std::string& corpus, const std::string& quality) {
  return absl::StrCat(
      "name: \"", name, "\"\nmethod: AUTOCOMPRESS\nparent { path: \"", parent, "\" }\n",
      "target { device_kind: \"cpu\" precision: FP32 }\n",
      "workload { batch_size: 1 input_tokens: 16 output_tokens: 8 cached_prefix_tokens: 0 }\n",
      "budget { latency_ms_max: 5000 }\n",
      "ranking { calibration_samples: 16 }\n",
      "search { steps: 4 sampled_architectures: 4 batch_sequences: 8 sequence_length: 32 }\n",
      // 120 steps: long enough for one distill job to be killed mid-run.
      "recovery { tokens: 30720 batch_sequences: 8 sequence_length: 32 "
      "checkpoint_every_steps: 2 }\n",
      "compare_uniform_baseline: true\n",
      "data {\n  calibration { path: \"", corpus, "/train.jsonl\" }\n",
      "  train { path: \"", corpus, "/train.jsonl\" }\n",
      "  eval { path: \"", corpus, "/eval.jsonl\" sequence_tokens: 64 max_sequences: 48 }\n}\n",
      quality,
      "resources { search { ranks_per_node: 2 } distill { ranks_per_node: 2 } }\n");
}

TEST(DataQualityE2E, OwnDataTrainsAndJudgesTheStudentAndBadDataIsRefused) {
  if (!std::filesystem::exists("/usr/share/common-licenses")) {
    GTEST_SKIP() << "no /usr/share/common-licenses";
  }
  Cluster cluster("dataq", Cluster::WithProductionLeases());
  const std::string corpus = cluster.dir() + "/corpus";
  const data::DebianCorpus text = SmallCorpus(corpus);
  const std::string parent = WriteParent(cluster.dir() + "/parent", text);
  ASSERT_TRUE(cluster.StartCoordinator());
  cluster.StartAgent("cpu0", {"--profile-rounds", "2", "--profile-validation", "4",
                              "--verify-repetitions", "3", "--verify-task-samples", "4"});

  // A broken corpus: refused at submission with the file and line; no campaign exists.
  const std::string broken = cluster.dir() + "/broken";
  std::filesystem::create_directories(broken);
  std::filesystem::copy_file(corpus + "/train.jsonl", broken + "/train.jsonl");
  std::ofstream(broken + "/eval.jsonl") << "{\"text\": \"fine\"}\n{\"text\": \"cut\n";
  RunResult refused = cluster.Cli(
      {"submit", cluster.WriteFile("broken.textproto", Contract("broken", parent, broken, ""))});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr(absl::StrCat("data.eval.path: ", broken,
                                                  "/eval.jsonl:2: not JSON")));
  RunResult listed = cluster.Cli({"list", "--json"});
  EXPECT_THAT(listed.out, ::testing::Not(HasSubstr("broken")));

  const std::string good = cluster.Submit(
      cluster.WriteFile("good.textproto",
                        Contract("good", parent, corpus,
                                 "quality { max_relative_perplexity_increase: 100 }\n")),
      "good");
  const std::string strict = cluster.Submit(
      cluster.WriteFile("strict.textproto",
                        Contract("strict", parent, corpus, "quality { min_exact_match: 1 }\n")),
      "strict");
  ASSERT_FALSE(good.empty());
  ASSERT_FALSE(strict.empty());
  // The strict campaign's distill job loses a rank after its step-2 checkpoint; the retry
  // resumes there and must read what the good campaign's uninterrupted job read.
  const std::string killed =
      KillRankAtStep(cluster, strict, "distill", 5, /*rank=*/1, absl::Minutes(10));
  ASSERT_FALSE(killed.empty());
  ASSERT_TRUE(cluster.WaitForState(good, "CAMPAIGN_SUCCEEDED", absl::Minutes(15)))
      << cluster.Status(good).dump(2);
  ASSERT_TRUE(cluster.WaitForState(strict, "CAMPAIGN_FAILED", absl::Minutes(15)))
      << cluster.Status(strict).dump(2);

  const nlohmann::json report = cluster.Report(good);
  std::printf("quality: %s\nquality_check: %s\n", report["quality"].dump().c_str(),
              report["quality_check"].dump().c_str());
  std::map<std::string, double> perplexity;
  for (const nlohmann::json& q : report["quality"]) {
    perplexity[q["model"]] = q.value("perplexity", 0.0);
  }
  for (const char* model : {"parent", "student", "baseline"}) {
    EXPECT_GT(perplexity[model], 1.0) << model << ": " << report["quality"].dump(2);
    EXPECT_LT(perplexity[model], 4.0 * kVocab) << model;
  }
  // Verify measured each student in the serving engine on the same 48 sequences (FP32: the
  // distill job's figure up to rounding).
  for (const nlohmann::json& q : report["quality"]) {
    if (q["model"] == "parent") continue;
    ASSERT_TRUE(q.contains("served_perplexity")) << q.dump();
    const double ppl = q["perplexity"].get<double>();
    EXPECT_NEAR(q["served_perplexity"].get<double>(), ppl, 1e-3 * ppl) << q.dump();
  }
  EXPECT_EQ(report["quality_check"]["met"], true);
  EXPECT_DOUBLE_EQ(report["quality_check"]["student_perplexity"].get<double>(),
                   perplexity["student"]);
  ASSERT_EQ(report["datasets"].size(), 3u) << report.dump(2);
  for (const nlohmann::json& d : report["datasets"]) {
    EXPECT_EQ(d.value("artifact_digest", "").size(), 64u) << d.dump();
  }
  // The two ranks of the distill job trained on disjoint documents.
  const nlohmann::json shards =
      JobOf(cluster.Status(good), "distill")["output"]["detail"]["shards"];
  ASSERT_EQ(shards.size(), 2u) << shards.dump(2);
  for (int rank = 0; rank < 2; ++rank) {
    const nlohmann::json& s = shards[rank];
    EXPECT_EQ(Int64Of(s.value("first_document", nlohmann::json(0))) % 2, rank) << s.dump();
    EXPECT_EQ(Int64Of(s["last_document"]) % 2, rank) << s.dump();
    EXPECT_GT(Int64Of(s["sequences"]), 0) << s.dump();
  }
  EXPECT_NE(shards[0]["documents_sha256"], shards[1]["documents_sha256"]);

  // The strict campaign failed on its floor with the figures, after its student was stored.
  const nlohmann::json failed = cluster.Status(strict);
  EXPECT_THAT(failed["error"].get<std::string>(),
              HasSubstr("quality floor missed on data.eval: student exact match"));
  const nlohmann::json distill = JobOf(failed, "distill");
  EXPECT_EQ(distill["state"], "JOB_SUCCEEDED");
  EXPECT_EQ(JobOf(failed, "verify")["state"], "JOB_CANCELLED");
  const std::string student = distill["output"].value("model_digest", "");
  ASSERT_EQ(student.size(), 64u) << distill.dump(2);
  EXPECT_EQ(cluster.Cli({"artifacts", "get", student, "-o", cluster.dir() + "/student.tar"})
                .exit_code,
            0);
  EXPECT_EQ(cluster.Report(strict)["quality_check"]["met"], false);

  // Killed and retried, it read the same documents in the same order on every rank.
  EXPECT_EQ(distill["attempt"], 2) << distill.dump(2);
  const nlohmann::json& retried = distill["output"]["detail"];
  std::printf("killed %s; the retry: %s\n", killed.c_str(), retried.dump().c_str());
  EXPECT_GE(Int64Of(retried["resumed_from_step"]), 2) << retried.dump(2);
  ASSERT_EQ(retried["shards"].size(), 2u) << retried.dump(2);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(retried["shards"][rank], shards[rank]) << "rank " << rank;
  }
}

}  // namespace
}  // namespace tailor::e2e
