#ifndef TAILOR_COMPRESSION_MODEL_MODEL_ARCHIVE_H_
#define TAILOR_COMPRESSION_MODEL_MODEL_ARCHIVE_H_

// The model artifact: one file, an uncompressed POSIX ustar archive holding exactly
// config.json and model.safetensors (in that order). One file so a model is one
// content-addressed blob; tar so `tar xf` opens it anywhere; uncompressed because
// safetensors weights barely compress and a reader can stream them straight to disk.
//
// Packing is deterministic (mode 0644, uid/gid 0, mtime 0, no user names), so the same
// model gives the same bytes and the same digest. Unpacking accepts only those two regular
// files, each once, with valid header checksums and complete data; anything else (other
// names, paths, links, truncation) is rejected before a partial model can be used.
//
// No LibTorch here.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tailor::model {

inline constexpr char kModelConfigFile[] = "config.json";
inline constexpr char kModelWeightsFile[] = "model.safetensors";

// DIR/config.json + DIR/model.safetensors -> `path` (written to a temp file, then renamed).
// NOT_FOUND when a file is missing.
absl::Status PackModelArchive(const std::string& dir, const std::string& path);

// The same ustar packing for any flat folder: `names` (files directly in `dir`, at most 99
// bytes each) in that order, written atomically to `path`. What an exported student folder
// (HF layout: config.json, shards, index, tokenizer files) travels as; `tar xf` unpacks it.
absl::Status PackFilesArchive(const std::string& dir, const std::vector<std::string>& names,
                              const std::string& path);

// `path` -> DIR/config.json + DIR/model.safetensors (DIR is created). INVALID_ARGUMENT for
// entries that do not belong in a model archive, DATA_LOSS for a corrupt or truncated one.
// The contents are not validated here: load the model (ReadHybridConfig, LoadSafetensors)
// for that.
absl::Status UnpackModelArchive(const std::string& path, const std::string& dir);

// A dataset artifact (compression/data): PackFilesArchive of its *.jsonl shards, unpacked
// into `dir` (created); the shard names in archive order. INVALID_ARGUMENT for any other
// entry (a path, a link, another name) or an empty archive, DATA_LOSS for a corrupt one.
absl::StatusOr<std::vector<std::string>> UnpackDatasetArchive(const std::string& path,
                                                              const std::string& dir);

// The text of `path`'s config.json (its first entry) without reading the weights: what the
// coordinator needs to key cost tables by the parent's architecture. INVALID_ARGUMENT when
// the archive does not start with config.json or it exceeds `max_bytes`.
absl::StatusOr<std::string> ReadModelArchiveConfig(const std::string& path,
                                                   uint64_t max_bytes);

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_MODEL_ARCHIVE_H_
