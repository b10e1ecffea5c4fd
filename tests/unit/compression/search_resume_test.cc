// RunSearch across interruptions and ranks: a run stopped after 3 steps and resumed from
// its checkpoint by a fresh process state ends exactly where an uninterrupted 6-step run
// ends; a checkpoint of another search is ignored; a packed checkpoint resumes elsewhere;
// and two "ranks" (threads) holding half of every global batch each, with gradients and
// the KD loss averaged in the hooks, follow the single full-batch run.

#include <torch/torch.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/autocompress/search.h"
#include "compression/model/hybrid_lm.h"
#include "gtest/gtest.h"

namespace tailor::autocompress {
namespace {

namespace fs = std::filesystem;
using model::HybridConfig;
using model::LayerSpec;

HybridConfig TinyConfig() {
  HybridConfig c;
  c.vocab = 20;
  c.hidden = 16;
  c.max_seq = 16;
  c.layers = {LayerSpec::Mlp(32), LayerSpec::Attention(4, 2, 8)};
  return c;
}

std::string TempDir(const std::string& name) {
  const fs::path p =
      fs::path(::testing::TempDir()) / absl::StrCat("search_resume_", name, "_", ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// Memory "MiB" = expected hidden width + expected MLP width / 4 of a sample.
CostPredictor ToyCost(const SearchSpace& space) {
  const std::vector<int64_t> hidden = space.axes[0].widths;
  const std::vector<int64_t> mlp = space.axes[1].widths;
  return [hidden, mlp](const std::vector<at::Tensor>& y) -> absl::StatusOr<CostPrediction> {
    CostPrediction p;
    p.memory_mib = (y[0] * torch::tensor(hidden, torch::kFloat)).sum() +
                   0.25 * (y[1] * torch::tensor(mlp, torch::kFloat)).sum();
    return p;
  };
}

SearchOptions Options() {
  SearchOptions o;
  o.schedule.steps = 6;
  o.samples = 2;
  o.alpha = 1.0;
  o.router.hidden = 16;
  o.router.learning_rate = 0.05;
  o.supernet_lr = 1e-3;  // the supernet and its Adam state are part of the checkpoint
  o.stop_when_converged = false;
  o.seed = 7;
  // No annealing: at the default end temperature the samples are one-hot to float precision
  // after a few steps, and a resume that lost the Gumbel generator's state could pass.
  o.schedule.k_end = 1.0;
  o.schedule.tau_end = 1.0;
  return o;
}

struct Models {
  model::HybridLM parent{nullptr};
  model::HybridLM supernet{nullptr};
};

Models Fresh(const HybridConfig& c) {
  return {*model::CreateHybridLM(c, 1), *model::CreateHybridLM(c, 1)};
}

void ExpectSameProbabilities(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b,
                             double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE((a[i] - b[i]).abs().max().item<double>(), tol) << "axis " << i << "\n"
                                                             << a[i] << "\n"
                                                             << b[i];
  }
}

class SearchResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(3);
    data_ = torch::randint(0, config_.vocab, {6, 4, 8}, torch::kLong);
    space_ = *BuildSearchSpace(config_);
    budgets_.memory_mib = 8.0;
  }
  BatchSource Batches() {
    return [this](int64_t step) -> absl::StatusOr<at::Tensor> { return data_[step]; };
  }

  HybridConfig config_ = TinyConfig();
  at::Tensor data_;
  SearchSpace space_;
  Budgets budgets_;
};

TEST_F(SearchResumeTest, ResumedRunEqualsUninterruptedRun) {
  // Uninterrupted: 6 steps, checkpoints at 3 and 6.
  SearchOptions o = Options();
  o.checkpoint_dir = TempDir("full");
  o.checkpoint_every = 3;
  Models a = Fresh(config_);
  ArchRouter router_a(space_, o.router);
  absl::StatusOr<SearchResult> full =
      RunSearch(a.parent, a.supernet, space_, router_a, Batches(), ToyCost(space_), budgets_, o);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->steps_run, 6);
  EXPECT_EQ(full->resumed_from, 0);
  EXPECT_TRUE(fs::exists(fs::path(o.checkpoint_dir) / "search.meta"));
  EXPECT_TRUE(fs::exists(fs::path(o.checkpoint_dir) / "step-6"));
  EXPECT_FALSE(fs::exists(fs::path(o.checkpoint_dir) / "step-3"));  // superseded

  // Interrupted after 3 steps (the progress callback stops it, as a cancellation would).
  o.checkpoint_dir = TempDir("split");
  {
    Models b = Fresh(config_);
    ArchRouter router_b(space_, o.router);
    absl::StatusOr<SearchResult> first =
        RunSearch(b.parent, b.supernet, space_, router_b, Batches(), ToyCost(space_), budgets_, o,
                  [](const StepReport& r) { return r.step < 2; });
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->steps_run, 3);
  }
  const std::string digest = SearchDigest(config_, space_, budgets_, o);
  EXPECT_EQ(CheckpointStep(o.checkpoint_dir, digest), 3);
  // A new "process": new router (same seed), supernet back at the parent's weights.
  Models c = Fresh(config_);
  ArchRouter router_c(space_, o.router);
  std::vector<int64_t> steps;
  absl::StatusOr<SearchResult> resumed =
      RunSearch(c.parent, c.supernet, space_, router_c, Batches(), ToyCost(space_), budgets_, o,
                [&](const StepReport& r) {
                  steps.push_back(r.step);
                  return true;
                });
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->resumed_from, 3);
  EXPECT_EQ(resumed->steps_run, 6);
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 4, 5}));
  ExpectSameProbabilities(resumed->probabilities, full->probabilities, 1e-6);
  EXPECT_NEAR(resumed->kd_loss, full->kd_loss, 1e-6);
  for (const auto& [name, t] : a.supernet->StateDict()) {
    EXPECT_LE((t - c.supernet->StateDict().at(name)).abs().max().item<double>(), 1e-6) << name;
  }
  // Sanity: the search moved away from uniform, so equality above is not vacuous.
  EXPECT_GT((full->probabilities[0] - 0.25).abs().max().item<double>(), 1e-3);

  // Nothing left to run: resuming a finished run only reports it.
  Models d = Fresh(config_);
  ArchRouter router_d(space_, o.router);
  absl::StatusOr<SearchResult> done =
      RunSearch(d.parent, d.supernet, space_, router_d, Batches(), ToyCost(space_), budgets_, o);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->resumed_from, 6);
  EXPECT_EQ(done->steps_run, 6);
  ExpectSameProbabilities(done->probabilities, full->probabilities, 1e-6);
}

TEST_F(SearchResumeTest, ForeignCheckpointIsIgnoredAndPackedCheckpointResumesElsewhere) {
  SearchOptions o = Options();
  o.checkpoint_dir = TempDir("foreign");
  o.checkpoint_every = 3;
  Models a = Fresh(config_);
  ArchRouter router_a(space_, o.router);
  ASSERT_TRUE(RunSearch(a.parent, a.supernet, space_, router_a, Batches(), ToyCost(space_),
                        budgets_, o, [](const StepReport& r) { return r.step < 2; })
                  .ok());

  // Packed on one "host", unpacked on another, resumed read-only there.
  absl::StatusOr<std::string> blob = PackCheckpoint(o.checkpoint_dir);
  ASSERT_TRUE(blob.ok()) << blob.status();
  ASSERT_FALSE(blob->empty());
  SearchOptions other = o;
  other.checkpoint_dir = TempDir("unpacked");
  other.write_checkpoints = false;
  ASSERT_TRUE(UnpackCheckpoint(*blob, other.checkpoint_dir).ok());
  Models b = Fresh(config_);
  ArchRouter router_b(space_, o.router);
  absl::StatusOr<SearchResult> r = RunSearch(b.parent, b.supernet, space_, router_b, Batches(),
                                             ToyCost(space_), budgets_, other);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resumed_from, 3);
  EXPECT_FALSE(fs::exists(fs::path(other.checkpoint_dir) / "step-6"));  // read-only
  EXPECT_TRUE(PackCheckpoint(TempDir("empty"))->empty());
  EXPECT_FALSE(UnpackCheckpoint("garbage", TempDir("garbage")).ok());

  // Another search (other alpha) must not load it, and takes the directory over.
  SearchOptions changed = o;
  changed.alpha = 0.5;
  EXPECT_EQ(CheckpointStep(o.checkpoint_dir, SearchDigest(config_, space_, budgets_, changed)), 0);
  Models c = Fresh(config_);
  ArchRouter router_c(space_, changed.router);
  r = RunSearch(c.parent, c.supernet, space_, router_c, Batches(), ToyCost(space_), budgets_,
                changed);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ignored_foreign_checkpoint);
  EXPECT_EQ(r->resumed_from, 0);
  EXPECT_EQ(r->steps_run, 6);
  EXPECT_EQ(CheckpointStep(o.checkpoint_dir, SearchDigest(config_, space_, budgets_, changed)), 6);
}

// Averages tensors across `n` threads, one call per thread per round (a tiny all-reduce).
class ThreadAllReduce {
 public:
  explicit ThreadAllReduce(int n) : n_(n), slots_(n) {}

  void Mean(int rank, const std::vector<at::Tensor>& tensors) {
    std::unique_lock<std::mutex> lock(mu_);
    slots_[rank].clear();
    for (const at::Tensor& t : tensors) slots_[rank].push_back(t.detach().clone());
    const int64_t round = round_;
    if (++arrived_ == n_) {
      // Summed in rank order, so every rank gets bit-identical values.
      mean_.clear();
      for (size_t i = 0; i < tensors.size(); ++i) {
        at::Tensor s = slots_[0][i].clone();
        for (int r = 1; r < n_; ++r) s += slots_[r][i];
        mean_.push_back(s / n_);
      }
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(mean_[i]);
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t round_ = 0;
  std::vector<std::vector<at::Tensor>> slots_;
  std::vector<at::Tensor> mean_;
};

TEST_F(SearchResumeTest, TwoRanksWithHalfBatchesFollowTheFullBatchRun) {
  torch::set_num_threads(1);
  SearchOptions o = Options();
  o.schedule.steps = 5;
  Models single = Fresh(config_);
  ArchRouter router(space_, o.router);
  std::vector<double> single_kd;
  absl::StatusOr<SearchResult> full =
      RunSearch(single.parent, single.supernet, space_, router, Batches(), ToyCost(space_),
                budgets_, o, [&](const StepReport& r) {
                  single_kd.push_back(r.kd_loss);
                  return true;
                });
  ASSERT_TRUE(full.ok()) << full.status();

  constexpr int kWorld = 2;
  const int64_t global = data_.size(1);  // 4 rows: 2 architectures, one per rank
  ThreadAllReduce grads(kWorld), scalars(kWorld);
  std::vector<absl::StatusOr<SearchResult>> results(kWorld, absl::UnknownError("not run"));
  std::vector<std::vector<double>> kd(kWorld);
  std::vector<Models> models = {Fresh(config_), Fresh(config_)};
  std::vector<ArchRouter> routers = {ArchRouter(space_, o.router), ArchRouter(space_, o.router)};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      SearchOptions ro = o;
      ro.global_batch = global;
      ro.row_offset = rank * global / kWorld;
      SearchHooks hooks;
      hooks.after_backward = [&, rank](const std::vector<at::Tensor>& params) {
        std::vector<at::Tensor> g;
        for (const at::Tensor& p : params) {
          if (!p.grad().defined()) const_cast<at::Tensor&>(p).mutable_grad() = torch::zeros_like(p);
          g.push_back(p.grad());
        }
        grads.Mean(rank, g);
        return absl::OkStatus();
      };
      hooks.reduce_mean = [&, rank](at::Tensor& t) {
        scalars.Mean(rank, {t});
        return absl::OkStatus();
      };
      BatchSource mine = [&, rank](int64_t step) -> absl::StatusOr<at::Tensor> {
        return data_[step].slice(0, rank * global / kWorld, (rank + 1) * global / kWorld);
      };
      results[rank] = RunSearch(
          models[rank].parent, models[rank].supernet, space_, routers[rank], mine, ToyCost(space_),
          budgets_, ro,
          [&, rank](const StepReport& r) {
            kd[rank].push_back(r.kd_loss);
            return true;
          },
          hooks);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank].status();
    EXPECT_EQ(results[rank]->steps_run, 5);
    ExpectSameProbabilities(results[rank]->probabilities, full->probabilities, 1e-5);
    ASSERT_EQ(kd[rank].size(), single_kd.size());
    for (size_t s = 0; s < single_kd.size(); ++s) {
      EXPECT_NEAR(kd[rank][s], single_kd[s], 1e-5 * std::max(1.0, single_kd[s])) << s;
    }
  }
  // The ranks agree bit for bit (same averaged gradients, same samples).
  ExpectSameProbabilities(results[0]->probabilities, results[1]->probabilities, 0.0);
  EXPECT_GT((full->probabilities[0] - 0.25).abs().max().item<double>(), 1e-3);

  // A slice that does not fit the global batch is refused.
  SearchOptions bad = o;
  bad.global_batch = 4;
  bad.row_offset = 2;
  Models m = Fresh(config_);
  ArchRouter r(space_, o.router);
  EXPECT_EQ(RunSearch(m.parent, m.supernet, space_, r, Batches(), ToyCost(space_), budgets_, bad)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tailor::autocompress
