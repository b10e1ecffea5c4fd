#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_DISTILL_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_DISTILL_H_

// Recovery by logit distillation (spec §1 Step 4): a student extracted from the ranked
// parent is trained to match the frozen parent's logits,
//   L = KL(teacher || student) per token, averaged over every token of the batch,
// with Adam (betas 0.9/0.95, no weight decay) and a cosine learning-rate schedule from `lr`
// down to lr * min_lr_ratio over the planned steps, no warm-up (the student starts from the
// parent's weights, not from noise). Everything that decides the result -- data, order,
// schedule -- depends only on the options, never on the student, so the AutoCompress student
// and the uniform baseline get the same recovery ("matched recovery").
//
// Data: the contract's own (DistillOptions::data, e.g. DatasetRows over data.train), or
// without it the train split of the eight task suites, mixed uniformly and packed into rows of
// exactly `sequence_length` tokens (samples run on from one row into the next, so every
// position is a real token and the token count is exact). The global batch of step s is a
// pure function of (seed, s): a resumed run regenerates exactly the batches it would have
// seen, and every rank regenerates the whole batch and keeps rows
// [rank * B / W, (rank + 1) * B / W).
//
// Data parallelism: each rank's KD loss is scaled by rows_rank * W / B before backward, so
// the mean over ranks of the gradients (what `after_backward` must produce, e.g.
// Dist::AverageGradients) is exactly the gradient of the global batch mean, even when B is
// not a multiple of W. Everything after the hook is identical on every rank.
//
// Checkpoints (when checkpoint_dir is set): CHECKPOINT_DIR/checkpoint.pt holds the student
// weights, the Adam state, the next step (= the data-stream position) and the held-out KD
// loss before training, plus the digests of the student config and of the options; it is
// written to a temp file and renamed. CHECKPOINT_DIR/meta.txt repeats the digests and step
// for people. A checkpoint whose digests differ from this run's is ignored (logged) and
// overwritten by the first new one.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compression/model/hybrid_lm.h"

namespace tailor::autocompress {

// Where training rows come from when not from the task suites: this rank's rows of each step,
// asked for in increasing step order from the first step a run trains (a resumed run starts
// past 0, and the source skips what the steps before would have read).
class DistillData {
 public:
  virtual ~DistillData() = default;
  // [rows, sequence_length] int64 token ids.
  virtual absl::StatusOr<at::Tensor> TrainRows(int64_t step, int64_t rows,
                                               int64_t sequence_length) = 0;
};

struct DistillOptions {
  int64_t tokens = 2'000'000;  // global training tokens; steps = DistillSteps(...)
  double learning_rate = 3e-4;
  int64_t batch_sequences = 32;  // global batch (rows), split across ranks
  int64_t sequence_length = 64;  // tokens per row; <= both models' max_seq
  double min_lr_ratio = 0.1;     // cosine floor: lr * min_lr_ratio at the last step
  double grad_clip = 1.0;        // global-norm clipping after the hook; 0 = off
  uint64_t seed = 1;             // data stream (the contract seed; never the job)
  // The contract's training data (not owned); null: the task suites. Fold what identifies it
  // (the dataset digest) into `identity`, so a checkpoint of other data is not resumed.
  DistillData* data = nullptr;
  // Held-out batches for the KD loss before and after training ([rows, length] each); empty:
  // `eval_batches` batches of the task suites' evaluation split.
  std::vector<at::Tensor> held_out;

  // Held-out KD loss on this many batches of the evaluation split, before and after
  // training. 0 skips both (ranks other than 0 need not spend the time).
  int64_t eval_batches = 4;

  // Data parallelism. `after_backward` runs on every rank after backward, before clipping
  // and the optimizer step; it must leave every parameter's gradient equal to the mean over
  // ranks (the worker passes Dist::AverageGradients). Null with world_size 1.
  int rank = 0;
  int world_size = 1;
  std::function<absl::Status(const std::vector<at::Tensor>& params)> after_backward;

  // Checkpointing; an empty dir disables it.
  std::string checkpoint_dir;
  int64_t checkpoint_every_steps = 50;
  bool write_checkpoints = true;  // false on ranks that only read (all but rank 0)
  // Called once on every rank before training with the checkpoint bytes this rank read
  // ("" when none); must leave every rank holding the same bytes (the worker broadcasts
  // rank 0's), so all ranks resume from the same step or all start fresh. Null: use the
  // local file as is.
  std::function<absl::Status(std::string& bytes)> share_checkpoint;
  // Folded into the options digest: what else identifies the run (the worker passes the
  // teacher and student artifact digests), so a checkpoint of another run is ignored.
  std::string identity;

  // Log lines (checkpoint ignored, resumed); null writes them to stderr.
  std::function<void(const std::string&)> log;
};

struct DistillStep {
  int64_t step = 0;   // steps completed, 1-based
  int64_t steps = 0;  // planned
  // This rank's share of the batch KD loss: the mean over ranks is the global batch's KD
  // loss (with one rank it is that loss).
  double loss = 0.0;
  double lr = 0.0;
};
// Called on every rank after each step (and after that step's checkpoint, if due);
// returning false stops the run after writing a checkpoint for the completed steps.
using DistillProgress = std::function<bool(const DistillStep&)>;

struct DistillResult {
  int64_t steps = 0;              // planned
  int64_t steps_done = 0;         // completed, including those before a resume
  int64_t resumed_from_step = 0;  // 0 when started fresh
  int64_t tokens_trained = 0;     // steps_done * batch_sequences * sequence_length (global)
  bool stopped = false;           // the progress callback stopped it (no final evaluation)
  // Held-out KD loss of the student before training (carried through a resume) and after.
  // NaN when not evaluated (eval_batches 0 or stopped).
  double kd_loss_before = std::numeric_limits<double>::quiet_NaN();
  double kd_loss_after = std::numeric_limits<double>::quiet_NaN();
};

// tokens / (batch_sequences * sequence_length), rounded down, but at least 1 when tokens > 0
// (a positive budget smaller than one batch still trains one batch); 0 for tokens 0.
int64_t DistillSteps(int64_t tokens, int64_t batch_sequences, int64_t sequence_length);

// The global training batch of `step`: [batch_sequences, sequence_length] int64 tokens.
at::Tensor DistillBatch(uint64_t seed, int64_t step, int64_t batch_sequences,
                        int64_t sequence_length);

// Mean KD loss (teacher || student) over `batches` packed batches of the evaluation split,
// drawn from `seed` (disjoint from the training data by construction of the split).
absl::StatusOr<double> HeldOutKdLoss(model::HybridLM& teacher, model::HybridLM& student,
                                     uint64_t seed, int64_t batches, int64_t batch_sequences,
                                     int64_t sequence_length);

// Trains `student` in place (left in eval mode); `teacher` is only read. Both must share the
// vocabulary, which must be the task tokenizer's.
absl::StatusOr<DistillResult> Distill(model::HybridLM& teacher, model::HybridLM& student,
                                      const DistillOptions& options,
                                      const DistillProgress& progress = nullptr);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_DISTILL_H_
