// Fuzz target: a parent's tokenizer files (compression/tokenizer). tokenizer.json bytes go to
// the byte-level BPE reader: anything it refuses is InvalidArgument; a tokenizer it accepts
// encodes every UTF-8 text it is given (the input itself, and fixed texts) without crashing,
// and decoding gives the text back (byte-level BPE loses nothing). The same bytes as a
// SentencePiece tokenizer.model go to tailor's ModelProto reader: InvalidArgument or a
// vocabulary with one score and one type per piece.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "compression/tokenizer/byte_level_bpe.h"
#include "compression/tokenizer/sentencepiece_tokenizer.h"
#include "compression/tokenizer/unicode.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void CheckRoundTrip(const tailor::tokenizer::ByteLevelBpe& t, const std::string& text) {
  if (!tailor::tokenizer::DecodeUtf8(text).ok()) {
    FUZZ_CHECK(!t.Encode(text, false).ok(), "invalid UTF-8 encoded");
    return;
  }
  auto ids = t.Encode(text, /*parse_special=*/false);
  if (!ids.ok()) {
    // A vocabulary without some byte's symbol cannot encode that byte: a precise error.
    FUZZ_CHECK(ids.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               ids.status().ToString().c_str());
    return;
  }
  for (int32_t id : *ids) FUZZ_CHECK(id >= 0 && id < t.vocab_size(), "id %d", id);
  FUZZ_CHECK(t.Decode(*ids) == text, "decode(encode(text)) != text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto bpe = tailor::tokenizer::ByteLevelBpe::FromJson(bytes, "fuzz.json");
  if (!bpe.ok()) {
    FUZZ_CHECK(bpe.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               bpe.status().ToString().c_str());
  } else {
    for (const std::string& text :
         {std::string(bytes.substr(0, 256)), std::string("Hello, world's 2026!\n\n  x"),
          std::string("Gr\xc3\xbc\xc3\x9f" "e \xe6\x9d\xb1 \xf0\x9f\x99\x82")}) {
      CheckRoundTrip(**bpe, text);
    }
  }
  auto spm = tailor::tokenizer::ParseSentencePieceModel(bytes, "fuzz.model");
  if (!spm.ok()) {
    FUZZ_CHECK(spm.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               spm.status().ToString().c_str());
  } else {
    const auto& v = spm->vocabulary;
    FUZZ_CHECK(v.tokens.size() == v.scores.size() && v.tokens.size() == v.types.size(),
               "%zu pieces, %zu scores, %zu types", v.tokens.size(), v.scores.size(),
               v.types.size());
  }
  return 0;
}
