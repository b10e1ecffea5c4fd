#ifndef TAILOR_COMPRESSION_TASKS_TRAINING_H_
#define TAILOR_COMPRESSION_TASKS_TRAINING_H_

// Training and exact-match evaluation of HybridLM on the synthetic task suites.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/model/hybrid_lm.h"
#include "compression/tasks/suites.h"

namespace tailor::tasks {

// The quickstart parent: vocab 64, hidden 128, 8 layers mixing all four kinds
// (attention, mamba, moe, attention, mamba, mlp, attention, moe), max_seq 64.
model::HybridConfig DefaultParentConfig();

// A padded batch: inputs [B, T] (<pad> after each sample), targets [B, T] = next token at
// answer positions and -100 (ignored) elsewhere, so only answers are learned.
struct Batch {
  at::Tensor inputs;
  at::Tensor targets;
};
Batch MakeBatch(const std::vector<Sample>& samples);
// Mean cross-entropy over answer positions.
at::Tensor AnswerLoss(const at::Tensor& logits, const at::Tensor& targets);

struct TrainProgress {
  int64_t step = 0;
  double loss = 0;  // exponential moving average of the answer loss
  double lr = 0;
  double seconds = 0;
};

struct TrainOptions {
  int64_t steps = 1000;
  int64_t batch_size = 64;
  double lr = 2e-3;  // peak; linear warmup, then cosine to lr * min_lr_ratio
  double min_lr_ratio = 0.05;
  int64_t warmup_steps = 100;
  double weight_decay = 0.01;  // matrices only; norms, biases and SSM scalars are exempt
  double aux_loss_weight = 0.01;
  double grad_clip = 1.0;
  uint64_t seed = 1;  // data stream seed
  int threads = 0;    // LibTorch intra-op threads; 0 = leave as is
  int64_t log_every = 100;
  std::function<void(const TrainProgress&)> on_progress;
};

struct TrainResult {
  int64_t steps = 0;
  double seconds = 0;
  double final_loss = 0;  // moving average at the end
};

// The next training batch (samples whose answer loss is learnt; a sample with answer_begin 1
// is plain language modelling).
using SampleSource = std::function<absl::StatusOr<std::vector<Sample>>()>;

// AdamW (warmup, cosine) on the batches `next_batch` gives, options.steps of them.
absl::StatusOr<TrainResult> TrainOnSamples(model::HybridLM& model, const SampleSource& next_batch,
                                           const TrainOptions& options);

// AdamW on a uniform mixture of `suites` (train split).
absl::StatusOr<TrainResult> TrainOnTasks(model::HybridLM& model,
                                         const std::vector<const TaskSuite*>& suites,
                                         const TrainOptions& options);

struct EvalResult {
  std::string task;
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
};

// Greedy exact match on `n` evaluation-split samples drawn with `seed`: the prompt goes
// through Prefill, the answer is generated token by token with DecodeStep, and a sample
// counts only if every answer token (including <eos>) matches.
absl::StatusOr<EvalResult> Evaluate(model::HybridLM& model, const TaskSuite& suite, int64_t n,
                                    uint64_t seed);

}  // namespace tailor::tasks

#endif  // TAILOR_COMPRESSION_TASKS_TRAINING_H_
