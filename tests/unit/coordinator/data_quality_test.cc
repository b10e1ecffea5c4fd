// A contract's datasets at submission (coordinator/dataset_ingest.h: read through with the
// parent's own tokenizer, stored by digest, nothing stored when any is bad) and its quality
// floors judged on the student's eval (coordinator/quality_check.h).

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/model/model_archive.h"
#include "compression/tokenizer/bpe_trainer.h"
#include "coordinator/dataset_ingest.h"
#include "coordinator/quality_check.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "storage/blob_store.h"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::EvalQuality Eval(double teacher, double student) {
  v1::EvalQuality e;
  e.set_dataset_digest("d");
  e.set_tokens(1000);
  e.set_teacher_perplexity(teacher);
  e.set_student_perplexity(student);
  return e;
}

TEST(JudgeQualityTest, PerplexityFloor) {
  v1::QualityParams floors;
  floors.set_max_relative_perplexity_increase(0.25);
  v1::QualityCheck met = JudgeQuality(floors, Eval(10, 12));
  EXPECT_TRUE(met.met());
  EXPECT_DOUBLE_EQ(met.relative_perplexity_increase(), 0.2);
  EXPECT_EQ(met.reason(), "quality floors met on data.eval: student perplexity 12 is +20.0% "
                          "against the parent's 10 (at most +25.0%)");
  v1::QualityCheck missed = JudgeQuality(floors, Eval(10, 13));
  EXPECT_FALSE(missed.met());
  EXPECT_EQ(missed.reason(), "quality floor missed on data.eval: student perplexity 13 is "
                             "+30.0% against the parent's 10 (at most +25.0%)");
  EXPECT_TRUE(JudgeQuality({}, Eval(10, 50)).met());  // no floor: figures only
}

TEST(JudgeQualityTest, ExactMatchFloorNeedsPrompts) {
  v1::QualityParams floors;
  floors.set_min_exact_match(0.5);
  v1::EvalQuality e = Eval(10, 11);
  EXPECT_FALSE(JudgeQuality(floors, e).met());
  EXPECT_THAT(JudgeQuality(floors, e).reason(), HasSubstr("no prompt/answer line"));
  e.set_exact_match_items(20);
  e.set_teacher_exact_match(0.9);
  e.set_student_exact_match(0.45);
  const v1::QualityCheck c = JudgeQuality(floors, e);
  EXPECT_FALSE(c.met());
  EXPECT_THAT(c.reason(), HasSubstr("student exact match 0.450 over 20 prompts (parent 0.900; "
                                    "at least 0.500)"));
  e.set_student_exact_match(0.5);
  EXPECT_TRUE(JudgeQuality(floors, e).met());
}

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tailor::testing::NewTestDir("ingest");
    parent_ = dir_ + "/parent";
    std::filesystem::create_directories(parent_);
    nlohmann::json config = tailor::testing::TinyHfConfig("LlamaForCausalLM");
    config["vocab_size"] = 300;
    std::ofstream(parent_ + "/config.json") << config.dump();
    absl::StatusOr<std::string> tok =
        tokenizer::TrainByteLevelBpe({"the cat sat on the mat"}, {.vocab_size = 270});
    ASSERT_THAT(tok.status(), IsOk());
    std::ofstream(parent_ + "/tokenizer.json") << *tok;
    auto blobs = storage::BlobStore::Open(dir_ + "/blobs");
    ASSERT_THAT(blobs.status(), IsOk());
    blobs_ = *std::move(blobs);
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
    return dir_ + "/" + name;
  }

  v1::DeploymentContract Contract(const std::string& data) {
    v1::DeploymentContract c;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
        absl::StrCat("method: AUTOCOMPRESS parent { path: \"", parent_,
                     "\" } recovery { sequence_length: 8 } ", data),
        &c));
    return c;
  }

  int StoredBlobs() {
    int n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_ + "/blobs/sha256")) {
      n += e.is_regular_file() ? 1 : 0;
    }
    return n;
  }

  std::string dir_;
  std::string parent_;
  std::unique_ptr<storage::BlobStore> blobs_;
};

TEST_F(IngestTest, StoresEachDatasetByDigest) {
  const std::string train = Write("train.jsonl", "{\"text\": \"the cat sat\"}\n"
                                                 "{\"input_ids\": [1, 2, 3, 4, 5, 6, 7, 8]}\n");
  const std::string eval = Write("eval.jsonl", "{\"prompt\": \"the cat\", \"answer\": \" sat\"}\n");
  v1::DeploymentContract c = Contract(absl::StrCat(
      "data { train { path: \"", train, "\" packing: true } eval { path: \"", eval,
      "\" packing: false sequence_tokens: 16 } }"));
  ASSERT_THAT(IngestDatasets(c, *blobs_), IsOk());
  ASSERT_EQ(c.data().train().artifact_digest().size(), 64u);
  ASSERT_TRUE(blobs_->Exists(c.data().eval().artifact_digest()));
  absl::StatusOr<std::string> stored = blobs_->PathOf(c.data().train().artifact_digest());
  ASSERT_THAT(stored.status(), IsOk());
  absl::StatusOr<std::vector<std::string>> names =
      model::UnpackDatasetArchive(*stored, dir_ + "/unpacked");
  ASSERT_THAT(names.status(), IsOk());
  EXPECT_THAT(*names, ElementsAre("train.jsonl"));
  // Given by digest (a recompression), a stored dataset is not read again.
  v1::DeploymentContract again = c;
  std::filesystem::remove(train);
  EXPECT_THAT(IngestDatasets(again, *blobs_), IsOk());
}

TEST_F(IngestTest, BadDataIsRefusedNamingFieldFileAndLineAndNothingIsStored) {
  const std::string train = Write("train.jsonl", "{\"text\": \"the cat sat on the mat\"}\n");
  const std::string eval = Write("eval.jsonl", "{\"text\": \"the cat\"}\n{broken\n");
  v1::DeploymentContract c = Contract(absl::StrCat(
      "data { train { path: \"", train, "\" packing: true } eval { path: \"", eval,
      "\" packing: true sequence_tokens: 16 } }"));
  EXPECT_THAT(IngestDatasets(c, *blobs_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("data.eval.path: ", eval, ":2: not JSON")));
  EXPECT_EQ(StoredBlobs(), 0);
  EXPECT_TRUE(c.data().train().artifact_digest().empty());

  Write("eval.jsonl", "{\"input_ids\": [5, 300]}\n");
  EXPECT_THAT(IngestDatasets(c, *blobs_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(":1: input_ids[1] = 300 is outside the parent's vocabulary of "
                                 "300 tokens")));
  Write("eval.jsonl", "\n\n");
  EXPECT_THAT(IngestDatasets(c, *blobs_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds no sequence of at least 2 tokens")));
  EXPECT_EQ(StoredBlobs(), 0);

  v1::DeploymentContract missing = Contract(
      "data { eval { artifact_digest: "
      "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\" } }");
  EXPECT_THAT(IngestDatasets(missing, *blobs_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("data.eval.artifact_digest: no artifact sha256:0123")));
  v1::DeploymentContract nowhere = Contract("data { train { path: \"/no/such.jsonl\" } }");
  EXPECT_THAT(IngestDatasets(nowhere, *blobs_),
              StatusIs(absl::StatusCode::kNotFound,
                       "data.train.path: /no/such.jsonl: no such file or directory"));
}

}  // namespace
}  // namespace tailor::coordinator
