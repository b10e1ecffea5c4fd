// The CUDA fused decode-GEMV (compression/entropy/gemv_cuda.h) against the CPU kernels:
// decoded weights bit for bit, products within the documented float bound, corruption
// reported through the error flag. Skips when the machine has no CUDA device.
#include "compression/entropy/gemv_cuda.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "compression/entropy/gemv.h"
#include "gtest/gtest.h"
#include "tests/unit/compression/entropy_test_util.h"

namespace tailor::entropy {
namespace {

using testing::Dist;
using testing::MakeTensor;

#define SKIP_WITHOUT_CUDA()                                                          \
  if (CudaDeviceCount() == 0) {                                                      \
    GTEST_SKIP() << "no CUDA device: the CUDA kernel is compiled but not run here"; \
  }

// Device copy of a host float vector.
struct DeviceFloats {
  explicit DeviceFloats(const std::vector<float>& v) : n(v.size()) {
    auto b = CudaBuffer::Alloc(n * sizeof(float));
    EXPECT_TRUE(b.ok()) << b.status();
    buf = std::move(*b);
    if (n > 0) cudaMemcpy(buf.get(), v.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  }
  explicit DeviceFloats(size_t count) : DeviceFloats(std::vector<float>(count, -1.0f)) {}
  float* get() const { return static_cast<float*>(buf.get()); }
  std::vector<float> Host() const {
    std::vector<float> v(n);
    if (n > 0) cudaMemcpy(v.data(), buf.get(), n * sizeof(float), cudaMemcpyDeviceToHost);
    return v;
  }
  size_t n;
  CudaBuffer buf;
};

struct Case {
  DType dtype;
  int64_t rows, cols;
  CodecConfig config;
  Dist dist;
};

std::string Name(const Case& c) {
  return DTypeName(c.dtype) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols) +
         " k=" + std::to_string(c.config.symbols_per_codeword) +
         " tl=" + std::to_string(c.config.table_log) +
         " cw=" + std::to_string(c.config.chunk_width) +
         (c.config.code_all_planes ? " all-planes" : "");
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const Dist dists[] = {Dist::kGaussian, Dist::kHeavyTailed, Dist::kUniformBytes};
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kInt8, DType::kFP8, DType::kInt4}) {
    const int max_k = dtype == DType::kInt4 ? 4 : 2;
    int d = 0;
    for (int k = 1; k <= max_k; ++k) {
      for (int tl : {9, 12, 16}) {
        // Row slices with a short last slice, row groups with rows straddling symbols
        // (77 columns), and a single tiny row group (cols < 4k).
        const int64_t shapes[][2] = {{24, 1000}, {37, 77}, {5, 3}};
        for (const auto& s : shapes) {
          CodecConfig c{k, tl, s[1] >= 1000 ? 256 : 1024};
          c.code_all_planes = (d % 2) == 1;  // also force near-uniform planes through rANS
          cases.push_back({dtype, s[0], s[1], c, dists[d++ % 3]});
        }
      }
    }
  }
  cases.push_back({DType::kBF16, 64, 4096, {1, 12, 4096}, Dist::kGaussian});
  cases.push_back({DType::kInt4, 33, 129, {3, 11, 64}, Dist::kHeavyTailed});
  return cases;
}

TEST(EntropyCudaTest, DecodedWeightsEqualCpuBitForBit) {
  SKIP_WITHOUT_CUDA();
  for (const Case& c : Cases()) {
    SCOPED_TRACE(Name(c));
    const std::vector<uint8_t> dense = MakeTensor(c.dtype, c.rows, c.cols, c.dist, 5);
    auto coded = Parse(*Encode(TensorView{c.dtype, c.rows, c.cols, dense}, c.config));
    ASSERT_TRUE(coded.ok()) << coded.status();
    std::vector<float> want(c.rows * c.cols);
    ASSERT_TRUE(FusedValues(*coded, 0, c.rows * c.cols, want.data()).ok());
    auto dev = UploadCoded(*coded);
    ASSERT_TRUE(dev.ok()) << dev.status();
    DeviceFloats out(want.size());
    ASSERT_TRUE(DecodeValuesCuda(*dev, out.get(), nullptr).ok());
    ASSERT_TRUE(CudaDecodeStatus(*dev, nullptr).ok());
    const std::vector<float> got = out.Host();
    // Compare bits: fp8 tables hold NaNs, which never compare equal as floats.
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
  }
}

TEST(EntropyCudaTest, FusedAndDenseGpuMatchCpuWithinBound) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (const Case& c : Cases()) {
    if (c.dtype == DType::kFP8 && c.dist == Dist::kUniformBytes) continue;  // NaN weights
    if (c.dtype == DType::kF32 && c.dist == Dist::kUniformBytes) continue;  // NaN/Inf bits
    if (c.dtype == DType::kBF16 && c.dist == Dist::kUniformBytes) continue;
    SCOPED_TRACE(Name(c));
    const std::vector<uint8_t> dense = MakeTensor(c.dtype, c.rows, c.cols, c.dist, 7);
    const TensorView view{c.dtype, c.rows, c.cols, dense};
    auto coded = Parse(*Encode(view, c.config));
    ASSERT_TRUE(coded.ok()) << coded.status();
    std::vector<float> x(c.cols), scale(c.rows);
    for (float& v : x) v = normal(rng);
    for (float& v : scale) v = 0.01f + std::fabs(normal(rng));
    std::vector<float> cpu(c.rows), values(c.rows * c.cols);
    ASSERT_TRUE(FusedGemv(*coded, x.data(), scale.data(), cpu.data()).ok());
    ASSERT_TRUE(FusedValues(*coded, 0, c.rows * c.cols, values.data()).ok());

    auto dev = UploadCoded(*coded);
    ASSERT_TRUE(dev.ok()) << dev.status();
    auto dense_dev = UploadDense(view);
    ASSERT_TRUE(dense_dev.ok()) << dense_dev.status();
    DeviceFloats xd(x), sd(scale), yf(c.rows), yd(c.rows);
    ASSERT_TRUE(FusedGemvCuda(*dev, xd.get(), sd.get(), yf.get(), nullptr).ok());
    ASSERT_TRUE(DenseGemvCuda(*dense_dev, xd.get(), sd.get(), yd.get(), nullptr).ok());
    ASSERT_TRUE(CudaDecodeStatus(*dev, nullptr).ok());
    const std::vector<float> fused = yf.Host(), dense_gpu = yd.Host();
    // Run twice: the sums have a fixed order, so the result is bit-identical.
    ASSERT_TRUE(FusedGemvCuda(*dev, xd.get(), sd.get(), yf.get(), nullptr).ok());
    ASSERT_TRUE(CudaDecodeStatus(*dev, nullptr).ok());
    const std::vector<float> again = yf.Host();
    ASSERT_EQ(0, std::memcmp(fused.data(), again.data(), fused.size() * sizeof(float)));
    for (int64_t r = 0; r < c.rows; ++r) {
      double mag = 0;
      for (int64_t j = 0; j < c.cols; ++j) mag += std::fabs(values[r * c.cols + j] * x[j]);
      const double bound =
          (c.cols / 8.0 + c.cols / 4.0 + 64) * std::ldexp(1.0, -24) * mag * scale[r] + 1e-30;
      EXPECT_LE(std::fabs(fused[r] - cpu[r]), bound) << "row " << r;
      EXPECT_LE(std::fabs(dense_gpu[r] - cpu[r]), bound) << "dense row " << r;
    }
  }
}

TEST(EntropyCudaTest, NullScaleAndRealShapes) {
  SKIP_WITHOUT_CUDA();
  // Shapes of real projections (row slices of 4096/1024 and a short last slice).
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  const Case cases[] = {{DType::kBF16, 256, 4096, {1, 12, 1024}, Dist::kHeavyTailed},
                        {DType::kBF16, 128, 11008, {2, 12, 4096}, Dist::kGaussian},
                        {DType::kInt4, 512, 2048, {4, 12, 1024}, Dist::kGaussian},
                        {DType::kFP8, 300, 1500, {1, 10, 1024}, Dist::kHeavyTailed},
                        {DType::kInt8, 1000, 64, {2, 12, 4096}, Dist::kGaussian}};
  for (const Case& c : cases) {
    SCOPED_TRACE(Name(c));
    const std::vector<uint8_t> dense = MakeTensor(c.dtype, c.rows, c.cols, c.dist, 8);
    auto coded = Parse(*Encode(TensorView{c.dtype, c.rows, c.cols, dense}, c.config));
    ASSERT_TRUE(coded.ok()) << coded.status();
    std::vector<float> x(c.cols), cpu(c.rows), values(c.rows * c.cols);
    for (float& v : x) v = normal(rng);
    ASSERT_TRUE(FusedGemv(*coded, x.data(), nullptr, cpu.data()).ok());
    ASSERT_TRUE(FusedValues(*coded, 0, c.rows * c.cols, values.data()).ok());
    auto dev = UploadCoded(*coded);
    ASSERT_TRUE(dev.ok()) << dev.status();
    DeviceFloats xd(x), y(c.rows);
    ASSERT_TRUE(FusedGemvCuda(*dev, xd.get(), nullptr, y.get(), nullptr).ok());
    ASSERT_TRUE(CudaDecodeStatus(*dev, nullptr).ok());
    const std::vector<float> got = y.Host();
    for (int64_t r = 0; r < c.rows; ++r) {
      double mag = 0;
      for (int64_t j = 0; j < c.cols; ++j) mag += std::fabs(values[r * c.cols + j] * x[j]);
      EXPECT_LE(std::fabs(got[r] - cpu[r]),
                (c.cols / 8.0 + c.cols / 4.0 + 64) * std::ldexp(1.0, -24) * mag + 1e-30)
          << "row " << r;
    }
  }
}

TEST(EntropyCudaTest, CorruptStreamsSetTheErrorFlag) {
  SKIP_WITHOUT_CUDA();
  const int64_t rows = 16, cols = 512;
  const std::vector<uint8_t> dense = MakeTensor(DType::kBF16, rows, cols, Dist::kHeavyTailed, 2);
  CodecConfig config{1, 12, 256};
  config.code_all_planes = true;
  auto clean = Parse(*Encode(TensorView{DType::kBF16, rows, cols, dense}, config));
  ASSERT_TRUE(clean.ok());
  std::mt19937 rng(6);
  DeviceFloats x(std::vector<float>(cols, 1.0f)), y(rows);
  int flagged = 0;
  for (int trial = 0; trial < 200; ++trial) {
    // Flip bytes inside the coded streams (the directory stays valid, so Parse and
    // UploadCoded accept it; only the decode can notice).
    CodedTensor t = *clean;
    const CodedPlane& plane = t.planes[trial % 2];
    const int64_t chunk = rng() % plane.stream_offset.size();
    const int64_t at = plane.stream_offset[chunk] + rng() % plane.stream_size[chunk];
    t.bytes[at] ^= static_cast<uint8_t>(1 + rng() % 255);
    auto dev = UploadCoded(t);
    ASSERT_TRUE(dev.ok()) << dev.status();
    ASSERT_TRUE(FusedGemvCuda(*dev, x.get(), nullptr, y.get(), nullptr).ok());
    const absl::Status s = CudaDecodeStatus(*dev, nullptr);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
      ++flagged;
    }
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);  // no out-of-bounds fault
  }
  // The CPU decoder's final-state check catches nearly every flip; so must the kernel's.
  EXPECT_GT(flagged, 150);
}

TEST(EntropyCudaTest, UploadRejectsInconsistentDirectories) {
  // Host-side validation needs no device for the cases it rejects before allocating.
  const std::vector<uint8_t> dense = MakeTensor(DType::kInt8, 8, 300, Dist::kGaussian, 1);
  auto clean = Parse(*Encode(TensorView{DType::kInt8, 8, 300, dense}, CodecConfig{1, 12, 256}));
  ASSERT_TRUE(clean.ok());
  ASSERT_TRUE(clean->planes[0].coded);
  CodedTensor t = *clean;
  t.planes[0].stream_offset[1] = t.size_bytes() - 4;
  EXPECT_EQ(UploadCoded(t).status().code(), absl::StatusCode::kDataLoss);
  t = *clean;
  t.planes[0].escape_count[0] = 1u << 30;
  EXPECT_EQ(UploadCoded(t).status().code(), absl::StatusCode::kDataLoss);
  t = *clean;
  t.planes[0].table.pop_back();
  EXPECT_EQ(UploadCoded(t).status().code(), absl::StatusCode::kDataLoss);
  t = *clean;
  t.geometry.num_chunks += 1;
  EXPECT_EQ(UploadCoded(t).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tailor::entropy
