// Recovery distillation: KD loss falls, a stopped-and-resumed run equals an uninterrupted
// one, foreign checkpoints are ignored, two data-parallel ranks equal one full-batch rank,
// and the step / token arithmetic.

#include "compression/autocompress/distill.h"

#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <set>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "compression/autocompress/dataset_rows.h"
#include "compression/autocompress/text_quality.h"
#include "compression/data/text_dataset.h"
#include "compression/model/hybrid_lm.h"
#include "compression/tasks/tokenizer.h"
#include "gtest/gtest.h"

namespace tailor::autocompress {
namespace {

using model::HybridConfig;
using model::HybridLM;
using model::LayerSpec;

HybridConfig Config(int64_t hidden, int64_t heads, int64_t ffn) {
  HybridConfig c;
  c.vocab = tasks::kVocabSize;
  c.hidden = hidden;
  c.max_seq = 16;
  c.layers = {LayerSpec::Attention(heads, heads / 2, 8), LayerSpec::Mlp(ffn)};
  return c;
}
HybridConfig TeacherConfig() { return Config(32, 4, 64); }
HybridConfig StudentConfig() { return Config(16, 2, 32); }

HybridLM Make(const HybridConfig& c, uint64_t seed) {
  absl::StatusOr<HybridLM> m = model::CreateHybridLM(c, seed);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

DistillOptions SmallOptions(int64_t steps, int64_t batch = 4) {
  DistillOptions o;
  o.batch_sequences = batch;
  o.sequence_length = 16;
  o.tokens = steps * batch * 16;
  o.learning_rate = 3e-3;
  o.seed = 7;
  o.eval_batches = 2;
  o.log = [](const std::string&) {};
  return o;
}

double MaxAbsDiff(const HybridLM& a, const HybridLM& b) {
  const model::TensorMap wa = a->StateDict(), wb = b->StateDict();
  EXPECT_EQ(wa.size(), wb.size());
  double worst = 0;
  for (const auto& [name, t] : wa) {
    worst = std::max(worst, (t - wb.at(name)).abs().max().item<double>());
  }
  return worst;
}

std::string TempDir(const std::string& name) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("tailor_distill_test_" + name + "_" + std::to_string(::getpid())))
                              .string();
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(DistillStepsTest, Arithmetic) {
  EXPECT_EQ(DistillSteps(2'000'000, 32, 64), 976);  // floor(2e6 / 2048)
  EXPECT_EQ(DistillSteps(4096, 32, 64), 2);
  EXPECT_EQ(DistillSteps(4097, 32, 64), 2);
  EXPECT_EQ(DistillSteps(100, 32, 64), 1);  // a positive budget trains one batch
  EXPECT_EQ(DistillSteps(0, 32, 64), 0);
}

TEST(DistillBatchTest, DeterministicPerStepAndPacked) {
  const at::Tensor a = DistillBatch(7, 3, 4, 16);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{4, 16}));
  EXPECT_TRUE(torch::equal(a, DistillBatch(7, 3, 4, 16)));
  EXPECT_FALSE(torch::equal(a, DistillBatch(7, 4, 4, 16)));
  EXPECT_FALSE(torch::equal(a, DistillBatch(8, 3, 4, 16)));
  EXPECT_LT(a.max().item<int64_t>(), tasks::kVocabSize);
  EXPECT_EQ(a.eq(tasks::kPad).sum().item<int64_t>(), 0);  // packed: no padding
}

TEST(DistillTest, KdLossDecreasesAndTokensAreCounted) {
  HybridLM teacher = Make(TeacherConfig(), 1);
  HybridLM student = Make(StudentConfig(), 2);
  DistillOptions o = SmallOptions(12, 8);
  o.learning_rate = 1e-2;
  std::vector<int64_t> seen;
  absl::StatusOr<DistillResult> r = Distill(teacher, student, o, [&](const DistillStep& s) {
    seen.push_back(s.step);
    EXPECT_EQ(s.steps, 12);
    EXPECT_GT(s.loss, 0.0);
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 12);
  EXPECT_EQ(r->steps_done, 12);
  EXPECT_EQ(r->tokens_trained, 12 * 8 * 16);
  EXPECT_EQ(r->resumed_from_step, 0);
  EXPECT_FALSE(r->stopped);
  ASSERT_EQ(seen.size(), 12u);
  EXPECT_EQ(seen.front(), 1);
  EXPECT_EQ(seen.back(), 12);
  EXPECT_GT(r->kd_loss_before, 0.0);
  EXPECT_LT(r->kd_loss_after, 0.8 * r->kd_loss_before);
  // The teacher is frozen.
  EXPECT_EQ(MaxAbsDiff(teacher, Make(TeacherConfig(), 1)), 0.0);
}

TEST(DistillTest, StopAndResumeEqualsUninterruptedRun) {
  HybridLM teacher = Make(TeacherConfig(), 1);
  DistillOptions o = SmallOptions(6);
  o.checkpoint_every_steps = 3;

  HybridLM straight = Make(StudentConfig(), 2);
  o.checkpoint_dir = TempDir("straight");
  absl::StatusOr<DistillResult> full = Distill(teacher, straight, o);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->steps_done, 6);

  o.checkpoint_dir = TempDir("resumed");
  HybridLM first = Make(StudentConfig(), 2);
  absl::StatusOr<DistillResult> part =
      Distill(teacher, first, o, [](const DistillStep& s) { return s.step < 3; });
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_TRUE(part->stopped);
  EXPECT_EQ(part->steps_done, 3);
  EXPECT_EQ(part->tokens_trained, 3 * 4 * 16);
  EXPECT_TRUE(std::isnan(part->kd_loss_after));
  EXPECT_TRUE(std::filesystem::exists(o.checkpoint_dir + "/checkpoint.pt"));
  EXPECT_TRUE(std::filesystem::exists(o.checkpoint_dir + "/meta.txt"));

  // A new process would reload the student from its artifact: start from fresh weights.
  std::vector<std::string> logs;
  o.log = [&](const std::string& l) { logs.push_back(l); };
  HybridLM second = Make(StudentConfig(), 2);
  std::vector<int64_t> seen;
  absl::StatusOr<DistillResult> rest = Distill(teacher, second, o, [&](const DistillStep& s) {
    seen.push_back(s.step);
    return true;
  });
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(rest->resumed_from_step, 3);
  EXPECT_EQ(rest->steps_done, 6);
  EXPECT_EQ(rest->tokens_trained, 6 * 4 * 16);
  EXPECT_EQ(seen, (std::vector<int64_t>{4, 5, 6}));
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("resumed from step 3 of 6"), std::string::npos) << logs[0];
  // The pre-training loss travels in the checkpoint.
  EXPECT_EQ(rest->kd_loss_before, full->kd_loss_before);
  EXPECT_LE(MaxAbsDiff(straight, second), 1e-6);
  EXPECT_EQ(rest->kd_loss_after, full->kd_loss_after);

  std::filesystem::remove_all(TempDir("straight"));
  std::filesystem::remove_all(o.checkpoint_dir);
}

TEST(DistillTest, CheckpointOfAnotherStudentIsIgnored) {
  HybridLM teacher = Make(TeacherConfig(), 1);
  DistillOptions o = SmallOptions(4);
  o.eval_batches = 0;
  o.checkpoint_every_steps = 2;
  o.checkpoint_dir = TempDir("foreign");
  HybridLM other = Make(Config(16, 2, 48), 2);
  ASSERT_TRUE(Distill(teacher, other, o).ok());
  ASSERT_TRUE(std::filesystem::exists(o.checkpoint_dir + "/checkpoint.pt"));

  std::vector<std::string> logs;
  o.log = [&](const std::string& l) { logs.push_back(l); };
  HybridLM student = Make(StudentConfig(), 2);
  absl::StatusOr<DistillResult> r = Distill(teacher, student, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resumed_from_step, 0);
  EXPECT_EQ(r->steps_done, 4);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("student config digest"), std::string::npos) << logs[0];

  // Same student, other recovery settings: ignored too.
  logs.clear();
  o.learning_rate *= 2;
  HybridLM again = Make(StudentConfig(), 2);
  r = Distill(teacher, again, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resumed_from_step, 0);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("options digest"), std::string::npos) << logs[0];
  std::filesystem::remove_all(o.checkpoint_dir);
}

// Two in-process "ranks" meet in the hook and average their gradients, as
// Dist::AverageGradients does over Gloo.
class GradExchange {
 public:
  explicit GradExchange(int world) : slots_(world) {}

  absl::Status Average(int rank, const std::vector<at::Tensor>& params) {
    std::unique_lock<std::mutex> lock(mu_);
    slots_[rank] = params;
    const int64_t generation = generation_;
    if (++arrived_ < static_cast<int>(slots_.size())) {
      cv_.wait(lock, [&] { return generation_ != generation; });
      return absl::OkStatus();
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor sum = torch::zeros_like(slots_[0][i]);
      for (const auto& slot : slots_) {
        if (slot[i].grad().defined()) sum += slot[i].grad();
      }
      const at::Tensor mean = sum / static_cast<double>(slots_.size());
      for (auto& slot : slots_) slot[i].mutable_grad() = mean.clone();
    }
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<at::Tensor>> slots_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

TEST(DistillTest, TwoRanksWithAveragedGradientsEqualOneFullBatch) {
  // 5 rows: rank 0 gets 2, rank 1 gets 3; the loss scaling keeps the mean exact.
  DistillOptions o = SmallOptions(3, 5);
  o.eval_batches = 0;
  HybridLM teacher = Make(TeacherConfig(), 1);
  HybridLM single = Make(StudentConfig(), 2);
  absl::StatusOr<DistillResult> one = Distill(teacher, single, o);
  ASSERT_TRUE(one.ok()) << one.status();

  // Models are built before the threads: CreateHybridLM seeds the global generator.
  std::vector<HybridLM> teachers = {Make(TeacherConfig(), 1), Make(TeacherConfig(), 1)};
  std::vector<HybridLM> students = {Make(StudentConfig(), 2), Make(StudentConfig(), 2)};
  GradExchange exchange(2);
  std::vector<absl::StatusOr<DistillResult>> results(2, absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      DistillOptions ro = o;
      ro.rank = r;
      ro.world_size = 2;
      ro.after_backward = [&exchange, r](const std::vector<at::Tensor>& params) {
        return exchange.Average(r, params);
      };
      results[r] = Distill(teachers[r], students[r], ro);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].status();
    EXPECT_EQ(results[r]->steps_done, 3);
    EXPECT_EQ(results[r]->tokens_trained, 3 * 5 * 16);  // global tokens on every rank
  }
  EXPECT_EQ(MaxAbsDiff(students[0], students[1]), 0.0);
  EXPECT_LE(MaxAbsDiff(single, students[0]), 1e-5);
}

TEST(DistillTest, RejectsBadSetups) {
  HybridLM teacher = Make(TeacherConfig(), 1);
  HybridLM student = Make(StudentConfig(), 2);
  DistillOptions o = SmallOptions(1);
  o.sequence_length = 17;  // > max_seq 16
  EXPECT_EQ(Distill(teacher, student, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallOptions(1);
  o.world_size = 2;  // no gradient hook
  EXPECT_EQ(Distill(teacher, student, o).status().code(), absl::StatusCode::kInvalidArgument);
  HybridConfig small_vocab = StudentConfig();
  small_vocab.vocab = 32;
  HybridLM other = Make(small_vocab, 2);
  EXPECT_EQ(Distill(teacher, other, SmallOptions(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A JSONL of `n` documents of 3..12 token ids (below the task vocabulary), in `dir`.
std::string WriteDocuments(const std::string& dir, int n) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/docs.jsonl";
  std::ofstream out(path);
  for (int d = 0; d < n; ++d) {
    out << "{\"input_ids\": [";
    for (int t = 0; t < 3 + d % 10; ++t) out << (t ? ", " : "") << 4 + (d * 7 + t * 3) % 60;
    out << "]}\n";
  }
  return path;
}

DatasetRows::OpenReader Opener(const std::string& path, int rank, int world) {
  return [=](int64_t epoch) {
    data::TextDatasetOptions o;
    o.sequence_tokens = 16;
    o.vocab_size = tasks::kVocabSize;
    o.eos = tasks::kEos;
    o.shuffle_window = 4;
    o.seed = 7 + static_cast<uint64_t>(epoch);
    return data::TextDatasetReader::Open(path, o, nullptr, rank, world);
  };
}

TEST(DatasetRowsTest, RanksReadDisjointDocumentsAndAResumeReadsTheSameRows) {
  const std::string dir = TempDir("rows");
  const std::string path = WriteDocuments(dir, 40);
  std::vector<std::set<int64_t>> seen(2);
  std::vector<at::Tensor> rank0_batches;
  for (int rank = 0; rank < 2; ++rank) {
    DatasetRows rows(Opener(path, rank, 2));
    for (int64_t step = 0; step < 12; ++step) {  // past one epoch: the data cycles
      absl::StatusOr<at::Tensor> b = rows.TrainRows(step, 2, 16);
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_EQ(b->sizes(), (std::vector<int64_t>{2, 16}));
      if (rank == 0) rank0_batches.push_back(*b);
    }
    for (const int64_t d : rows.documents()) {
      EXPECT_EQ(d % 2, rank) << "document " << d << " read by rank " << rank;
      seen[rank].insert(d);
    }
    EXPECT_EQ(rows.rows_read(), 24);
  }
  EXPECT_EQ(seen[0].size() + seen[1].size(), 40u);  // every document, each by one rank
  // A retried attempt resuming at step 7 reads what the first attempt read from there.
  DatasetRows resumed(Opener(path, 0, 2));
  for (int64_t step = 7; step < 12; ++step) {
    absl::StatusOr<at::Tensor> b = resumed.TrainRows(step, 2, 16);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(torch::equal(*b, rank0_batches[step])) << "step " << step;
  }
  EXPECT_EQ(resumed.TrainRows(3, 2, 16).status().code(), absl::StatusCode::kInternal);
  std::filesystem::remove_all(dir);
}

TEST(DatasetRowsTest, DistillTrainsOnTheDataAndReportsTextQuality) {
  const std::string dir = TempDir("data_distill");
  const std::string path = WriteDocuments(dir, 60);
  HybridLM teacher = Make(TeacherConfig(), 1);
  HybridLM student = Make(StudentConfig(), 2);
  DatasetRows held(Opener(path, 0, 1));
  DistillOptions o = SmallOptions(8);
  o.held_out = {held.TrainRows(0, 4, 16).value()};  // any [rows, 16] batch will do here
  DatasetRows training(Opener(path, 0, 1));
  o.data = &training;
  absl::StatusOr<DistillResult> r = Distill(teacher, student, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps_done, 8);
  EXPECT_LT(r->kd_loss_after, r->kd_loss_before);
  EXPECT_EQ(training.rows_read(), 8 * 4);

  data::TextDatasetOptions eval;
  eval.sequence_tokens = 16;
  eval.vocab_size = tasks::kVocabSize;
  eval.packing = false;
  auto reader = data::TextDatasetReader::Open(path, eval, nullptr);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<TextQuality> q = EvaluateText(teacher, student, **reader);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->sequences, 60);
  int64_t tokens = 0;
  for (int d = 0; d < 60; ++d) tokens += 3 + d % 10 - 1;
  EXPECT_EQ(q->tokens, tokens);
  const double teacher_ppl = TextQuality::Perplexity(q->teacher, q->tokens);
  EXPECT_GT(teacher_ppl, 1.0);
  EXPECT_LT(teacher_ppl, 2.0 * tasks::kVocabSize);  // a random model is near uniform

  // One document by hand: the perplexity is exp of the mean next-token NLL.
  const std::string one = WriteDocuments(dir + "/one", 1);  // ids 4, 7, 10
  auto single = data::TextDatasetReader::Open(one, eval, nullptr);
  ASSERT_TRUE(single.ok()) << single.status();
  absl::StatusOr<TextQuality> q1 = EvaluateText(teacher, student, **single);
  ASSERT_TRUE(q1.ok()) << q1.status();
  ASSERT_EQ(q1->tokens, 2);
  torch::NoGradGuard no_grad;
  const at::Tensor ids = torch::tensor({4, 7, 10}, torch::kLong).reshape({1, 3});
  const at::Tensor logp = torch::log_softmax(teacher->Forward(ids).value().logits[0], -1);
  const double nll = -(logp[0][7].item<double>() + logp[1][10].item<double>());
  EXPECT_NEAR(q1->teacher.nll_sum, nll, 1e-5);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tailor::autocompress
