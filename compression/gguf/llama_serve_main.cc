// tailor-llama-serve: the serving cost of a GGUF in llama.cpp, measured by a native loop
// around libllama (the prebuilt library of the pinned node-llama-cpp package, called through
// compression/gguf/libllama_api.h). The same workload and the same JSON as
// tools/llama-sidecar/serve_benchmark.mjs (its header comment defines every figure), plus
// "harness": "native":
//
//   tailor-llama-serve --lib-dir DIR --model M.gguf --batch-size B --input I --output O
//       [--prefix P] [--threads T] [--warmup W] [--repetitions R] [--seed S] [--kv-type f16|f32]
//   tailor-llama-serve --check --lib-dir DIR
//       loads the libraries only and prints {"harness", "node_llama_cpp", "llama_cpp"}: what
//       the agent runs at start-up, so a package this program does not declare is refused
//       there rather than at the first serve.
//
// Why a native loop (docs/costmodel.md, "The serving harness"): node-llama-cpp generates
// through a JavaScript async iterator, one hop between node's event loop and a worker thread
// per token; on the quickstart's parent shape that loop added 0.12-0.16 ms per generated token
// to the engine's 0.089 (bench_serve_harness), so a request timed through it measured 11-12
// ms where llama.cpp took 6.7, and one serve's student / parent ratio moved by an sd of 7-10%
// against 2-3%. A server around llama.cpp (llama-server) runs this loop natively too.
//
// The context is created as node-llama-cpp 3.21.1 creates it (so the memory figures and the
// cost model's KV sizing stay those of docs/costmodel.md): n_ctx = B x (P + I + O) padded to
// 256, n_batch = n_ubatch = max(B x I, B x max(P, 1)), B sequences, no flash attention,
// swa_full off, the KV type given. Memory: weights (llama_model_size) and state
// (llama_state_get_size) exact; the compute buffers from llama.cpp's "compute buffer size =
// X MiB" log lines (two decimals: +-5243 bytes per line) as the node script reports them; the
// KV and recurrent-state buffers exact, which node-llama-cpp reads from llama_context's C++
// memory breakdown: llama.cpp logs each such buffer right after allocating it, and on the CPU
// a buffer is one ggml_aligned_malloc, i.e. one posix_memalign, which this program wraps to
// note the last size (checked against the logged MiB).
//
// Exits 1 with "tailor-llama-serve: message" on stderr on any failure; tailor runs it as a
// child process because llama.cpp aborts its process (GGML_ASSERT) on some models.

#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "compression/gguf/libllama_api.h"
#include "nlohmann/json.hpp"

// A sanitizer's runtime owns the allocator: a posix_memalign of ours would hand its frees
// memory it never allocated. There the cache buffers are read from the log like the compute
// buffers ("cache_bytes_exact": false).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TAILOR_SANITIZED_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define TAILOR_SANITIZED_ALLOCATOR 1
#endif
#endif

namespace {
// The size of the last posix_memalign anywhere in the process (the harness is single-threaded
// until llama_decode, and the buffers it reads are allocated by then).
std::atomic<size_t> last_aligned_alloc{0};
#ifdef TAILOR_SANITIZED_ALLOCATOR
constexpr bool kSeesAllocations = false;
#else
constexpr bool kSeesAllocations = true;
#endif
}  // namespace

#ifndef TAILOR_SANITIZED_ALLOCATOR
// Exported (ENABLE_EXPORTS), so the dlopen'ed libggml-base binds its posix_memalign here.
extern "C" int posix_memalign(void** out, size_t alignment, size_t size) {
  using Fn = int (*)(void**, size_t, size_t);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "posix_memalign"));
  last_aligned_alloc.store(size);
  return real(out, alignment, size);
}
#endif

namespace {

namespace ll = tailor::gguf::libllama;

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "tailor-llama-serve: %s\n", message.c_str());
  std::exit(1);
}

struct Args {
  std::string lib_dir, model, kv_type = "f16";
  int64_t batch = 0, input = 0, output = 0, prefix = 0, threads = 1, warmup = 1, repetitions = 5;
  uint64_t seed = 1;
};

int64_t ParseInt(const std::string& flag, const std::string& value, int64_t min) {
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < min) {
    Fail(flag + ": \"" + value + "\" is not an integer >= " + std::to_string(min));
  }
  return v;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  std::map<std::string, std::pair<int64_t*, int64_t>> ints = {
      {"--batch-size", {&a.batch, 1}}, {"--input", {&a.input, 1}},
      {"--output", {&a.output, 1}},    {"--prefix", {&a.prefix, 0}},
      {"--threads", {&a.threads, 1}},  {"--warmup", {&a.warmup, 0}},
      {"--repetitions", {&a.repetitions, 1}}};
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) Fail(key + ": missing value");
    const std::string value = argv[i + 1];
    if (key == "--lib-dir") {
      a.lib_dir = value;
    } else if (key == "--model") {
      a.model = value;
    } else if (key == "--kv-type") {
      if (value != "f16" && value != "f32") Fail("--kv-type: \"" + value + "\" is not f16 or f32");
      a.kv_type = value;
    } else if (key == "--seed") {
      char* end = nullptr;
      a.seed = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || value[0] == '-') {
        Fail("--seed: \"" + value + "\" is not a uint64");
      }
    } else if (auto it = ints.find(key); it != ints.end()) {
      *it->second.first = ParseInt(key, value, it->second.second);
    } else {
      Fail("unknown flag " + key);
    }
  }
  if (a.lib_dir.empty()) Fail("--lib-dir is required");
  if (a.model.empty()) Fail("--model is required");
  if (a.batch == 0 || a.input == 0 || a.output == 0) {
    Fail("--batch-size, --input and --output are required");
  }
  return a;
}

// A field of /proc/self/status in bytes (it reports kB).
int64_t ProcStatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1) * 1024;
  }
  Fail("no " + field + " in /proc/self/status");
}

// llama.cpp's log, kept for the figures only it prints, and the exact size of each CPU KV or
// recurrent-state buffer it logs (-1 when the last allocation is not the logged buffer).
struct Log {
  std::string text;
  int64_t cache_bytes = 0;
  bool cache_exact = true;
};

void CollectLog(int /*level*/, const char* text, void* user_data) {
  Log& log = *static_cast<Log*>(user_data);
  log.text.append(text);
  static const std::regex cache("CPU +(KV|RS) buffer size = +([0-9.]+) MiB");
  std::cmatch m;
  if (!std::regex_search(text, m, cache)) return;
  const int64_t logged = std::llround(std::stod(m[2]) * 1024 * 1024);
  const int64_t allocated = static_cast<int64_t>(last_aligned_alloc.load());
  const bool exact = kSeesAllocations && std::llabs(allocated - logged) <= 5243;
  log.cache_exact = log.cache_exact && exact;
  log.cache_bytes += exact ? allocated : logged;
}

// The sum of the "<what> buffer size = X MiB" lines of the CPU buffers; -1 when none.
int64_t LoggedBufferBytes(const std::string& log, const std::string& what) {
  const std::regex line("CPU +" + what + " buffer size = +([0-9.]+) MiB");
  int64_t bytes = -1;
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) {
    bytes = std::max<int64_t>(bytes, 0) + std::llround(std::stod((*it)[1]) * 1024 * 1024);
  }
  return bytes;
}

int64_t LoggedContextCells(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("llama_context: n_ctx += +([0-9]+)"))) {
    Fail("llama.cpp logged no \"llama_context: n_ctx\" line");
  }
  return std::stoll(m[1]);
}

// splitmix64: deterministic prompt ids from the seed (the same sequence as the node script's).
struct SplitMix {
  uint64_t x;
  uint64_t Next() {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

struct Prompt {
  std::vector<ll::Token> prefix, input;
};

// Per sequence P prefix and I input ids from the vocabulary's ordinary tokens (not control,
// not end-of-generation; every token when none is ordinary).
std::vector<Prompt> MakePrompts(const ll::Api& api, const ll::Vocab* vocab, const Args& a) {
  const int32_t n = api.vocab_n_tokens(vocab);
  std::vector<ll::Token> pool;
  for (ll::Token t = 0; t < n; ++t) {
    if (!api.vocab_is_control(vocab, t) && !api.vocab_is_eog(vocab, t)) pool.push_back(t);
  }
  if (pool.empty()) {
    for (ll::Token t = 0; t < n; ++t) pool.push_back(t);
  }
  SplitMix next{a.seed};
  auto draw = [&](int64_t k) {
    std::vector<ll::Token> ids(k);
    for (ll::Token& t : ids) t = pool[next.Next() % pool.size()];
    return ids;
  };
  std::vector<Prompt> prompts(a.batch);
  for (Prompt& p : prompts) {
    p.prefix = draw(a.prefix);
    p.input = draw(a.input);
  }
  return prompts;
}

struct Engine {
  const ll::Api& api;
  ll::Context* ctx;
  const ll::Vocab* vocab;
  ll::Batch batch;
  int32_t n_vocab;

  void Clear() { batch.n_tokens = 0; }
  void Add(ll::Token t, ll::Pos pos, ll::SeqId seq, bool logits) {
    const int32_t i = batch.n_tokens++;
    batch.token[i] = t;
    batch.pos[i] = pos;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = seq;
    batch.logits[i] = logits ? 1 : 0;
  }
  void Decode() {
    if (const int32_t rc = api.decode(ctx, batch); rc != 0) {
      Fail("llama_decode returned " + std::to_string(rc));
    }
  }
  ll::Token Greedy(int32_t i) {
    const float* logits = api.get_logits_ith(ctx, i);
    if (logits == nullptr) Fail("llama_get_logits_ith returned no logits");
    return static_cast<ll::Token>(std::max_element(logits, logits + n_vocab) - logits);
  }
};

struct Sample {
  double request_ms, prefill_ms, decode_ms, cpu_ms;
  int64_t eog;
};

double CpuMs() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

// One request: clean state, the untimed prefixes, then timed: every sequence's input in one
// decode (its first token greedy from the last input position), then O - 1 single-token
// decodes of all sequences at once; an end-of-generation token does not stop a sequence.
Sample Request(Engine& e, const std::vector<Prompt>& prompts, int64_t output) {
  using Clock = std::chrono::steady_clock;
  e.api.memory_clear(e.api.get_memory(e.ctx), true);
  const int32_t b = static_cast<int32_t>(prompts.size());
  for (int32_t s = 0; s < b; ++s) {
    if (prompts[s].prefix.empty()) continue;
    e.Clear();
    for (size_t k = 0; k < prompts[s].prefix.size(); ++k) e.Add(prompts[s].prefix[k], k, s, false);
    e.Decode();
  }
  const double cpu0 = CpuMs();
  const Clock::time_point start = Clock::now();
  e.Clear();
  std::vector<int32_t> last(b);
  for (int32_t s = 0; s < b; ++s) {
    const Prompt& p = prompts[s];
    for (size_t k = 0; k < p.input.size(); ++k) {
      if (k + 1 == p.input.size()) last[s] = e.batch.n_tokens;
      e.Add(p.input[k], p.prefix.size() + k, s, k + 1 == p.input.size());
    }
  }
  e.Decode();
  std::vector<ll::Token> token(b);
  int64_t eog = 0;
  for (int32_t s = 0; s < b; ++s) {
    token[s] = e.Greedy(last[s]);
    eog += e.api.vocab_is_eog(e.vocab, token[s]) ? 1 : 0;
  }
  const Clock::time_point first = Clock::now();
  for (int64_t o = 1; o < output; ++o) {
    e.Clear();
    for (int32_t s = 0; s < b; ++s) {
      e.Add(token[s], prompts[s].prefix.size() + prompts[s].input.size() + o - 1, s, true);
    }
    e.Decode();
    for (int32_t s = 0; s < b; ++s) {
      token[s] = e.Greedy(s);
      eog += e.api.vocab_is_eog(e.vocab, token[s]) ? 1 : 0;
    }
  }
  const Clock::time_point end = Clock::now();
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  return {ms(end - start), ms(first - start), ms(end - first), CpuMs() - cpu0, eog};
}

int64_t Pad256(int64_t v) { return (v + 255) / 256 * 256; }

}  // namespace

// --check --lib-dir DIR: the libraries load and are the declared release.
int Check(int argc, char** argv) {
  if (argc != 4 || std::string(argv[2]) != "--lib-dir") Fail("usage: --check --lib-dir DIR");
  absl::StatusOr<ll::Loaded> loaded = ll::LoadLibllama(argv[3]);
  if (!loaded.ok()) Fail(std::string(loaded.status().message()));
  const nlohmann::json out = {{"harness", "native"},
                              {"node_llama_cpp", loaded->package_version},
                              {"llama_cpp", loaded->release}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--check") return Check(argc, argv);
  const Args a = ParseArgs(argc, argv);
  absl::StatusOr<ll::Loaded> loaded = ll::LoadLibllama(a.lib_dir);
  if (!loaded.ok()) Fail(std::string(loaded.status().message()));
  const ll::Api& api = loaded->api;
  Log log;
  api.log_set(CollectLog, &log);
  api.ggml_backend_load_all_from_path(a.lib_dir.c_str());
  api.backend_init();
  const int64_t rss_before_load = ProcStatusBytes("VmRSS");
  ll::ModelParams mp = api.model_default_params();
  mp.n_gpu_layers = 0;
  ll::Model* model = api.model_load_from_file(a.model.c_str(), mp);
  if (model == nullptr) Fail("llama.cpp cannot load " + a.model);
  ll::ContextParams cp = api.context_default_params();
  cp.n_ctx = Pad256(a.batch * (a.prefix + a.input + a.output));
  cp.n_batch = cp.n_ubatch = std::max(a.batch * a.input, a.batch * std::max<int64_t>(a.prefix, 1));
  cp.n_seq_max = a.batch;
  cp.n_threads = cp.n_threads_batch = a.threads;
  cp.flash_attn_type = ll::kFlashAttentionDisabled;
  cp.type_k = cp.type_v = a.kv_type == "f32" ? ll::kKvF32 : ll::kKvF16;
  cp.no_perf = true;
  cp.swa_full = false;
  ll::Context* ctx = api.init_from_model(model, cp);
  if (ctx == nullptr) Fail("llama.cpp cannot create a context for " + a.model);
  const ll::Vocab* vocab = api.model_get_vocab(model);
  Engine e{api, ctx, vocab, api.batch_init(cp.n_batch, 0, 1), api.vocab_n_tokens(vocab)};
  const std::vector<Prompt> prompts = MakePrompts(api, vocab, a);
  nlohmann::json out;
  std::vector<double> request, prefill, decode, cpu;
  int64_t eog = 0;
  for (int64_t r = 0; r < a.warmup + a.repetitions; ++r) {
    const Sample s = Request(e, prompts, a.output);
    if (r < a.warmup) continue;
    request.push_back(s.request_ms);
    prefill.push_back(s.prefill_ms);
    decode.push_back(s.decode_ms);
    cpu.push_back(s.cpu_ms);
    eog += s.eog;
  }
  const int64_t compute = LoggedBufferBytes(log.text, "compute");
  if (compute < 0) Fail("llama.cpp logged no \"CPU compute buffer size\" line");
  out["request_ms"] = request;
  out["prefill_ms"] = prefill;
  out["decode_ms"] = decode;
  out["cpu_ms"] = cpu;
  out["eog_tokens"] = eog;
  out["weights_bytes"] = static_cast<int64_t>(api.model_size(model));
  out["state_bytes"] = static_cast<int64_t>(api.state_get_size(ctx));
  out["compute_buffer_bytes"] = compute;
  out["context_buffer_bytes"] = log.cache_bytes + compute;
  out["kv_cache_cells"] = LoggedContextCells(log.text);
  out["rss_before_load_bytes"] = rss_before_load;
  out["rss_peak_bytes"] = ProcStatusBytes("VmHWM");
  out["threads"] = a.threads;
  out["node_llama_cpp"] = loaded->package_version;
  out["llama_cpp"] = loaded->release;
  out["harness"] = "native";
  out["cache_bytes_exact"] = log.cache_exact;
  std::printf("%s\n", out.dump().c_str());
  api.batch_free(e.batch);
  api.free(ctx);
  api.model_free(model);
  return 0;
}
