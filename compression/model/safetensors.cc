#include "compression/model/safetensors.h"

#include <torch/torch.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::model {
namespace {

at::ScalarType ToTorch(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return at::kFloat;
    case DType::kBF16:
      return at::kBFloat16;
    case DType::kF16:
      return at::kHalf;
    case DType::kI8:
      return at::kChar;
    case DType::kU8:
      return at::kByte;
    case DType::kI32:
      return at::kInt;
    case DType::kI64:
      return at::kLong;
  }
  return at::kFloat;
}

}  // namespace

absl::StatusOr<DType> DTypeFromTorch(const at::Tensor& tensor) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kI8, DType::kU8, DType::kI32,
                  DType::kI64}) {
    if (ToTorch(d) == tensor.scalar_type()) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype ", c10::toString(tensor.scalar_type()), " has no safetensors code"));
}

absl::StatusOr<TensorMap> TensorsFromSafetensors(const SafetensorsFile& file) {
  TensorMap out;
  try {
    for (const TensorEntry& e : file.tensors()) {
      // Copy instead of from_blob: the buffer is only 8-byte aligned if the writer padded
      // the header, and the tensor must outlive the file bytes anyway.
      at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(ToTorch(e.dtype)));
      const absl::string_view bytes = file.Bytes(e);
      if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
      out.emplace(e.name, std::move(t));
    }
  } catch (const c10::Error& err) {
    return absl::InternalError(absl::StrCat(file.source(), ": ", err.what_without_backtrace()));
  }
  return out;
}

absl::StatusOr<TensorMap> LoadSafetensors(const std::string& path,
                                          std::map<std::string, std::string>* metadata) {
  TAILOR_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Read(path));
  if (metadata != nullptr) *metadata = file.metadata();
  return TensorsFromSafetensors(file);
}

absl::Status SaveSafetensors(const std::string& path, const TensorMap& tensors,
                             const std::map<std::string, std::string>& metadata) {
  std::vector<RawTensor> raw;
  raw.reserve(tensors.size());
  try {
    for (const auto& [name, tensor] : tensors) {
      absl::StatusOr<DType> dtype = DTypeFromTorch(tensor);
      if (!dtype.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor '", name, "': ", dtype.status().message()));
      }
      at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
      RawTensor r;
      r.name = name;
      r.dtype = *dtype;
      r.shape = cpu.sizes().vec();
      r.data.assign(static_cast<const char*>(cpu.data_ptr()), cpu.nbytes());
      raw.push_back(std::move(r));
    }
  } catch (const c10::Error& err) {
    return absl::InternalError(absl::StrCat(path, ": ", err.what_without_backtrace()));
  }
  return WriteSafetensors(path, raw, metadata);
}

}  // namespace tailor::model
