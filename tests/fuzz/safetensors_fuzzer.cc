// Fuzz target: the safetensors reader (compression/model/safetensors_format.h). Invariants on
// every accepted file: each tensor's bytes lie inside the buffer and match shape x dtype,
// Find returns each tensor, and writing the tensors again gives a file that reads back to
// the same index and bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compression/model/safetensors_format.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tailor::model::SafetensorsFile;
  auto file = SafetensorsFile::Parse(std::string(reinterpret_cast<const char*>(data), size),
                                     "fuzz.safetensors");
  if (!file.ok()) {
    FUZZ_CHECK(file.status().code() == absl::StatusCode::kDataLoss, "%s",
               file.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(file->tensors().size() <= tailor::model::kMaxSafetensorsTensors, "too many");
  std::vector<tailor::model::RawTensor> raw;
  uint64_t total = 0;
  for (const tailor::model::TensorEntry& e : file->tensors()) {
    FUZZ_CHECK(file->Find(e.name) == &e, "Find(%s) misses", e.name.c_str());
    FUZZ_CHECK(!e.name.empty() && e.name.size() <= tailor::model::kMaxTensorNameBytes,
               "bad name");
    FUZZ_CHECK(e.shape.size() <= tailor::model::kMaxTensorRank, "rank %zu", e.shape.size());
    const absl::string_view bytes = file->Bytes(e);
    FUZZ_CHECK(bytes.size() == e.end - e.begin, "Bytes() is %zu, offsets span %llu",
               bytes.size(), static_cast<unsigned long long>(e.end - e.begin));
    uint64_t want = tailor::model::DTypeSize(e.dtype);
    for (int64_t d : e.shape) want *= static_cast<uint64_t>(d);
    FUZZ_CHECK(want == bytes.size(), "shape x dtype %llu != %zu",
               static_cast<unsigned long long>(want), bytes.size());
    total += bytes.size();
    raw.push_back({e.name, e.dtype, e.shape, std::string(bytes)});
  }
  FUZZ_CHECK(total <= size, "tensors cover %llu bytes of a %zu-byte file",
             static_cast<unsigned long long>(total), size);

  auto again = tailor::model::SerializeSafetensors(raw, file->metadata());
  FUZZ_CHECK(again.ok(), "re-serialising an accepted file fails: %s",
             again.status().ToString().c_str());
  auto reread = SafetensorsFile::Parse(*again, "fuzz-reserialised");
  FUZZ_CHECK(reread.ok(), "re-serialised file does not parse: %s",
             reread.status().ToString().c_str());
  FUZZ_CHECK(reread->metadata() == file->metadata(), "metadata changed");
  FUZZ_CHECK(reread->tensors().size() == file->tensors().size(), "tensor count changed");
  for (size_t i = 0; i < raw.size(); ++i) {
    const tailor::model::TensorEntry& e = reread->tensors()[i];
    FUZZ_CHECK(e.name == raw[i].name && e.dtype == raw[i].dtype && e.shape == raw[i].shape &&
                   reread->Bytes(e) == raw[i].data,
               "tensor %s changed", raw[i].name.c_str());
  }
  return 0;
}
