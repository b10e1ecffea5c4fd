#include "compression/tokenizer/bpe_trainer.h"

#include <map>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compression/tokenizer/byte_level_bpe.h"
#include "nlohmann/json.hpp"

namespace tailor::tokenizer {
namespace {

using Json = nlohmann::json;

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
}

// The most frequent adjacent pair (ties: the smaller by text); count 0 when none.
std::pair<uint64_t, int64_t> BestPair(const std::vector<Word>& words,
                                      const std::vector<std::string>& text) {
  std::unordered_map<uint64_t, int64_t> counts;
  for (const Word& w : words) {
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      counts[PairKey(w.symbols[i], w.symbols[i + 1])] += w.count;
    }
  }
  std::pair<uint64_t, int64_t> best{0, 0};
  auto texts = [&](uint64_t k) {
    return std::make_pair(text[k >> 32], text[k & 0xFFFFFFFFu]);
  };
  for (const auto& [key, count] : counts) {
    if (count > best.second || (count == best.second && texts(key) < texts(best.first))) {
      best = {key, count};
    }
  }
  return best;
}

void MergeEverywhere(std::vector<Word>& words, int32_t a, int32_t b, int32_t merged) {
  for (Word& w : words) {
    std::vector<int32_t> out;
    out.reserve(w.symbols.size());
    for (size_t i = 0; i < w.symbols.size(); ++i) {
      if (i + 1 < w.symbols.size() && w.symbols[i] == a && w.symbols[i + 1] == b) {
        out.push_back(merged);
        ++i;
      } else {
        out.push_back(w.symbols[i]);
      }
    }
    w.symbols = std::move(out);
  }
}

Json PreTokenizerJson(PreTokenizer kind) {
  if (kind == PreTokenizer::kGpt2) {
    return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
            {"use_regex", true}};
  }
  return {{"type", "Sequence"},
          {"pretokenizers",
           Json::array({{{"type", "Split"},
                         {"pattern", {{"Regex", PreTokenizerRegex(kind)}}},
                         {"behavior", "Isolated"},
                         {"invert", false}},
                        {{"type", "ByteLevel"},
                         {"add_prefix_space", false},
                         {"trim_offsets", true},
                         {"use_regex", false}}})}};
}

}  // namespace

absl::StatusOr<std::string> TrainByteLevelBpe(const std::vector<std::string>& texts,
                                              const BpeTrainOptions& options) {
  const int64_t merges_wanted =
      options.vocab_size - 256 - static_cast<int64_t>(options.special_tokens.size());
  if (merges_wanted < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab_size ", options.vocab_size, " is below the 256 byte symbols and ",
        options.special_tokens.size(), " special tokens"));
  }
  std::vector<std::string> text;  // symbol id -> its byte-level text
  std::unordered_map<std::string, int32_t> id_of;
  for (int b = 0; b < 256; ++b) {
    text.push_back(ByteSymbol(static_cast<uint8_t>(b)));
    id_of.emplace(text.back(), b);
  }
  std::map<std::string, int64_t> counts;  // ordered: the word list is deterministic
  for (size_t i = 0; i < texts.size(); ++i) {
    absl::StatusOr<std::vector<std::string>> pieces = PreTokenize(options.pre_tokenizer, texts[i]);
    if (!pieces.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("text ", i, ": ", pieces.status().message()));
    }
    for (const std::string& p : *pieces) ++counts[p];
  }
  std::vector<Word> words;
  for (const auto& [piece, count] : counts) {
    Word w{{}, count};
    for (const char c : piece) w.symbols.push_back(static_cast<uint8_t>(c));
    words.push_back(std::move(w));
  }
  Json merges = Json::array();
  while (static_cast<int64_t>(text.size()) - 256 < merges_wanted) {
    const auto [key, count] = BestPair(words, text);
    if (count < options.min_pair_count) break;
    const auto a = static_cast<int32_t>(key >> 32), b = static_cast<int32_t>(key & 0xFFFFFFFFu);
    merges.push_back(absl::StrCat(text[a], " ", text[b]));
    // Two different pairs can spell the same token ("ab c", "a bc"): it keeps its first id.
    auto [it, fresh] = id_of.emplace(text[a] + text[b], static_cast<int32_t>(text.size()));
    if (fresh) text.push_back(it->first);
    MergeEverywhere(words, a, b, it->second);
  }
  Json vocab = Json::object();
  for (size_t id = 0; id < text.size(); ++id) vocab[text[id]] = id;
  Json added = Json::array();
  for (size_t i = 0; i < options.special_tokens.size(); ++i) {
    added.push_back({{"id", text.size() + i}, {"content", options.special_tokens[i]},
                     {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  }
  const Json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", PreTokenizerJson(options.pre_tokenizer)},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
        {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", options.pre_tokenizer == PreTokenizer::kLlama3},
        {"vocab", vocab}, {"merges", merges}}}};
  return tokenizer.dump(1);
}

}  // namespace tailor::tokenizer
