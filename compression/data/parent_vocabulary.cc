#include "compression/data/parent_vocabulary.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compression/hf/hf_config.h"
#include "compression/model/config.h"
#include "nlohmann/json.hpp"

namespace tailor::data {
namespace {

using Json = nlohmann::json;

// bos_token_id / eos_token_id of an HF config (eos may be a list: the first ends generation).
int32_t SpecialId(const Json& c, const char* key, int64_t vocab_size) {
  if (!c.contains(key)) return -1;
  const Json& x = c[key].is_array() && !c[key].empty() ? c[key][0] : c[key];
  const int64_t id = x.is_number_integer() ? x.get<int64_t>() : -1;
  return id >= 0 && id < vocab_size ? static_cast<int32_t>(id) : -1;
}

bool HasTokenizerFiles(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir + "/tokenizer.json", ec) ||
         std::filesystem::exists(dir + "/tokenizer.model", ec);
}

}  // namespace

TextDatasetOptions ParentVocabulary::Options(int64_t sequence_tokens) const {
  TextDatasetOptions o;
  o.sequence_tokens = sequence_tokens;
  o.vocab_size = vocab_size;
  o.context_tokens = context_tokens;
  o.bos = bos;
  o.eos = eos;
  return o;
}

ParentVocabulary TailorParentVocabulary(int64_t vocab_size, int64_t context_tokens) {
  ParentVocabulary v;
  v.vocab_size = vocab_size;
  v.context_tokens = context_tokens;
  v.bos = vocab_size > 1 ? 1 : -1;  // the task vocabulary's <bos> and <eos>
  v.eos = vocab_size > 2 ? 2 : -1;
  v.no_tokenizer_reason =
      "tailor-format parents speak token ids only, unless their folder has a tokenizer.json";
  return v;
}

absl::StatusOr<ParentVocabulary> ReadParentVocabulary(absl::string_view config_json,
                                                      absl::string_view source,
                                                      absl::string_view format,
                                                      const std::string& dir) {
  const Json parsed = Json::parse(config_json.begin(), config_json.end(), nullptr, false);
  const bool hf = !format.empty() || (parsed.is_object() && (parsed.contains("architectures") ||
                                                             parsed.contains("model_type")));
  ParentVocabulary v;
  if (!hf) {
    absl::StatusOr<model::HybridConfig> c = model::ParseHybridConfigJson(config_json);
    if (!c.ok()) return c.status();
    v = TailorParentVocabulary(c->vocab, c->max_seq);
    // A tailor-format parent speaks ids unless its folder carries the tokenizer it was
    // trained with (tailor-train-parent --tokenizer).
    if (dir.empty() || !HasTokenizerFiles(dir)) return v;
  } else {
    absl::StatusOr<hf::HfConfig> c = hf::ParseHfConfigJson(config_json, source, format);
    if (!c.ok()) return c.status();
    v.vocab_size = c->vocab_size;
    v.context_tokens = c->max_position_embeddings;
    v.bos = SpecialId(parsed, "bos_token_id", v.vocab_size);
    v.eos = SpecialId(parsed, "eos_token_id", v.vocab_size);
  }
  if (dir.empty()) {
    v.no_tokenizer_reason = "the parent is a stored artifact without tokenizer files";
    return v;
  }
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> t = tokenizer::LoadTokenizer(dir);
  if (t.ok()) {
    v.tokenizer = *std::move(t);
    v.no_tokenizer_reason.clear();
  } else {
    v.no_tokenizer_reason = std::string(t.status().message());
  }
  return v;
}

absl::StatusOr<ParentVocabulary> ReadParentVocabularyDir(const std::string& dir,
                                                         absl::string_view format) {
  const std::string path = dir + "/config.json";
  absl::StatusOr<std::string> text = model::ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ReadParentVocabulary(*text, path, format, dir);
}

}  // namespace tailor::data
