#ifndef TAILOR_WORKER_DIST_H_
#define TAILOR_WORKER_DIST_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rank_env.h"

namespace tailor::worker {

// The ranks of one job as a c10d process group: a TCPStore rendezvous at
// MASTER_ADDR:MASTER_PORT (rank 0 serves it) and Gloo on CPU (NCCL in CUDA builds is chosen
// by the caller's tensors' device; this build uses Gloo). Every collective has a timeout, so a
// dead peer turns into an error instead of a hang. All calls return Status; c10::Error never
// escapes.
class Dist {
 public:
  static absl::StatusOr<std::unique_ptr<Dist>> Connect(const RankEnv& env,
                                                       absl::Duration timeout);
  ~Dist();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Sum over ranks, in place.
  absl::Status AllReduceSum(at::Tensor& tensor);
  // Mean over ranks, in place (gradient averaging).
  absl::Status AllReduceMean(at::Tensor& tensor);
  absl::Status Broadcast(at::Tensor& tensor, int root);
  // Sends `bytes` from `root` to every rank (length first, then the payload as uint8), so a
  // file only rank 0 can fetch (a model artifact, a cost table) reaches ranks on other hosts.
  absl::Status BroadcastBytes(std::string& bytes, int root);
  // Averages the gradients of `params` over ranks (parameters without a gradient get a zero
  // one first, so every rank takes part in the same collectives). One flat all-reduce.
  absl::Status AverageGradients(const std::vector<at::Tensor>& params);
  absl::Status Barrier();

 private:
  struct Impl;
  explicit Dist(std::unique_ptr<Impl> impl, int rank, int world);
  std::unique_ptr<Impl> impl_;
  int rank_;
  int world_size_;
};

}  // namespace tailor::worker

#endif  // TAILOR_WORKER_DIST_H_
