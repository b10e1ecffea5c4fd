#ifndef TAILOR_COMPRESSION_MODEL_ARCHITECTURE_KEY_H_
#define TAILOR_COMPRESSION_MODEL_ARCHITECTURE_KEY_H_

// The part of a parent model a cost table depends on: vocabulary, hidden width and every
// layer's kind and widths, not its weights nor the settings that change no cost (rope
// theta and scaling, norm epsilon, longest sequence). Cost tables are keyed by it beside
// the target fingerprint, so a second parent of another shape on the same target is
// profiled rather than served the first parent's table (docs/costmodel.md, "Reuse").
// No LibTorch.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compression/model/config.h"

namespace tailor::model {

// Lowercase hex SHA-256 of the canonical description; equal for two configs exactly when
// they have the same vocab, hidden width, layer kinds and layer widths.
std::string ArchitectureKey(const HybridConfig& config);

// The same from config.json text; the parse error (naming the field) otherwise.
absl::StatusOr<std::string> ArchitectureKeyOfConfigJson(absl::string_view json_text);

}  // namespace tailor::model

#endif  // TAILOR_COMPRESSION_MODEL_ARCHITECTURE_KEY_H_
