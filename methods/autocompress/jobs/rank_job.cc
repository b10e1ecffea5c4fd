// The `rank` job of AUTOCOMPRESS: activation-importance ranking of the parent on calibration
// data from the task streams, split across ranks, then the permuted ("ranked") parent saved as
// artifact (a model archive) by rank 0. Every candidate of the search is a prefix of the ranked parent.
#include <torch/torch.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/autocompress/dataset_rows.h"
#include "compression/autocompress/ranking.h"
#include "compression/hf/hf_import.h"
#include "compression/model/hybrid_lm.h"
#include "compression/tasks/suites.h"
#include "common/job_output.h"
#include "compression/tasks/training.h"
#include "worker/job_data.h"
#include "worker/job_io.h"
#include "worker/worker_context.h"
#include "methods/autocompress/autocompress_results.pb.h"
#include "methods/autocompress/job_kinds.h"

namespace tailor::worker {
namespace {

// Scores that are sqrt(sum of squares) combine exactly across ranks by summing squares;
// mean-type scores (expert norms, depth) are averaged, which is exact when ranks see equal
// token counts (the split below gives every rank the same number of samples).
absl::Status CombineSqrtScores(Dist* dist, std::vector<double>& v) {
  if (v.empty() || dist->world_size() == 1) return absl::OkStatus();
  at::Tensor t = torch::tensor(v, torch::kFloat64).square();
  absl::Status st = dist->AllReduceSum(t);
  if (!st.ok()) return st;
  t = t.sqrt();
  for (size_t i = 0; i < v.size(); ++i) v[i] = t[static_cast<int64_t>(i)].item<double>();
  return absl::OkStatus();
}

absl::Status CombineMeans(Dist* dist, std::vector<double>& v) {
  if (v.empty() || dist->world_size() == 1) return absl::OkStatus();
  at::Tensor t = torch::tensor(v, torch::kFloat64);
  absl::Status st = dist->AllReduceMean(t);
  if (!st.ok()) return st;
  for (size_t i = 0; i < v.size(); ++i) v[i] = t[static_cast<int64_t>(i)].item<double>();
  return absl::OkStatus();
}

absl::Status Combine(Dist* dist, autocompress::Importance& imp) {
  absl::Status st = CombineSqrtScores(dist, imp.hidden);
  for (auto& l : imp.layers) {
    if (!st.ok()) return st;
    st = CombineSqrtScores(dist, l.attention_heads);
    if (st.ok()) st = CombineSqrtScores(dist, l.mamba_heads);
    if (st.ok()) st = CombineSqrtScores(dist, l.shared_ffn);
    if (st.ok()) st = CombineSqrtScores(dist, l.mlp_ffn);
    for (auto& e : l.expert_ffn) {
      if (st.ok()) st = CombineSqrtScores(dist, e);
    }
    if (st.ok()) st = CombineMeans(dist, l.experts);
    std::vector<double> depth = {l.depth};
    if (st.ok()) st = CombineMeans(dist, depth);
    l.depth = depth[0];
  }
  return st;
}

// The task suites' calibration samples: every rank draws the same seeded stream and keeps
// its own slice, so the union over ranks is the same calibration set for any world size.
std::vector<at::Tensor> TaskBatches(WorkerContext& ctx, int per_rank, int batch_size) {
  auto suites = tasks::AllSuites();
  std::vector<const tasks::TaskSuite*> ptrs;
  for (auto& s : suites) ptrs.push_back(s.get());
  tasks::TaskMixture mixture(ptrs, ctx.contract().seed() ^ 0x72616e6bULL, tasks::Split::kTrain);
  std::vector<tasks::Sample> mine;
  for (int i = 0; i < per_rank * ctx.env.world_size; ++i) {
    tasks::Sample s = mixture.Next();
    if (i / per_rank == ctx.env.rank) mine.push_back(std::move(s));
  }
  std::vector<at::Tensor> batches;
  for (size_t i = 0; i < mine.size(); i += batch_size) {
    std::vector<tasks::Sample> chunk(mine.begin() + i,
                                     mine.begin() + std::min(mine.size(), i + batch_size));
    batches.push_back(tasks::MakeBatch(chunk).inputs);
  }
  return batches;
}

// Collective. `per_rank` full sequences of ranking.sequence_length tokens from this rank's
// documents of data.calibration, in batches of `batch_size`.
absl::StatusOr<std::vector<at::Tensor>> CalibrationBatches(WorkerContext& ctx,
                                                           const model::HybridConfig& parent,
                                                           int per_rank, int batch_size) {
  TAILOR_ASSIGN_OR_RETURN(data::ParentVocabulary vocab, JobParentVocabulary(ctx, parent));
  TAILOR_ASSIGN_OR_RETURN(JobDataset d, FetchJobDataset(ctx, "calibration"));
  const int64_t length =
      std::min<int64_t>(ctx.contract().ranking().sequence_length(), parent.max_seq);
  autocompress::DatasetRows rows([&](int64_t epoch) {
    return OpenJobReader(d, vocab, {.sequence_tokens = length,
                                    .rank = ctx.env.rank,
                                    .world_size = ctx.env.world_size,
                                    .seed = ctx.contract().seed() + static_cast<uint64_t>(epoch)});
  });
  std::vector<at::Tensor> batches;
  for (int done = 0; done < per_rank; done += batch_size) {
    TAILOR_ASSIGN_OR_RETURN(at::Tensor b,
                            rows.TrainRows(done / batch_size,
                                           std::min(batch_size, per_rank - done), length));
    batches.push_back(std::move(b));
  }
  return batches;
}

absl::StatusOr<v1::JobOutput> RunRank(WorkerContext& ctx) {
  const v1::DeploymentContract& c = ctx.contract();
  if (c.parent().path().empty()) {
    return absl::InvalidArgumentError(
        "parent.path: the rank job needs a parent directory (tailor's config.json + "
        "model.safetensors, or a Hugging Face checkpoint)");
  }
  torch::NoGradGuard no_grad;
  auto model = hf::LoadModelDir(c.parent().path(), c.parent().format());
  if (!model.ok()) return model.status();
  const int total = c.ranking().calibration_samples();
  const int per_rank = std::max(1, total / ctx.env.world_size);
  const int batch_size = 16;
  std::vector<at::Tensor> batches;
  if (c.data().has_calibration()) {
    // The contract's own data: this rank's share of data.calibration's documents.
    TAILOR_ASSIGN_OR_RETURN(batches, CalibrationBatches(ctx, (*model)->config(), per_rank,
                                                        batch_size));
  } else {
    batches = TaskBatches(ctx, per_rank, batch_size);
  }
  ctx.Progress(0.1, absl::StrCat("ranking on ", total, " calibration samples",
                                 c.data().has_calibration() ? " of data.calibration" : "",
                                 " over ", ctx.env.world_size, " ranks"));
  auto importance = autocompress::RankImportance(*model, batches);
  if (!importance.ok()) return importance.status();
  absl::Status st = Combine(ctx.dist, *importance);
  if (!st.ok()) return st;
  ctx.Progress(0.6, "importance combined across ranks; permuting the parent");

  v1::JobOutput output;
  v1::autocompress::RankResult result;
  result.set_calibration_samples(per_rank * ctx.env.world_size);
  output.set_world_size(ctx.env.world_size);
  // A fingerprint of the ranking (cheap to compare across runs and world sizes).
  double hidden_sum = 0;
  for (double h : importance->hidden) hidden_sum += h;
  result.set_hidden_importance_sum(hidden_sum);
  if (!ctx.is_rank0()) {
    SetDetail(output, result);
    return output;
  }

  st = autocompress::PermuteModel(*model, *importance);
  if (!st.ok()) return st;
  // One model archive (config.json + safetensors): the teacher and the slicing source of every
  // later job (search, baseline, distill).
  auto art = UploadModel(ctx, *model, "ranked_parent", "ranked-parent");
  if (!art.ok()) return art.status();
  result.set_ranked_model_digest(art->digest());
  SetDetail(output, result);
  ctx.Progress(1.0, "ranked parent uploaded");
  return output;
}

}  // namespace

void RegisterRankJob() { RegisterWorkerHandler(methods::jobs::kRank, RunRank); }

}  // namespace tailor::worker
