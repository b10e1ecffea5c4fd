#include "compression/tokenizer/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>

namespace tailor::tokenizer {

struct SentencePieceBridge::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceBridge::SentencePieceBridge() : impl_(std::make_unique<Impl>()) {}
SentencePieceBridge::~SentencePieceBridge() = default;

bool SentencePieceBridge::Load(const std::string& path, std::string& error) {
  const sentencepiece::util::Status s = impl_->processor.Load(path);
  if (!s.ok()) error = s.ToString();
  return s.ok();
}

bool SentencePieceBridge::Encode(const std::string& text, std::vector<int>& ids,
                                 std::string& error) const {
  const sentencepiece::util::Status s = impl_->processor.Encode(text, &ids);
  if (!s.ok()) error = s.ToString();
  return s.ok();
}

std::string SentencePieceBridge::Decode(const std::vector<int>& ids) const {
  std::string text;
  if (!impl_->processor.Decode(ids, &text).ok()) return "";
  return text;
}

}  // namespace tailor::tokenizer
