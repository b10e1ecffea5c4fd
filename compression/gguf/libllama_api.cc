#include "compression/gguf/libllama_api.h"

#include <dlfcn.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tailor::gguf::libllama {
namespace {

absl::StatusOr<nlohmann::json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("libllama: no ", path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InternalError(absl::StrCat("libllama: ", path, " is not a JSON object"));
  }
  return j;
}

absl::StatusOr<void*> Open(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(
        absl::StrCat("libllama: cannot load ", path, ": ", why != nullptr ? why : "?"));
  }
  return h;
}

// Resolves `name` from `lib` into `fn`; false (with `missing` set) when it does not resolve.
template <typename Fn>
bool Resolve(void* lib, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (fn == nullptr && missing.empty()) missing = name;
  return fn != nullptr;
}

}  // namespace

absl::StatusOr<Loaded> LoadLibllama(const std::string& lib_dir) {
  Loaded out;
  absl::StatusOr<nlohmann::json> package = ReadJson(lib_dir + "/../../package.json");
  if (!package.ok()) return package.status();
  out.package_version = package->value("version", "");
  if (out.package_version != kPinnedPackageVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "libllama: ", lib_dir, " is @node-llama-cpp/linux-x64 ", out.package_version,
        "; tailor's native harness declares the C API of ", kPinnedPackageVersion,
        " (compression/gguf/libllama_api.h) and would misread another release's structs"));
  }
  absl::StatusOr<nlohmann::json> build = ReadJson(lib_dir + "/_nlcBuildMetadata.json");
  if (!build.ok()) return build.status();
  const nlohmann::json& cpp = (*build)["buildOptions"]["llamaCpp"];
  out.release = cpp.is_object() ? cpp.value("release", "") : "";
  if (out.release.empty()) {
    return absl::InternalError(
        absl::StrCat("libllama: ", lib_dir, "/_nlcBuildMetadata.json names no llama.cpp release"));
  }
  absl::StatusOr<void*> ggml = Open(absl::StrCat(lib_dir, "/libggml.", out.release, ".so"));
  if (!ggml.ok()) return ggml.status();
  absl::StatusOr<void*> llama = Open(absl::StrCat(lib_dir, "/libllama.", out.release, ".so"));
  if (!llama.ok()) return llama.status();
  Api& a = out.api;
  std::string missing;
  Resolve(*ggml, "ggml_backend_load_all_from_path", a.ggml_backend_load_all_from_path, missing);
  Resolve(*llama, "llama_log_set", a.log_set, missing);
  Resolve(*llama, "llama_backend_init", a.backend_init, missing);
  Resolve(*llama, "llama_model_default_params", a.model_default_params, missing);
  Resolve(*llama, "llama_context_default_params", a.context_default_params, missing);
  Resolve(*llama, "llama_model_load_from_file", a.model_load_from_file, missing);
  Resolve(*llama, "llama_model_free", a.model_free, missing);
  Resolve(*llama, "llama_init_from_model", a.init_from_model, missing);
  Resolve(*llama, "llama_free", a.free, missing);
  Resolve(*llama, "llama_model_get_vocab", a.model_get_vocab, missing);
  Resolve(*llama, "llama_vocab_n_tokens", a.vocab_n_tokens, missing);
  Resolve(*llama, "llama_vocab_is_eog", a.vocab_is_eog, missing);
  Resolve(*llama, "llama_vocab_is_control", a.vocab_is_control, missing);
  Resolve(*llama, "llama_model_size", a.model_size, missing);
  Resolve(*llama, "llama_state_get_size", a.state_get_size, missing);
  Resolve(*llama, "llama_get_memory", a.get_memory, missing);
  Resolve(*llama, "llama_memory_clear", a.memory_clear, missing);
  Resolve(*llama, "llama_batch_init", a.batch_init, missing);
  Resolve(*llama, "llama_batch_free", a.batch_free, missing);
  Resolve(*llama, "llama_decode", a.decode, missing);
  Resolve(*llama, "llama_get_logits_ith", a.get_logits_ith, missing);
  if (!missing.empty()) {
    return absl::InternalError(
        absl::StrCat("libllama: ", lib_dir, ": symbol ", missing, " does not resolve"));
  }
  return out;
}

}  // namespace tailor::gguf::libllama
