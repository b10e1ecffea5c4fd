// bench_hf_io: bringing your own model. Per synthetic LlamaForCausalLM checkpoint (BF16,
// sharded, written by tests/testing/hf_test_checkpoint), side by side in the same run:
//   (a) HfCheckpoint::Open + ImportHfModel: wall time and peak memory, against a naive import
//       (every shard read whole into a std::string, every tensor converted to its own F32
//       tensor while all shards are held);
//   (b) ExportHfToGguf: MB/s of shard bytes, against a plain 1 MiB read/write copy of the same
//       shards (neither fsyncs);
//   (c) ExportStudentAsHf of the untouched import (SaveHybridLM first, not timed in (c)):
//       time against the import's and against the shards copied with fsync (the export
//       writes as many bytes and fsyncs them), and whether it is bit-identical to the parent.
// Each step runs in its own forked child, so its VmHWM is its own (the parent never touches
// the weights or LibTorch). VmHWM counts the pages of the memory-mapped shards as well
// (RssFile: page cache, dropped under pressure); a sampler thread also records the peak of
// anonymous RSS (statm resident - shared, every 1 ms), which is the "extra copy" question.
// Prints three tables and writes JSON (--json-out, default bench/out/hf_io.json).
// docs/benchmarks.md, "Bring your own model (bench/hf_io)".
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compression/gguf/hf_to_gguf.h"
#include "compression/hf/hf_checkpoint.h"
#include "compression/hf/hf_export.h"
#include "compression/hf/hf_import.h"
#include "compression/model/hybrid_lm.h"
#include "compression/model/safetensors_format.h"
#include "bench/common/bench_report.h"
#include "nlohmann/json.hpp"
#include "tests/testing/hf_test_checkpoint.h"

namespace {

namespace fs = std::filesystem;
namespace hf = tailor::hf;
namespace model = tailor::model;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr double kMiB = 1024.0 * 1024.0;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// --- Memory probes ------------------------------------------------------------------------

struct MemStatus {
  int64_t rss = 0, hwm = 0, anon = 0, file = 0;  // bytes
};

MemStatus ReadMemStatus() {
  MemStatus m;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    for (auto [key, out] : {std::pair<const char*, int64_t*>{"VmRSS:", &m.rss},
                            {"VmHWM:", &m.hwm},
                            {"RssAnon:", &m.anon},
                            {"RssFile:", &m.file}}) {
      const size_t n = std::strlen(key);
      if (line.compare(0, n, key) == 0) *out = std::stoll(line.substr(n)) * 1024;  // kB
    }
  }
  return m;
}

// Anonymous RSS now: statm's resident minus shared (file-backed + shmem) pages. statm, not
// status, because it is the cheapest read and this runs every millisecond.
int64_t AnonRssBytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  long long size = 0, resident = 0, shared = 0;
  if (std::sscanf(buf, "%lld %lld %lld", &size, &resident, &shared) != 3) return 0;
  return (resident - shared) * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

// The kernel keeps no high-water mark of anonymous memory alone and VmHWM cannot be reset,
// so a thread samples it; a peak shorter than the period can be missed (the table's
// anonymous figures are lower bounds; VmHWM is exact but includes the mapped shards).
class AnonPeakSampler {
 public:
  AnonPeakSampler() : thread_([this] { Run(); }) {}
  ~AnonPeakSampler() { Stop(); }
  int64_t Stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
    }
    Sample();
    return peak_;
  }

 private:
  void Sample() { peak_ = std::max<int64_t>(peak_, AnonRssBytes()); }
  void Run() {
    while (!stop_) {
      Sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> peak_{0};
  std::thread thread_;  // last: starts after the members it uses
};

// Runs `body` between the probes: wall seconds, VmHWM growth over the RSS at the start, and
// the sampled peak growth of anonymous RSS. `body` adds its own figures to the object.
Json Measured(const std::function<absl::Status(Json&)>& body) {
  const MemStatus before = ReadMemStatus();
  const int64_t anon_before = AnonRssBytes();
  Json out = Json::object();
  absl::Status status;
  double seconds = 0;
  int64_t anon_peak = 0;
  {
    AnonPeakSampler sampler;
    const Clock::time_point t0 = Clock::now();
    status = body(out);
    seconds = Seconds(t0);
    anon_peak = sampler.Stop();
  }
  const MemStatus after = ReadMemStatus();
  if (!status.ok()) return Json{{"error", status.ToString()}};
  out["seconds"] = seconds;
  out["rss_before_bytes"] = before.rss;
  out["hwm_bytes"] = after.hwm;
  out["hwm_growth_bytes"] = after.hwm - before.rss;
  out["anon_peak_growth_bytes"] = anon_peak - anon_before;
  out["rss_file_after_bytes"] = after.file;
  return out;
}

// Runs `step` in a forked child and returns the JSON it sends back over a pipe, or
// {"error": ...}. The parent holds no weights and never started LibTorch's thread pools, so
// the child's VmHWM is the step's (plus the small parent image) and forking is safe.
Json InChild(const std::function<Json()>& step) {
  int fds[2];
  if (::pipe(fds) != 0) return Json{{"error", "pipe failed"}};
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Json{{"error", "fork failed"}};
  if (pid == 0) {
    ::close(fds[0]);
    std::string text;
    try {
      text = step().dump();
    } catch (const std::exception& e) {
      text = Json{{"error", e.what()}}.dump();
    }
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fds[1], text.data() + done, text.size() - done);
      if (n <= 0) ::_exit(3);
      done += static_cast<size_t>(n);
    }
    std::fflush(nullptr);
    ::_exit(0);  // no destructors: the parent's copies of static objects are not the child's
  }
  ::close(fds[1]);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || j.is_discarded()) {
    return Json{{"error", absl::StrFormat("step child ended with wait status %d", status)}};
  }
  return j;
}

// --- Checkpoints ---------------------------------------------------------------------------

struct CheckpointSize {
  std::string name;
  int64_t hidden, layers, intermediate, vocab, heads, kv_heads;
  int shards;
};

// TinyHfConfig's Llama (llama3 rope scaling, untied lm_head) at bench sizes.
Json ConfigOf(const CheckpointSize& s) {
  Json c = tailor::testing::TinyHfConfig("LlamaForCausalLM");
  c["hidden_size"] = s.hidden;
  c["num_hidden_layers"] = s.layers;
  c["intermediate_size"] = s.intermediate;
  c["vocab_size"] = s.vocab;
  c["num_attention_heads"] = s.heads;
  c["num_key_value_heads"] = s.kv_heads;
  return c;
}

// Child step: writes the checkpoint into `dir` and reports its sizes.
Json Generate(const CheckpointSize& s, const std::string& dir) {
  const Clock::time_point t0 = Clock::now();
  const Json config = ConfigOf(s);
  const std::vector<model::RawTensor> tensors =
      tailor::testing::HfTestTensors(config, model::DType::kBF16, /*seed=*/7);
  int64_t params = 0, largest = 0, bytes = 0;
  for (const model::RawTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    params += n;
    largest = std::max(largest, n);
    bytes += static_cast<int64_t>(t.data.size());
  }
  const absl::Status st = tailor::testing::WriteHfCheckpointFiles(dir, config, tensors, s.shards);
  if (!st.ok()) return Json{{"error", st.ToString()}};
  return Json{{"seconds", Seconds(t0)},
              {"params", params},
              {"tensors", tensors.size()},
              {"weight_bytes", bytes},
              {"f32_model_bytes", 4 * params},
              {"largest_tensor_f32_bytes", 4 * largest}};
}

std::vector<std::string> ShardPaths(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".safetensors") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t FileBytes(const std::vector<std::string>& paths) {
  int64_t total = 0;
  for (const std::string& p : paths) total += static_cast<int64_t>(fs::file_size(p));
  return total;
}

// --- Steps (each run in its own child) -----------------------------------------------------

at::ScalarType ScalarOf(model::DType d) {
  return d == model::DType::kBF16 ? torch::kBFloat16
         : d == model::DType::kF16 ? torch::kHalf
                                   : torch::kFloat;
}

// The baseline of (a): what a loader without mapping does. Every shard is read whole, then
// every tensor is converted to its own F32 tensor while the shards are still held.
absl::Status NaiveImport(const std::string& dir, Json& out) {
  std::vector<model::SafetensorsFile> files;
  for (const std::string& path : ShardPaths(dir)) {
    absl::StatusOr<model::SafetensorsFile> f = model::SafetensorsFile::Read(path);
    if (!f.ok()) return f.status();
    files.push_back(*std::move(f));
  }
  std::map<std::string, at::Tensor> tensors;
  int64_t f32_bytes = 0;
  for (const model::SafetensorsFile& f : files) {
    for (const model::TensorEntry& e : f.tensors()) {
      const absl::string_view b = f.Bytes(e);
      const at::Tensor view =
          torch::from_blob(const_cast<char*>(b.data()), e.shape, ScalarOf(e.dtype));
      at::Tensor t = view.to(torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
      f32_bytes += t.numel() * 4;
      tensors.emplace(e.name, std::move(t));
    }
  }
  out["tensors_f32_bytes"] = f32_bytes;
  return absl::OkStatus();
}

Json NaiveStep(const std::string& dir) {
  return Measured([&](Json& out) { return NaiveImport(dir, out); });
}

// (a) and the save (c) needs: Open + ImportHfModel measured, then (unless `student_dir` is
// empty) SaveHybridLM (F32, as a compression job leaves a student) measured on its own.
Json ImportStep(const std::string& dir, const std::string& student_dir) {
  std::optional<model::HybridLM> imported;
  Json out = Measured([&](Json&) -> absl::Status {
    absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(dir);
    if (!ckpt.ok()) return ckpt.status();
    absl::StatusOr<model::HybridLM> m = hf::ImportHfModel(*ckpt);
    if (!m.ok()) return m.status();
    imported = *std::move(m);
    return absl::OkStatus();
  });
  if (out.contains("error")) return out;
  int64_t numel = 0;
  for (const at::Tensor& p : (*imported)->parameters()) numel += p.numel();
  out["model_f32_bytes"] = 4 * numel;
  if (student_dir.empty()) return out;
  out["save"] = Measured([&](Json&) { return model::SaveHybridLM(*imported, student_dir); });
  return out;
}

// Baseline of (b): the shards copied 1 MiB at a time through user space, without fsync as
// the GGUF writer. With `sync`, each file is fsynced before close: the disk-bound floor of
// (c), which writes the same bytes and fsyncs them.
absl::Status CopyFiles(const std::vector<std::string>& paths, const std::string& out_dir,
                       bool sync) {
  std::vector<char> buf(1 << 20);
  for (const std::string& p : paths) {
    const std::string to = out_dir + "/" + fs::path(p).filename().string();
    const int in = ::open(p.c_str(), O_RDONLY);
    const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    bool ok = in >= 0 && out >= 0;
    for (ssize_t n; ok && (n = ::read(in, buf.data(), buf.size())) != 0;) {
      ok = n > 0 && ::write(out, buf.data(), static_cast<size_t>(n)) == n;
    }
    if (ok && sync) ok = ::fsync(out) == 0;
    if (in >= 0) ::close(in);
    if (out >= 0) ok = ::close(out) == 0 && ok;
    if (!ok) return absl::InternalError(absl::StrCat("copy ", p, " -> ", to, " failed"));
  }
  return absl::OkStatus();
}

Json CopyStep(const std::string& dir, const std::string& out_dir, bool sync) {
  return Measured([&](Json&) {
    fs::create_directories(out_dir);
    return CopyFiles(ShardPaths(dir), out_dir, sync);
  });
}

// (b): Open + ExportHfToGguf with the default options (matrices keep BF16).
Json GgufStep(const std::string& dir, const std::string& path) {
  return Measured([&](Json& out) -> absl::Status {
    absl::StatusOr<hf::HfCheckpoint> ckpt = hf::HfCheckpoint::Open(dir);
    if (!ckpt.ok()) return ckpt.status();
    absl::StatusOr<tailor::gguf::GgufExportSummary> s = tailor::gguf::ExportHfToGguf(*ckpt, path);
    if (!s.ok()) return s.status();
    out["arch"] = s->arch;
    out["gguf_bytes"] = static_cast<int64_t>(fs::file_size(path));
    return absl::OkStatus();
  });
}

// True when every tensor of `a` is in `b` with the same dtype, shape and bytes.
absl::StatusOr<bool> SameTensors(const hf::HfCheckpoint& a, const hf::HfCheckpoint& b) {
  if (a.tensor_names() != b.tensor_names()) return false;
  for (const std::string& name : a.tensor_names()) {
    absl::StatusOr<hf::TensorView> x = a.Tensor(name), y = b.Tensor(name);
    if (!x.ok()) return x.status();
    if (!y.ok()) return y.status();
    if (x->dtype != y->dtype || *x->shape != *y->shape || x->size_bytes != y->size_bytes ||
        std::memcmp(x->data, y->data, x->size_bytes) != 0) {
      return false;
    }
  }
  return true;
}

// (c): Open (the parent) + ExportStudentAsHf measured; then, not timed, the round trip
// checked tensor by tensor against the parent.
Json StudentStep(const std::string& dir, const std::string& student_dir,
                 const std::string& out_dir) {
  Json out = Measured([&](Json& o) -> absl::Status {
    absl::StatusOr<hf::HfCheckpoint> parent = hf::HfCheckpoint::Open(dir);
    if (!parent.ok()) return parent.status();
    absl::StatusOr<hf::HfExportSummary> s = hf::ExportStudentAsHf(student_dir, *parent, out_dir);
    if (!s.ok()) return s.status();
    o["shards"] = s->shards.size();
    o["weight_bytes"] = s->weight_bytes;
    return absl::OkStatus();
  });
  if (out.contains("error")) return out;
  absl::StatusOr<hf::HfCheckpoint> parent = hf::HfCheckpoint::Open(dir);
  absl::StatusOr<hf::HfCheckpoint> exported = hf::HfCheckpoint::Open(out_dir);
  if (!parent.ok() || !exported.ok()) {
    out["error"] = (parent.ok() ? exported.status() : parent.status()).ToString();
    return out;
  }
  absl::StatusOr<bool> same = SameTensors(*parent, *exported);
  if (!same.ok()) {
    out["error"] = same.status().ToString();
    return out;
  }
  out["bit_identical"] = *same;
  return out;
}

// --- One checkpoint size -------------------------------------------------------------------

double Ratio(const Json& a, const Json& b, const char* key) {
  const double d = b.value(key, 0.0);
  return d > 0 ? a.value(key, 0.0) / d : 0.0;
}

void AddRatios(Json& r) {
  const Json& imp = r["import"];
  const Json& naive = r["naive_import"];
  const double bytes = r["shard_bytes"].get<double>();
  const double gguf_mbs = bytes / kMiB / r["gguf"]["seconds"].get<double>();
  const double copy_mbs = bytes / kMiB / r["copy"]["seconds"].get<double>();
  r["gguf"]["mb_per_s"] = gguf_mbs;
  r["copy"]["mb_per_s"] = copy_mbs;
  r["ratios"] = {
      {"import_vs_naive_seconds", Ratio(imp, naive, "seconds")},
      {"import_vs_naive_hwm_growth", Ratio(imp, naive, "hwm_growth_bytes")},
      {"import_vs_naive_anon_growth", Ratio(imp, naive, "anon_peak_growth_bytes")},
      {"import_anon_growth_vs_f32_model",
       imp["anon_peak_growth_bytes"].get<double>() / r["f32_model_bytes"].get<double>()},
      {"gguf_vs_copy_throughput", gguf_mbs / copy_mbs},
      {"student_export_vs_import_seconds", Ratio(r["student_export"], imp, "seconds")},
      {"student_export_vs_copy_fsync_seconds",
       Ratio(r["student_export"], r["copy_fsync"], "seconds")}};
}

// The run with the median seconds of `runs` (each a step's JSON), with every run's seconds
// beside it; the first error when any run failed.
Json MedianRun(const std::vector<Json>& runs) {
  std::vector<const Json*> order;
  for (const Json& r : runs) {
    if (r.contains("error")) return r;
    order.push_back(&r);
  }
  std::sort(order.begin(), order.end(), [](const Json* a, const Json* b) {
    return (*a)["seconds"].get<double>() < (*b)["seconds"].get<double>();
  });
  Json out = *order[order.size() / 2];
  out["runs_seconds"] = Json::array();
  for (const Json& r : runs) out["runs_seconds"].push_back(r["seconds"]);
  return out;
}

// One repetition of every measured step, each in its own child after a sync(), so no step
// pays for the previous one's dirty pages. Copy and GGUF swap order on odd repetitions.
void RunRepetition(const std::string& base, int rep,
                   std::map<std::string, std::vector<Json>>& runs) {
  const std::string dir = base + "/parent";
  auto step = [&](const char* key, const std::function<Json()>& fn) {
    ::sync();
    runs[key].push_back(InChild(fn));
  };
  step("naive_import", [&] { return NaiveStep(dir); });
  // The first import also saves the student that every student export reads.
  step("import", [&] { return ImportStep(dir, rep == 0 ? base + "/student" : ""); });
  for (int i = 0; i < 2; ++i) {
    if ((i == 0) == (rep % 2 == 0)) {
      step("copy", [&] { return CopyStep(dir, base + "/copy", /*sync=*/false); });
      fs::remove_all(base + "/copy");
    } else {
      step("gguf", [&] { return GgufStep(dir, base + "/model.gguf"); });
      fs::remove(base + "/model.gguf");
    }
  }
  step("student_export", [&] {
    return StudentStep(dir, base + "/student", base + "/exported");
  });
  fs::remove_all(base + "/exported");
  step("copy_fsync", [&] { return CopyStep(dir, base + "/copy", /*sync=*/true); });
  fs::remove_all(base + "/copy");
}

// Every step of one size, `reps` times; the figures are each step's median run. The naive
// baseline and the import both read shards the writer just left in the page cache.
Json RunSize(const CheckpointSize& s, const std::string& scratch, int reps) {
  const std::string base = absl::StrCat(scratch, "/", s.name);
  const std::string dir = base + "/parent";
  fs::create_directories(dir);
  Json r = {{"name", s.name}, {"config", ConfigOf(s)}, {"shards", s.shards},
            {"repetitions", reps}};
  std::fprintf(stderr, "[%s] writing the checkpoint\n", s.name.c_str());
  r["generate"] = InChild([&] { return Generate(s, dir); });
  bool ok = !r["generate"].contains("error");
  if (ok) {
    for (const char* k :
         {"params", "weight_bytes", "f32_model_bytes", "largest_tensor_f32_bytes"}) {
      r[k] = r["generate"][k];
    }
    r["shard_bytes"] = FileBytes(ShardPaths(dir));
    std::map<std::string, std::vector<Json>> runs;
    for (int rep = 0; rep < reps && ok; ++rep) {
      std::fprintf(stderr, "[%s] repetition %d of %d\n", s.name.c_str(), rep + 1, reps);
      RunRepetition(base, rep, runs);
      for (const auto& [key, list] : runs) ok = ok && !list.back().contains("error");
    }
    for (const auto& [key, list] : runs) r[key] = MedianRun(list);
    // The save ran once, inside the first import.
    if (!runs["import"].empty()) r["save"] = runs["import"].front().value("save", Json());
  }
  for (const char* key : {"generate", "naive_import", "import", "copy", "gguf", "save",
                          "student_export", "copy_fsync"}) {
    if (r.contains(key) && r[key].is_object() && r[key].contains("error")) {
      ok = false;
      std::fprintf(stderr, "[%s] %s: %s\n", s.name.c_str(), key,
                   r[key]["error"].get<std::string>().c_str());
    }
  }
  std::error_code ec;
  fs::remove_all(base, ec);
  if (ok) AddRatios(r);
  return r;
}

// --- Report --------------------------------------------------------------------------------

double MiB(const Json& j, const char* key) { return j.value(key, 0.0) / kMiB; }

void PrintTables(const Json& sizes) {
  std::printf("\n(a) import: Open + ImportHfModel vs naive (shards read whole + F32 copies)\n");
  std::printf("%-6s %8s %8s %8s %8s | %8s %8s %6s | %9s %9s %9s %9s %6s\n", "size", "params_M",
              "ckpt_MiB", "f32_MiB", "maxt_MiB", "import_s", "naive_s", "ratio", "imp_hwm",
              "imp_anon", "nai_hwm", "nai_anon", "ratio");
  for (const Json& r : sizes) {
    if (!r.contains("ratios")) continue;
    const Json &imp = r["import"], &nai = r["naive_import"], &q = r["ratios"];
    std::printf(
        "%-6s %8.1f %8.0f %8.0f %8.1f | %8.2f %8.2f %6.2f | %9.0f %9.0f %9.0f %9.0f %6.2f\n",
        r["name"].get<std::string>().c_str(), r["params"].get<double>() / 1e6,
        MiB(r, "shard_bytes"), MiB(r, "f32_model_bytes"), MiB(r, "largest_tensor_f32_bytes"),
        imp["seconds"].get<double>(), nai["seconds"].get<double>(),
        q["import_vs_naive_seconds"].get<double>(), MiB(imp, "hwm_growth_bytes"),
        MiB(imp, "anon_peak_growth_bytes"), MiB(nai, "hwm_growth_bytes"),
        MiB(nai, "anon_peak_growth_bytes"), q["import_vs_naive_anon_growth"].get<double>());
  }
  std::printf("\n(b) HF -> GGUF (Open + ExportHfToGguf) vs a 1 MiB read/write copy, shard MiB/s\n");
  std::printf("%-6s %8s %8s %10s %8s %10s %6s\n", "size", "ckpt_MiB", "gguf_s", "gguf_MiB/s",
              "copy_s", "copy_MiB/s", "ratio");
  for (const Json& r : sizes) {
    if (!r.contains("ratios")) continue;
    std::printf("%-6s %8.0f %8.2f %10.0f %8.2f %10.0f %6.2f\n",
                r["name"].get<std::string>().c_str(), MiB(r, "shard_bytes"),
                r["gguf"]["seconds"].get<double>(), r["gguf"]["mb_per_s"].get<double>(),
                r["copy"]["seconds"].get<double>(), r["copy"]["mb_per_s"].get<double>(),
                r["ratios"]["gguf_vs_copy_throughput"].get<double>());
  }
  std::printf("\n(c) student export (Open + ExportStudentAsHf, untouched import) vs import and\n"
              "    vs the shards copied with fsync (cpsync: the same bytes written and synced)\n");
  std::printf("%-6s %8s %9s %8s %6s %8s %6s %9s %9s %10s\n", "size", "save_s", "export_s",
              "import_s", "ratio", "cpsync_s", "ratio", "exp_hwm", "exp_anon", "identical");
  for (const Json& r : sizes) {
    if (!r.contains("ratios")) continue;
    const Json& e = r["student_export"];
    std::printf("%-6s %8.2f %9.2f %8.2f %6.2f %8.2f %6.2f %9.0f %9.0f %10s\n",
                r["name"].get<std::string>().c_str(),
                r["save"]["seconds"].get<double>(), e["seconds"].get<double>(),
                r["import"]["seconds"].get<double>(),
                r["ratios"]["student_export_vs_import_seconds"].get<double>(),
                r["copy_fsync"]["seconds"].get<double>(),
                r["ratios"]["student_export_vs_copy_fsync_seconds"].get<double>(),
                MiB(e, "hwm_growth_bytes"), MiB(e, "anon_peak_growth_bytes"),
                e.value("bit_identical", false) ? "yes" : "NO");
  }
  std::printf("(memory columns: MiB of growth during the step; hwm = VmHWM, counts mapped shard\n"
              " pages; anon = sampled peak of anonymous RSS)\n");
}

double LoadAverage() {
  double load[1] = {0};
  return ::getloadavg(load, 1) == 1 ? load[0] : 0;
}

constexpr char kMethod[] =
    "Each step runs in its own forked child of a parent that holds no weights, after a "
    "sync(), `repetitions` times per size; each step's figures are its median run by seconds "
    "(runs_seconds lists all). seconds: wall time of the step. hwm_growth_bytes: VmHWM at the "
    "end minus VmRSS at the start (the exact kernel peak, but it also counts the pages of the "
    "memory-mapped shards: clean page cache, reclaimable, and ~5-10 MiB of library pages). "
    "anon_peak_growth_bytes: peak of anonymous RSS (statm resident - shared) sampled every "
    "1 ms, minus its value at the start (a lower bound). Shards are in the page cache (just "
    "written) for every step. GGUF and copy MB/s are shard bytes / seconds; neither fsyncs. "
    "copy_fsync: the same copy with an fsync per file, the disk-bound floor of the student "
    "export, which writes as many bytes. "
    "SaveHybridLM and the student export fsync what they write (WriteFileAtomically).";

constexpr char kUsage[] =
    "usage: bench_hf_io [--quick] [--json-out PATH] [--dir DIR] [--repeat N]\n"
    "  --json-out PATH  JSON report (default bench/out/hf_io.json; --json is the same)\n"
    "  --dir DIR        scratch folder for the checkpoints (default: a new one under\n"
    "                   $TEST_TMPDIR or the system temp dir; removed at the end)\n"
    "  --repeat N       runs of every measured step per size, each in a fresh child; the\n"
    "                   figures are each step's median run (default 5; 1 with --quick)\n"
    "  --quick          smoke mode (the test command's bench_hf_io_quick): one tiny\n"
    "                   checkpoint (hidden 64, 2 layers, vocab 512); figures mean nothing\n"
    "  --help           this text\n"
    "Full mode: LlamaForCausalLM BF16, vocab 32000: S = hidden 512, 4 layers, 2 shards;\n"
    "M = hidden 1024, 8 layers, intermediate 2816, 3 shards (~0.35 GB; ~1.5 GiB RAM peak).\n";

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "bench/out/hf_io.json", scratch;
  bool quick = false;
  int reps = 0;  // 0: 5, or 1 with --quick
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    command += " " + a;
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (a == "--quick") {
      quick = true;
      continue;
    }
    const bool known = a == "--json" || a == "--json-out" || a == "--dir" || a == "--repeat";
    if (!known || i + 1 >= argc) {
      std::fprintf(stderr, "bench_hf_io: %s '%s'\n%s",
                   known ? "missing value for" : "unknown option", a.c_str(), kUsage);
      return 2;
    }
    const std::string v = argv[++i];
    command += " " + v;
    if (a == "--dir") scratch = v;
    else if (a == "--repeat") reps = std::max(1, std::atoi(v.c_str()));
    else json_path = v;
  }
  std::vector<CheckpointSize> sizes;
  if (quick) {
    sizes.push_back({"quick", 64, 2, 176, 512, 4, 2, 2});
  } else {
    sizes.push_back({"S", 512, 4, 1408, 32000, 8, 4, 2});
    sizes.push_back({"M", 1024, 8, 2816, 32000, 16, 8, 3});
  }
  const bool own_scratch = scratch.empty();
  if (own_scratch) scratch = tailor::testing::NewTestDir("tailor-bench-hf-io-");
  std::error_code ec;
  if (!scratch.empty()) fs::create_directories(scratch, ec);
  if (scratch.empty() || !fs::is_directory(scratch)) {
    std::fprintf(stderr, "bench_hf_io: cannot make a scratch folder\n");
    return 1;
  }
  Json out = {{"bench", "hf_io"},
              {"date", tailor::bench::UtcNow()},
              {"machine", tailor::bench::Machine()},
              {"quick", quick},
              {"command", command},
              {"method", kMethod},
              {"loadavg_start", LoadAverage()}};
  bool failed = false;
  for (const CheckpointSize& s : sizes) {
    Json r = RunSize(s, scratch, reps > 0 ? reps : (quick ? 1 : 5));
    failed = failed || !r.contains("ratios");
    out["sizes"].push_back(std::move(r));
  }
  out["loadavg_end"] = LoadAverage();
  if (own_scratch) fs::remove_all(scratch, ec);
  PrintTables(out["sizes"]);
  const fs::path parent = fs::path(json_path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  std::ofstream file(json_path);
  file << out.dump(2) << "\n";
  file.close();
  if (!file) {
    std::fprintf(stderr, "bench_hf_io: cannot write %s\n", json_path.c_str());
    return 1;
  }
  std::printf("\nJSON: %s\n", json_path.c_str());
  return failed ? 1 : 0;
}
