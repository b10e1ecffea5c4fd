#ifndef TAILOR_COMPRESSION_ENGINE_PACKAGE_LINEAR_H_
#define TAILOR_COMPRESSION_ENGINE_PACKAGE_LINEAR_H_

// Serves a HybridLM's projections straight from an entropy-coded package (docs/entropy.md,
// "Serving a package"), so the engine never holds those weights dense:
//   - a product over one row (batch-1 decode, and the last-position LM head of a batch-1
//     prefill) runs the package's GEMV kernel: the fused decode-GEMV on the coded streams,
//     or the dense GEMV on the storage bytes of a tensor the package left dense;
//   - a product over several rows (prefill, batch > 1) decompresses the weight into a
//     scratch tensor (freed when the call returns; counted in the request's peak), exactly
//     as Dequantize would, and runs torch::linear, so it is bit-identical to the dense twin;
//   - embedding rows are decoded one by one (only the chunks holding them).
// Only projection weights of at least kMinServedWeights weights and two or more dimensions
// are served (package_build's codable tensors); everything else stays a dense parameter.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "compression/entropy/package.h"
#include "compression/model/hybrid_lm.h"

namespace tailor::engine {

// Equal to package_build's kMinCodedWeights (static_assert there): the served set is
// exactly the codable set, for a real package and for its dense-twin package alike.
inline constexpr int64_t kMinServedWeights = 1024;

// Whether the engine serves tensor `t` through PackageLinear (no dense parameter).
bool IsServedTensor(const entropy::PackageTensorInfo& t);

class PackageLinear final : public model::LinearProvider {
 public:
  // Calls per path since creation (tests and verify read them).
  struct Counters {
    int64_t fused_gemv = 0;      // one-row products over coded tensors
    int64_t dense_gemv = 0;      // one-row products over tensors the package left dense
    int64_t gemm = 0;            // multi-row products: decompress + torch::linear
    int64_t embedding_rows = 0;  // embedding rows decoded
  };

  // Keys every served tensor of `package` to the parameter of `model` with its name (the
  // parameters must already be in place: Engine::Create swaps in new storage but keeps each
  // parameter's TensorImpl, which is the key). `threads` splits one-row products.
  static absl::StatusOr<std::unique_ptr<PackageLinear>> Create(
      std::shared_ptr<const entropy::Package> package, model::HybridLMImpl& model, int threads);

  at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, int64_t expert) override;
  at::Tensor Embedding(const at::Tensor& table, const at::Tensor& ids) override;

  const Counters& counters() const { return counters_; }
  // What serving keeps resident for the served tensors: coded containers or storage bytes,
  // plus per-row scales (the engine adds it to its weight bytes).
  int64_t resident_bytes() const { return resident_bytes_; }

 private:
  struct Slot {
    const entropy::LoadedTensor* tensor = nullptr;
    int64_t out = 0;  // rows of one product (per expert for a stacked tensor)
    int64_t in = 0;
    bool stacked = false;  // [experts, out, in]
  };
  PackageLinear(std::shared_ptr<const entropy::Package> package, int threads)
      : package_(std::move(package)), threads_(threads) {}
  const Slot* Find(const at::Tensor& weight) const;

  std::shared_ptr<const entropy::Package> package_;
  int threads_ = 1;
  std::unordered_map<const void*, Slot> slots_;
  Counters counters_;
  int64_t resident_bytes_ = 0;
};

}  // namespace tailor::engine

#endif  // TAILOR_COMPRESSION_ENGINE_PACKAGE_LINEAR_H_
