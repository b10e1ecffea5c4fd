#ifndef TAILOR_COMPRESSION_GGUF_LIBLLAMA_API_H_
#define TAILOR_COMPRESSION_GGUF_LIBLLAMA_API_H_

// The part of llama.cpp's C API (llama.h) that tailor's native serving harness calls
// (llama_serve_main.cc), declared here from llama.cpp's documented interface and loaded at run
// time (dlopen) from the prebuilt libraries of the pinned npm package @node-llama-cpp/linux-x64
// 3.21.1, so that building tailor needs neither llama.cpp's headers nor its libraries.
//
// The two parameter structs are passed and returned by value, so their layout must be the
// pinned release's exactly (x86-64 SysV; checked by the static_asserts below against sizes
// taken from that release's llama.h). LoadLibllama refuses any other package version: a
// struct that grew a field would be read past its end.
//
// No LibTorch here.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tailor::gguf::libllama {

// The @node-llama-cpp/linux-x64 version whose libllama these declarations match.
inline constexpr char kPinnedPackageVersion[] = "3.21.1";

using Token = int32_t;
using Pos = int32_t;
using SeqId = int32_t;

struct Model;    // llama_model
struct Context;  // llama_context
struct Vocab;    // llama_vocab
struct Memory;   // what llama_get_memory returns (llama_memory_t)

// llama_model_params: tailor keeps llama.cpp's defaults (on a CPU-only build nothing is
// offloaded) and only passes the struct through.
struct ModelParams {
  void* devices;
  const void* tensor_buft_overrides;
  int32_t n_gpu_layers;
  int32_t split_mode;
  int32_t load_mode;
  int32_t lazy_mode;
  int32_t main_gpu;
  const float* tensor_split;
  void* progress_callback;
  void* progress_callback_user_data;
  const void* kv_overrides;
  bool vocab_only, check_tensors, use_extra_bufts, no_host, no_alloc, load_mtp;
};

enum FlashAttention : int32_t { kFlashAttentionAuto = -1, kFlashAttentionDisabled = 0 };
enum KvType : int32_t { kKvF32 = 0, kKvF16 = 1 };  // ggml_type values

// llama_context_params, field for field.
struct ContextParams {
  uint32_t n_ctx, n_batch, n_ubatch, n_seq_max, n_rs_seq, n_outputs_max, n_outputs_max_per_seq;
  int32_t n_threads, n_threads_batch;
  int32_t ctx_type, rope_scaling_type, pooling_type, attention_type;
  int32_t flash_attn_type;  // FlashAttention
  float rope_freq_base, rope_freq_scale, yarn_ext_factor, yarn_attn_factor, yarn_beta_fast,
      yarn_beta_slow;
  uint32_t yarn_orig_ctx;
  float defrag_thold;
  void* cb_eval;
  void* cb_eval_user_data;
  int32_t type_k, type_v;  // KvType
  void* abort_callback;
  void* abort_callback_data;
  bool embeddings, offload_kqv, no_perf, op_offload, swa_full, kv_unified;
  void* samplers;
  size_t n_samplers;
  Context* ctx_other;
};

// llama_batch.
struct Batch {
  int32_t n_tokens;
  Token* token;
  float* embd;
  Pos* pos;
  int32_t* n_seq_id;
  SeqId** seq_id;
  int8_t* logits;  // non-zero: compute this token's logits
};

static_assert(sizeof(ModelParams) == 80, "llama_model_params of the pinned release");
static_assert(sizeof(ContextParams) == 160, "llama_context_params of the pinned release");
static_assert(offsetof(ContextParams, type_k) == 104, "llama_context_params.type_k");
static_assert(offsetof(ContextParams, embeddings) == 128, "llama_context_params.embeddings");
static_assert(sizeof(Batch) == 56, "llama_batch");

using LogCallback = void (*)(int level, const char* text, void* user_data);

// The entry points, resolved from libggml and libllama.
struct Api {
  void (*ggml_backend_load_all_from_path)(const char* dir);
  void (*log_set)(LogCallback callback, void* user_data);
  void (*backend_init)();
  ModelParams (*model_default_params)();
  ContextParams (*context_default_params)();
  Model* (*model_load_from_file)(const char* path, ModelParams params);
  void (*model_free)(Model* model);
  Context* (*init_from_model)(Model* model, ContextParams params);
  void (*free)(Context* ctx);
  const Vocab* (*model_get_vocab)(const Model* model);
  int32_t (*vocab_n_tokens)(const Vocab* vocab);
  bool (*vocab_is_eog)(const Vocab* vocab, Token token);
  bool (*vocab_is_control)(const Vocab* vocab, Token token);
  uint64_t (*model_size)(const Model* model);
  size_t (*state_get_size)(Context* ctx);
  Memory* (*get_memory)(const Context* ctx);
  void (*memory_clear)(Memory* memory, bool data);
  Batch (*batch_init)(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
  void (*batch_free)(Batch batch);
  int32_t (*decode)(Context* ctx, Batch batch);
  float* (*get_logits_ith)(Context* ctx, int32_t i);
};

struct Loaded {
  Api api;
  std::string package_version;  // of @node-llama-cpp/linux-x64, from its package.json
  std::string release;          // the llama.cpp release it was built from (_nlcBuildMetadata)
};

// `lib_dir`: the package's bins/linux-x64 folder (libllama.*.so, libggml*.so and the CPU
// backends). NotFound naming the file when a library or the package's metadata is missing;
// FailedPrecondition naming both versions when the package is not kPinnedPackageVersion;
// Internal naming the symbol when one does not resolve. The libraries stay loaded.
absl::StatusOr<Loaded> LoadLibllama(const std::string& lib_dir);

}  // namespace tailor::gguf::libllama

#endif  // TAILOR_COMPRESSION_GGUF_LIBLLAMA_API_H_
