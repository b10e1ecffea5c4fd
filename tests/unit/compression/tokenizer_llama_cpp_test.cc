// tailor's tokenizers against llama.cpp's (node-llama-cpp 3.21.1) on the vocabulary tailor's
// GGUF exporter writes: a byte-level BPE trained here on Debian text (Llama-3 and Qwen2 split
// patterns) and a SentencePiece BPE trained by Debian's spm_train (tailor's encoder also
// against Debian's libsentencepiece), over that text plus lines with non-ASCII, digits,
// whitespace runs and special tokens. The ids must be identical: the student is served by
// llama.cpp, so its data must be cut exactly as llama.cpp cuts it.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/data/debian_corpus.h"
#include "compression/gguf/gguf_reader.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/gguf/llama_cpp_sidecar.h"
#include "compression/gguf/llama_cpp_tokenize.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/tokenizer/bpe_trainer.h"
#include "compression/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/sentencepiece_reference.h"
#include "tests/testing/status_matchers.h"

namespace tailor::tokenizer {
namespace {

using ::tailor::testing::IsOk;

// Lines no license has: scripts, accents, emoji, digit runs, whitespace runs, contractions.
const std::vector<std::string> kHardLines = {
    "Grüße aus Köln: 3 Bücher für 12,50 € — naïve café.",
    "東京は日本の首都です。人口は約1400万人。",
    "Привет, мир! Это тест №42.",
    "Ελληνικά: αβγ ΑΒΓ, 2026-12-03T20:49:05Z",
    "emoji 🙂🚀 and ZWJ 👩‍💻 sequences",
    "  leading spaces, trailing spaces   ",
    "tabs\t\tand\r\nCRLF\n\n\nblank lines\n   \n",
    "I'LL SAY it's they'RE we've you'd 'tis",
    "digits 1 12 123 1234 12345 1234567890 3.14159 ½ ² ٣",
    "x=1;y=2;z=x+y*(3/4)-[5]{6}<7>|8\\9",
    "multiple     spaces    between\twords",
};

const std::vector<std::string> kSpecialLines = {
    "<|begin_of_text|>Hello<|eot_id|>",
    "text<|end_of_text|> <|eot_id|>\n<|begin_of_text|>  more",
    "<s>Hello</s> world <unk>",
};

// The Debian license texts, every machine has them (/usr/share/common-licenses).
std::vector<std::string> DebianLicenseParagraphs() {
  absl::StatusOr<data::DebianCorpus> corpus = data::ReadDebianCorpus();
  if (!corpus.ok()) return {};
  std::vector<std::string> out = corpus->train;
  out.insert(out.end(), corpus->eval.begin(), corpus->eval.end());
  return out;
}

// What both tokenizers must agree on: a sample of paragraphs (whole, so newlines and
// indentation runs are in), the hard lines and the special-token lines.
std::vector<std::string> TestTexts(const std::vector<std::string>& paragraphs) {
  std::vector<std::string> texts;
  for (size_t i = 0; i < paragraphs.size(); i += 7) texts.push_back(paragraphs[i]);
  texts.insert(texts.end(), kHardLines.begin(), kHardLines.end());
  texts.insert(texts.end(), kSpecialLines.begin(), kSpecialLines.end());
  return texts;
}

class TokenizerLlamaCppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = gguf::LlamaCppSidecarMissing(gguf::DefaultTokenizeScript());
    if (!missing.empty()) GTEST_SKIP() << missing;
    if (!std::filesystem::exists("/usr/share/common-licenses")) {
      GTEST_SKIP() << "no /usr/share/common-licenses";
    }
    paragraphs_ = DebianLicenseParagraphs();
    texts_ = TestTexts(paragraphs_);
  }

  // An HF checkpoint of `architecture` whose vocabulary is the tokenizer in `dir`, exported
  // to GGUF; returns the GGUF path.
  std::string ExportWithTokenizer(const std::string& dir, const std::string& architecture,
                                  int64_t vocab_size) {
    nlohmann::json config = tailor::testing::TinyHfConfig(architecture);
    config["vocab_size"] = vocab_size;
    EXPECT_THAT(tailor::testing::WriteHfCheckpointFiles(
                    dir, config,
                    tailor::testing::HfTestTensors(config, model::DType::kF32, 7), 1,
                    /*tokenizer=*/false),
                IsOk());
    absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(dir);
    EXPECT_THAT(ckpt.status(), IsOk());
    if (!ckpt.ok()) return "";
    const std::string gguf = dir + "/model.gguf";
    absl::StatusOr<gguf::GgufExportSummary> summary = gguf::ExportHfToGguf(*ckpt, gguf);
    EXPECT_THAT(summary.status(), IsOk());
    if (summary.ok()) {
      EXPECT_TRUE(summary->vocabulary.carried) << summary->vocabulary.note;
    }
    return gguf;
  }

  // Every text, with and without parse_special, tokenized by tailor and by llama.cpp.
  void ExpectSameIds(const Tokenizer& tailor_tokenizer, const std::string& gguf) {
    for (const bool special : {false, true}) {
      absl::StatusOr<std::vector<std::vector<int32_t>>> llama =
          gguf::RunLlamaCppTokenize(gguf, texts_, special);
      ASSERT_THAT(llama.status(), IsOk());
      int64_t tokens = 0;
      for (size_t i = 0; i < texts_.size(); ++i) {
        absl::StatusOr<std::vector<int32_t>> ours = tailor_tokenizer.Encode(texts_[i], special);
        ASSERT_THAT(ours.status(), IsOk());
        EXPECT_EQ(*ours, (*llama)[i]) << "parse_special " << special << ", text " << i << ": \""
                                      << texts_[i] << "\"";
        tokens += static_cast<int64_t>(ours->size());
      }
      EXPECT_GT(tokens, 5000);  // the comparison covers real text, not a handful of ids
    }
  }

  std::vector<std::string> paragraphs_;
  std::vector<std::string> texts_;
};

TEST_F(TokenizerLlamaCppTest, TrainedByteLevelBpeMatchesLlamaCppForLlama3AndQwen2Splits) {
  std::vector<std::string> corpus = paragraphs_;
  corpus.insert(corpus.end(), kHardLines.begin(), kHardLines.end());
  // Years and counts, so that digit pairs and triples become tokens and the two patterns'
  // digit splits (three at a time, one at a time) give different ids.
  std::string numbers;
  for (int n = 1900; n < 2100; ++n) absl::StrAppend(&numbers, n, " ", n % 1000, " ");
  corpus.push_back(numbers);
  for (const PreTokenizer pre : {PreTokenizer::kLlama3, PreTokenizer::kQwen2}) {
    SCOPED_TRACE(PreTokenizerName(pre));
    BpeTrainOptions options;
    options.vocab_size = 900;
    options.pre_tokenizer = pre;
    options.special_tokens = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"};
    absl::StatusOr<std::string> json = TrainByteLevelBpe(corpus, options);
    ASSERT_THAT(json.status(), IsOk());
    const std::string dir = tailor::testing::NewTestDir("bpe");
    std::ofstream(dir + "/tokenizer.json") << *json;
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(dir);
    ASSERT_THAT(t.status(), IsOk());
    ASSERT_EQ((*t)->vocab_size(), 900);
    const std::string gguf = ExportWithTokenizer(
        dir, pre == PreTokenizer::kLlama3 ? "LlamaForCausalLM" : "Qwen3ForCausalLM", 900);
    absl::StatusOr<gguf::GgufFile> f = gguf::GgufFile::Read(gguf);
    ASSERT_THAT(f.status(), IsOk());
    EXPECT_EQ(std::get<std::string>(*f->Find("tokenizer.ggml.pre")), GgufPreName(pre));
    ExpectSameIds(**t, gguf);
  }
}

TEST_F(TokenizerLlamaCppTest, SentencePieceBpeFromSpmTrainMatchesLlamaCpp) {
  if (std::system("command -v spm_train > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "spm_train is missing (Debian package sentencepiece; deploy/install-deps.sh)";
  }
  const std::string dir = tailor::testing::NewTestDir("spm");
  {
    std::ofstream corpus(dir + "/corpus.txt");
    for (const std::string& p : paragraphs_) corpus << p << "\n";
    for (const std::string& l : kHardLines) corpus << l << "\n";
  }
  // Llama-2's settings: BPE, byte fallback, no normalization, whitespace kept.
  const std::string train = absl::StrCat(
      "spm_train --input=", dir, "/corpus.txt --model_prefix=", dir,
      "/tokenizer --vocab_size=700 --model_type=bpe --byte_fallback=true "
      "--character_coverage=1.0 --normalization_rule_name=identity "
      "--remove_extra_whitespaces=false --split_digits=true --minloglevel=2 > ",
      dir, "/spm_train.log 2>&1");
  ASSERT_EQ(std::system(train.c_str()), 0) << "see " << dir << "/spm_train.log";
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(dir);
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_EQ((*t)->vocabulary().model, "llama");
  ASSERT_EQ((*t)->vocab_size(), 700);
  const std::string gguf = ExportWithTokenizer(dir, "LlamaForCausalLM", 700);
  ExpectSameIds(**t, gguf);

  // The library itself, on text without control pieces (it never parses those).
  tailor::testing::SentencePieceReference reference;
  std::string error;
  ASSERT_TRUE(reference.Load(dir + "/tokenizer.model", error)) << error;
  int64_t compared = 0;
  for (const std::string& text : texts_) {
    if (text.find('<') != std::string::npos) continue;
    std::vector<int> ids;
    ASSERT_TRUE(reference.Encode(text, ids, error)) << error;
    absl::StatusOr<std::vector<int32_t>> ours = (*t)->Encode(text, false);
    ASSERT_THAT(ours.status(), IsOk());
    EXPECT_EQ(*ours, std::vector<int32_t>(ids.begin(), ids.end())) << "\"" << text << "\"";
    compared += static_cast<int64_t>(ids.size());
    EXPECT_EQ((*t)->Decode(*ours), text);
  }
  EXPECT_GT(compared, 3000);
}

}  // namespace
}  // namespace tailor::tokenizer
