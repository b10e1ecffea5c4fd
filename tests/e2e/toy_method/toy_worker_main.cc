// toy-tailor-worker: the real worker plus the TOY method's launcher job, which sums
// rank + 1 over the job's real c10d process group.
#include <torch/torch.h>

#include "common/job_output.h"
#include "methods/registry.h"
#include "tests/e2e/toy_method/toy_method.h"
#include "worker/worker_context.h"
#include "worker/worker_main.h"

namespace {

absl::StatusOr<tailor::v1::JobOutput> ToyTransform(tailor::worker::WorkerContext& ctx) {
  at::Tensor t = torch::full({1}, static_cast<double>(ctx.env.rank + 1), torch::kFloat64);
  if (absl::Status st = ctx.dist->AllReduceSum(t); !st.ok()) return st;
  tailor::toy::ToyTransformResult transformed;
  transformed.set_rank_sum(t.item<double>());
  tailor::v1::JobOutput output;
  output.set_world_size(ctx.env.world_size);
  tailor::SetDetail(output, transformed);
  return output;
}

}  // namespace

int main(int argc, char** argv) {
  // The method's declarations first: handlers register only for kinds a method declares.
  tailor::methods::AddMethodBeforeStart(tailor::toy::MakeToyMethod());
  tailor::worker::RegisterWorkerHandler(tailor::toy::kToyTransform, ToyTransform);
  return tailor::worker::WorkerMain(argc, argv);
}
