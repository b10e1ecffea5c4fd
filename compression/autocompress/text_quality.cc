#include "compression/autocompress/text_quality.h"

#include <torch/torch.h>

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::autocompress {
namespace {

constexpr size_t kMaxBatch = 8;

// Adds one model's NLL and exact-match hits over `batch` (sequences of one length).
absl::Status Score(model::HybridLM& m, const std::vector<data::TokenSequence>& batch,
                   ModelTextQuality& q) {
  const int64_t length = static_cast<int64_t>(batch.front().tokens.size());
  std::vector<int64_t> flat;
  for (const data::TokenSequence& s : batch) {
    flat.insert(flat.end(), s.tokens.begin(), s.tokens.end());
  }
  const at::Tensor tokens = torch::tensor(flat, torch::kLong)
                                .reshape({static_cast<int64_t>(batch.size()), length});
  const c10::Device device = m->parameters().front().device();
  TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput out, m->Forward(tokens.to(device)));
  // Position t predicts token t + 1.
  const at::Tensor logits = out.logits.slice(1, 0, length - 1).to(torch::kFloat32).cpu();
  const at::Tensor next = tokens.slice(1, 1, length);
  const at::Tensor logp = torch::log_softmax(logits, -1);
  const at::Tensor nll = -logp.gather(-1, next.unsqueeze(-1)).squeeze(-1);  // [B, T-1]
  q.nll_sum += nll.to(torch::kFloat64).sum().item<double>();
  const at::Tensor hit = logits.argmax(-1).eq(next);  // [B, T-1]
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t a = batch[i].answer_begin;
    if (a < 1) continue;
    if (hit[static_cast<int64_t>(i)].slice(0, a - 1, length - 1).all().item<bool>()) {
      ++q.exact_hits;
    }
  }
  return absl::OkStatus();
}

absl::Status ScoreBatch(model::HybridLM& teacher, model::HybridLM& student,
                        const std::vector<data::TokenSequence>& batch, TextQuality& q) {
  if (batch.empty()) return absl::OkStatus();
  TAILOR_RETURN_IF_ERROR(Score(teacher, batch, q.teacher));
  TAILOR_RETURN_IF_ERROR(Score(student, batch, q.student));
  for (const data::TokenSequence& s : batch) {
    ++q.sequences;
    q.tokens += static_cast<int64_t>(s.tokens.size()) - 1;
    if (s.answer_begin >= 1) ++q.exact_items;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TextQuality> EvaluateText(model::HybridLM& teacher, model::HybridLM& student,
                                         data::TextDatasetReader& reader) {
  TextQuality q;
  try {
    torch::NoGradGuard no_grad;
    const bool teacher_training = teacher->is_training();
    const bool student_training = student->is_training();
    teacher->eval();
    student->eval();
    std::vector<data::TokenSequence> batch;
    while (true) {
      absl::StatusOr<std::optional<data::TokenSequence>> s = reader.Next();
      if (!s.ok()) return s.status();
      const bool end = !s->has_value();
      if (end || batch.size() == kMaxBatch ||
          (!batch.empty() && batch.front().tokens.size() != (*s)->tokens.size())) {
        TAILOR_RETURN_IF_ERROR(ScoreBatch(teacher, student, batch, q));
        batch.clear();
      }
      if (end) break;
      batch.push_back(**std::move(s));
    }
    teacher->train(teacher_training);
    student->train(student_training);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("evaluating on the eval set: ",
                                            e.what_without_backtrace()));
  }
  if (q.sequences == 0) {
    return absl::InvalidArgumentError("the eval set holds no sequence to evaluate");
  }
  return q;
}

absl::StatusOr<ModelTextQuality> ScoreSequences(model::HybridLM& m,
                                                const std::vector<data::TokenSequence>& sequences,
                                                int64_t& tokens) {
  ModelTextQuality q;
  tokens = 0;
  try {
    torch::NoGradGuard no_grad;
    const bool training = m->is_training();
    m->eval();
    std::vector<data::TokenSequence> batch;
    auto flush = [&]() -> absl::Status {
      if (batch.empty()) return absl::OkStatus();
      TAILOR_RETURN_IF_ERROR(Score(m, batch, q));
      for (const data::TokenSequence& s : batch) {
        tokens += static_cast<int64_t>(s.tokens.size()) - 1;
      }
      batch.clear();
      return absl::OkStatus();
    };
    for (const data::TokenSequence& s : sequences) {
      if (s.tokens.size() < 2) continue;
      if (batch.size() == kMaxBatch ||
          (!batch.empty() && batch.front().tokens.size() != s.tokens.size())) {
        TAILOR_RETURN_IF_ERROR(flush());
      }
      batch.push_back(s);
    }
    TAILOR_RETURN_IF_ERROR(flush());
    m->train(training);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("scoring eval sequences: ",
                                            e.what_without_backtrace()));
  }
  if (tokens == 0) {
    return absl::InvalidArgumentError("no eval sequence of two or more tokens to score");
  }
  return q;
}

}  // namespace tailor::autocompress
