#include "tests/testing/sentencepiece_reference.h"

#include <sentencepiece_processor.h>

namespace tailor::testing {

struct SentencePieceReference::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceReference::SentencePieceReference() : impl_(std::make_unique<Impl>()) {}
SentencePieceReference::~SentencePieceReference() = default;

bool SentencePieceReference::Load(const std::string& path, std::string& error) {
  const sentencepiece::util::Status s = impl_->processor.Load(path);
  if (!s.ok()) error = s.ToString();
  return s.ok();
}

bool SentencePieceReference::Encode(const std::string& text, std::vector<int>& ids,
                                 std::string& error) const {
  const sentencepiece::util::Status s = impl_->processor.Encode(text, &ids);
  if (!s.ok()) error = s.ToString();
  return s.ok();
}

std::string SentencePieceReference::Decode(const std::vector<int>& ids) const {
  std::string text;
  if (!impl_->processor.Decode(ids, &text).ok()) return "";
  return text;
}

}  // namespace tailor::testing
