// compression/data: JSONL documents as token sequences: packing, sharding by rank, shuffling,
// caps, tokenized text, and the errors bad data gets (file and line).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/data/debian_corpus.h"
#include "compression/data/parent_vocabulary.h"
#include "compression/data/text_dataset.h"
#include "compression/tokenizer/bpe_trainer.h"
#include "compression/tokenizer/byte_level_bpe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/status_matchers.h"

namespace tailor::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Every sequence of a reader, or the first error.
absl::StatusOr<std::vector<TokenSequence>> ReadAll(const std::string& path,
                                                   const TextDatasetOptions& options,
                                                   const tokenizer::Tokenizer* tok = nullptr,
                                                   int rank = 0, int world = 1) {
  auto reader = TextDatasetReader::Open(path, options, tok, rank, world);
  if (!reader.ok()) return reader.status();
  std::vector<TokenSequence> out;
  while (true) {
    absl::StatusOr<std::optional<TokenSequence>> s = (*reader)->Next();
    if (!s.ok()) return s.status();
    if (!s->has_value()) return out;
    out.push_back(**std::move(s));
  }
}

TextDatasetOptions Options(int64_t sequence_tokens) {
  TextDatasetOptions o;
  o.sequence_tokens = sequence_tokens;
  o.eos = 0;
  o.vocab_size = 100;
  o.context_tokens = 16;
  return o;
}

class TextDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tailor::testing::NewTestDir("data"); }
  std::string dir_;
};

TEST_F(TextDatasetTest, PackingJoinsDocumentsWithEosAndCutsExactLengths) {
  const std::string path = WriteFile(
      dir_, "d.jsonl",
      "{\"input_ids\": [1, 2, 3]}\n\n{\"input_ids\": [4, 5]}\n{\"input_ids\": [6, 7, 8, 9]}\n");
  absl::StatusOr<std::vector<TokenSequence>> seqs = ReadAll(path, Options(4));
  ASSERT_THAT(seqs.status(), IsOk());
  ASSERT_EQ(seqs->size(), 3u);
  EXPECT_THAT((*seqs)[0].tokens, ElementsAre(1, 2, 3, 0));
  EXPECT_THAT((*seqs)[1].tokens, ElementsAre(4, 5, 0, 6));
  EXPECT_THAT((*seqs)[2].tokens, ElementsAre(7, 8, 9, 0));
  EXPECT_THAT((*seqs)[0].documents, ElementsAre(0));
  EXPECT_THAT((*seqs)[1].documents, ElementsAre(1, 2));
  EXPECT_THAT((*seqs)[2].documents, ElementsAre(2));

  TextDatasetOptions unpacked = Options(3);
  unpacked.packing = false;
  seqs = ReadAll(path, unpacked);
  ASSERT_THAT(seqs.status(), IsOk());
  ASSERT_EQ(seqs->size(), 3u);
  EXPECT_THAT((*seqs)[0].tokens, ElementsAre(1, 2, 3));  // cut to sequence_tokens
  EXPECT_THAT((*seqs)[1].tokens, ElementsAre(4, 5, 0));
  EXPECT_THAT((*seqs)[2].documents, ElementsAre(2));
}

TEST_F(TextDatasetTest, RanksReadDisjointDocumentsThatTogetherCoverTheDataset) {
  std::string lines;
  for (int d = 0; d < 11; ++d) absl::StrAppend(&lines, "{\"input_ids\": [", d + 1, "]}\n");
  const std::string path = WriteFile(dir_, "d.jsonl", lines);
  std::set<int64_t> seen;
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<std::vector<TokenSequence>> seqs = ReadAll(path, Options(4), nullptr, rank, 2);
    ASSERT_THAT(seqs.status(), IsOk());
    for (const TokenSequence& s : *seqs) {
      for (int64_t d : s.documents) {
        EXPECT_EQ(d % 2, rank);
        EXPECT_TRUE(seen.insert(d).second) << "document " << d << " read twice";
      }
    }
  }
  EXPECT_EQ(seen.size(), 11u);
}

TEST_F(TextDatasetTest, ShuffleIsSeededAndCapsCount) {
  std::string lines;
  for (int d = 0; d < 40; ++d) absl::StrAppend(&lines, "{\"input_ids\": [", d + 1, ", 1]}\n");
  const std::string path = WriteFile(dir_, "d.jsonl", lines);
  TextDatasetOptions o = Options(3);
  o.shuffle_window = 8;
  auto order = [&](uint64_t seed) {
    o.seed = seed;
    std::vector<int64_t> docs;
    absl::StatusOr<std::vector<TokenSequence>> seqs = ReadAll(path, o);
    EXPECT_THAT(seqs.status(), IsOk());
    for (const TokenSequence& s : *seqs) docs.push_back(s.documents.front());
    return docs;
  };
  const std::vector<int64_t> a = order(7);
  EXPECT_EQ(a, order(7));  // a retried job reads the same sequences in the same order
  EXPECT_NE(a, order(8));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted.front(), 0);
  EXPECT_EQ(sorted.size(), 40u);
  o.max_sequences = 5;
  EXPECT_EQ(ReadAll(path, o)->size(), 5u);
}

TEST_F(TextDatasetTest, DirectoriesReadTheirShardsInNameOrderAndTextIsTokenized) {
  absl::StatusOr<std::string> json = tokenizer::TrainByteLevelBpe(
      {"the cat sat on the mat", "the cat ate"}, {.vocab_size = 280});
  ASSERT_THAT(json.status(), IsOk());
  auto tok = tokenizer::ByteLevelBpe::FromJson(*json, "t");
  ASSERT_THAT(tok.status(), IsOk());
  WriteFile(dir_, "b.jsonl", "{\"text\": \"the mat\"}\n");
  WriteFile(dir_, "a.jsonl", "{\"text\": \"the cat\"}\n");
  WriteFile(dir_, "notes.txt", "not a shard\n");
  TextDatasetOptions o = Options(16);
  o.vocab_size = (*tok)->vocab_size();
  o.eos = 1;
  o.packing = false;
  absl::StatusOr<std::vector<TokenSequence>> seqs = ReadAll(dir_, o, tok->get());
  ASSERT_THAT(seqs.status(), IsOk());
  ASSERT_EQ(seqs->size(), 2u);
  std::vector<int32_t> cat = *(*tok)->Encode("the cat", false);
  cat.push_back(1);
  EXPECT_EQ((*seqs)[0].tokens, cat);
  EXPECT_EQ((*tok)->Decode({(*seqs)[1].tokens.begin(), (*seqs)[1].tokens.end() - 1}), "the mat");
}

TEST_F(TextDatasetTest, PromptAnswerLinesMarkWhereTheAnswerStartsWhenUnpacked) {
  absl::StatusOr<std::string> json =
      tokenizer::TrainByteLevelBpe({"what is two? two"}, {.vocab_size = 270});
  ASSERT_THAT(json.status(), IsOk());
  auto tok = tokenizer::ByteLevelBpe::FromJson(*json, "t");
  ASSERT_THAT(tok.status(), IsOk());
  const std::string path = WriteFile(
      dir_, "qa.jsonl", "{\"prompt\": \"what is two?\", \"answer\": \" two\"}\n");
  TextDatasetOptions o = Options(16);
  o.vocab_size = (*tok)->vocab_size();
  o.bos = 5;
  o.packing = false;
  absl::StatusOr<std::vector<TokenSequence>> seqs = ReadAll(path, o, tok->get());
  ASSERT_THAT(seqs.status(), IsOk());
  ASSERT_EQ(seqs->size(), 1u);
  const std::vector<int32_t> prompt = *(*tok)->Encode("what is two?", false);
  EXPECT_EQ((*seqs)[0].answer_begin, 1 + static_cast<int64_t>(prompt.size()));  // after <bos>
  EXPECT_EQ((*tok)->Decode({(*seqs)[0].tokens.begin() + (*seqs)[0].answer_begin,
                            (*seqs)[0].tokens.end() - 1}),
            " two");
  o.packing = true;
  EXPECT_EQ(ReadAll(path, o, tok->get())->at(0).answer_begin, -1);

  // The exact-match pass skips text lines, even ones longer than the context.
  const std::string mixed = WriteFile(
      dir_, "mixed.jsonl",
      absl::StrCat("{\"text\": \"", std::string(200, 'x'), "\"}\n",
                   "{\"prompt\": \"what is two?\", \"answer\": \" two\"}\n"));
  o.packing = false;
  EXPECT_THAT(ReadAll(mixed, o, tok->get()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mixed.jsonl:1: ")));
  o.only_prompts = true;
  absl::StatusOr<std::vector<TokenSequence>> prompts = ReadAll(mixed, o, tok->get());
  ASSERT_THAT(prompts.status(), IsOk());
  ASSERT_EQ(prompts->size(), 1u);
  EXPECT_THAT(prompts->at(0).documents, ElementsAre(1));
  EXPECT_GT(prompts->at(0).answer_begin, 0);
}

TEST_F(TextDatasetTest, BadDataNamesTheFileAndLine) {
  auto error = [&](const std::string& text, const TextDatasetOptions& o) {
    return ReadAll(WriteFile(dir_, "bad.jsonl", text), o).status();
  };
  const std::string at2 = dir_ + "/bad.jsonl:3";
  EXPECT_THAT(error("{\"input_ids\": [1]}\n\n{oops\n", Options(4)),
              StatusIs(absl::StatusCode::kInvalidArgument, absl::StrCat(at2, ": not JSON")));
  EXPECT_THAT(error("{\"input_ids\": [1]}\n\n{\"input_ids\": [3, 100]}\n", Options(4)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat(at2, ": input_ids[1] = 100 is outside the "
                                                   "parent's vocabulary of 100 tokens"))));
  EXPECT_THAT(error("{\"text\": \"hi\"}\n", Options(4)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no tokenizer")));
  EXPECT_THAT(error("{\"txt\": \"hi\"}\n", Options(4)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(":1: none of \"text\" (a string), \"input_ids\"")));
  TextDatasetOptions unpacked = Options(4);
  unpacked.packing = false;
  EXPECT_THAT(error("{\"input_ids\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}\n", unpacked),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(":1: 17 tokens, longer than the parent's context of 16")));
  EXPECT_THAT(ReadAll(dir_ + "/missing.jsonl", Options(4)).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no such file or directory")));
  const std::string empty_dir = tailor::testing::NewTestDir("empty");
  EXPECT_THAT(ReadAll(empty_dir, Options(4)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no *.jsonl files")));
  EXPECT_THAT(ReadAll(dir_, Options(32)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "sequence_tokens 32 is longer than the parent's context of 16 tokens"));
}

// A tailor-format parent speaks ids; with the tokenizer it was trained with in its folder
// (tailor-train-parent --tokenizer / --debian-corpus), its text datasets read as the same ids
// as the corpus's input_ids files.
TEST_F(TextDatasetTest, TailorParentWithATokenizerInItsFolderReadsText) {
  if (!std::filesystem::exists("/usr/share/common-licenses")) {
    GTEST_SKIP() << "no /usr/share/common-licenses";
  }
  WriteFile(dir_, "config.json",
            R"({"format": "tailor-hybrid-lm", "hidden": 32, "vocab": 300, "max_seq": 128,
                "rope_theta": 10000.0, "norm_eps": 1e-5, "version": 1,
                "layers": [{"kind": "attention",
                            "attention": {"heads": 2, "kv_heads": 1, "head_dim": 16}}]})");
  absl::StatusOr<ParentVocabulary> bare = ReadParentVocabularyDir(dir_, "");
  ASSERT_THAT(bare.status(), IsOk());
  EXPECT_EQ(bare->tokenizer, nullptr);
  EXPECT_THAT(bare->no_tokenizer_reason, HasSubstr("unless their folder has a tokenizer.json"));
  EXPECT_EQ(bare->bos, 1);
  EXPECT_EQ(bare->eos, 2);

  TokenizedCorpusOptions o;
  o.vocab_size = 300;
  o.max_train = 12;
  o.max_eval = 3;
  absl::StatusOr<DebianCorpus> corpus = WriteTokenizedDebianCorpus(dir_, o);
  ASSERT_THAT(corpus.status(), IsOk());
  EXPECT_EQ(corpus->train.size(), 12u);
  EXPECT_EQ(corpus->eval.size(), 3u);
  absl::StatusOr<ParentVocabulary> v = ReadParentVocabularyDir(dir_, "");
  ASSERT_THAT(v.status(), IsOk());
  ASSERT_NE(v->tokenizer, nullptr) << v->no_tokenizer_reason;
  EXPECT_EQ(v->tokenizer->vocab_size(), 300);
  EXPECT_EQ(v->bos, 1);  // the task vocabulary's, control bytes no paragraph holds
  EXPECT_EQ(v->eos, 2);
  TextDatasetOptions unpacked = v->Options(1 << 16);
  unpacked.packing = false;
  unpacked.context_tokens = 1 << 20;
  absl::StatusOr<std::vector<TokenSequence>> text =
      ReadAll(dir_ + "/train.jsonl", unpacked, v->tokenizer.get());
  absl::StatusOr<std::vector<TokenSequence>> ids = ReadAll(dir_ + "/train_ids.jsonl", unpacked);
  ASSERT_THAT(text.status(), IsOk());
  ASSERT_THAT(ids.status(), IsOk());
  ASSERT_EQ(text->size(), 12u);
  ASSERT_EQ(ids->size(), 12u);
  for (size_t i = 0; i < ids->size(); ++i) {
    EXPECT_EQ((*text)[i].tokens, (*ids)[i].tokens) << "paragraph " << i;
    EXPECT_GT((*ids)[i].tokens.size(), 3u);
  }
}

}  // namespace
}  // namespace tailor::data
