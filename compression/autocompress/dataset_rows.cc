#include "compression/autocompress/dataset_rows.h"

#include <torch/torch.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace tailor::autocompress {

absl::StatusOr<std::vector<int32_t>> DatasetRows::NextRow(int64_t sequence_length) {
  while (true) {
    if (reader_ == nullptr) {
      if (epoch_ >= 0 && !epoch_had_rows_) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the training data gives this rank no sequence of ", sequence_length,
            " tokens: too little data for the ranks (or a shorter sequence length)"));
      }
      absl::StatusOr<std::unique_ptr<data::TextDatasetReader>> r = open_(++epoch_);
      if (!r.ok()) return r.status();
      reader_ = *std::move(r);
      epoch_had_rows_ = false;
    }
    absl::StatusOr<std::optional<data::TokenSequence>> s = reader_->Next();
    if (!s.ok()) return s.status();
    if (!s->has_value()) {
      reader_.reset();  // the next epoch
      continue;
    }
    if (static_cast<int64_t>((*s)->tokens.size()) != sequence_length) continue;  // a short tail
    epoch_had_rows_ = true;
    ++rows_read_;
    for (const int64_t d : (*s)->documents) {
      if (documents_.empty() || documents_.back() != d) documents_.push_back(d);
    }
    return std::move((*s)->tokens);
  }
}

absl::StatusOr<at::Tensor> DatasetRows::TrainRows(int64_t step, int64_t rows,
                                                  int64_t sequence_length) {
  if (step < next_step_) {
    return absl::InternalError(absl::StrCat("DatasetRows: step ", step, " asked after step ",
                                            next_step_ - 1, " (steps only move forward)"));
  }
  for (; next_step_ < step; ++next_step_) {  // a resumed run: skip what came before
    for (int64_t r = 0; r < rows; ++r) {
      absl::StatusOr<std::vector<int32_t>> skipped = NextRow(sequence_length);
      if (!skipped.ok()) return skipped.status();
    }
  }
  std::vector<int64_t> flat;
  flat.reserve(rows * sequence_length);
  for (int64_t r = 0; r < rows; ++r) {
    absl::StatusOr<std::vector<int32_t>> row = NextRow(sequence_length);
    if (!row.ok()) return row.status();
    flat.insert(flat.end(), row->begin(), row->end());
  }
  ++next_step_;
  return torch::tensor(flat, torch::kLong).reshape({rows, sequence_length});
}

}  // namespace tailor::autocompress
