// Weight formats (quantize.h) and packaged models (package.h): exact round trips, the
// documented schemes on hand-computed values, and corruption caught at load.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "compression/entropy/gemv.h"
#include "compression/entropy/package.h"
#include "compression/entropy/quantize.h"
#include "gtest/gtest.h"

namespace tailor::entropy {
namespace {

namespace fs = std::filesystem;

std::vector<float> Gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(QuantizeTest, Int8SchemeOnKnownValues) {
  const float w[] = {0.5f, -1.27f, 0.0f, 0.004f, 0.0f, 0.0f, 0.0f, 0.0f};
  auto q = Quantize(w, 2, 4, DType::kInt8);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->scales.size(), 2u);
  EXPECT_FLOAT_EQ(q->scales[0], 1.27f / 127.0f);
  EXPECT_EQ(q->scales[1], 1.0f);  // all-zero row
  EXPECT_EQ(static_cast<int8_t>(q->data[0]), 50);
  EXPECT_EQ(static_cast<int8_t>(q->data[1]), -127);
  EXPECT_EQ(static_cast<int8_t>(q->data[2]), 0);
  EXPECT_EQ(static_cast<int8_t>(q->data[3]), 0);  // 0.4 rounds to 0
  auto d = Dequantize(*q);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[1], -127.0f * q->scales[0]);
}

TEST(QuantizeTest, Int4PacksLowNibbleFirst) {
  const float w[] = {0.7f, -0.7f, 0.1f};  // s = 0.1: 7, -7, 1
  auto q = Quantize(w, 1, 3, DType::kInt4);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->data.size(), 2u);
  EXPECT_EQ(q->data[0], 0x97);  // low 7, high -7 = 0x9
  EXPECT_EQ(q->data[1], 0x01);  // padding nibble is zero
}

TEST(QuantizeTest, Fp8E4M3Codes) {
  EXPECT_EQ(FloatToE4M3(448.0f), 0x7E);
  EXPECT_EQ(FloatToE4M3(1000.0f), 0x7E);  // saturates
  EXPECT_EQ(FloatToE4M3(1.0f), 0x38);
  EXPECT_EQ(FloatToE4M3(-1.0f), 0xB8);
  EXPECT_EQ(FloatToE4M3(0.0f), 0x00);
  EXPECT_EQ(FloatToE4M3(1.0625f), 0x38);  // halfway 1 and 1.125: ties to even (1.0)
  EXPECT_EQ(FloatToE4M3(1.1875f), 0x3A);  // halfway 1.125 and 1.25: ties to even (1.25)
  EXPECT_EQ(Fp8E4M3Table()[0x01], 1.0f / 512.0f);  // smallest subnormal 2^-9
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F) continue;
    EXPECT_EQ(FloatToE4M3(Fp8E4M3Table()[b]), b == 0x80 ? 0x80 : b) << b;
  }
}

TEST(QuantizeTest, RejectsNonFinite) {
  const float w[] = {1.0f, std::nanf("")};
  auto q = Quantize(w, 1, 2, DType::kInt8);
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(q.status().message().find("weight [0, 1] is not finite"), std::string::npos);
}

TEST(QuantizeTest, CodecRoundTripIsExactForEveryFormat) {
  const std::vector<float> w = Gaussian(64 * 200, 7);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kInt8, DType::kInt4, DType::kFP8}) {
    auto q = Quantize(w.data(), 64, 200, dt);
    ASSERT_TRUE(q.ok()) << DTypeName(dt);
    CodecConfig config;
    config.chunk_width = 1024;
    config.table_log = 10;
    auto bytes = Encode(q->view(), config);
    ASSERT_TRUE(bytes.ok()) << DTypeName(dt) << bytes.status();
    auto coded = Parse(*bytes);
    ASSERT_TRUE(coded.ok());
    auto back = Decode(*coded);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, q->data) << DTypeName(dt);
    // The fused kernel equals the dense kernel bit for bit, scales included.
    std::vector<float> x = Gaussian(200, 9), y1(64), y2(64);
    ASSERT_TRUE(DenseGemv(q->view(), x.data(), q->scale_data(), y1.data()).ok());
    ASSERT_TRUE(FusedGemv(*coded, x.data(), q->scale_data(), y2.data(), 2).ok());
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4)) << DTypeName(dt);
  }
}

class PackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("entropy_pkg_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    w_ = Gaussian(32 * 96, 3);
    norm_ = std::vector<float>(96, 1.0f);
    PackageTensorInput a;
    a.name = "layers.0.w";
    a.shape = {32, 96};
    a.tensor = *Quantize(w_.data(), 32, 96, DType::kInt8);
    a.coded = true;
    a.config.chunk_width = 64;
    a.config.table_log = 10;
    a.entropy_bits_per_weight = 5.5;
    ConfigPoint dense;
    dense.dense = true;
    dense.bytes = 32 * 96;
    dense.latency_us = 3;
    ConfigPoint coded;
    coded.config = a.config;
    coded.bytes = 2000;
    coded.latency_us = 9;
    a.frontier = {coded, dense};
    a.chosen = 0;
    PackageTensorInput b;
    b.name = "norm";
    b.shape = {96};
    b.tensor = *Quantize(norm_.data(), 1, 96, DType::kF32);
    inputs_ = {a, b};
    summary_.weight_format = "int8";
    summary_.budget_bytes = 1 << 20;
    ASSERT_TRUE(WritePackage(dir_.string(), "{\"x\":1}", summary_, inputs_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::vector<float> w_, norm_;
  std::vector<PackageTensorInput> inputs_;
  PackageSummary summary_;
};

TEST_F(PackageTest, WriteLoadRoundTrip) {
  auto p = LoadPackage(dir_.string());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->config_json, "{\"x\":1}");
  EXPECT_EQ(p->summary.weight_format, "int8");
  EXPECT_EQ(p->summary.budget_bytes, 1 << 20);
  ASSERT_EQ(p->tensors.size(), 2u);
  const LoadedTensor& t = p->tensors[0];
  EXPECT_TRUE(t.coded.has_value());
  EXPECT_EQ(t.info.chosen, 0);
  ASSERT_EQ(t.info.frontier.size(), 2u);
  EXPECT_EQ(t.info.frontier[0].bytes, 2000);
  EXPECT_EQ(t.info.frontier[1].dense, true);
  EXPECT_EQ(t.info.dense_bytes, 32 * 96);
  auto q = DecodeToQuantized(t);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->data, inputs_[0].tensor.data);
  EXPECT_EQ(q->scales, inputs_[0].tensor.scales);
  auto f = DecodeToFloat(p->tensors[1]);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, norm_);
  EXPECT_EQ(p->resident_bytes(), t.info.bytes + 32 * 4 + 96 * 4);
  EXPECT_EQ(p->dense_bytes(), 32 * 96 + 32 * 4 + 96 * 4);
}

TEST_F(PackageTest, TarRoundTripIsDeterministic) {
  const std::string tar1 = dir_.string() + "/../" + dir_.filename().string() + "_1.tar";
  const std::string tar2 = dir_.string() + "/../" + dir_.filename().string() + "_2.tar";
  ASSERT_TRUE(PackPackage(dir_.string(), tar1).ok());
  ASSERT_TRUE(PackPackage(dir_.string(), tar2).ok());
  std::ifstream a(tar1, std::ios::binary), b(tar2, std::ios::binary);
  std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
  EXPECT_EQ(sa, sb);
  EXPECT_EQ(sa.size() % 512, 0u);
  const std::string out = dir_.string() + "_unpacked";
  ASSERT_TRUE(UnpackPackage(tar1, out).ok());
  auto p = LoadPackage(out);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tensors.size(), 2u);
  // A flipped byte in a header fails its checksum.
  sa[10] ^= 1;
  std::ofstream(tar1, std::ios::binary | std::ios::trunc) << sa;
  EXPECT_EQ(UnpackPackage(tar1, out).code(), absl::StatusCode::kDataLoss);
  fs::remove_all(out);
  fs::remove(tar1);
  fs::remove(tar2);
}

TEST_F(PackageTest, CorruptCodedFileIsDataLoss) {
  const std::string f = (dir_ / "t0000.rans").string();
  std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(40);
  io.put('\x5a');
  io.close();
  auto p = LoadPackage(dir_.string());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(p.status().message().find("t0000.rans: CRC-32 mismatch"), std::string::npos);
}

TEST_F(PackageTest, TruncatedScalesAreDataLoss) {
  fs::resize_file(dir_ / "t0000.scale", 64);
  auto p = LoadPackage(dir_.string());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(p.status().message().find("64 bytes for 32 scales"), std::string::npos);
}

TEST_F(PackageTest, BadSettingsAreInvalidArgument) {
  std::ifstream in(dir_ / "settings.json");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const std::string bad = std::string(s).replace(s.find("\"t0000.rans\""), 12, "\"../x.rans\"");
  std::ofstream(dir_ / "settings.json", std::ios::trunc) << bad;
  auto p = LoadPackage(dir_.string());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("unsafe file name '../x.rans'"), std::string::npos);
}

TEST(FrontiersJsonTest, RoundTrip) {
  TensorFrontier f;
  f.name = "a";
  f.dtype = DType::kInt4;
  f.rows = 4;
  f.cols = 64;
  f.dense_bytes = 128;
  f.entropy_bits_per_weight = 2.5;
  ConfigPoint p;
  p.config.symbols_per_codeword = 2;
  p.config.table_log = 10;
  p.config.chunk_width = 64;
  p.bytes = 100;
  p.latency_us = 1.5;
  f.frontier = {p};
  std::string fmt;
  auto back = FrontiersFromJson(FrontiersToJson({f}, "int4"), &fmt);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(fmt, "int4");
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].frontier[0].config.symbols_per_codeword, 2);
  EXPECT_EQ((*back)[0].frontier[0].bytes, 100);
  EXPECT_EQ((*back)[0].dtype, DType::kInt4);
}

}  // namespace
}  // namespace tailor::entropy
