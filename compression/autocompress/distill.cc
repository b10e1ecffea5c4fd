#include "compression/autocompress/distill.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "compression/autocompress/search.h"
#include "compression/model/config.h"
#include "compression/tasks/suites.h"
#include "compression/tasks/tokenizer.h"

namespace tailor::autocompress {
namespace {

// Salts keep the training stream, the evaluation stream and the other jobs' streams (which
// derive from the same contract seed) independent of each other.
constexpr uint64_t kTrainSalt = 0x64697374696c6c31ULL;  // "distill1"
constexpr uint64_t kEvalSalt = 0x64697374696c6c65ULL;   // "distille"
constexpr char kCheckpointFile[] = "checkpoint.pt";
constexpr char kMetaFile[] = "meta.txt";

uint64_t MixSeed(uint64_t seed, uint64_t salt, uint64_t index) {
  tasks::Rng rng(seed ^ salt ^ (index * 0x9E3779B97F4A7C15ULL));
  rng.Next();  // one round so nearby indices do not give nearby states
  return rng.Next();
}

// FNV-1a: the digests only tell runs apart (not a security boundary), and this library
// must not depend on OpenSSL.
std::string Digest(absl::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return absl::StrFormat("%016x", h);
}

// Only what changes the trained weights: rank-local settings (rank, world size, evaluation,
// checkpoint cadence) are left out so every rank computes the same digest and a resume on
// another world size still matches.
std::string OptionsDigest(const DistillOptions& o, const model::HybridConfig& teacher) {
  return Digest(absl::StrFormat(
      "tokens=%d;lr=%.17g;batch=%d;seq=%d;min_lr=%.17g;clip=%.17g;seed=%d;id=%s;teacher=%s",
      o.tokens, o.learning_rate, o.batch_sequences, o.sequence_length, o.min_lr_ratio, o.grad_clip,
      o.seed, o.identity, model::HybridConfigToJson(teacher)));
}

double LearningRate(const DistillOptions& o, int64_t step, int64_t steps) {
  const double progress =
      steps <= 1 ? 0.0 : static_cast<double>(step) / static_cast<double>(steps - 1);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return o.learning_rate * (o.min_lr_ratio + (1.0 - o.min_lr_ratio) * cosine);
}

// `count` rows of `length` tokens packed from `mixture`: samples are concatenated and run on
// from one row into the next, so no position is padding.
at::Tensor PackRows(tasks::TaskMixture& mixture, int64_t count, int64_t length) {
  std::vector<int64_t> tokens;
  tokens.reserve(count * length);
  while (static_cast<int64_t>(tokens.size()) < count * length) {
    const tasks::Sample s = mixture.Next();
    for (tasks::Token t : s.tokens) {
      if (static_cast<int64_t>(tokens.size()) == count * length) break;
      tokens.push_back(t);
    }
  }
  return torch::tensor(tokens, torch::kLong).view({count, length});
}

std::vector<const tasks::TaskSuite*> Pointers(
    const std::vector<std::unique_ptr<tasks::TaskSuite>>& suites) {
  std::vector<const tasks::TaskSuite*> out;
  for (const auto& s : suites) out.push_back(s.get());
  return out;
}

c10::Device DeviceOf(model::HybridLM& m) {
  for (const auto& p : m->parameters()) return p.device();
  return c10::Device(c10::kCPU);
}

// KL(teacher || student) on tokens [B, T], averaged over all tokens.
absl::StatusOr<at::Tensor> KdLoss(model::HybridLM& teacher, model::HybridLM& student,
                                  const at::Tensor& tokens) {
  at::Tensor teacher_logits;
  {
    torch::NoGradGuard no_grad;
    TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput t, teacher->Forward(tokens.to(DeviceOf(teacher))));
    teacher_logits = t.logits;
  }
  const c10::Device device = DeviceOf(student);
  TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput s, student->Forward(tokens.to(device)));
  return ForwardKl(teacher_logits.to(device), s.logits);
}

struct Checkpoint {
  int64_t step = 0;
  double kd_loss_before = std::numeric_limits<double>::quiet_NaN();
};

absl::Status SaveCheckpoint(const std::string& dir, const std::string& config_digest,
                            const std::string& options_digest, int64_t step, double kd_loss_before,
                            model::HybridLM& student, const torch::optim::Adam& optimizer) {
  torch::serialize::OutputArchive archive;
  archive.write("config_digest", c10::IValue(config_digest));
  archive.write("options_digest", c10::IValue(options_digest));
  // The next step is also the data-stream position: batches are a function of (seed, step).
  archive.write("step", c10::IValue(step));
  archive.write("kd_loss_before", c10::IValue(kd_loss_before));
  // Archive keys may not contain '.', so weights are stored by index with the names beside.
  const model::TensorMap weights = student->StateDict();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : weights) {
    archive.write(absl::StrCat("w", names.size()), tensor.detach().to(torch::kCPU));
    names.push_back(name);
  }
  archive.write("weight_names", c10::IValue(absl::StrJoin(names, "\n")));
  torch::serialize::OutputArchive adam(archive.compilation_unit());
  optimizer.save(adam);
  archive.write("optimizer", adam);
  std::ostringstream bytes;
  archive.save_to(bytes);

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(dir, ": cannot create: ", ec.message()));
  TAILOR_RETURN_IF_ERROR(
      model::WriteFileAtomically(absl::StrCat(dir, "/", kCheckpointFile), bytes.str()));
  // For people only; the authoritative digests live inside the checkpoint, so a crash
  // between these two writes cannot pair a stale meta file with a new checkpoint.
  return model::WriteFileAtomically(
      absl::StrCat(dir, "/", kMetaFile),
      absl::StrCat("student_config_digest ", config_digest, "\noptions_digest ", options_digest,
                   "\nstep ", step, "\n"));
}

// Restores the student and the optimizer from `bytes`. Returns nullopt (after logging why)
// when the checkpoint belongs to another run; errors only for a matching but unreadable one.
absl::StatusOr<std::optional<Checkpoint>> LoadCheckpoint(
    const std::string& bytes, const std::string& where, const std::string& config_digest,
    const std::string& options_digest, model::HybridLM& student, torch::optim::Adam& optimizer,
    const std::function<void(const std::string&)>& log) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(bytes.data(), bytes.size());
  } catch (const c10::Error& e) {
    log(absl::StrCat("ignoring checkpoint ", where, ": unreadable (", e.what_without_backtrace(),
                     ")"));
    return std::nullopt;
  }
  c10::IValue config, options, step, before, names;
  if (!archive.try_read("config_digest", config) || !archive.try_read("options_digest", options) ||
      !archive.try_read("step", step) || !archive.try_read("kd_loss_before", before) ||
      !archive.try_read("weight_names", names) || !config.isString() || !options.isString() ||
      !step.isInt() || !before.isDouble() || !names.isString()) {
    log(absl::StrCat("ignoring checkpoint ", where, ": not a distillation checkpoint"));
    return std::nullopt;
  }
  if (config.toStringRef() != config_digest) {
    log(absl::StrCat("ignoring checkpoint ", where, ": student config digest ",
                     config.toStringRef(), " != ", config_digest, " (another student)"));
    return std::nullopt;
  }
  if (options.toStringRef() != options_digest) {
    log(absl::StrCat("ignoring checkpoint ", where, ": options digest ", options.toStringRef(),
                     " != ", options_digest, " (other recovery settings, data or models)"));
    return std::nullopt;
  }
  // Same run from here on: a checkpoint that does not load is corrupt, not foreign.
  try {
    model::TensorMap weights;
    const std::vector<std::string> list = absl::StrSplit(names.toStringRef(), '\n');
    for (size_t i = 0; i < list.size(); ++i) {
      at::Tensor t;
      archive.read(absl::StrCat("w", i), t);
      weights[list[i]] = t;
    }
    TAILOR_RETURN_IF_ERROR(student->LoadStateDict(weights, where));
    torch::serialize::InputArchive adam;
    archive.read("optimizer", adam);
    optimizer.load(adam);
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", where, ": ", e.what_without_backtrace()));
  }
  Checkpoint c;
  c.step = step.toInt();
  c.kd_loss_before = before.toDouble();
  return std::optional<Checkpoint>(c);
}

absl::Status Validate(model::HybridLM& teacher, model::HybridLM& student, const DistillOptions& o) {
  const model::HybridConfig& t = teacher->config();
  const model::HybridConfig& s = student->config();
  if (t.vocab != s.vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("distill: teacher vocab ", t.vocab, " != student vocab ", s.vocab));
  }
  if (o.data == nullptr && s.vocab < tasks::kVocabSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "distill: vocab ", s.vocab, " is smaller than the task tokenizer's ", tasks::kVocabSize));
  }
  if (o.tokens < 0 || o.batch_sequences < 1 || o.sequence_length < 1 || !(o.learning_rate > 0) ||
      o.min_lr_ratio < 0 || o.min_lr_ratio > 1 || o.grad_clip < 0 || o.eval_batches < 0) {
    return absl::InvalidArgumentError(
        "distill: need tokens >= 0, batch_sequences >= 1, sequence_length >= 1, lr > 0, "
        "min_lr_ratio in [0, 1], grad_clip >= 0, eval_batches >= 0");
  }
  const int64_t max_seq = std::min(t.max_seq, s.max_seq);
  if (o.sequence_length > max_seq) {
    return absl::InvalidArgumentError(absl::StrCat("distill: sequence_length ", o.sequence_length,
                                                   " exceeds max_seq ", max_seq,
                                                   " of the teacher/student"));
  }
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("distill: rank ", o.rank, " outside world size ", o.world_size));
  }
  if (o.batch_sequences < o.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("distill: batch_sequences ", o.batch_sequences,
                                                   " < world size ", o.world_size,
                                                   " (every rank needs at least one sequence)"));
  }
  if (o.world_size > 1 && !o.after_backward) {
    return absl::InvalidArgumentError("distill: world_size > 1 needs an after_backward hook");
  }
  if (!o.checkpoint_dir.empty() && o.checkpoint_every_steps < 1) {
    return absl::InvalidArgumentError("distill: checkpoint_every_steps must be >= 1");
  }
  return absl::OkStatus();
}

using Log = std::function<void(const std::string&)>;

// Distill's notes (resumes, ignored checkpoints) go to the caller's log, or to stderr.
Log MakeLog(const DistillOptions& o) {
  return [&o](const std::string& line) {
    if (o.log) {
      o.log(line);
    } else {
      std::fprintf(stderr, "distill: %s\n", line.c_str());
    }
  };
}

// This run's checkpoint: where it lives and the digests a checkpoint must carry to be ours.
struct CheckpointIds {
  std::string config_digest;
  std::string options_digest;
  std::string path;
};

// The checkpoint's bytes, agreed by every rank through share_checkpoint: empty when there
// is none (or it cannot be read, which is logged and treated as none).
absl::StatusOr<std::string> CheckpointBytes(const DistillOptions& o, const std::string& path,
                                            const Log& log) {
  std::string bytes;
  if (std::filesystem::exists(path)) {
    absl::StatusOr<std::string> read = model::ReadFileToString(path);
    if (read.ok()) {
      bytes = *std::move(read);
    } else {
      log(absl::StrCat("ignoring checkpoint ", path, ": ", read.status().message()));
    }
  }
  if (o.share_checkpoint) TAILOR_RETURN_IF_ERROR(o.share_checkpoint(bytes));
  return bytes;
}

// Restores the student and optimizer from this run's checkpoint, if there is one, and
// returns the step to continue from (0: a fresh start).
absl::StatusOr<int64_t> Resume(const DistillOptions& o, const CheckpointIds& ids,
                               model::HybridLM& student, torch::optim::Adam& optimizer,
                               const Log& log, DistillResult& result) {
  if (o.checkpoint_dir.empty()) return 0;
  TAILOR_ASSIGN_OR_RETURN(std::string bytes, CheckpointBytes(o, ids.path, log));
  if (bytes.empty()) return 0;
  TAILOR_ASSIGN_OR_RETURN(std::optional<Checkpoint> c,
                          LoadCheckpoint(bytes, ids.path, ids.config_digest, ids.options_digest,
                                         student, optimizer, log));
  if (!c.has_value()) return 0;
  const int64_t start = std::min(c->step, result.steps);
  result.resumed_from_step = start;
  result.kd_loss_before = c->kd_loss_before;
  log(absl::StrCat("resumed from step ", start, " of ", result.steps, " (", ids.path, ")"));
  return start;
}

// This rank's rows [begin, end) of every batch, and the scale of its mean loss.
struct RankRows {
  int64_t begin = 0;
  int64_t end = 0;
  // Scales this rank's mean so the mean over ranks is the global batch mean (rows have equal
  // token counts), exact even for uneven splits.
  double share = 1.0;
};

RankRows RowsOfRank(const DistillOptions& o) {
  RankRows r;
  r.begin = o.rank * o.batch_sequences / o.world_size;
  r.end = (o.rank + 1) * o.batch_sequences / o.world_size;
  r.share = static_cast<double>((r.end - r.begin) * o.world_size) /
            static_cast<double>(o.batch_sequences);
  return r;
}

// One optimizer step at learning rate `lr` on this rank's rows of the step's batch.
// Returns the rank's scaled loss.
absl::StatusOr<at::Tensor> TrainStep(model::HybridLM& teacher, model::HybridLM& student,
                                     torch::optim::Adam& optimizer,
                                     const std::vector<at::Tensor>& params,
                                     const DistillOptions& o, const RankRows& rows, int64_t step,
                                     double lr) {
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
  }
  at::Tensor batch;
  if (o.data != nullptr) {
    TAILOR_ASSIGN_OR_RETURN(batch,
                            o.data->TrainRows(step, rows.end - rows.begin, o.sequence_length));
  } else {
    batch = DistillBatch(o.seed, step, o.batch_sequences, o.sequence_length)
                .slice(0, rows.begin, rows.end);
  }
  TAILOR_ASSIGN_OR_RETURN(at::Tensor kd, KdLoss(teacher, student, batch));
  at::Tensor loss = kd * rows.share;
  optimizer.zero_grad();
  loss.backward();
  if (o.after_backward) TAILOR_RETURN_IF_ERROR(o.after_backward(params));
  if (o.grad_clip > 0) torch::nn::utils::clip_grad_norm_(params, o.grad_clip);
  optimizer.step();
  return loss;
}

// Trains steps [start, result.steps), checkpointing on the cadence and at the end; a
// progress callback that returns false stops the run (checkpointed first).
absl::Status TrainSteps(model::HybridLM& teacher, model::HybridLM& student,
                        torch::optim::Adam& optimizer, const DistillOptions& o,
                        const CheckpointIds& ids, int64_t start,
                        const DistillProgress& progress, DistillResult& result) {
  const RankRows rows = RowsOfRank(o);
  const bool checkpointing = !o.checkpoint_dir.empty() && o.write_checkpoints;
  auto save = [&](int64_t step) {
    return SaveCheckpoint(o.checkpoint_dir, ids.config_digest, ids.options_digest, step,
                          result.kd_loss_before, student, optimizer);
  };
  const std::vector<at::Tensor> params = student->parameters();
  student->train();
  result.steps_done = start;
  for (int64_t step = start; step < result.steps; ++step) {
    const double lr = LearningRate(o, step, result.steps);
    TAILOR_ASSIGN_OR_RETURN(at::Tensor loss,
                            TrainStep(teacher, student, optimizer, params, o, rows, step, lr));
    result.steps_done = step + 1;

    bool saved = false;
    if (checkpointing && (result.steps_done % o.checkpoint_every_steps == 0 ||
                          result.steps_done == result.steps)) {
      TAILOR_RETURN_IF_ERROR(save(result.steps_done));
      saved = true;
    }
    if (progress && !progress({result.steps_done, result.steps, loss.item<double>(), lr})) {
      if (checkpointing && !saved) TAILOR_RETURN_IF_ERROR(save(result.steps_done));
      result.stopped = true;
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t DistillSteps(int64_t tokens, int64_t batch_sequences, int64_t sequence_length) {
  if (tokens <= 0 || batch_sequences <= 0 || sequence_length <= 0) return 0;
  return std::max<int64_t>(1, tokens / (batch_sequences * sequence_length));
}

at::Tensor DistillBatch(uint64_t seed, int64_t step, int64_t batch_sequences,
                        int64_t sequence_length) {
  const auto suites = tasks::AllSuites();
  tasks::TaskMixture mixture(Pointers(suites), MixSeed(seed, kTrainSalt, step),
                             tasks::Split::kTrain);
  return PackRows(mixture, batch_sequences, sequence_length);
}

absl::StatusOr<double> HeldOutKdLoss(model::HybridLM& teacher, model::HybridLM& student,
                                     uint64_t seed, int64_t batches, int64_t batch_sequences,
                                     int64_t sequence_length) {
  if (batches < 1) return absl::InvalidArgumentError("HeldOutKdLoss: batches must be >= 1");
  try {
    torch::NoGradGuard no_grad;
    const bool was_training = student->is_training();
    student->eval();
    const auto suites = tasks::AllSuites();
    tasks::TaskMixture mixture(Pointers(suites), MixSeed(seed, kEvalSalt, 0), tasks::Split::kEval);
    double sum = 0;
    for (int64_t b = 0; b < batches; ++b) {
      const at::Tensor tokens = PackRows(mixture, batch_sequences, sequence_length);
      TAILOR_ASSIGN_OR_RETURN(at::Tensor kd, KdLoss(teacher, student, tokens));
      sum += kd.item<double>();
    }
    student->train(was_training);
    return sum / static_cast<double>(batches);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("HeldOutKdLoss: ", e.what_without_backtrace()));
  }
}

namespace {

// The held-out KD loss: over the given batches, else over the task suites' evaluation split.
absl::StatusOr<double> HeldOut(model::HybridLM& teacher, model::HybridLM& student,
                               const DistillOptions& o) {
  if (o.held_out.empty()) {
    return HeldOutKdLoss(teacher, student, o.seed, o.eval_batches, o.batch_sequences,
                         o.sequence_length);
  }
  torch::NoGradGuard no_grad;
  const bool was_training = student->is_training();
  student->eval();
  double sum = 0;
  for (const at::Tensor& batch : o.held_out) {
    TAILOR_ASSIGN_OR_RETURN(at::Tensor kd, KdLoss(teacher, student, batch));
    sum += kd.item<double>();
  }
  student->train(was_training);
  return sum / static_cast<double>(o.held_out.size());
}

}  // namespace

absl::StatusOr<DistillResult> Distill(model::HybridLM& teacher, model::HybridLM& student,
                                      const DistillOptions& o, const DistillProgress& progress) {
  TAILOR_RETURN_IF_ERROR(Validate(teacher, student, o));
  const Log log = MakeLog(o);
  DistillResult result;
  result.steps = DistillSteps(o.tokens, o.batch_sequences, o.sequence_length);
  const CheckpointIds ids{Digest(model::HybridConfigToJson(student->config())),
                          OptionsDigest(o, teacher->config()),
                          absl::StrCat(o.checkpoint_dir, "/", kCheckpointFile)};
  try {
    teacher->eval();
    torch::optim::Adam optimizer(
        student->parameters(),
        torch::optim::AdamOptions(o.learning_rate).betas({0.9, 0.95}).weight_decay(0.0));
    TAILOR_ASSIGN_OR_RETURN(const int64_t start,
                            Resume(o, ids, student, optimizer, log, result));
    if (start == 0 && o.eval_batches > 0) {
      TAILOR_ASSIGN_OR_RETURN(result.kd_loss_before, HeldOut(teacher, student, o));
    }
    TAILOR_RETURN_IF_ERROR(
        TrainSteps(teacher, student, optimizer, o, ids, start, progress, result));
    student->eval();
    result.tokens_trained = result.steps_done * o.batch_sequences * o.sequence_length;
    if (!result.stopped && o.eval_batches > 0) {
      TAILOR_ASSIGN_OR_RETURN(result.kd_loss_after, HeldOut(teacher, student, o));
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("distill: ", e.what_without_backtrace()));
  }
  return result;
}

}  // namespace tailor::autocompress
