#include "compression/data/debian_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "compression/tokenizer/bpe_trainer.h"
#include "compression/tokenizer/byte_level_bpe.h"
#include "nlohmann/json.hpp"

namespace tailor::data {
namespace {

namespace fs = std::filesystem;

// FNV-1a: a stable split of paragraphs, whatever the file order.
uint64_t Hash(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// A sentence of a paragraph as (all words but the last, " " + the last word), when it has at
// least 6 words of letters.
std::optional<std::pair<std::string, std::string>> PromptOf(absl::string_view paragraph) {
  std::vector<std::string> words = absl::StrSplit(paragraph, absl::ByAnyChar(" \n\t"),
                                                  absl::SkipEmpty());
  if (words.size() < 6) return std::nullopt;
  words.resize(std::min<size_t>(words.size(), 12));
  std::string& last = words.back();
  while (!last.empty() && !absl::ascii_isalpha(static_cast<unsigned char>(last.back()))) {
    last.pop_back();
  }
  if (last.size() < 2) return std::nullopt;
  std::string answer = " " + last;
  words.pop_back();
  return std::make_pair(absl::StrJoin(words, " "), answer);
}

}  // namespace

absl::StatusOr<DebianCorpus> ReadDebianCorpus(const DebianCorpusOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(options.source_dir, ec)) {
    return absl::NotFoundError(absl::StrCat(options.source_dir, ": no such directory"));
  }
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(options.source_dir, ec)) {
    // GPL -> GPL-3 and the like are links to files read anyway: duplicates.
    if (!e.is_symlink() && e.is_regular_file()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  DebianCorpus corpus;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    for (absl::string_view p : absl::StrSplit(text.str(), "\n\n", absl::SkipWhitespace())) {
      std::string paragraph(absl::StripTrailingAsciiWhitespace(p));
      if (static_cast<int64_t>(paragraph.size()) > options.max_paragraph_bytes) {
        const size_t cut = paragraph.rfind('\n', options.max_paragraph_bytes);
        paragraph.resize(cut == std::string::npos ? options.max_paragraph_bytes : cut);
      }
      corpus.bytes += static_cast<int64_t>(paragraph.size());
      const bool eval = Hash(paragraph) % options.eval_one_in == 0;
      if (eval && static_cast<int64_t>(corpus.prompts.size()) < options.prompts) {
        if (auto prompt = PromptOf(paragraph)) corpus.prompts.push_back(*std::move(prompt));
      }
      (eval ? corpus.eval : corpus.train).push_back(std::move(paragraph));
    }
  }
  if (corpus.train.empty() || corpus.eval.empty()) {
    return absl::NotFoundError(absl::StrCat(options.source_dir, ": too little text"));
  }
  return corpus;
}

absl::Status WriteDebianCorpus(const DebianCorpus& corpus, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  auto write = [&](const std::string& name, auto&& lines) -> absl::Status {
    std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
    lines(out);
    out.close();
    if (!out) return absl::InternalError(absl::StrCat(dir, "/", name, ": cannot write"));
    return absl::OkStatus();
  };
  auto text_lines = [](const std::vector<std::string>& texts) {
    return [&texts](std::ofstream& out) {
      for (const std::string& t : texts) out << nlohmann::json{{"text", t}}.dump() << "\n";
    };
  };
  if (absl::Status s = write("train.jsonl", text_lines(corpus.train)); !s.ok()) return s;
  return write("eval.jsonl", [&](std::ofstream& out) {
    text_lines(corpus.eval)(out);
    for (const auto& [prompt, answer] : corpus.prompts) {
      out << nlohmann::json{{"prompt", prompt}, {"answer", answer}}.dump() << "\n";
    }
  });
}

absl::StatusOr<DebianCorpus> WriteTokenizedDebianCorpus(const std::string& dir,
                                                        const TokenizedCorpusOptions& options) {
  absl::StatusOr<DebianCorpus> corpus = ReadDebianCorpus(options.source);
  if (!corpus.ok()) return corpus.status();
  if (options.max_train > 0 && corpus->train.size() > options.max_train) {
    corpus->train.resize(options.max_train);
  }
  if (options.max_eval > 0 && corpus->eval.size() > options.max_eval) {
    corpus->eval.resize(options.max_eval);
  }
  absl::StatusOr<std::string> json =
      tokenizer::TrainByteLevelBpe(corpus->train, {.vocab_size = options.vocab_size});
  if (!json.ok()) return json.status();
  absl::StatusOr<std::unique_ptr<tokenizer::ByteLevelBpe>> bpe =
      tokenizer::ByteLevelBpe::FromJson(*json, dir + "/tokenizer.json");
  if (!bpe.ok()) return bpe.status();
  if (absl::Status s = WriteDebianCorpus(*corpus, dir); !s.ok()) return s;
  std::ofstream tok(dir + "/tokenizer.json", std::ios::binary | std::ios::trunc);
  tok << *json;
  tok.close();
  if (!tok) return absl::InternalError(absl::StrCat(dir, "/tokenizer.json: cannot write"));
  for (const auto& [name, texts] : {std::make_pair("train_ids.jsonl", &corpus->train),
                                    std::make_pair("eval_ids.jsonl", &corpus->eval)}) {
    std::ofstream out(absl::StrCat(dir, "/", name), std::ios::binary | std::ios::trunc);
    for (const std::string& t : *texts) {
      absl::StatusOr<std::vector<int32_t>> ids = (*bpe)->Encode(t, /*parse_special=*/false);
      if (!ids.ok()) return ids.status();
      out << nlohmann::json{{"input_ids", *ids}}.dump() << "\n";
    }
    out.close();
    if (!out) return absl::InternalError(absl::StrCat(dir, "/", name, ": cannot write"));
  }
  return corpus;
}

}  // namespace tailor::data
