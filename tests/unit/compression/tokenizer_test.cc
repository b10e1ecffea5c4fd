// compression/tokenizer: the split patterns, byte-level BPE merging and added tokens, the
// BPE trainer, and the errors bad tokenizer files and bad text get. Agreement with llama.cpp
// itself is tokenizer_llama_cpp_test.cc.

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "compression/tokenizer/bpe_trainer.h"
#include "compression/tokenizer/byte_level_bpe.h"
#include "compression/tokenizer/pre_tokenizer.h"
#include "compression/tokenizer/sentencepiece_tokenizer.h"
#include "compression/tokenizer/tokenizer.h"
#include "compression/tokenizer/unicode.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"
#include "tests/testing/status_matchers.h"

namespace tailor::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using Json = nlohmann::json;

std::vector<std::string> Split(PreTokenizer kind, const std::string& text) {
  absl::StatusOr<std::vector<std::string>> pieces = PreTokenize(kind, text);
  EXPECT_THAT(pieces.status(), IsOk());
  return pieces.ok() ? *pieces : std::vector<std::string>{};
}

TEST(PreTokenizerTest, Llama3SplitsContractionsWordsDigitTriplesAndWhitespace) {
  EXPECT_THAT(Split(PreTokenizer::kLlama3, "Hello world's 12345 ok!!\n\n  x"),
              ElementsAre("Hello", " world", "'s", " ", "123", "45", " ok", "!!\n\n", " ",
                          " x"));
  // Case-insensitive contractions; a tab or other non-letter, non-digit joins the word after it.
  EXPECT_THAT(Split(PreTokenizer::kLlama3, "I'LL\tgo"), ElementsAre("I", "'LL", "\tgo"));
  // A whitespace run with newlines ends at its last newline.
  EXPECT_THAT(Split(PreTokenizer::kLlama3, "a \n \n  b"), ElementsAre("a", " \n \n", " ", " b"));
}

TEST(PreTokenizerTest, Qwen2SplitsSingleDigitsAndGpt2KeepsDigitRuns) {
  EXPECT_THAT(Split(PreTokenizer::kQwen2, "x 2026!"), ElementsAre("x", " ", "2", "0", "2", "6",
                                                                  "!"));
  EXPECT_THAT(Split(PreTokenizer::kGpt2, "Hello world's 12345 ok!!\n\n  x"),
              ElementsAre("Hello", " world", "'s", " 12345", " ok", "!!", "\n\n ", " x"));
  EXPECT_THAT(Split(PreTokenizer::kGpt2, "I'LL"), ElementsAre("I", "'", "LL"));
}

TEST(PreTokenizerTest, UnicodeLettersNumbersAndSpaces) {
  // ï, é and the CJK ideographs are letters, ½ a number (No), U+3000 a space.
  EXPECT_THAT(Split(PreTokenizer::kLlama3, "naïve café 東京 ½\u3000ok"),
              ElementsAre("naïve", " café", " 東京", " ", "½", "\u3000ok"));
  EXPECT_EQ(ClassOf(U'東'), CharClass::kLetter);
  EXPECT_EQ(ClassOf(U'½'), CharClass::kNumber);
  EXPECT_EQ(ClassOf(U'\u0301'), CharClass::kMark);
  EXPECT_EQ(ClassOf(0x0378), CharClass::kUnassigned);
  EXPECT_TRUE(IsWhitespace(0x3000));
  EXPECT_FALSE(IsWhitespace(0x200B));  // zero-width space is not White_Space
}

TEST(PreTokenizerTest, InvalidUtf8IsAnErrorNamingTheByte) {
  EXPECT_THAT(PreTokenize(PreTokenizer::kLlama3, "ab\xff").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("byte 2")));
  EXPECT_THAT(DecodeUtf8("\xc0\xaf").status(),  // overlong '/'
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("byte 0")));
  EXPECT_THAT(DecodeUtf8("ok\xed\xa0\x80").status(),  // a surrogate
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("byte 2")));
}

TEST(PreTokenizerTest, RegexesAreRecognizedInBothSpellings) {
  for (PreTokenizer k : {PreTokenizer::kGpt2, PreTokenizer::kLlama3, PreTokenizer::kQwen2}) {
    absl::StatusOr<PreTokenizer> back = PreTokenizerFromRegex(PreTokenizerRegex(k));
    ASSERT_THAT(back.status(), IsOk());
    EXPECT_EQ(*back, k);
  }
  EXPECT_EQ(GgufPreName(PreTokenizer::kLlama3), "llama-bpe");
  EXPECT_EQ(GgufPreName(PreTokenizer::kQwen2), "qwen2");
  EXPECT_THAT(PreTokenizerFromRegex("\\w+").status(), StatusIs(absl::StatusCode::kNotFound));
}

// All 256 byte symbols (id = byte), then "bc" 256, "ab" 257, "abc" 258 with merges ranked
// "b c" < "a b" < "ab c", and added tokens <|eot|> (special, 259) and <x> (plain, 260).
std::string TestTokenizerJson(bool ignore_merges) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteSymbol(static_cast<uint8_t>(b))] = b;
  vocab["bc"] = 256;
  vocab["ab"] = 257;
  vocab["abc"] = 258;
  const Json j = {
      {"added_tokens",
       {{{"id", 259}, {"content", "<|eot|>"}, {"special", true}},
        {{"id", 260}, {"content", "<x>"}, {"special", false}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", PreTokenizerRegex(PreTokenizer::kLlama3)}}}},
          {{"type", "ByteLevel"}, {"use_regex", false}}}}}},
      {"model",
       {{"type", "BPE"}, {"ignore_merges", ignore_merges}, {"vocab", vocab},
        {"merges", {"b c", "a b", "ab c"}}}}};
  return j.dump();
}

std::vector<int32_t> Encode(const Tokenizer& t, const std::string& text, bool special) {
  absl::StatusOr<std::vector<int32_t>> ids = t.Encode(text, special);
  EXPECT_THAT(ids.status(), IsOk());
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(ByteLevelBpeTest, MergesLowestRankFirstAndIgnoreMergesTakesWholeWords) {
  auto merging = ByteLevelBpe::FromJson(TestTokenizerJson(false), "t.json");
  ASSERT_THAT(merging.status(), IsOk());
  EXPECT_THAT(Encode(**merging, "abc", false), ElementsAre('a', 256));  // "b c" ranks first
  EXPECT_THAT(Encode(**merging, " abc", false), ElementsAre(' ', 'a', 256));
  auto whole = ByteLevelBpe::FromJson(TestTokenizerJson(true), "t.json");
  ASSERT_THAT(whole.status(), IsOk());
  EXPECT_THAT(Encode(**whole, "abc", false), ElementsAre(258));
  EXPECT_EQ((*whole)->vocabulary().pre, "llama-bpe");
  EXPECT_EQ((*whole)->vocab_size(), 261);
  EXPECT_EQ((*whole)->vocabulary().types[259], TokenType::kControl);
  EXPECT_EQ((*whole)->vocabulary().types[260], TokenType::kUserDefined);
}

TEST(ByteLevelBpeTest, SpecialTokensOnlyWithParseSpecialUserDefinedAlways) {
  auto t = ByteLevelBpe::FromJson(TestTokenizerJson(false), "t.json");
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_THAT(Encode(**t, "abc<|eot|>c<x>a", true), ElementsAre('a', 256, 259, 'c', 260, 'a'));
  EXPECT_THAT(Encode(**t, "abc<|eot|>c<x>a", false),
              ElementsAre('a', 256, '<', '|', 'e', 'o', 't', '|', '>', 'c', 260, 'a'));
  EXPECT_EQ((*t)->Decode(Encode(**t, "abc<|eot|>c<x>a \n", true)), "abc<|eot|>c<x>a \n");
  EXPECT_EQ((*t)->Decode(Encode(**t, "Grüße, 東京!", false)), "Grüße, 東京!");
  EXPECT_THAT((*t)->Encode("ab\xfe", false).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("byte 2")));
}

TEST(ByteLevelBpeTest, BadFilesNameWhatIsWrong) {
  EXPECT_THAT(ByteLevelBpe::FromJson("{", "t.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("t.json: not JSON")));
  Json j = Json::parse(TestTokenizerJson(false));
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  EXPECT_THAT(ByteLevelBpe::FromJson(j.dump(), "t.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("split pattern \"\\w+\" is not one tailor implements")));
  auto lenient = ByteLevelBpe::FromJson(j.dump(), "t.json", {.require_pre_tokenizer = false});
  ASSERT_THAT(lenient.status(), IsOk());
  EXPECT_EQ((*lenient)->vocabulary().pre, "default");
  EXPECT_THAT((*lenient)->Encode("a", false).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  j = Json::parse(TestTokenizerJson(false));
  j["added_tokens"][1]["content"] = "ab";
  EXPECT_THAT(ByteLevelBpe::FromJson(j.dump(), "t.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("token \"ab\" appears twice (ids 257 and 260)")));
  j = Json::parse(TestTokenizerJson(false));
  j["model"]["merges"][1] = "a";
  EXPECT_THAT(ByteLevelBpe::FromJson(j.dump(), "t.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.merges[1]")));
  j = Json::parse(TestTokenizerJson(false));
  j["model"]["vocab"]["abc"] = int64_t{1} << 40;  // would allocate terabytes of token slots
  EXPECT_THAT(ByteLevelBpe::FromJson(j.dump(), "t.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("model.vocab[\"abc\"] is not a token id below 16777216")));
  j = Json::parse(TestTokenizerJson(false));
  j["model"]["type"] = "Unigram";
  EXPECT_THAT(ByteLevelBpe::FromJson(j.dump(), "t.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"BPE\"")));
}

// Fields of another JSON type than the format's are errors or ignored, never an exception
// (the fuzzer's crash of 2026-12-05: "pre_tokenizer": {"type": false} threw type_error 302).
TEST(ByteLevelBpeTest, FieldsOfTheWrongTypeAreRefusedOrIgnored) {
  auto from = [](const Json& j) { return ByteLevelBpe::FromJson(j.dump(), "t.json").status(); };
  Json j = Json::parse(TestTokenizerJson(false));
  j["decoder"] = {{"type", "ByteLevel"}};  // still a byte-level BPE without its pre-tokenizer
  j["pre_tokenizer"] = {{"type", false}, {"use_regex", true}};
  EXPECT_THAT(from(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("pre-tokenizer type \"\" is not one tailor")));
  j = Json::parse(TestTokenizerJson(false));
  j["decoder"] = {{"type", "ByteLevel"}};
  j["pre_tokenizer"]["pretokenizers"] = {7, "x", {{"type", 1}}};
  EXPECT_THAT(from(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("a pre-tokenizer Sequence without a split pattern")));
  j = Json::parse(TestTokenizerJson(false));
  j["model"]["type"] = 3;
  EXPECT_THAT(from(j), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"BPE\"")));
  j = Json::parse(TestTokenizerJson(false));
  j["model"]["merges"] = "a b";
  EXPECT_THAT(from(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("model.merges is not an array")));
  j = Json::parse(TestTokenizerJson(false));
  j["model"]["vocab"] = Json::array({1, 2});
  EXPECT_THAT(from(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("model.vocab is not an object")));
  j = Json::parse(TestTokenizerJson(false));
  j["added_tokens"] = "x";
  EXPECT_THAT(from(j), StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("added_tokens is not an array")));
  // Flags of the wrong type keep their defaults.
  j = Json::parse(TestTokenizerJson(false));
  j["model"]["ignore_merges"] = "yes";
  j["added_tokens"][0]["special"] = 1;
  EXPECT_THAT(from(j), IsOk());
}

TEST(BpeTrainerTest, MergesTheMostFrequentPairFirstAndStopsBelowTheMinimum) {
  BpeTrainOptions options;
  options.vocab_size = 1000;
  options.special_tokens = {"<|end|>"};
  absl::StatusOr<std::string> json = TrainByteLevelBpe({"low low low lower lowest"}, options);
  ASSERT_THAT(json.status(), IsOk());
  const Json j = Json::parse(*json);
  // (l,o) and (o,w) both occur 5 times: the smaller pair by text merges first.
  EXPECT_EQ(j["model"]["merges"], Json({"l o", "lo w", "Ġ low", "Ġlow e"}));
  EXPECT_EQ(j["added_tokens"][0]["id"], 260);
  auto t = ByteLevelBpe::FromJson(*json, "trained");
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_THAT(Encode(**t, " lowest<|end|>", true), ElementsAre(259, 's', 't', 260));
  EXPECT_THAT(TrainByteLevelBpe({"x"}, {.vocab_size = 256, .special_tokens = {"<s>"}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocab_size 256")));
  EXPECT_THAT(TrainByteLevelBpe({"ok", "\xff"}, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("text 1")));
}

TEST(TokenizerTest, LoadTokenizerSaysWhatIsMissingOrWrong) {
  const std::string dir = tailor::testing::NewTestDir("tok");
  ASSERT_FALSE(dir.empty());
  EXPECT_THAT(LoadTokenizer(dir).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no tokenizer.json or")));
  std::ofstream(dir + "/tokenizer.model") << "not a protobuf \xff\xff";
  EXPECT_THAT(LoadTokenizer(dir).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a SentencePiece")));
  std::ofstream(dir + "/tokenizer.json") << TestTokenizerJson(true);
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(dir);
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_EQ((*t)->Describe(), "byte-level BPE (llama3 split, 261 tokens)");
}

}  // namespace
}  // namespace tailor::tokenizer
