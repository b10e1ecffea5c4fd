#ifndef TAILOR_COMPRESSION_MODEL_SAFETENSORS_H_
#define TAILOR_COMPRESSION_MODEL_SAFETENSORS_H_

// The safetensors reader and writer (compression/model/safetensors_format.h, no LibTorch)
// plus the LibTorch boundary: tensors in and out of files.

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compression/model/safetensors_format.h"

namespace tailor::model {

// LibTorch boundary. Tensors come back as contiguous CPU tensors of the file's dtype.
using TensorMap = std::map<std::string, at::Tensor>;
absl::StatusOr<TensorMap> TensorsFromSafetensors(const SafetensorsFile& file);
absl::StatusOr<TensorMap> LoadSafetensors(const std::string& path,
                                          std::map<std::string, std::string>* metadata = nullptr);
// Any device; dtype must be one of DType's. Non-contiguous tensors are copied.
absl::Status SaveSafetensors(const std::string& path, const TensorMap& tensors,
                             const std::map<std::string, std::string>& metadata = {});
absl::StatusOr<DType> DTypeFromTorch(const at::Tensor& tensor);

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_SAFETENSORS_H_
