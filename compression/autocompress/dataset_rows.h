#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_DATASET_ROWS_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_DATASET_ROWS_H_

// Distillation rows from a contract dataset (data.train): this rank's reader (its own
// documents, compression/data/text_dataset.h) cut into full rows; a shorter last sequence is
// skipped. When the data runs out a new epoch starts: the reader is opened again with the
// epoch folded into its shuffle seed. Rows depend only on (dataset, options, rank, world
// size, step), so a resumed run that starts at step s first reads and drops the rows of
// steps 0..s-1 and then sees exactly what the uninterrupted run saw.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/autocompress/distill.h"
#include "compression/data/text_dataset.h"

namespace tailor::autocompress {

class DatasetRows : public DistillData {
 public:
  // Opens this rank's reader for epoch 0, 1, ... (the same options but the seed).
  using OpenReader =
      std::function<absl::StatusOr<std::unique_ptr<data::TextDatasetReader>>(int64_t epoch)>;

  explicit DatasetRows(OpenReader open) : open_(std::move(open)) {}

  absl::StatusOr<at::Tensor> TrainRows(int64_t step, int64_t rows,
                                       int64_t sequence_length) override;

  // Rows handed out or skipped so far, and the documents they came from in reading order
  // (a document spanning two rows counts once per row that holds it, consecutive repeats
  // merged): what DataShard reports.
  int64_t rows_read() const { return rows_read_; }
  const std::vector<int64_t>& documents() const { return documents_; }

 private:
  absl::StatusOr<std::vector<int32_t>> NextRow(int64_t sequence_length);

  OpenReader open_;
  std::unique_ptr<data::TextDatasetReader> reader_;
  int64_t epoch_ = -1;
  int64_t next_step_ = 0;
  int64_t rows_read_ = 0;
  bool epoch_had_rows_ = false;
  std::vector<int64_t> documents_;
};

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_DATASET_ROWS_H_
