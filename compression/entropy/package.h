#ifndef TAILOR_COMPRESSION_ENTROPY_PACKAGE_H_
#define TAILOR_COMPRESSION_ENTROPY_PACKAGE_H_

// The packaged model an ENTROPY_CODE campaign writes (docs/entropy.md, "Package format").
//
// A directory:
//   config.json     the model's architecture (the same file a dense model dir has)
//   settings.json   format "tailor-entropy-package" v1: weight format, budget, totals, and
//                   per tensor: name, shape, storage dtype, "coded" or "dense", file, size,
//                   CRC-32, per-row scales file, bits/weight, empirical entropy, the Pareto
//                   frontier (coded bytes vs measured batch-1 GEMV latency) and the chosen
//                   point
//   tNNNN.rans      a coded container (codec.h; it has its own checksums)
//   tNNNN.raw       a tensor kept dense, in its storage dtype (little-endian)
//   tNNNN.scale     per-row float32 scales of an int8/int4/fp8 tensor
// Transported as one deterministic ustar archive holding exactly those files.
//
// Loading validates everything before anything is used: the JSON schema, names, shapes,
// file sizes and CRCs, every container (Parse) and that its dtype and shape match the
// settings. No LibTorch here: the engine turns a loaded package into model weights.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compression/entropy/autotune.h"
#include "compression/entropy/codec.h"
#include "compression/entropy/quantize.h"

namespace tailor::entropy {

inline constexpr char kPackageSettingsFile[] = "settings.json";
inline constexpr char kPackageConfigFile[] = "config.json";

// One tensor as it goes into a package.
struct PackageTensorInput {
  std::string name;
  std::vector<int64_t> shape;  // as the model stores it; rows = shape[0], cols = the rest
  QuantizedTensor tensor;      // the storage format (f32 for tensors that are never coded)
  bool coded = false;
  CodecConfig config;          // when coded
  double entropy_bits_per_weight = 0;
  std::vector<ConfigPoint> frontier;  // from the autotuner (may be empty for dense extras)
  int chosen = -1;                    // index into frontier, -1 = none
};

struct PackageTensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  bool coded = false;
  CodecConfig config;
  std::string file;
  int64_t bytes = 0;  // size of `file`
  uint32_t crc32 = 0;
  std::string scale_file;  // empty when the dtype has no scales
  uint32_t scale_crc32 = 0;
  int64_t dense_bytes = 0;  // DenseBytes of the storage dtype
  double bits_per_weight = 0;
  double entropy_bits_per_weight = 0;
  std::vector<ConfigPoint> frontier;
  int chosen = -1;
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  int64_t cols() const;
  // What serving keeps resident for this tensor: the stored bytes plus its scales.
  int64_t resident_bytes() const {
    return bytes + (scale_file.empty() ? 0 : rows() * 4);
  }
};

struct PackageSummary {
  std::string weight_format;  // "keep" or a DTypeName
  int64_t budget_bytes = 0;   // 0 = none
  std::string source;         // where the weights came from (job, digest)
};

// A loaded, validated package. Coded tensors are parsed containers; dense ones raw bytes.
struct LoadedTensor {
  PackageTensorInfo info;
  std::optional<CodedTensor> coded;
  std::vector<uint8_t> dense;  // storage bytes when not coded
  std::vector<float> scales;
  TensorView dense_view() const;
  const float* scale_data() const { return scales.empty() ? nullptr : scales.data(); }
};

struct Package {
  std::string config_json;
  PackageSummary summary;
  std::vector<LoadedTensor> tensors;
  int64_t resident_bytes() const;
  int64_t dense_bytes() const;  // what the same tensors take uncoded in their storage dtype
};

// Writes the directory (created; files written fresh). The settings also record totals.
absl::Status WritePackage(const std::string& dir, const std::string& config_json,
                          const PackageSummary& summary,
                          const std::vector<PackageTensorInput>& tensors);

// Reads and validates a package directory. Bad or inconsistent content is INVALID_ARGUMENT
// or DATA_LOSS (checksums) naming the file and field.
absl::StatusOr<Package> LoadPackage(const std::string& dir);
// Just the settings (no tensor files read): what `tailor report` and select need.
absl::StatusOr<std::vector<PackageTensorInfo>> ReadPackageSettings(const std::string& dir,
                                                                   PackageSummary* summary);
bool IsPackageDir(const std::string& dir);

// The weights a tensor stands for, row-major floats (decoded, then value * scale).
absl::StatusOr<std::vector<float>> DecodeToFloat(const LoadedTensor& t);
// Storage bytes of a tensor (decoded when coded): the exact quantised tensor.
absl::StatusOr<QuantizedTensor> DecodeToQuantized(const LoadedTensor& t);
// y = W x for a 2-D tensor: the fused kernel for coded tensors, the dense kernel otherwise.
absl::Status PackageGemv(const LoadedTensor& t, const float* x, float* y, int threads = 1);

// Deterministic ustar archive of a package directory (the files settings.json lists) and
// its inverse; unpack accepts only plain files with safe names, each once.
absl::Status PackPackage(const std::string& dir, const std::string& tar_path);
absl::Status UnpackPackage(const std::string& tar_path, const std::string& dir);

// Frontier serialisation shared by the autotune artifact and settings.json.
std::string FrontiersToJson(const std::vector<TensorFrontier>& frontiers,
                            const std::string& weight_format);
absl::StatusOr<std::vector<TensorFrontier>> FrontiersFromJson(const std::string& json,
                                                              std::string* weight_format);

}  // namespace tailor::entropy

#endif  // TAILOR_COMPRESSION_ENTROPY_PACKAGE_H_
