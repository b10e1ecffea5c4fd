// toy-tailor-worker: the real worker plus the TOY method's launcher job, which sums
// rank + 1 over the job's real c10d process group.
#include <torch/torch.h>

#include "tests/e2e/toy_method/toy_method.h"
#include "worker/worker_context.h"
#include "worker/worker_main.h"

namespace {

absl::StatusOr<google::protobuf::Struct> ToyTransform(tailor::worker::WorkerContext& ctx) {
  at::Tensor t = torch::full({1}, static_cast<double>(ctx.env.rank + 1), torch::kFloat64);
  if (absl::Status st = ctx.dist->AllReduceSum(t); !st.ok()) return st;
  google::protobuf::Struct result;
  (*result.mutable_fields())["rank_sum"].set_number_value(t.item<double>());
  (*result.mutable_fields())["world_size"].set_number_value(ctx.env.world_size);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  tailor::worker::RegisterWorkerHandler(tailor::toy::kToyTransform, ToyTransform);
  return tailor::worker::WorkerMain(argc, argv);
}
