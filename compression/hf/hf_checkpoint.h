#ifndef TAILOR_COMPRESSION_HF_HF_CHECKPOINT_H_
#define TAILOR_COMPRESSION_HF_HF_CHECKPOINT_H_

// A Hugging Face checkpoint folder, opened read-only and checked against its config
// (docs/model.md, "Hugging Face checkpoints"):
//
//   config.json
//   model.safetensors.index.json + model-0000N-of-0000M.safetensors   (sharded)
//   or model.safetensors                                                (one file)
//   tokenizer.json, tokenizer_config.json, ...                         (listed, not read)
//
// Shards are memory-mapped and only their headers parsed, so opening a checkpoint costs
// no copy of its weights; tensor access is a view into the mapping. Open checks everything
// before returning: the index against the shards, every tensor the config implies present
// with its shape, no tensor the config does not imply, dtypes F32/BF16/F16, and that the
// weights fit in memory. Each error names the file and the tensor; nothing is written.
//
// No LibTorch here.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/hf/hf_config.h"
#include "compression/model/safetensors_format.h"

namespace tailor::hf {

namespace internal {
struct HfShard;  // one mapped shard and its parsed header
}  // namespace internal

inline constexpr absl::string_view kConfigFile = "config.json";
inline constexpr absl::string_view kIndexFile = "model.safetensors.index.json";
inline constexpr absl::string_view kSingleFile = "model.safetensors";

// One tensor the config implies: its name, shape, and for each dimension the config keys
// that size it (what a shape error quotes).
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<std::string> dims;  // e.g. {"num_key_value_heads * head_dim", "hidden_size"}
};

// Every tensor of `config`'s family layout, in layer order: embeddings, per layer the norms,
// attention (q/k/v/o, biases, q/k norms), MLP / experts / Mamba tensors, final norm, and
// lm_head unless the embeddings are tied.
std::vector<ExpectedTensor> ExpectedTensors(const HfConfig& config);

struct HfCheckpointOptions {
  // Forces the layout (an architectures value or model_type; parent { format: ... });
  // empty detects it from config.json.
  std::string format;
  // Bytes the weights may take; 0 reads MemAvailable from /proc/meminfo. Tests inject it.
  uint64_t memory_limit_bytes = 0;
};

// A view of one tensor's bytes inside a mapped shard (little-endian, row-major). Valid as
// long as the HfCheckpoint lives.
struct TensorView {
  const std::string* name = nullptr;
  const std::string* file = nullptr;  // the shard's path
  model::DType dtype = model::DType::kF32;
  const std::vector<int64_t>* shape = nullptr;
  const char* data = nullptr;
  uint64_t size_bytes = 0;
};

class HfCheckpoint {
 public:
  static absl::StatusOr<HfCheckpoint> Open(const std::string& dir,
                                           const HfCheckpointOptions& options = {});

  HfCheckpoint(HfCheckpoint&&) noexcept;
  HfCheckpoint& operator=(HfCheckpoint&&) noexcept;
  ~HfCheckpoint();

  const std::string& dir() const { return dir_; }
  const HfConfig& config() const { return config_; }
  // Shard file names (relative to dir), sorted.
  std::vector<std::string> shard_files() const;
  // Tokenizer and generation files present in dir (relative names, sorted), for an export
  // to carry to the student.
  const std::vector<std::string>& tokenizer_files() const { return tokenizer_files_; }
  // Sum of the tensors' bytes as stored.
  uint64_t weight_bytes() const { return weight_bytes_; }

  // This checkpoint's config with its decoder layers repeated `copies` times (>= 1), the same
  // dir and tokenizer files, and no tensors: the parent a model deeper than this one is
  // exported against (the whole-model profiler's deep stacks, dummy weights of their own).
  // Tensor() finds nothing in it.
  HfCheckpoint ConfigRepeated(int copies) const;

  // Sorted; exactly the names of ExpectedTensors(config()).
  std::vector<std::string> tensor_names() const;
  // NotFound naming the tensor when the checkpoint has no such tensor.
  absl::StatusOr<TensorView> Tensor(absl::string_view name) const;

  // Drops the mapped pages wholly inside [data, data + bytes) from this process's resident
  // set (madvise MADV_DONTNEED: clean file pages, re-read from the file if touched again),
  // once an importer has copied a tensor out. A range outside the shards' mappings is left
  // alone (never anonymous memory, which MADV_DONTNEED would zero). Without it the import's
  // RSS peak counts every shard page besides the F32 model.
  void ReleasePages(const void* data, uint64_t bytes) const;

 private:
  struct Located {
    const internal::HfShard* shard = nullptr;
    const model::TensorEntry* entry = nullptr;
  };
  HfCheckpoint() = default;

  std::string dir_;
  HfConfig config_;
  std::vector<std::unique_ptr<internal::HfShard>> shards_;
  std::map<std::string, Located, std::less<>> tensors_;
  std::vector<std::string> tokenizer_files_;
  uint64_t weight_bytes_ = 0;
};

// MemAvailable from /proc/meminfo in bytes (Unavailable when it cannot be read).
absl::StatusOr<uint64_t> AvailableMemoryBytes();

}  // namespace tailor::hf

#endif  // TAILOR_COMPRESSION_HF_HF_CHECKPOINT_H_
