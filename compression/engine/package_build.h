#ifndef TAILOR_COMPRESSION_ENGINE_PACKAGE_BUILD_H_
#define TAILOR_COMPRESSION_ENGINE_PACKAGE_BUILD_H_

// From a dense model dir to the pieces of an entropy-coded package (docs/entropy.md): which
// tensors are coded, their storage in the campaign's weight format, and the dense twin
// (the model whose weights are exactly what the package decodes to) that verify compares
// greedy outputs against. Shared by the autotune and verify agent jobs, the select worker
// job, the tests and bench/entropy.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/entropy/package.h"
#include "compression/model/safetensors.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::engine {

// Tensors with at least this many weights and two or more dimensions are coded (matrices:
// projections, experts, embedding, LM head); norms, biases and gains stay dense f32: they
// are a rounding error of the size and every decode would read them anyway.
inline constexpr int64_t kMinCodedWeights = 1024;

struct SourceTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;      // row-major
  entropy::DType stored = entropy::DType::kF32;  // the model file's dtype (f32 or bf16)
  bool codable = false;
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  int64_t cols() const;
};

// DIR/model.safetensors as float tensors in name order.
absl::StatusOr<std::vector<SourceTensor>> ReadSourceTensors(const std::string& model_dir);

// The weight format a campaign codes in: the contract's, or (unspecified) the tensor's own
// stored dtype. Formats without a scheme here are INVALID_ARGUMENT.
absl::StatusOr<entropy::DType> FormatFor(v1::WeightFormat format, const SourceTensor& t);
std::string FormatName(v1::WeightFormat format);  // "keep", "bf16", "fp8", "int8", "int4"

// Storage of one tensor: quantised to `format` when codable, f32 otherwise.
absl::StatusOr<entropy::QuantizedTensor> StorageOf(const SourceTensor& t, v1::WeightFormat format);

// The dense twin's state dict: every codable tensor replaced by Dequantize(StorageOf(...)).
absl::StatusOr<model::TensorMap> DenseTwin(const std::vector<SourceTensor>& tensors,
                                           v1::WeightFormat format);

// The dense twin as a package with nothing coded: every tensor in its storage format, the
// exact bytes and scales the package decodes to. Engine::FromPackage serves it with the
// package's own kernels (the dense GEMV where the package runs the fused one, which equals
// it bit for bit), so its greedy outputs must equal the package's exactly: verify's
// reference. The plain DenseTwin model (torch::linear) differs only in float summation
// order at one-row products.
absl::StatusOr<entropy::Package> DenseTwinPackage(const std::string& model_dir,
                                                  const std::vector<SourceTensor>& tensors,
                                                  v1::WeightFormat format);

// What select decided for one codable tensor.
struct TensorChoice {
  bool coded = false;
  entropy::CodecConfig config;
  std::vector<entropy::ConfigPoint> frontier;
  int chosen = -1;
  double entropy_bits_per_weight = 0;
};

// Writes the package of `model_dir` into `out_dir`: codable tensors in `format`, coded as
// `choices` says (absent = dense), everything else dense f32.
absl::Status BuildPackage(const std::string& model_dir, const std::vector<SourceTensor>& tensors,
                          v1::WeightFormat format,
                          const std::map<std::string, TensorChoice>& choices,
                          const entropy::PackageSummary& summary, const std::string& out_dir);

// Tune space from the contract (empty lists take TuneSpace's defaults).
entropy::TuneSpace TuneSpaceOf(const v1::EntropyParams& params);

}  // namespace tailor::engine

#endif  // TAILOR_COMPRESSION_ENGINE_PACKAGE_BUILD_H_
