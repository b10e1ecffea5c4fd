#include "compression/engine/package_build.h"

#include <torch/torch.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/engine/package_linear.h"

namespace tailor::engine {

// The engine serves exactly the codable tensors through its package provider, for a real
// package and for DenseTwinPackage alike (that is what makes the two bit-identical).
static_assert(kMinCodedWeights == kMinServedWeights);

int64_t SourceTensor::cols() const {
  int64_t c = 1;
  for (size_t i = 1; i < shape.size(); ++i) c *= shape[i];
  return c;
}

absl::StatusOr<std::vector<SourceTensor>> ReadSourceTensors(const std::string& model_dir) {
  const std::string path = model_dir + "/model.safetensors";
  TAILOR_ASSIGN_OR_RETURN(model::TensorMap tensors, model::LoadSafetensors(path));
  std::vector<SourceTensor> out;
  for (const auto& [name, t] : tensors) {
    SourceTensor s;
    s.name = name;
    s.shape = t.sizes().vec();
    if (t.scalar_type() == at::kBFloat16) {
      s.stored = entropy::DType::kBF16;
    } else if (t.scalar_type() != at::kFloat) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor ", name, " is ", c10::toString(t.scalar_type()),
          "; entropy coding reads F32 or BF16 models"));
    }
    at::Tensor f = t.to(at::kFloat).contiguous();
    s.values.resize(f.numel());
    std::memcpy(s.values.data(), f.data_ptr<float>(), s.values.size() * sizeof(float));
    s.codable = t.dim() >= 2 && t.numel() >= kMinCodedWeights;
    out.push_back(std::move(s));
  }
  return out;
}

std::string FormatName(v1::WeightFormat format) {
  switch (format) {
    case v1::WEIGHT_FORMAT_UNSPECIFIED: return "keep";
    case v1::WEIGHT_BF16: return "bf16";
    case v1::WEIGHT_FP8: return "fp8";
    case v1::WEIGHT_INT8: return "int8";
    case v1::WEIGHT_INT4: return "int4";
    default: return absl::StrCat("format ", static_cast<int>(format));
  }
}

absl::StatusOr<entropy::DType> FormatFor(v1::WeightFormat format, const SourceTensor& t) {
  switch (format) {
    case v1::WEIGHT_FORMAT_UNSPECIFIED: return t.stored;
    case v1::WEIGHT_BF16: return entropy::DType::kBF16;
    case v1::WEIGHT_FP8: return entropy::DType::kFP8;
    case v1::WEIGHT_INT8: return entropy::DType::kInt8;
    case v1::WEIGHT_INT4: return entropy::DType::kInt4;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("entropy.weight_format: unknown value ", static_cast<int>(format)));
  }
}

absl::StatusOr<entropy::QuantizedTensor> StorageOf(const SourceTensor& t,
                                                   v1::WeightFormat format) {
  entropy::DType dtype = entropy::DType::kF32;
  if (t.codable) {
    TAILOR_ASSIGN_OR_RETURN(dtype, FormatFor(format, t));
  }
  absl::StatusOr<entropy::QuantizedTensor> q =
      entropy::Quantize(t.values.data(), t.rows(), t.cols(), dtype);
  if (!q.ok()) return absl::InvalidArgumentError(absl::StrCat(t.name, ": ", q.status().message()));
  return q;
}

absl::StatusOr<model::TensorMap> DenseTwin(const std::vector<SourceTensor>& tensors,
                                           v1::WeightFormat format) {
  model::TensorMap out;
  for (const SourceTensor& t : tensors) {
    TAILOR_ASSIGN_OR_RETURN(entropy::QuantizedTensor q, StorageOf(t, format));
    TAILOR_ASSIGN_OR_RETURN(std::vector<float> w, entropy::Dequantize(q));
    at::Tensor x = at::empty(t.shape, at::kFloat);
    std::memcpy(x.data_ptr<float>(), w.data(), w.size() * sizeof(float));
    out[t.name] = std::move(x);
  }
  return out;
}

absl::StatusOr<entropy::Package> DenseTwinPackage(const std::string& model_dir,
                                                  const std::vector<SourceTensor>& tensors,
                                                  v1::WeightFormat format) {
  std::ifstream in(model_dir + "/config.json", std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", model_dir, "/config.json"));
  std::ostringstream config;
  config << in.rdbuf();
  entropy::Package package;
  package.config_json = config.str();
  package.summary.weight_format = FormatName(format);
  package.summary.source = absl::StrCat("dense twin of ", model_dir);
  for (const SourceTensor& t : tensors) {
    TAILOR_ASSIGN_OR_RETURN(entropy::QuantizedTensor q, StorageOf(t, format));
    entropy::LoadedTensor lt;
    lt.info.name = t.name;
    lt.info.shape = t.shape;
    lt.info.dtype = q.dtype;
    lt.info.coded = false;
    lt.info.bytes = static_cast<int64_t>(q.data.size());
    lt.info.dense_bytes = lt.info.bytes;
    // In memory only: the names just make resident_bytes() count the scales.
    if (!q.scales.empty()) lt.info.scale_file = absl::StrCat(t.name, ".scale");
    lt.dense = std::move(q.data);
    lt.scales = std::move(q.scales);
    package.tensors.push_back(std::move(lt));
  }
  return package;
}

absl::Status BuildPackage(const std::string& model_dir, const std::vector<SourceTensor>& tensors,
                          v1::WeightFormat format,
                          const std::map<std::string, TensorChoice>& choices,
                          const entropy::PackageSummary& summary, const std::string& out_dir) {
  std::ifstream in(model_dir + "/config.json", std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", model_dir, "/config.json"));
  std::ostringstream config;
  config << in.rdbuf();
  std::vector<entropy::PackageTensorInput> inputs;
  for (const SourceTensor& t : tensors) {
    entropy::PackageTensorInput p;
    p.name = t.name;
    p.shape = t.shape;
    TAILOR_ASSIGN_OR_RETURN(p.tensor, StorageOf(t, format));
    if (const auto it = choices.find(t.name); it != choices.end() && t.codable) {
      p.coded = it->second.coded;
      p.config = it->second.config;
      p.frontier = it->second.frontier;
      p.chosen = it->second.chosen;
      p.entropy_bits_per_weight = it->second.entropy_bits_per_weight;
    } else {
      p.entropy_bits_per_weight = entropy::EmpiricalBitsPerWeight(p.tensor.view(), 1);
    }
    inputs.push_back(std::move(p));
  }
  return entropy::WritePackage(out_dir, config.str(), summary, inputs);
}

entropy::TuneSpace TuneSpaceOf(const v1::EntropyParams& params) {
  entropy::TuneSpace space;
  if (params.symbols_per_codeword_size() > 0) {
    space.symbols_per_codeword.assign(params.symbols_per_codeword().begin(),
                                      params.symbols_per_codeword().end());
  }
  if (params.table_log_size() > 0) {
    space.table_log.assign(params.table_log().begin(), params.table_log().end());
  }
  if (params.chunk_width_size() > 0) {
    space.chunk_width.assign(params.chunk_width().begin(), params.chunk_width().end());
  }
  return space;
}

}  // namespace tailor::engine
