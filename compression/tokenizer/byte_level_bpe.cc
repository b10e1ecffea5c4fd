#include "compression/tokenizer/byte_level_bpe.h"

#include <fstream>
#include <queue>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compression/tokenizer/unicode.h"
#include "nlohmann/json.hpp"

namespace tailor::tokenizer {
namespace {

using Json = nlohmann::json;

// Nesting tailor follows into pre_tokenizer / decoder (a Sequence of steps is depth 2): a
// file nested deeper is not one the families write, and recursion must stay bounded.
constexpr int kMaxNesting = 4;

// Typed reads of a field that may be missing or of another type in a hostile file: `o[key]`
// when `o` is an object holding `key` of the wanted kind, else `fallback` (nlohmann's
// value() throws on a wrong type, and a tokenizer.json is user input).
std::string StringOr(const Json& o, const char* key, const std::string& fallback) {
  if (!o.is_object()) return fallback;
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool BoolOr(const Json& o, const char* key, bool fallback) {
  if (!o.is_object()) return fallback;
  const auto it = o.find(key);
  return it != o.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// `o[key]` when `o` is an object holding `key` as an array (else an empty array).
Json ArrayOr(const Json& o, const char* key) {
  if (!o.is_object()) return Json::array();
  const auto it = o.find(key);
  return it != o.end() && it->is_array() ? *it : Json::array();
}

// True when any object in `j` has "type": "ByteLevel" (pre_tokenizer or decoder): the mark
// of a byte-level BPE, which is what tokenizer.ggml.model "gpt2" means.
bool HasByteLevel(const Json& j, int depth = 0) {
  if (depth > kMaxNesting) return false;
  if (j.is_object()) {
    auto t = j.find("type");
    if (t != j.end() && t->is_string() && *t == "ByteLevel") return true;
    for (const auto& [k, v] : j.items()) {
      if (HasByteLevel(v, depth + 1)) return true;
    }
  } else if (j.is_array()) {
    for (const Json& v : j) {
      if (HasByteLevel(v, depth + 1)) return true;
    }
  }
  return false;
}

// The split pattern of a pre_tokenizer: a ByteLevel with use_regex (GPT-2's), or a Split
// regex inside a Sequence (Llama-3, Qwen2).
absl::StatusOr<PreTokenizer> DetectPreTokenizer(const Json& pt, int depth = 0) {
  if (!pt.is_object()) return absl::NotFoundError("no pre_tokenizer");
  if (depth > kMaxNesting) return absl::NotFoundError("a pre_tokenizer nested too deep");
  const std::string type = StringOr(pt, "type", "");
  if (type == "ByteLevel" && BoolOr(pt, "use_regex", true)) return PreTokenizer::kGpt2;
  if (type == "Split") {
    const auto pattern = pt.find("pattern");
    if (pattern != pt.end() && pattern->is_object() && pattern->contains("Regex") &&
        (*pattern)["Regex"].is_string()) {
      return PreTokenizerFromRegex((*pattern)["Regex"].get<std::string>());
    }
    return absl::NotFoundError("a Split pre-tokenizer without a Regex pattern");
  }
  if (type == "Sequence") {
    for (const Json& p : ArrayOr(pt, "pretokenizers")) {
      absl::StatusOr<PreTokenizer> kind = DetectPreTokenizer(p, depth + 1);
      if (kind.ok() || StringOr(p, "type", "") == "Split") return kind;
    }
    return absl::NotFoundError("a pre-tokenizer Sequence without a split pattern");
  }
  return absl::NotFoundError(absl::StrCat("pre-tokenizer type \"", type,
                                          "\" is not one tailor implements"));
}

absl::StatusOr<std::pair<std::string, std::string>> MergePair(const Json& merge) {
  if (merge.is_string()) {
    const std::string s = merge.get<std::string>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < s.size() &&
        s.find(' ', space + 1) == std::string::npos) {
      return std::make_pair(s.substr(0, space), s.substr(space + 1));
    }
  } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
             merge[1].is_string()) {  // the newer ["a", "b"] spelling
    return std::make_pair(merge[0].get<std::string>(), merge[1].get<std::string>());
  }
  return absl::InvalidArgumentError("not \"a b\" or [\"a\", \"b\"]");
}

struct Symbol {
  int prev = -1;
  int next = -1;
  std::string text;
};

struct Bigram {
  int32_t rank;
  int left;
  int right;
  size_t size;  // text size of the pair when queued: a stale entry no longer matches
  bool operator<(const Bigram& o) const {  // std::priority_queue pops the largest
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

std::string ByteSymbol(uint8_t byte) {
  auto printable = [](int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  };
  char32_t cp = byte;
  if (!printable(byte)) {
    cp = 256;
    for (int b = 0; b < byte; ++b) cp += printable(b) ? 0 : 1;
  }
  std::string s;
  AppendUtf8(cp, s);
  return s;
}

absl::StatusOr<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::Load(
    const std::string& path, const ByteLevelBpeOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  return FromJson(text.str(), path, options);
}

absl::StatusOr<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::FromJson(
    absl::string_view json, const std::string& source, const ByteLevelBpeOptions& options) {
  auto bad = [&](auto&&... why) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", why...));
  };
  const Json j = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    return bad("not JSON with a \"model\" object");
  }
  const Json& m = j["model"];
  if (StringOr(m, "type", "") != "BPE") return bad("model.type is not \"BPE\"");
  bool byte_level = false;
  for (const char* part : {"pre_tokenizer", "decoder", "post_processor"}) {
    byte_level = byte_level || HasByteLevel(j.value(part, Json()));
  }
  if (!byte_level) return bad("not a byte-level BPE (no ByteLevel pre-tokenizer or decoder)");
  std::unique_ptr<ByteLevelBpe> t(new ByteLevelBpe());
  absl::StatusOr<PreTokenizer> pre = DetectPreTokenizer(j.value("pre_tokenizer", Json()));
  if (pre.ok()) {
    t->pre_ = *pre;
  } else if (options.require_pre_tokenizer) {
    return bad(pre.status().message());
  }
  t->ignore_merges_ = BoolOr(m, "ignore_merges", false);
  struct Entry {
    std::string text;
    int64_t id;
    TokenType type;
  };
  std::vector<Entry> entries;
  const Json vocab = m.contains("vocab") ? m["vocab"] : Json::object();
  if (!vocab.is_object()) return bad("model.vocab is not an object");
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= kMaxTokenizerVocab) {
      return bad("model.vocab[\"", token, "\"] is not a token id below ", kMaxTokenizerVocab);
    }
    entries.push_back({token, id.get<int64_t>(), TokenType::kNormal});
  }
  if (j.contains("added_tokens") && !j["added_tokens"].is_array()) {
    return bad("added_tokens is not an array");
  }
  for (const Json& a : ArrayOr(j, "added_tokens")) {
    if (!a.is_object() || !a.value("content", Json()).is_string() ||
        !a.value("id", Json()).is_number_integer() || a["id"].get<int64_t>() < 0 ||
        a["id"].get<int64_t>() >= kMaxTokenizerVocab) {
      return bad("added_tokens has an entry without a string content and a token id below ",
                 kMaxTokenizerVocab);
    }
    const WholeToken w{a["content"].get<std::string>(), a["id"].get<int32_t>()};
    const bool special = BoolOr(a, "special", false);
    (special ? t->special_ : t->user_defined_).push_back(w);
    entries.push_back({w.text, w.id, special ? TokenType::kControl : TokenType::kUserDefined});
  }
  int64_t size = 0;
  for (const Entry& e : entries) size = std::max(size, e.id + 1);
  Vocabulary& v = t->vocabulary_;
  v.model = "gpt2";
  v.pre = t->pre_ ? GgufPreName(*t->pre_) : "default";
  v.tokens.assign(size, "");
  v.types.assign(size, TokenType::kUnused);
  std::vector<bool> seen(size, false);
  std::unordered_map<std::string, int32_t> by_text;
  for (const auto& [text, id, type] : entries) {
    if (seen[id] && v.tokens[id] != text) {
      return bad("token id ", id, " is both \"", v.tokens[id], "\" and \"", text, "\"");
    }
    auto [it, fresh] = by_text.emplace(text, static_cast<int32_t>(id));
    if (!fresh && it->second != id) {
      return bad("token \"", text, "\" appears twice (ids ", it->second, " and ", id, ")");
    }
    seen[id] = true;
    v.tokens[id] = text;
    v.types[id] = type;
    if (type == TokenType::kNormal) t->ids_.emplace(text, static_cast<int32_t>(id));
  }
  for (int64_t id = 0; id < size; ++id) {
    // Ids no token names (padding rows of an embedding) get unused placeholders.
    if (!seen[id]) v.tokens[id] = absl::StrCat("<|tailor_unused_", id, "|>");
  }
  if (m.contains("merges") && !m["merges"].is_array()) return bad("model.merges is not an array");
  const Json merges = ArrayOr(m, "merges");
  for (size_t i = 0; i < merges.size(); ++i) {
    absl::StatusOr<std::pair<std::string, std::string>> pair = MergePair(merges[i]);
    if (!pair.ok()) return bad("model.merges[", i, "] is ", pair.status().message());
    std::string key = absl::StrCat(pair->first, " ", pair->second);
    t->ranks_.emplace(key, static_cast<int32_t>(i));  // the first of duplicates ranks
    v.merges.push_back(std::move(key));
  }
  for (int b = 0; b < 256; ++b) t->symbol_bytes_.emplace(ByteSymbol(b), static_cast<uint8_t>(b));
  t->source_ = source;
  return t;
}

absl::StatusOr<std::vector<int32_t>> ByteLevelBpe::Encode(absl::string_view text,
                                                          bool parse_special) const {
  if (!pre_) {
    return absl::FailedPreconditionError(
        absl::StrCat(source_, ": its split pattern is not one tailor implements"));
  }
  std::vector<WholeToken> whole = user_defined_;
  if (parse_special) whole.insert(whole.end(), special_.begin(), special_.end());
  return EncodeAroundTokens(
      text, std::move(whole), [this](absl::string_view fragment, std::vector<int32_t>& ids) {
        absl::StatusOr<std::vector<std::string>> pieces = PreTokenize(*pre_, fragment);
        if (!pieces.ok()) return pieces.status();
        for (const std::string& piece : *pieces) {
          if (absl::Status s = EncodePiece(piece, ids); !s.ok()) return s;
        }
        return absl::OkStatus();
      });
}

absl::Status ByteLevelBpe::EncodePiece(absl::string_view piece, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  std::string whole;
  for (const char c : piece) {
    std::string s = ByteSymbol(static_cast<uint8_t>(c));
    whole += s;
    const int i = static_cast<int>(symbols.size());
    symbols.push_back({i - 1, -1, std::move(s)});
    if (i > 0) symbols[i - 1].next = i;
  }
  if (ignore_merges_) {
    if (auto it = ids_.find(whole); it != ids_.end()) {
      out.push_back(it->second);
      return absl::OkStatus();
    }
  }
  std::priority_queue<Bigram> queue;
  auto enqueue = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[l.next];
    auto it = ranks_.find(absl::StrCat(l.text, " ", r.text));
    if (it != ranks_.end()) queue.push({it->second, left, l.next, l.text.size() + r.text.size()});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) enqueue(i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    if (l.next != b.right || l.text.empty() || symbols[b.right].text.empty() ||
        l.text.size() + symbols[b.right].text.size() != b.size) {
      continue;  // stale: one side has merged since
    }
    Symbol& r = symbols[b.right];
    l.text += r.text;
    r.text.clear();
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    enqueue(l.prev);
    enqueue(b.left);
  }
  for (int i = 0; i >= 0 && i < static_cast<int>(symbols.size()); i = symbols[i].next) {
    if (auto it = ids_.find(symbols[i].text); it != ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    for (size_t k = 0; k < symbols[i].text.size();) {  // fall back to one token per byte
      const size_t len = (static_cast<uint8_t>(symbols[i].text[k]) & 0xE0) == 0xC0 ? 2 : 1;
      auto it = ids_.find(symbols[i].text.substr(k, len));
      if (it == ids_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            source_, ": byte symbol \"", symbols[i].text.substr(k, len), "\" has no token"));
      }
      out.push_back(it->second);
      k += len;
    }
  }
  return absl::OkStatus();
}

std::string ByteLevelBpe::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    const std::string& token = vocabulary_.tokens[id];
    if (vocabulary_.types[id] != TokenType::kNormal) {
      if (vocabulary_.types[id] != TokenType::kUnused) out += token;
      continue;
    }
    absl::StatusOr<std::vector<char32_t>> cps = DecodeUtf8(token);
    if (!cps.ok()) continue;
    for (const char32_t cp : *cps) {
      std::string symbol;
      AppendUtf8(cp, symbol);
      auto it = symbol_bytes_.find(symbol);
      out += it != symbol_bytes_.end() ? std::string(1, static_cast<char>(it->second)) : symbol;
    }
  }
  return out;
}

std::string ByteLevelBpe::Describe() const {
  return absl::StrCat("byte-level BPE (", pre_ ? PreTokenizerName(*pre_) : "unknown",
                      " split, ", vocab_size(), " tokens)");
}

}  // namespace tailor::tokenizer
