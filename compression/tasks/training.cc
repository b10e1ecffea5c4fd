#include "compression/tasks/training.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::tasks {

using model::HybridConfig;
using model::HybridLM;
using model::LayerSpec;

HybridConfig DefaultParentConfig() {
  HybridConfig c;
  c.vocab = kVocabSize;
  c.hidden = 128;
  c.max_seq = 64;
  c.rope_theta = 10000.0;
  c.norm_eps = 1e-5;
  const LayerSpec attention = LayerSpec::Attention(4, 2, 32);
  const LayerSpec mamba = LayerSpec::Mamba(4, 32, 16, 4, 16);
  const LayerSpec moe = LayerSpec::Moe(4, 2, 128, 128);
  c.layers = {attention, mamba, moe, attention, mamba, LayerSpec::Mlp(256), attention, moe};
  return c;
}

Batch MakeBatch(const std::vector<Sample>& samples) {
  int64_t t = 0;
  for (const Sample& s : samples) t = std::max<int64_t>(t, s.tokens.size() - 1);
  const int64_t b = samples.size();
  std::vector<int64_t> inputs(b * t, kPad), targets(b * t, -100);
  for (int64_t i = 0; i < b; ++i) {
    const Sample& s = samples[i];
    for (int64_t j = 0; j + 1 < static_cast<int64_t>(s.tokens.size()); ++j) {
      inputs[i * t + j] = s.tokens[j];
      // Position j predicts token j + 1; learn it only inside the answer.
      if (j + 1 >= s.answer_begin) targets[i * t + j] = s.tokens[j + 1];
    }
  }
  Batch batch;
  batch.inputs = torch::tensor(inputs, torch::kLong).view({b, t});
  batch.targets = torch::tensor(targets, torch::kLong).view({b, t});
  return batch;
}

at::Tensor AnswerLoss(const at::Tensor& logits, const at::Tensor& targets) {
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}).to(logits.device()),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

namespace {

double LearningRate(const TrainOptions& o, int64_t step) {
  if (step < o.warmup_steps) return o.lr * (step + 1) / o.warmup_steps;
  const double progress =
      static_cast<double>(step - o.warmup_steps) / std::max<int64_t>(1, o.steps - o.warmup_steps);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
  return o.lr * (o.min_lr_ratio + (1.0 - o.min_lr_ratio) * cosine);
}

}  // namespace

absl::StatusOr<TrainResult> TrainOnSamples(HybridLM& model, const SampleSource& next_batch,
                                           const TrainOptions& options) {
  if (options.steps < 0 || options.batch_size < 1) {
    return absl::InvalidArgumentError("training: need steps >= 0, batch_size >= 1");
  }
  try {
    if (options.threads > 0) torch::set_num_threads(options.threads);
    std::vector<at::Tensor> decay, no_decay;
    for (const auto& p : model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(options.lr)
                                       .betas({0.9, 0.95})
                                       .weight_decay(options.weight_decay)));
    groups.emplace_back(
        no_decay, std::make_unique<torch::optim::AdamWOptions>(
                      torch::optim::AdamWOptions(options.lr).betas({0.9, 0.95}).weight_decay(0.0)));
    torch::optim::AdamW optimizer(std::move(groups));
    model->train();
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&start] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    double ema = 0;
    for (int64_t step = 0; step < options.steps; ++step) {
      const double lr = LearningRate(options, step);
      for (auto& g : optimizer.param_groups()) {
        static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
      }
      TAILOR_ASSIGN_OR_RETURN(std::vector<Sample> samples, next_batch());
      Batch batch = MakeBatch(samples);
      TAILOR_ASSIGN_OR_RETURN(model::ForwardOutput out, model->Forward(batch.inputs));
      at::Tensor answer_loss = AnswerLoss(out.logits, batch.targets);
      at::Tensor loss = answer_loss + options.aux_loss_weight * out.aux_loss;
      optimizer.zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), options.grad_clip);
      optimizer.step();
      const double l = answer_loss.item<double>();
      ema = step == 0 ? l : 0.98 * ema + 0.02 * l;
      if (options.on_progress && ((options.log_every > 0 && (step + 1) % options.log_every == 0) ||
                                  step + 1 == options.steps)) {
        options.on_progress({step + 1, ema, lr, elapsed()});
      }
    }
    model->eval();
    return TrainResult{options.steps, elapsed(), ema};
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("training: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<TrainResult> TrainOnTasks(HybridLM& model,
                                         const std::vector<const TaskSuite*>& suites,
                                         const TrainOptions& options) {
  if (suites.empty() || options.steps < 0 || options.batch_size < 1) {
    return absl::InvalidArgumentError("TrainOnTasks: need suites, steps >= 0, batch_size >= 1");
  }
  for (const TaskSuite* s : suites) {
    if (s->max_length() > model->config().max_seq + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("task ", s->name(), " needs max_seq >= ", s->max_length() - 1));
    }
  }
  TaskMixture stream(suites, options.seed, Split::kTrain);
  // Batches come from a pool of kPool batches sorted by length: padding shrinks by about
  // a third, and batches still mix several tasks. Batch order is shuffled.
  constexpr int64_t kPool = 8;
  Rng order_rng(options.seed ^ 0x5eedull);
  std::vector<std::vector<Sample>> ready;
  return TrainOnSamples(
      model,
      [&]() -> absl::StatusOr<std::vector<Sample>> {
        if (ready.empty()) {
          std::vector<Sample> pool;
          for (int64_t i = 0; i < kPool * options.batch_size; ++i) pool.push_back(stream.Next());
          std::stable_sort(pool.begin(), pool.end(), [](const Sample& a, const Sample& b) {
            return a.tokens.size() < b.tokens.size();
          });
          for (int64_t k = 0; k < kPool; ++k) {
            ready.emplace_back(pool.begin() + k * options.batch_size,
                               pool.begin() + (k + 1) * options.batch_size);
          }
          for (int64_t k = kPool - 1; k > 0; --k) {
            std::swap(ready[k], ready[order_rng.Uniform(0, k)]);
          }
        }
        std::vector<Sample> batch = std::move(ready.back());
        ready.pop_back();
        return batch;
      },
      options);
}

absl::StatusOr<EvalResult> Evaluate(HybridLM& model, const TaskSuite& suite, int64_t n,
                                    uint64_t seed) {
  EvalResult result;
  result.task = std::string(suite.name());
  Rng rng(seed);
  std::vector<Sample> samples;
  for (int64_t i = 0; i < n; ++i) samples.push_back(suite.Generate(rng, Split::kEval));
  // Same-length prompts share one batched prefill and decode loop.
  std::map<int64_t, std::vector<const Sample*>> by_length;
  for (const Sample& s : samples) by_length[s.answer_begin].push_back(&s);
  constexpr size_t kMaxBatch = 64;
  try {
    for (const auto& [prompt_len, group] : by_length) {
      for (size_t begin = 0; begin < group.size(); begin += kMaxBatch) {
        const std::vector<const Sample*> part(
            group.begin() + begin, group.begin() + std::min(group.size(), begin + kMaxBatch));
        const int64_t b = part.size();
        int64_t answer_len = 0;
        std::vector<int64_t> prompt;
        for (const Sample* s : part) {
          answer_len = std::max<int64_t>(answer_len, s->tokens.size() - s->answer_begin);
          for (int64_t j = 0; j < prompt_len; ++j) prompt.push_back(s->tokens[j]);
        }
        TAILOR_ASSIGN_OR_RETURN(model::InferenceCache cache,
                                model->NewCache(b, prompt_len + answer_len - 1));
        model::ForwardOptions last;
        last.last_position_only = true;
        TAILOR_ASSIGN_OR_RETURN(
            at::Tensor logits,
            model->Prefill(torch::tensor(prompt, torch::kLong).view({b, prompt_len}), cache, last));
        at::Tensor next = logits.select(1, 0).argmax(-1);
        std::vector<at::Tensor> generated = {next};
        for (int64_t step = 1; step < answer_len; ++step) {
          TAILOR_ASSIGN_OR_RETURN(at::Tensor step_logits, model->DecodeStep(next, cache));
          next = step_logits.argmax(-1);
          generated.push_back(next);
        }
        at::Tensor out = torch::stack(generated, 1).to(torch::kCPU).contiguous();
        auto acc = out.accessor<int64_t, 2>();
        for (int64_t i = 0; i < b; ++i) {
          const Sample& s = *part[i];
          bool ok = true;
          for (int64_t j = s.answer_begin; j < static_cast<int64_t>(s.tokens.size()); ++j) {
            ok = ok && acc[i][j - s.answer_begin] == s.tokens[j];
          }
          result.correct += ok ? 1 : 0;
          result.total += 1;
        }
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("Evaluate: ", e.what_without_backtrace()));
  }
  return result;
}

}  // namespace tailor::tasks
