// The built-in engine serving an entropy-coded package: projections run from the coded
// streams (fused decode-GEMV at batch-1 decode, decompress + GEMM for prefill and batch > 1),
// the engine's weight memory is the coded size, and greedy outputs equal the dense twin's
// (the source quantised with the documented scheme) token for token, in every weight format:
// bit-exactly against the twin served by the same kernels, and on these prompts also against
// the torch::linear twin (logits within 1e-4 relative).
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "compression/engine/engine.h"
#include "compression/engine/package_build.h"
#include "compression/entropy/gemv.h"
#include "compression/model/hybrid_lm.h"
#include "gtest/gtest.h"

namespace tailor::engine {
namespace {

namespace fs = std::filesystem;
using model::LayerSpec;

model::HybridConfig SmallConfig() {
  model::HybridConfig c;
  c.vocab = 40;
  c.hidden = 32;
  c.max_seq = 48;
  c.layers = {LayerSpec::Attention(4, 2, 8), LayerSpec::Mamba(2, 8, 8, 4, 4),
              LayerSpec::Moe(4, 2, 16, 16), LayerSpec::Mlp(64)};
  return c;
}

class EntropyEngineTest : public ::testing::TestWithParam<v1::WeightFormat> {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("entropy_engine_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(static_cast<int>(GetParam())));
    fs::remove_all(root_);
    fs::create_directories(root_ / "dense");
    auto m = model::CreateHybridLM(SmallConfig(), 5);
    ASSERT_TRUE(m.ok()) << m.status();
    torch::NoGradGuard no_grad;
    torch::manual_seed(5);
    for (auto& p : (*m)->parameters()) {
      if (p.dim() >= 2) p.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(p.size(-1))));
    }
    ASSERT_TRUE(model::SaveHybridLM(*m, (root_ / "dense").string()).ok());
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_P(EntropyEngineTest, PackageServesExactlyTheDenseTwin) {
  const v1::WeightFormat format = GetParam();
  auto tensors = ReadSourceTensors((root_ / "dense").string());
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  // Code every codable tensor, alternating configurations, so both chunk geometries and
  // both symbol widths are exercised.
  std::map<std::string, TensorChoice> choices;
  int i = 0;
  int coded = 0;
  for (const SourceTensor& t : *tensors) {
    if (!t.codable) continue;
    TensorChoice c;
    c.coded = true;
    c.config.symbols_per_codeword = (format == v1::WEIGHT_FORMAT_UNSPECIFIED || i % 2 == 0) ? 1 : 2;
    c.config.table_log = 10;
    c.config.chunk_width = i % 2 == 0 ? 64 : 1024;
    choices[t.name] = c;
    ++i;
    ++coded;
  }
  ASSERT_GT(coded, 8);
  entropy::PackageSummary summary;
  summary.weight_format = FormatName(format);
  const std::string pkg = (root_ / "pkg").string();
  ASSERT_TRUE(
      BuildPackage((root_ / "dense").string(), *tensors, format, choices, summary, pkg).ok());

  EngineOptions options;
  auto packaged = Engine::Load(pkg, options);
  ASSERT_TRUE(packaged.ok()) << packaged.status();
  ASSERT_NE((*packaged)->package(), nullptr);
  const PackageLinear* linear = (*packaged)->package_linear();
  ASSERT_NE(linear, nullptr);
  const entropy::Package& package = *(*packaged)->package();

  // Exact reference: the dense twin as an uncoded package, served by the same kernels.
  auto twin_pkg = DenseTwinPackage((root_ / "dense").string(), *tensors, format);
  ASSERT_TRUE(twin_pkg.ok()) << twin_pkg.status();
  auto kernel_twin =
      Engine::FromPackage(std::make_shared<const entropy::Package>(std::move(*twin_pkg)), options);
  ASSERT_TRUE(kernel_twin.ok()) << kernel_twin.status();
  // The plain dense twin: the same weights as f32 parameters, torch::linear everywhere.
  auto twin_state = DenseTwin(*tensors, format);
  ASSERT_TRUE(twin_state.ok());
  auto lm = model::CreateHybridLM(SmallConfig(), 0);
  ASSERT_TRUE(lm.ok());
  ASSERT_TRUE((*lm)->LoadStateDict(*twin_state, "twin").ok());
  auto twin = Engine::Create(*lm, options);
  ASSERT_TRUE(twin.ok());

  // The package decodes to the twin's weights bit for bit.
  for (const entropy::LoadedTensor& t : package.tensors) {
    auto w = entropy::DecodeToFloat(t);
    ASSERT_TRUE(w.ok());
    const at::Tensor& want = twin_state->at(t.info.name);
    ASSERT_EQ(static_cast<int64_t>(w->size()), want.numel());
    EXPECT_EQ(std::memcmp(w->data(), want.data_ptr<float>(), w->size() * 4), 0) << t.info.name;
  }

  // Weight memory: projections as their coded containers (+ scales), never dense; the rest
  // as f32 parameters.
  int64_t want_bytes = 0, served = 0;
  for (const entropy::LoadedTensor& t : package.tensors) {
    int64_t n = 1;
    for (int64_t d : t.info.shape) n *= d;
    if (IsServedTensor(t.info)) {
      ASSERT_TRUE(t.coded.has_value()) << t.info.name;
      want_bytes += t.coded->size_bytes() + 4 * static_cast<int64_t>(t.scales.size());
      ++served;
    } else {
      want_bytes += 4 * n;
    }
  }
  EXPECT_GT(served, 8);
  EXPECT_EQ((*packaged)->weight_bytes(), want_bytes);
  EXPECT_LT((*packaged)->weight_bytes(), (*twin)->weight_bytes());
  for (const auto& item : (*packaged)->model()->named_parameters()) {
    if (model::IsProjectionWeight(item.key()) && item.value().numel() == 0) continue;
    EXPECT_GT(item.value().numel(), 0) << item.key();
  }

  // Batch 1: prefill (6 tokens) decompresses + GEMMs, every decode step runs the fused
  // decode-GEMV; greedy tokens equal the kernel twin's exactly and the plain twin's.
  at::Tensor prompt1 = torch::randint(40, {1, 6}, at::kLong);
  const PackageLinear::Counters before = linear->counters();
  auto x1 = (*packaged)->Generate(prompt1, 12);
  ASSERT_TRUE(x1.ok()) << x1.status();
  const PackageLinear::Counters after = linear->counters();
  // 11 decode steps, each with at least the LM head and the attention/MLP projections.
  EXPECT_GE(after.fused_gemv - before.fused_gemv, 11 * 5);
  EXPECT_GT(after.gemm - before.gemm, 0);
  EXPECT_EQ(after.dense_gemv, before.dense_gemv);  // every served tensor is coded here
  EXPECT_EQ(after.embedding_rows - before.embedding_rows, 6 + 11);
  auto k1 = (*kernel_twin)->Generate(prompt1, 12);
  auto y1 = (*twin)->Generate(prompt1, 12);
  ASSERT_TRUE(k1.ok() && y1.ok());
  EXPECT_TRUE(x1->equal(*k1));
  EXPECT_TRUE(x1->equal(*y1)) << "batch 1 vs torch::linear twin";
  EXPECT_GT((*kernel_twin)->package_linear()->counters().dense_gemv, 0);
  EXPECT_EQ((*kernel_twin)->package_linear()->counters().fused_gemv, 0);

  // Batch 2 and 3: decompress + GEMM (one-row products remain only for MoE experts that
  // got a single routed row), identical greedy tokens.
  for (int64_t batch : {2, 3}) {
    at::Tensor prompt = torch::randint(40, {batch, 6}, at::kLong);
    const int64_t gemm = linear->counters().gemm;
    auto x = (*packaged)->Generate(prompt, 12);
    auto k = (*kernel_twin)->Generate(prompt, 12);
    auto y = (*twin)->Generate(prompt, 12);
    ASSERT_TRUE(x.ok() && k.ok() && y.ok());
    EXPECT_GT(linear->counters().gemm - gemm, 11 * 5) << "batch " << batch;
    EXPECT_TRUE(x->equal(*k)) << "batch " << batch;
    EXPECT_TRUE(x->equal(*y)) << "batch " << batch << " vs torch::linear twin";
  }

  // Tolerance against torch::linear: one decode step's logits, fused vs the plain twin.
  {
    auto cache_a = (*packaged)->model()->NewCache(1, 16);
    auto cache_b = (*twin)->model()->NewCache(1, 16);
    ASSERT_TRUE(cache_a.ok() && cache_b.ok());
    torch::NoGradGuard no_grad;
    ASSERT_TRUE((*packaged)->model()->Prefill(prompt1, *cache_a).ok());
    ASSERT_TRUE((*twin)->model()->Prefill(prompt1, *cache_b).ok());
    at::Tensor tok = torch::tensor({3}, at::kLong);
    auto la = (*packaged)->model()->DecodeStep(tok, *cache_a);
    auto lb = (*twin)->model()->DecodeStep(tok, *cache_b);
    ASSERT_TRUE(la.ok() && lb.ok());
    const double diff = (*la - *lb).abs().max().item<double>();
    const double scale = lb->abs().max().item<double>();
    EXPECT_LE(diff, 1e-4 * std::max(1.0, scale)) << "max |logit diff| " << diff;
  }

  // The fused decode-GEMV on every coded tensor equals the dense GEMV on its decoded form.
  for (const entropy::LoadedTensor& t : package.tensors) {
    if (!t.coded.has_value()) continue;
    auto q = entropy::DecodeToQuantized(t);
    ASSERT_TRUE(q.ok());
    std::vector<float> x(t.info.cols()), y1(t.info.rows()), y2(t.info.rows());
    for (size_t k = 0; k < x.size(); ++k) x[k] = std::sin(0.37f * k);
    ASSERT_TRUE(entropy::DenseGemv(q->view(), x.data(), q->scale_data(), y1.data()).ok());
    ASSERT_TRUE(entropy::PackageGemv(t, x.data(), y2.data()).ok());
    EXPECT_EQ(y1, y2) << t.info.name;
  }
}

// Tensors the package leaves dense (decoding does not pay) are served from their storage
// bytes by the dense GEMV, still never as f32 parameters.
TEST(EntropyEngineMixedTest, DenseLeftTensorsUseTheDenseKernel) {
  const fs::path dir =
      fs::temp_directory_path() / ("entropy_engine_mixed_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "dense");
  auto m = model::CreateHybridLM(SmallConfig(), 2);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(model::SaveHybridLM(*m, (dir / "dense").string()).ok());
  auto tensors = ReadSourceTensors((dir / "dense").string());
  ASSERT_TRUE(tensors.ok());
  std::map<std::string, TensorChoice> choices;
  int i = 0;
  for (const SourceTensor& t : *tensors) {
    if (t.codable && i++ % 2 == 0) choices[t.name].coded = true;
  }
  ASSERT_TRUE(BuildPackage((dir / "dense").string(), *tensors, v1::WEIGHT_INT8, choices, {},
                           (dir / "pkg").string())
                  .ok());
  auto e = Engine::Load((dir / "pkg").string(), EngineOptions());
  ASSERT_TRUE(e.ok()) << e.status();
  auto twin_pkg = DenseTwinPackage((dir / "dense").string(), *tensors, v1::WEIGHT_INT8);
  ASSERT_TRUE(twin_pkg.ok());
  auto twin = Engine::FromPackage(std::make_shared<const entropy::Package>(std::move(*twin_pkg)),
                                  EngineOptions());
  ASSERT_TRUE(twin.ok());
  int64_t want = 0;
  for (const entropy::LoadedTensor& t : (*e)->package()->tensors) {
    want += IsServedTensor(t.info) ? t.info.resident_bytes() : 4 * t.info.rows() * t.info.cols();
  }
  EXPECT_EQ((*e)->weight_bytes(), want);
  EXPECT_EQ((*twin)->weight_bytes(), want - (*e)->package()->resident_bytes() +
                                         (*twin)->package()->resident_bytes());
  at::Tensor prompt = torch::randint(40, {1, 5}, at::kLong);
  auto x = (*e)->Generate(prompt, 10);
  auto y = (*twin)->Generate(prompt, 10);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_TRUE(x->equal(*y));
  EXPECT_GT((*e)->package_linear()->counters().fused_gemv, 0);
  EXPECT_GT((*e)->package_linear()->counters().dense_gemv, 0);
  // On a device/precision without the fused kernel the package is decoded and served densely.
  EngineOptions bf16;
  bf16.precision = Precision::kBf16;
  auto dense = Engine::Load((dir / "pkg").string(), bf16);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ((*dense)->package_linear(), nullptr);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Formats, EntropyEngineTest,
                         ::testing::Values(v1::WEIGHT_FORMAT_UNSPECIFIED, v1::WEIGHT_BF16,
                                           v1::WEIGHT_FP8, v1::WEIGHT_INT8, v1::WEIGHT_INT4));

TEST(EntropyEngineLoadTest, CorruptPackageIsDataLoss) {
  const fs::path dir = fs::temp_directory_path() / ("entropy_engine_bad_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto m = model::CreateHybridLM(SmallConfig(), 1);
  ASSERT_TRUE(m.ok());
  fs::create_directories(dir / "dense");
  ASSERT_TRUE(model::SaveHybridLM(*m, (dir / "dense").string()).ok());
  auto tensors = ReadSourceTensors((dir / "dense").string());
  ASSERT_TRUE(tensors.ok());
  std::map<std::string, TensorChoice> choices;
  for (const SourceTensor& t : *tensors) {
    if (t.codable) choices[t.name].coded = true;
  }
  ASSERT_TRUE(BuildPackage((dir / "dense").string(), *tensors, v1::WEIGHT_INT8, choices, {},
                           (dir / "pkg").string())
                  .ok());
  fs::resize_file(dir / "pkg" / "t0003.rans", fs::file_size(dir / "pkg" / "t0003.rans") - 1);
  auto e = Engine::Load((dir / "pkg").string(), EngineOptions());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kDataLoss) << e.status();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tailor::engine
