#ifndef TAILOR_COMPRESSION_GGUF_LLAMA_CPP_TOKENIZE_H_
#define TAILOR_COMPRESSION_GGUF_LLAMA_CPP_TOKENIZE_H_

// llama.cpp's own tokenization of texts on a GGUF's vocabulary (tools/llama-sidecar/
// tokenize.mjs in a child process, node-llama-cpp 3.21.1): the reference tailor's tokenizers
// (compression/tokenizer) are checked against, since the student is served there.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/gguf/llama_cpp_sidecar.h"

namespace tailor::gguf {

// tools/llama-sidecar/tokenize.mjs of the source tree ($TAILOR_LLAMA_TOKENIZE overrides).
std::string DefaultTokenizeScript();

// One id list per text, in order, no BOS/EOS added; `parse_special` as
// tokenizer::Tokenizer::Encode's. The errors of RunSidecarScript; Internal when the output is
// malformed or answers another number of texts.
absl::StatusOr<std::vector<std::vector<int32_t>>> RunLlamaCppTokenize(
    const std::string& gguf_path, const std::vector<std::string>& texts, bool parse_special,
    const SidecarOptions& options = {});

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_LLAMA_CPP_TOKENIZE_H_
