// bench_entropy [--quick] [--rows R] [--cols C] [--threads T] [--json-out PATH]
//
// Synthetic "real-looking" weights (Gaussian and Student-t(3) BF16, per-row quantised int8 and
// int4), per tensor: empirical entropy vs coded bits/weight for the autotuned frontier,
// single-core decode GB/s vs memcpy on the same bytes, and batch-1 fused decode-GEMV vs
// dense GEMV latency. Prints a table and writes JSON (docs/benchmarks.md, "Entropy coding").
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/entropy/png.h"
#include "compression/entropy/autotune.h"
#include "compression/entropy/codec.h"
#include "compression/entropy/quantize.h"
#include "compression/entropy/gemv.h"
#include "nlohmann/json.hpp"
#ifdef TAILOR_ENTROPY_CUDA
#include <cuda_runtime_api.h>

#include "compression/entropy/gemv_cuda.h"
#endif

namespace te = tailor::entropy;

namespace {

uint16_t ToBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7FFF + ((b >> 16) & 1);
  return static_cast<uint16_t>(b >> 16);
}

std::vector<uint8_t> Make(te::DType dtype, int64_t rows, int64_t cols, bool heavy, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::student_t_distribution<float> t3(3.0f);
  std::vector<uint8_t> out(te::DenseBytes(dtype, rows, cols), 0);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 1e-12f;
    for (auto& v : row) {
      v = 0.02f * (heavy ? t3(rng) : normal(rng));
      amax = std::max(amax, std::fabs(v));
    }
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      if (dtype == te::DType::kBF16) {
        const uint16_t h = ToBf16(row[c]);
        std::memcpy(&out[2 * i], &h, 2);
      } else if (dtype == te::DType::kInt8) {
        out[i] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(row[c] / amax * 127)));
      } else if (dtype == te::DType::kFP8) {
        out[i] = te::FloatToE4M3(row[c] / amax * 448.0f);  // quantize.h's per-row e4m3
      } else {
        const uint8_t q = static_cast<uint8_t>(std::lround(row[c] / amax * 7)) & 0xF;
        out[i / 2] |= (i & 1) ? q << 4 : q;
      }
    }
  }
  return out;
}

template <typename Fn>
double MedianSeconds(int reps, Fn fn) {
  fn();
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

#ifdef TAILOR_ENTROPY_CUDA
// Batch-1 GEMV on the device: fused decode-GEMV from the coded container vs the dense
// warp-per-row kernel on the storage bytes, CUDA-event timed (median of 7 batches of 20
// back-to-back launches, so launch overhead is included as a decode step would pay it).
nlohmann::json CudaRow(const char* name, const te::TensorView& view, const te::CodecConfig& config) {
  auto coded = te::Parse(*te::Encode(view, config));
  if (!coded.ok()) return {{"error", coded.status().ToString()}};
  auto cm = te::UploadCoded(*coded);
  auto dm = te::UploadDense(view);
  if (!cm.ok() || !dm.ok()) {
    return {{"error", (cm.ok() ? dm.status() : cm.status()).ToString()}};
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(view.cols);
  for (float& v : x) v = normal(rng);
  auto xd = te::CudaBuffer::Alloc(x.size() * sizeof(float));
  auto yd = te::CudaBuffer::Alloc(view.rows * sizeof(float));
  if (!xd.ok() || !yd.ok()) return {{"error", "cudaMalloc"}};
  cudaMemcpy(xd->get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  const float* xp = static_cast<const float*>(xd->get());
  float* yp = static_cast<float*>(yd->get());
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  auto time_us = [&](auto launch) {
    for (int i = 0; i < 3; ++i) (void)launch();
    std::vector<double> us;
    for (int b = 0; b < 7; ++b) {
      cudaEventRecord(e0);
      for (int i = 0; i < 20; ++i) (void)launch();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      us.push_back(1e3 * ms / 20);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  const double fused_us = time_us([&] { return te::FusedGemvCuda(*cm, xp, nullptr, yp, nullptr); });
  const absl::Status decode = te::CudaDecodeStatus(*cm, nullptr);
  const double dense_us = time_us([&] { return te::DenseGemvCuda(*dm, xp, nullptr, yp, nullptr); });
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  const double dense_bytes = static_cast<double>(view.data.size());
  const double bpw = 8.0 * coded->size_bytes() / (view.rows * view.cols);
  std::printf("  cuda %-11s k=%d tl=%-2d cw=%-5d %6.3f b/w  dense %8.2f us  fused %8.2f us  "
              "ratio %5.2f  decode %7.1f GB/s (coded %6.1f GB/s)%s\n",
              name, config.symbols_per_codeword, config.table_log, config.chunk_width, bpw,
              dense_us, fused_us, fused_us / dense_us, dense_bytes / fused_us / 1e3,
              coded->size_bytes() / fused_us / 1e3, decode.ok() ? "" : "  DECODE ERROR");
  return {{"tensor", name}, {"k", config.symbols_per_codeword}, {"table_log", config.table_log},
          {"chunk_width", config.chunk_width}, {"bits_per_weight", bpw},
          {"dtype_bits", te::DTypeBits(view.dtype)},
          {"entropy_bits_per_weight_k1", te::EmpiricalBitsPerWeight(view, 1)},
          {"dense_gemv_us", dense_us}, {"fused_gemv_us", fused_us},
          {"fused_over_dense", fused_us / dense_us},
          {"decode_gb_per_s", dense_bytes / fused_us / 1e3},
          {"coded_gb_per_s", coded->size_bytes() / fused_us / 1e3},
          {"decode_status", decode.ToString()}};
}
#endif

}  // namespace

constexpr char kUsage[] =
    "bench_entropy: entropy-coded weights against dense, per weight distribution: bits per\n"
    "weight, encode/decode throughput and batch-1 GEMV latency fused vs dense (docs/entropy.md)\n"
    "  --rows N          matrix rows (default 2048)\n"
    "  --cols N          matrix columns (default 2048)\n"
    "  --threads N       CPU threads (default 1)\n"
    "  --json-out PATH   where the JSON goes (default bench/out/entropy.json; --json is the\n"
    "                    same); the frontier plot goes beside it as *_frontier.png\n"
    "  --quick           smoke mode: 256x256 tensors, 3 repetitions (the test command's\n"
    "                    bench_entropy_quick; its timings mean nothing)\n"
#ifdef TAILOR_ENTROPY_CUDA
    "  --cuda-only 1     CUDA rows for fixed configurations only\n"
#endif
    "  --help            this text\n";

// Writes `j` to `path` (its folder made in main); false, with a message, when that fails.
bool WriteJson(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) {
    std::fprintf(stderr, "bench_entropy: cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("JSON: %s\n", path.c_str());
  return true;
}

int main(int argc, char** argv) {
  int64_t rows = 2048, cols = 2048;
  int threads = 1;
  int reps = 7;  // autotune latency: median of reps; decode/memcpy: median of reps - 2
  bool cuda_only = false;
  std::string json_path = "bench/out/entropy.json";
  // --quick changes the defaults, so flags given beside it still apply wherever they stand.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") {
      rows = cols = 256;
      reps = 3;
    }
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (a == "--quick") continue;
    const bool known = a == "--rows" || a == "--cols" || a == "--threads" || a == "--json" ||
                       a == "--json-out" || a == "--cuda-only";
    if (!known || i + 1 >= argc) {
      std::fprintf(stderr, "bench_entropy: %s '%s'\n%s",
                   known ? "missing value for" : "unknown option", a.c_str(), kUsage);
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--rows") rows = std::stoll(v);
    if (a == "--cols") cols = std::stoll(v);
    if (a == "--threads") threads = std::stoi(v);
    if (a == "--json" || a == "--json-out") json_path = v;
    if (a == "--cuda-only") cuda_only = v == "1";
  }
  {
    // The JSON's folder, which the frontier plot shares.
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(json_path).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  }
#ifdef TAILOR_ENTROPY_CUDA
  // --cuda-only 1: skip the CPU autotune, CUDA rows for fixed configurations only.
  const bool have_cuda = te::CudaDeviceCount() > 0;
  if (!have_cuda) std::printf("no CUDA device: CUDA rows skipped\n");
#else
  (void)cuda_only;
#endif
  struct Spec {
    const char* name;
    te::DType dtype;
    bool heavy;
  };
  const std::vector<Spec> specs = {{"bf16_gauss", te::DType::kBF16, false},
                                   {"bf16_t3", te::DType::kBF16, true},
                                   {"fp8_gauss", te::DType::kFP8, false},
                                   {"fp8_t3", te::DType::kFP8, true},
                                   {"int8_gauss", te::DType::kInt8, false},
                                   {"int4_gauss", te::DType::kInt4, false},
                                   {"int4_t3", te::DType::kInt4, true}};
#ifdef TAILOR_ENTROPY_CUDA
  if (cuda_only) {
    nlohmann::json rows_json = nlohmann::json::array();
    for (const Spec& s : specs) {
      if (!have_cuda) break;
      const std::vector<uint8_t> dense = Make(s.dtype, rows, cols, s.heavy, 1);
      const te::TensorView view{s.dtype, rows, cols, dense};
      const int max_k = s.dtype == te::DType::kInt4 ? 4 : 2;
      for (int k : {1, max_k}) {
        for (int cw : {256, 1024, 4096}) rows_json.push_back(CudaRow(s.name, view, {k, 12, cw}));
      }
    }
    const nlohmann::json report = {
        {"rows", rows}, {"cols", cols}, {"cuda_device", have_cuda}, {"cuda", rows_json}};
    return WriteJson(json_path, report) ? 0 : 1;
  }
#endif
  // The Pareto frontiers, plotted: x = bits/weight (0..dense bits), y = fused GEMV latency
  // relative to the tensor's dense GEMV (0..20x, ticks every 5x, grey line at 1x); one colour per tensor, the dense point as
  // a larger square, frontier points joined. Axes only (no text): docs/benchmarks.md has
  // the legend.
  tailor::bench::Canvas plot(800, 500);
  const uint32_t colors[] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd, 0x8c564b, 0xe377c2};
  const int x0 = 50, y0 = 460, x1 = 780, y1 = 20;
  plot.Line(x0, y0, x1, y0, 0);
  plot.Line(x0, y0, x0, y1, 0);
  for (int b = 0; b <= 16; b += 2) plot.Line(x0 + (x1 - x0) * b / 16, y0, x0 + (x1 - x0) * b / 16, y0 + 6, 0);
  for (int r = 0; r <= 4; ++r) {
    const int y = y0 - (y0 - y1) * r / 4;
    plot.Line(x0 - 6, y, x0, y, 0);
  }
  plot.Line(x0, y0 - (y0 - y1) / 20, x1, y0 - (y0 - y1) / 20, 0xbbbbbb);  // 1x = dense speed
  int spec_index = 0;
  te::TuneSpace space;
  space.symbols_per_codeword = {1, 2, 4};
  space.table_log = {10, 12};
  space.chunk_width = {1024, 4096};
  nlohmann::json out = nlohmann::json::array();
  int64_t total_weights = 0, total_dense = 0, total_best = 0;
  double total_entropy_bits = 0;
  std::printf("%-11s %5s %8s %8s %7s %5s %6s %9s %9s %9s %9s %9s %6s\n", "tensor", "bits",
              "H1 b/w", "H_k b/w", "coded", "k/tl", "chunk", "dec GB/s", "memcpy", "dense us",
              "fused us", "ratio", "front");
  for (const Spec& s : specs) {
    const std::vector<uint8_t> dense = Make(s.dtype, rows, cols, s.heavy, 1);
    const te::TensorView view{s.dtype, rows, cols, dense};
    auto f = te::AutotuneTensor(s.name, view, space, {.threads = threads, .reps = reps});
    if (!f.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.name, f.status().ToString().c_str());
      return 1;
    }
    // Densest measured configuration, and its decode speed vs memcpy of the dense bytes.
    const te::ConfigPoint* best = nullptr;
    for (const auto& p : f->candidates) {
      if (!p.dense && !p.pruned && (best == nullptr || p.bytes < best->bytes)) best = &p;
    }
    const te::ConfigPoint& dense_pt = f->candidates[0];
    nlohmann::json j = {{"tensor", s.name},
                        {"dtype", te::DTypeName(s.dtype)},
                        {"rows", rows},
                        {"cols", cols},
                        {"entropy_bits_per_weight_k1", f->entropy_bits_per_weight},
                        {"dense_gemv_us", dense_pt.latency_us}};
    nlohmann::json cands = nlohmann::json::array();
    for (const auto& p : f->candidates) {
      cands.push_back({{"dense", p.dense}, {"k", p.config.symbols_per_codeword},
                       {"table_log", p.config.table_log}, {"chunk_width", p.config.chunk_width},
                       {"predicted_bytes", p.predicted_bytes}, {"bytes", p.bytes},
                       {"bits_per_weight", 8.0 * p.bytes / (rows * cols)},
                       {"gemv_us", p.latency_us}, {"pruned", p.pruned}});
    }
    j["candidates"] = cands;
    nlohmann::json frontier = nlohmann::json::array();
    for (const auto& p : f->frontier) {
      frontier.push_back({{"dense", p.dense}, {"k", p.config.symbols_per_codeword},
                          {"table_log", p.config.table_log},
                          {"chunk_width", p.config.chunk_width}, {"bytes", p.bytes},
                          {"gemv_us", p.latency_us}});
    }
    j["frontier"] = frontier;
    total_weights += rows * cols;
    total_dense += f->dense_bytes;
    total_entropy_bits += f->entropy_bits_per_weight * rows * cols;
    if (best != nullptr) {
      auto coded = te::Parse(*te::Encode(view, best->config));
      const double dec_s = MedianSeconds(reps - 2, [&] { (void)te::Decode(*coded); });
      std::vector<uint8_t> dst(dense.size());
      const double cpy_s =
          MedianSeconds(reps - 2, [&] { std::memcpy(dst.data(), dense.data(), dense.size()); });
      const double dec_gbs = dense.size() / dec_s / 1e9, cpy_gbs = dense.size() / cpy_s / 1e9;
      const double hk = te::EmpiricalBitsPerWeight(view, best->config.symbols_per_codeword);
      const double bpw = 8.0 * best->bytes / (rows * cols);
      total_best += best->bytes;
      j["best"] = {{"k", best->config.symbols_per_codeword},
                   {"table_log", best->config.table_log},
                   {"chunk_width", best->config.chunk_width},
                   {"bits_per_weight", bpw},
                   {"entropy_bits_per_weight_k", hk},
                   {"fused_gemv_us", best->latency_us},
                   {"decode_gb_per_s", dec_gbs},
                   {"memcpy_gb_per_s", cpy_gbs}};
      std::printf("%-11s %5d %8.3f %8.3f %7.3f %2d/%-2d %6d %9.3f %9.2f %9.1f %9.1f %9.2f %6zu\n",
                  s.name, te::DTypeBits(s.dtype), f->entropy_bits_per_weight, hk, bpw,
                  best->config.symbols_per_codeword, best->config.table_log,
                  best->config.chunk_width, dec_gbs, cpy_gbs, dense_pt.latency_us,
                  best->latency_us, best->latency_us / dense_pt.latency_us, f->frontier.size());
#ifdef TAILOR_ENTROPY_CUDA
      if (have_cuda) j["cuda"] = CudaRow(s.name, view, best->config);
#endif
    } else {
      total_best += f->dense_bytes;
    }
    {
      const uint32_t color = colors[spec_index++ % 7];
      int px = -1, py = -1;
      for (const auto& p : f->frontier) {
        const double bpw = 8.0 * p.bytes / (rows * cols);
        const double rel = p.latency_us / dense_pt.latency_us;
        const int x = x0 + static_cast<int>((x1 - x0) * std::min(bpw, 16.0) / 16.0);
        const int y = y0 - static_cast<int>((y0 - y1) * std::min(rel, 20.0) / 20.0);
        if (px >= 0) plot.Line(px, py, x, y, color);
        plot.Box(x, y, p.dense ? 5 : 3, color);
        px = x;
        py = y;
      }
    }
    for (const auto& p : f->frontier) {
      std::printf("    frontier: %s k=%d tl=%d cw=%d  %.3f b/w  %.1f us\n", p.dense ? "dense" : "coded",
                  p.config.symbols_per_codeword, p.config.table_log, p.config.chunk_width,
                  8.0 * p.bytes / (rows * cols), p.latency_us);
    }
    out.push_back(j);
  }
  std::printf("total: %.3f b/w coded (densest) vs %.3f b/w entropy (k=1) vs %.3f b/w dense\n",
              8.0 * total_best / total_weights, total_entropy_bits / total_weights,
              8.0 * total_dense / total_weights);
  const std::string png_path =
      json_path.size() > 5 && json_path.substr(json_path.size() - 5) == ".json"
          ? json_path.substr(0, json_path.size() - 5) + "_frontier.png"
          : json_path + "_frontier.png";
  if (!plot.WritePng(png_path)) std::fprintf(stderr, "cannot write %s\n", png_path.c_str());
  std::printf("frontier plot: %s\n", png_path.c_str());
  const nlohmann::json report = {
      {"rows", rows},
      {"cols", cols},
      {"threads", threads},
      {"tensors", out},
      {"total_coded_bits_per_weight", 8.0 * total_best / total_weights},
      {"total_entropy_bits_per_weight", total_entropy_bits / total_weights},
      {"total_dense_bits_per_weight", 8.0 * total_dense / total_weights}};
  return WriteJson(json_path, report) ? 0 : 1;
}
