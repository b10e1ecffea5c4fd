#include "compression/engine/package_linear.h"

#include <torch/torch.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compression/entropy/gemv.h"
#include "compression/model/layers.h"

namespace tailor::engine {
namespace {

// Provider calls cannot return a Status (they replace torch::linear inside the forward):
// failures become c10::Error, which Engine::Serve turns back into a Status.
void Check(const absl::Status& s, const entropy::LoadedTensor& t) {
  TORCH_CHECK(s.ok(), "package tensor ", t.info.name, ": ", std::string(s.message()));
}

// Values [first, first + count) of a served tensor, before scales.
void Values(const entropy::LoadedTensor& t, int64_t first, int64_t count, float* out) {
  if (t.coded.has_value()) {
    Check(entropy::FusedValues(*t.coded, first, count, out), t);
  } else {
    Check(entropy::DenseValues(t.dense_view(), first, count, out), t);
  }
}

}  // namespace

bool IsServedTensor(const entropy::PackageTensorInfo& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return t.shape.size() >= 2 && n >= kMinServedWeights && model::IsProjectionWeight(t.name);
}

absl::StatusOr<std::unique_ptr<PackageLinear>> PackageLinear::Create(
    std::shared_ptr<const entropy::Package> package, model::HybridLMImpl& model, int threads) {
  std::unique_ptr<PackageLinear> p(new PackageLinear(std::move(package), std::max(1, threads)));
  const auto params = model.named_parameters(/*recurse=*/true);
  for (const entropy::LoadedTensor& t : p->package_->tensors) {
    if (!IsServedTensor(t.info)) continue;
    const at::Tensor* param = params.find(t.info.name);
    if (param == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("package tensor ", t.info.name, " is not a parameter of the model"));
    }
    Slot s;
    s.tensor = &t;
    s.stacked = t.info.shape.size() == 3;
    if (t.info.shape.size() > 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "package tensor ", t.info.name, " has shape [", absl::StrJoin(t.info.shape, ", "),
          "]; projections are [out, in] or [experts, out, in]"));
    }
    s.out = t.info.shape[t.info.shape.size() - 2];
    s.in = t.info.shape.back();
    p->slots_[param->unsafeGetTensorImpl()] = s;
    p->resident_bytes_ += t.coded.has_value()
                              ? t.coded->size_bytes() + static_cast<int64_t>(t.scales.size()) * 4
                              : t.info.resident_bytes();
  }
  return p;
}

const PackageLinear::Slot* PackageLinear::Find(const at::Tensor& weight) const {
  const auto it = slots_.find(weight.unsafeGetTensorImpl());
  return it == slots_.end() ? nullptr : &it->second;
}

at::Tensor PackageLinear::Linear(const at::Tensor& x, const at::Tensor& weight, int64_t expert) {
  const Slot* s = Find(weight);
  if (s == nullptr) return at::Tensor();
  const entropy::LoadedTensor& t = *s->tensor;
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.device().is_cpu() && x.size(-1) == s->in,
              "package tensor ", t.info.name, ": want CPU float input [..., ", s->in, "]");
  TORCH_CHECK(s->stacked == (expert >= 0) && expert < (s->stacked ? t.info.shape[0] : 1),
              "package tensor ", t.info.name, ": bad expert ", expert);
  const int64_t out = s->out, in = s->in;
  const int64_t first = s->stacked ? expert * out * in : 0;
  // Per-row scales of this product: a plain matrix has one per output row, an expert stack
  // one per expert (the quantiser's rows are shape[0]).
  const float* scale = t.scale_data();
  std::vector<float> expert_scale;
  if (scale != nullptr && s->stacked) {
    expert_scale.assign(out, scale[expert]);
    scale = expert_scale.data();
  }
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  const int64_t rows = x.numel() / in;
  if (rows == 1) {
    const at::Tensor xc = x.contiguous();
    at::Tensor y = at::empty(shape, x.options());
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    if (t.coded.has_value()) {
      ++counters_.fused_gemv;
      Check(s->stacked ? entropy::FusedGemvBlock(*t.coded, first, out, in, xp, scale, yp)
                       : entropy::FusedGemv(*t.coded, xp, scale, yp, threads_),
            t);
    } else {
      ++counters_.dense_gemv;
      Check(s->stacked ? entropy::DenseGemvBlock(t.dense_view(), first, out, in, xp, scale, yp)
                       : entropy::DenseGemv(t.dense_view(), xp, scale, yp, threads_),
            t);
    }
    return y;
  }
  // Several rows: a GEMM amortises the decode over the rows. The scratch weight dies with
  // this call, so only one layer's weight is ever dense at a time.
  ++counters_.gemm;
  at::Tensor w = at::empty({out, in}, x.options());
  float* wp = w.data_ptr<float>();
  Values(t, first, out * in, wp);
  if (scale != nullptr) {
    for (int64_t r = 0; r < out; ++r) {
      const float sr = scale[r];
      for (int64_t c = 0; c < in; ++c) wp[r * in + c] = wp[r * in + c] * sr;  // = Dequantize
    }
  }
  return torch::linear(x, w);
}

at::Tensor PackageLinear::Embedding(const at::Tensor& table, const at::Tensor& ids) {
  const Slot* s = Find(table);
  if (s == nullptr) return at::Tensor();
  const entropy::LoadedTensor& t = *s->tensor;
  TORCH_CHECK(!s->stacked, "package tensor ", t.info.name, " is not an embedding table");
  const int64_t in = s->in;
  const at::Tensor idc = ids.to(at::kLong).contiguous();
  std::vector<int64_t> shape = ids.sizes().vec();
  shape.push_back(in);
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(at::kFloat).device(at::kCPU));
  const int64_t* id = idc.data_ptr<int64_t>();
  float* op = out.data_ptr<float>();
  const float* scale = t.scale_data();
  for (int64_t i = 0; i < idc.numel(); ++i) {
    TORCH_CHECK(id[i] >= 0 && id[i] < s->out, "token ", id[i], " outside the embedding");
    float* row = op + i * in;
    Values(t, id[i] * in, in, row);
    if (scale != nullptr) {
      for (int64_t c = 0; c < in; ++c) row[c] = row[c] * scale[id[i]];
    }
  }
  counters_.embedding_rows += idc.numel();
  return out;
}

}  // namespace tailor::engine
