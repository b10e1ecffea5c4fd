#include "compression/tokenizer/tokenizer.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compression/tokenizer/byte_level_bpe.h"
#include "compression/tokenizer/sentencepiece_tokenizer.h"

namespace tailor::tokenizer {

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& dir) {
  const std::string json = dir + "/tokenizer.json";
  const std::string model = dir + "/tokenizer.model";
  const bool has_json = std::filesystem::exists(json);
  const bool has_model = std::filesystem::exists(model);
  if (!has_json && !has_model) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": no tokenizer.json or tokenizer.model to tokenize with"));
  }
  absl::Status json_error;
  if (has_json) {
    absl::StatusOr<std::unique_ptr<ByteLevelBpe>> bpe = ByteLevelBpe::Load(json);
    if (bpe.ok()) return std::unique_ptr<Tokenizer>(*std::move(bpe));
    json_error = bpe.status();
    if (!has_model) return json_error;
  }
  absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> spm = SentencePieceTokenizer::Load(model);
  if (spm.ok()) return std::unique_ptr<Tokenizer>(*std::move(spm));
  if (json_error.ok()) return spm.status();
  return absl::InvalidArgumentError(
      absl::StrCat(json_error.message(), "; and ", spm.status().message()));
}

}  // namespace tailor::tokenizer
