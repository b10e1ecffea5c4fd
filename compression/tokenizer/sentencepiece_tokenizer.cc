#include "compression/tokenizer/sentencepiece_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <queue>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compression/tokenizer/unicode.h"

namespace tailor::tokenizer {
namespace {

// Protocol-buffer wire format, only as far as a ModelProto needs: varints, 32-bit floats and
// length-delimited fields; every other field is skipped.
class WireReader {
 public:
  explicit WireReader(absl::string_view bytes) : rest_(bytes) {}

  bool done() const { return rest_.empty(); }

  // The next field's number and wire type; nullopt on malformed input.
  std::optional<std::pair<uint64_t, int>> Tag() {
    std::optional<uint64_t> key = Varint();
    if (!key) return std::nullopt;
    return std::make_pair(*key >> 3, static_cast<int>(*key & 7));
  }

  std::optional<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && !rest_.empty(); shift += 7) {
      const auto b = static_cast<uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return std::nullopt;
  }

  std::optional<absl::string_view> Bytes() {
    std::optional<uint64_t> n = Varint();
    if (!n || *n > rest_.size()) return std::nullopt;
    absl::string_view out = rest_.substr(0, *n);
    rest_.remove_prefix(*n);
    return out;
  }

  std::optional<float> Float() {
    if (rest_.size() < 4) return std::nullopt;
    float f;
    std::memcpy(&f, rest_.data(), 4);  // little-endian, as x86 and the format are
    rest_.remove_prefix(4);
    return f;
  }

  // Skips a field of wire type `type`; false on malformed input.
  bool Skip(int type) {
    switch (type) {
      case 0:
        return Varint().has_value();
      case 1:
        if (rest_.size() < 8) return false;
        rest_.remove_prefix(8);
        return true;
      case 2:
        return Bytes().has_value();
      case 5:
        return Float().has_value();
      default:
        return false;
    }
  }

 private:
  absl::string_view rest_;
};

// SentencePiece { piece = 1; score = 2; type = 3 }.
bool ParsePiece(absl::string_view bytes, Vocabulary& v) {
  WireReader r(bytes);
  std::string piece;
  float score = 0;
  int type = 1;
  while (!r.done()) {
    auto tag = r.Tag();
    if (!tag) return false;
    if (tag->first == 1 && tag->second == 2) {
      auto b = r.Bytes();
      if (!b) return false;
      piece = std::string(*b);
    } else if (tag->first == 2 && tag->second == 5) {
      auto f = r.Float();
      if (!f) return false;
      score = *f;
    } else if (tag->first == 3 && tag->second == 0) {
      auto t = r.Varint();
      if (!t || *t < 1 || *t > 6) return false;
      type = static_cast<int>(*t);
    } else if (!r.Skip(tag->second)) {
      return false;
    }
  }
  v.tokens.push_back(std::move(piece));
  v.scores.push_back(score);
  v.types.push_back(static_cast<TokenType>(type));
  return true;
}

// TrainerSpec { model_type = 3; byte_fallback = 35 } and NormalizerSpec { name = 1;
// add_dummy_prefix = 3; remove_extra_whitespaces = 4 }.
bool ParseSpec(absl::string_view bytes, bool trainer, SentencePieceModelInfo& info) {
  WireReader r(bytes);
  while (!r.done()) {
    auto tag = r.Tag();
    if (!tag) return false;
    const uint64_t field = tag->first;
    if (tag->second == 0 && ((trainer && (field == 3 || field == 35)) ||
                             (!trainer && (field == 3 || field == 4)))) {
      auto value = r.Varint();
      if (!value) return false;
      if (trainer && field == 3) info.model_type = static_cast<int>(*value);
      if (trainer && field == 35) info.byte_fallback = *value != 0;
      if (!trainer && field == 3) info.vocabulary.add_space_prefix = *value != 0;
      if (!trainer && field == 4) info.remove_extra_whitespaces = *value != 0;
    } else if (!trainer && field == 1 && tag->second == 2) {
      auto name = r.Bytes();
      if (!name) return false;
      info.normalizer = std::string(*name);
    } else if (!r.Skip(tag->second)) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<SentencePieceModelInfo> ParseSentencePieceModel(absl::string_view bytes,
                                                               const std::string& source) {
  SentencePieceModelInfo info;
  info.vocabulary.model = "llama";
  info.vocabulary.add_space_prefix = true;  // NormalizerSpec's default
  WireReader r(bytes);
  bool ok = true;
  while (ok && !r.done()) {
    auto tag = r.Tag();
    ok = tag.has_value();
    if (!ok) break;
    if (tag->second == 2 && tag->first >= 1 && tag->first <= 3) {
      auto b = r.Bytes();
      ok = b.has_value() && (tag->first == 1 ? ParsePiece(*b, info.vocabulary)
                                             : ParseSpec(*b, tag->first == 2, info));
    } else {
      ok = r.Skip(tag->second);
    }
  }
  if (!ok || info.vocabulary.tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a SentencePiece model (a ModelProto with pieces)"));
  }
  for (size_t i = 0; i < info.vocabulary.types.size(); ++i) {
    if (info.vocabulary.types[i] == TokenType::kUnknown) info.vocabulary.unk = i;
  }
  return info;
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<SentencePieceModelInfo> info = ParseSentencePieceModel(bytes.str(), path);
  if (!info.ok()) return info.status();
  // llama.cpp's "llama" tokenizer merges pieces by score over the text with spaces as U+2581:
  // exactly a BPE model's encoding, with no normalization.
  if (info->model_type != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": trainer_spec.model_type is ", info->model_type,
        ", not BPE (2): llama.cpp's SentencePiece tokenizer reproduces BPE models only"));
  }
  if (info->normalizer != "identity" || info->remove_extra_whitespaces) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": normalizer_spec is \"", info->normalizer, "\"",
        info->remove_extra_whitespaces ? " removing extra whitespace" : "",
        "; llama.cpp tokenizes without normalizing, so only the identity normalizer that "
        "keeps whitespace (Llama-2's) gives the ids it serves"));
  }
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->source_ = path;
  t->info_ = *std::move(info);
  std::fill(std::begin(t->byte_ids_), std::end(t->byte_ids_), -1);
  const Vocabulary& v = t->info_.vocabulary;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    const std::string& piece = v.tokens[i];
    switch (v.types[i]) {
      case TokenType::kControl:
      case TokenType::kUnknown:
        t->control_.push_back({piece, id});
        break;
      case TokenType::kUserDefined:
        t->user_defined_.push_back({piece, id});
        t->pieces_.emplace(piece, id);
        break;
      case TokenType::kNormal:
        t->pieces_.emplace(piece, id);
        break;
      case TokenType::kByte:
        if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
          t->byte_ids_[std::stoi(piece.substr(3, 2), nullptr, 16)] = id;
        }
        break;
      case TokenType::kUnused:
        break;
    }
  }
  return t;
}

absl::StatusOr<std::vector<int32_t>> SentencePieceTokenizer::Encode(absl::string_view text,
                                                                    bool parse_special) const {
  std::vector<WholeToken> whole = user_defined_;
  if (parse_special) whole.insert(whole.end(), control_.begin(), control_.end());
  return EncodeAroundTokens(text, std::move(whole),
                            [this](absl::string_view fragment, std::vector<int32_t>& ids) {
                              EncodeFragment(fragment, ids);
                              return absl::OkStatus();
                            });
}

namespace {

struct Symbol {
  int prev = -1;
  int next = -1;
  size_t begin = 0;  // bytes of the escaped text
  size_t size = 0;   // 0 once merged into its left neighbour
};

struct Bigram {
  float score;
  int left;
  int right;
  size_t size;  // joined size when queued: a stale entry no longer matches
  bool operator<(const Bigram& o) const {  // std::priority_queue pops the largest
    return score != o.score ? score < o.score : left > o.left;
  }
};

}  // namespace

void SentencePieceTokenizer::EncodeFragment(absl::string_view fragment,
                                            std::vector<int32_t>& out) const {
  static constexpr char kSpace[] = "\xe2\x96\x81";  // U+2581
  std::string text;
  if (info_.vocabulary.add_space_prefix) text = std::string(kSpace);
  for (const char c : fragment) {
    if (c == ' ') {
      text += kSpace;
    } else {
      text.push_back(c);
    }
  }
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < text.size();) {  // UTF-8 characters (the text was checked)
    const auto b = static_cast<uint8_t>(text[i]);
    const size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : 4;
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, -1, i, std::min(len, text.size() - i)});
    if (index > 0) symbols[index - 1].next = index;
    i += len;
  }
  std::priority_queue<Bigram> queue;
  auto enqueue = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[l.next];
    auto it = pieces_.find(text.substr(l.begin, l.size + r.size));
    if (it == pieces_.end()) return;
    queue.push({info_.vocabulary.scores[it->second], left, l.next, l.size + r.size});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) enqueue(i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    if (l.size == 0 || l.next != b.right || symbols[b.right].size == 0 ||
        l.size + symbols[b.right].size != b.size) {
      continue;  // stale: one side has merged since
    }
    Symbol& r = symbols[b.right];
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    enqueue(l.prev);
    enqueue(b.left);
  }
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string piece = text.substr(symbols[i].begin, symbols[i].size);
    if (auto it = pieces_.find(piece); it != pieces_.end()) {
      out.push_back(it->second);
      continue;
    }
    bool bytes = info_.byte_fallback;
    for (const char c : piece) bytes = bytes && byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (bytes) {
      for (const char c : piece) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    } else if (info_.vocabulary.unk >= 0) {
      out.push_back(static_cast<int32_t>(info_.vocabulary.unk));
    }
  }
}

std::string SentencePieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    const std::string& piece = info_.vocabulary.tokens[id];
    const TokenType type = info_.vocabulary.types[id];
    if (type == TokenType::kByte && piece.size() == 6) {
      text.push_back(static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
    } else if (type != TokenType::kUnused) {
      text += piece;
    }
  }
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "\xe2\x96\x81") == 0) {
      if (i > 0 || !info_.vocabulary.add_space_prefix) out.push_back(' ');  // not the dummy
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string SentencePieceTokenizer::Describe() const {
  return absl::StrCat("SentencePiece BPE (", vocab_size(), " pieces",
                      info_.byte_fallback ? ", byte fallback" : "", ")");
}

}  // namespace tailor::tokenizer
