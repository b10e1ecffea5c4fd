#include "compression/data/text_dataset.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tailor::data {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

absl::Status Bad(const std::string& where, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> DatasetFiles(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  if (fs::is_regular_file(st)) return std::vector<std::string>{path};
  if (!fs::is_directory(st)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a file or a directory"));
  }
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".jsonl") files.push_back(e.path());
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot list: ", ec.message()));
  if (files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a directory with no *.jsonl files"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<std::unique_ptr<TextDatasetReader>> TextDatasetReader::Open(
    const std::string& path, const TextDatasetOptions& options,
    const tokenizer::Tokenizer* tokenizer, int rank, int world_size) {
  if (options.sequence_tokens < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence_tokens ", options.sequence_tokens, ": must be at least 2"));
  }
  if (options.context_tokens > 0 && options.sequence_tokens > options.context_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence_tokens ", options.sequence_tokens,
                     " is longer than the parent's context of ", options.context_tokens,
                     " tokens"));
  }
  if (options.vocab_size <= 0) return absl::InvalidArgumentError("vocab_size: must be > 0");
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " of ", world_size));
  }
  absl::StatusOr<std::vector<std::string>> files = DatasetFiles(path);
  if (!files.ok()) return files.status();
  std::unique_ptr<TextDatasetReader> r(new TextDatasetReader());
  r->options_ = options;
  r->tokenizer_ = tokenizer;
  r->rank_ = rank;
  r->world_size_ = world_size;
  r->files_ = *std::move(files);
  r->rng_state_ = options.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(rank) + 1;
  return r;
}

absl::StatusOr<std::vector<int32_t>> TextDatasetReader::Tokenize(const std::string& text,
                                                                 const std::string& where) const {
  if (tokenizer_ == nullptr) {
    return Bad(where, "a text line, but the parent has no tokenizer (tokenizer.json or "
                      "tokenizer.model); give \"input_ids\" instead");
  }
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(text, /*parse_special=*/false);
  if (!ids.ok()) return Bad(where, ids.status().message());
  for (const int32_t id : *ids) {
    if (id >= options_.vocab_size) {
      return Bad(where, absl::StrCat("the tokenizer gives id ", id,
                                     ", outside the parent's vocabulary of ",
                                     options_.vocab_size, " tokens"));
    }
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> TextDatasetReader::ParseLine(const Json& j,
                                                                  const std::string& where,
                                                                  int64_t& answer_begin) const {
  answer_begin = -1;
  if (auto it = j.find("input_ids"); it != j.end()) {
    if (!it->is_array()) return Bad(where, "\"input_ids\" is not a list of token ids");
    std::vector<int32_t> ids;
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& id = (*it)[i];
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() >= options_.vocab_size) {
        return Bad(where, absl::StrCat("input_ids[", i, "] = ", id.dump(),
                                       " is outside the parent's vocabulary of ",
                                       options_.vocab_size, " tokens"));
      }
      ids.push_back(id.get<int32_t>());
    }
    return ids;
  }
  if (auto t = j.find("text"); t != j.end() && t->is_string()) {
    return Tokenize(t->get<std::string>(), where);
  }
  auto p = j.find("prompt");
  auto a = j.find("answer");
  if (p != j.end() && a != j.end() && p->is_string() && a->is_string()) {
    absl::StatusOr<std::vector<int32_t>> ids = Tokenize(p->get<std::string>(), where);
    if (!ids.ok()) return ids.status();
    absl::StatusOr<std::vector<int32_t>> answer = Tokenize(a->get<std::string>(), where);
    if (!answer.ok()) return answer.status();
    if (answer->empty()) return Bad(where, "an empty \"answer\"");
    answer_begin = static_cast<int64_t>(ids->size());
    ids->insert(ids->end(), answer->begin(), answer->end());
    return ids;
  }
  return Bad(where, "none of \"text\" (a string), \"input_ids\" (a list of token ids) or "
                    "\"prompt\" with \"answer\" (strings)");
}

absl::StatusOr<std::optional<std::vector<int32_t>>> TextDatasetReader::NextDocument() {
  std::string line;
  while (true) {
    if (!in_.is_open()) {
      if (file_index_ >= files_.size()) return std::nullopt;
      in_.open(files_[file_index_++], std::ios::binary);
      line_number_ = 0;
      if (!in_) {
        return absl::NotFoundError(absl::StrCat(files_[file_index_ - 1], ": cannot open"));
      }
    }
    if (!std::getline(in_, line)) {
      in_.close();
      continue;
    }
    ++line_number_;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const int64_t document = next_document_++;
    if (document % world_size_ != rank_) continue;  // another rank's
    const std::string where = absl::StrCat(files_[file_index_ - 1], ":", line_number_);
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Bad(where, "not JSON");
    if (!j.is_object()) return Bad(where, "not a JSON object");
    if (options_.only_prompts && !j.contains("prompt")) continue;
    int64_t answer_begin = -1;
    absl::StatusOr<std::vector<int32_t>> ids = ParseLine(j, where, answer_begin);
    if (!ids.ok()) return ids.status();
    std::vector<int32_t> doc;
    if (options_.bos >= 0) doc.push_back(options_.bos);
    current_answer_begin_ =
        answer_begin < 0 ? -1 : answer_begin + static_cast<int64_t>(doc.size());
    doc.insert(doc.end(), ids->begin(), ids->end());
    if (options_.eos >= 0) doc.push_back(options_.eos);
    if (!options_.packing && options_.context_tokens > 0 &&
        static_cast<int64_t>(doc.size()) > options_.context_tokens) {
      return Bad(where, absl::StrCat(doc.size(), " tokens, longer than the parent's context of ",
                                     options_.context_tokens, " tokens (pack it, or split it)"));
    }
    current_document_ = document;
    ++documents_read_;
    return doc;
  }
}

absl::StatusOr<std::optional<TokenSequence>> TextDatasetReader::NextInFileOrder() {
  const auto length = static_cast<size_t>(options_.sequence_tokens);
  if (!options_.packing) {
    while (true) {
      absl::StatusOr<std::optional<std::vector<int32_t>>> doc = NextDocument();
      if (!doc.ok()) return doc.status();
      if (!doc->has_value()) return std::nullopt;
      std::vector<int32_t>& tokens = **doc;
      int64_t answer_begin = current_answer_begin_;
      if (tokens.size() > length) {
        tokens.resize(length);
        answer_begin = -1;  // the cut answer cannot be matched exactly
      }
      if (tokens.size() < 2) continue;  // nothing to predict
      return TokenSequence{std::move(tokens), answer_begin, {current_document_}};
    }
  }
  while (pending_.size() < length && !exhausted_) {
    absl::StatusOr<std::optional<std::vector<int32_t>>> doc = NextDocument();
    if (!doc.ok()) return doc.status();
    if (!doc->has_value()) {
      exhausted_ = true;
      break;
    }
    pending_.insert(pending_.end(), (*doc)->begin(), (*doc)->end());
    pending_documents_.emplace_back(current_document_, static_cast<int64_t>((*doc)->size()));
  }
  const size_t take = std::min(pending_.size(), length);
  if (take < 2) return std::nullopt;
  TokenSequence s;  // packed: no answer boundaries
  s.tokens.assign(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(take));
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(take));
  for (int64_t left = static_cast<int64_t>(take); left > 0;) {
    auto& [document, count] = pending_documents_.front();
    if (s.documents.empty() || s.documents.back() != document) s.documents.push_back(document);
    const int64_t used = std::min(left, count);
    left -= used;
    count -= used;
    if (count == 0) pending_documents_.pop_front();
  }
  return s;
}

uint64_t TextDatasetReader::NextRandom() {  // SplitMix64
  uint64_t z = (rng_state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

absl::StatusOr<std::optional<TokenSequence>> TextDatasetReader::Next() {
  if (options_.max_sequences > 0 && emitted_ >= options_.max_sequences) return std::nullopt;
  if (options_.shuffle_window <= 1) {
    absl::StatusOr<std::optional<TokenSequence>> s = NextInFileOrder();
    if (s.ok() && s->has_value()) ++emitted_;
    return s;
  }
  while (static_cast<int64_t>(window_.size()) < options_.shuffle_window) {
    absl::StatusOr<std::optional<TokenSequence>> s = NextInFileOrder();
    if (!s.ok()) return s.status();
    if (!s->has_value()) break;
    window_.push_back(**std::move(s));
  }
  if (window_.empty()) return std::nullopt;
  const size_t pick = NextRandom() % window_.size();
  std::swap(window_[pick], window_.back());
  TokenSequence out = std::move(window_.back());
  window_.pop_back();
  ++emitted_;
  return out;
}

}  // namespace tailor::data
