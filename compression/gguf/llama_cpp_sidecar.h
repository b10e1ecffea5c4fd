#ifndef TAILOR_COMPRESSION_GGUF_LLAMA_CPP_SIDECAR_H_
#define TAILOR_COMPRESSION_GGUF_LLAMA_CPP_SIDECAR_H_

// llama.cpp as a child process: runs tools/llama-sidecar/next_token_logprobs.mjs (node +
// node-llama-cpp 3.21.1, installed by deploy/install-deps.sh) on a GGUF and returns the
// next-token log-probabilities it prints (docs/model.md, "Export to GGUF").
//
// A child process, not a library call, because llama.cpp aborts its process (GGML_ASSERT)
// on some layer patterns: here an abort, a crash or a hang (the timeout kills it) is an
// error naming the signal or the exit code with the child's last stderr lines, never a
// crash of the caller.
//
// No LibTorch here.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tailor::gguf {

struct SidecarOptions {
  std::string node = "node";  // resolved through PATH
  // The script; empty: $TAILOR_LLAMA_SIDECAR, else tools/llama-sidecar/ of the source tree
  // this binary was built from.
  std::string script;
  // A run of one prompt: the model load (most of it for a small model) and its evaluation.
  absl::Duration timeout = absl::Seconds(120);
  // What each further prompt of a batch adds to `timeout`.
  absl::Duration timeout_per_extra_prompt = absl::Seconds(10);
  int threads = 1;
};

struct NextTokenLogprobs {
  int64_t vocab_size = 0;
  std::vector<int64_t> positions;
  // logprobs[i][t] = log P(t | tokens[0..positions[i]]); -inf where float32 underflowed.
  std::vector<std::vector<double>> logprobs;
  std::string node_llama_cpp_version;  // the package's version, e.g. "3.21.1"
  std::string llama_cpp_release;       // the llama.cpp release it bundles
};

// The script path SidecarOptions{}.script resolves to.
std::string DefaultSidecarScript();

// Why `script` (a tools/llama-sidecar script) cannot run here, or "" when it can: the script,
// node-llama-cpp next to it, node on PATH. Tests and benches skip naming it.
std::string LlamaCppSidecarMissing(const std::string& script);

// NotFound when node, the script or node-llama-cpp is missing (so tests can say what to
// install); Internal naming the exit code or signal when the child fails;
// DeadlineExceeded when it runs past the timeout (it is killed).
// `positions` empty means every position.
absl::StatusOr<NextTokenLogprobs> RunNextTokenLogprobs(const std::string& gguf_path,
                                                       const std::vector<int32_t>& tokens,
                                                       const std::vector<int64_t>& positions,
                                                       const SidecarOptions& options = {});

// `prompts` in ONE child process (the model loaded once, each prompt evaluated from a clean
// state: a prompt's result does not depend on the prompts before it), one result per prompt
// in order; `positions` (empty: every position) applies to each prompt. The same errors as
// RunNextTokenLogprobs; the timeout covers the whole batch: options.timeout plus
// options.timeout_per_extra_prompt for each prompt after the first.
absl::StatusOr<std::vector<NextTokenLogprobs>> RunNextTokenLogprobsBatch(
    const std::string& gguf_path, const std::vector<std::vector<int32_t>>& prompts,
    const std::vector<int64_t>& positions, const SidecarOptions& options = {});

// `argv` (argv[0] a path, or a name resolved through PATH) as a child process, its stdout
// returned; what RunSidecarScript runs node with, and how the native serving harness
// (tailor-llama-serve) is run. NotFound when argv[0] is missing; otherwise its errors.
absl::StatusOr<std::string> RunEngineProcess(const std::vector<std::string>& argv,
                                             const std::string& stdin_text,
                                             absl::Duration timeout);

// The child-process runner under the functions above, for other scripts of
// tools/llama-sidecar: `options.node` runs `script_path` with `args` after it and `stdin_text`
// on its stdin (empty: /dev/null); returns its stdout. `options.script` and the timeouts of
// `options` are not used: the caller resolves the script and sizes `timeout`. The same
// errors as RunNextTokenLogprobs (NotFound when node or the script is missing, or when the
// script says "node-llama-cpp is not installed"; Internal with the exit code or signal and
// the last stderr lines; DeadlineExceeded past `timeout`, the child killed).
absl::StatusOr<std::string> RunSidecarScript(const std::string& script_path,
                                             const std::vector<std::string>& args,
                                             const std::string& stdin_text, absl::Duration timeout,
                                             const SidecarOptions& options);

// Parse the sidecar's stdout (exposed for tests): one prompt, and a batch answering `prompts`
// prompts.
absl::StatusOr<NextTokenLogprobs> ParseSidecarOutput(const std::string& json);
absl::StatusOr<std::vector<NextTokenLogprobs>> ParseSidecarBatchOutput(const std::string& json,
                                                                       size_t prompts);

}  // namespace tailor::gguf

#endif  // TAILOR_COMPRESSION_GGUF_LLAMA_CPP_SIDECAR_H_
