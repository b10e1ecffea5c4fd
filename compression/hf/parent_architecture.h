#ifndef TAILOR_COMPRESSION_HF_PARENT_ARCHITECTURE_H_
#define TAILOR_COMPRESSION_HF_PARENT_ARCHITECTURE_H_

// The parent-architecture half of a cost table's key (docs/costmodel.md, "Reuse"), from a
// parent's config.json in either layout tailor reads: tailor's own (model::ArchitectureKey)
// or a Hugging Face one (its family, vocabulary, hidden width, and every decoder layer's kind
// and widths). The coordinator computes it at submission and the profile job from the
// parent it loaded, both from the same text with this one function, so they agree exactly.
//
// Keys of the two layouts never collide (the HF description is prefixed), even for an HF
// checkpoint and its own import: such a pair is profiled twice rather than risk reusing a
// table for a model that is not the one measured.
//
// No LibTorch.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/hf/hf_config.h"

namespace tailor::hf {

// Lowercase hex SHA-256; settings that change no cost (rope theta and scaling, norm
// epsilon, the longest sequence) do not enter it.
std::string HfArchitectureKey(const HfConfig& config);

// Either layout, detected like the importer does (an HF config has `architectures` or
// `model_type`; a non-empty `format`, parent { format }, forces the HF layout); the parse
// error names the field otherwise.
absl::StatusOr<std::string> ParentArchitectureKey(absl::string_view config_json,
                                                  absl::string_view source = "config.json",
                                                  absl::string_view format = "");

}  // namespace tailor::hf

#endif  // TAILOR_COMPRESSION_HF_PARENT_ARCHITECTURE_H_
