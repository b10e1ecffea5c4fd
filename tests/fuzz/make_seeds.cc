// Writes the fuzzers' seed corpora: valid (and a few nearly valid) inputs for each target,
// so libFuzzer starts from deep inside the formats instead of guessing magic bytes and
// checksums. Usage: fuzz_make_seeds <corpus-dir> (normally tests/fuzz/corpus).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/contract_io.h"
#include "common/sha256.h"
#include "compression/entropy/codec.h"
#include "compression/model/config.h"
#include "compression/model/safetensors_format.h"
#include "google/protobuf/text_format.h"

namespace {

namespace fs = std::filesystem;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

void Contracts(const fs::path& out) {
  for (const auto& entry : fs::directory_iterator(fs::path(TAILOR_SOURCE_DIR) / "examples/contracts")) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto contract = tailor::LoadContractFile(entry.path().string());
    if (!contract.ok()) continue;
    const std::string stem = entry.path().stem().string();
    Write(out / (entry.path().extension() == ".json" ? "contract_json" : "contract_textproto"),
          entry.path().filename().string(), text);
    Write(out / "contract_json", stem + ".canonical.json", tailor::ContractToJson(*contract));
    std::string textproto;
    google::protobuf::TextFormat::PrintToString(*contract, &textproto);
    Write(out / "contract_textproto", stem + ".canonical.textproto", textproto);
  }
}

void Configs(const fs::path& out) {
  using tailor::model::LayerSpec;
  tailor::model::HybridConfig c;
  c.vocab = 256;
  c.hidden = 64;
  c.max_seq = 128;
  c.layers = {LayerSpec::Attention(4, 2, 16), LayerSpec::Mamba(4, 16, 16, 4, 32),
              LayerSpec::Moe(4, 2, 32, 16), LayerSpec::Mlp(128), LayerSpec::Attention(0, 0, 16),
              LayerSpec::Moe(0, 0, 0, 32)};
  Write(out / "model_config", "hybrid.json", tailor::model::HybridConfigToJson(c));
  c.layers = {LayerSpec::Mlp(32)};
  Write(out / "model_config", "one_mlp.json", tailor::model::HybridConfigToJson(c));
}

std::string Bytes(size_t n, uint8_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + 7 * i);
  return s;
}

void Safetensors(const fs::path& out) {
  using tailor::model::DType;
  std::vector<tailor::model::RawTensor> t = {
      {"embed.weight", DType::kF32, {4, 2}, Bytes(32, 1)},
      {"layers.0.w", DType::kBF16, {2, 3}, Bytes(12, 2)},
      {"layers.0.b", DType::kI8, {3}, Bytes(3, 3)},
      {"empty", DType::kI64, {0, 5}, ""},
      {"scalar", DType::kI32, {}, Bytes(4, 4)}};
  Write(out / "safetensors", "small.st",
        *tailor::model::SerializeSafetensors(t, {{"format", "pt"}, {"tailor", "seed"}}));
  Write(out / "safetensors", "one.st",
        *tailor::model::SerializeSafetensors({{"x", DType::kF16, {2}, Bytes(4, 9)}}, {}));
  Write(out / "safetensors", "none.st", *tailor::model::SerializeSafetensors({}, {}));
}

void Entropy(const fs::path& out) {
  using namespace tailor::entropy;
  std::mt19937 rng(5);
  struct Case {
    DType dtype;
    int64_t rows, cols;
    CodecConfig config;
    bool all_planes;
  };
  const Case cases[] = {{DType::kBF16, 4, 96, {1, 8, 64}, true},
                        {DType::kBF16, 3, 70, {2, 10, 64}, false},
                        {DType::kInt8, 2, 128, {2, 12, 64}, true},
                        {DType::kInt4, 3, 65, {4, 8, 64}, true},
                        {DType::kFP8, 2, 64, {1, 9, 64}, true},
                        {DType::kF32, 2, 64, {1, 8, 64}, true}};
  int i = 0;
  for (const Case& c : cases) {
    std::vector<uint8_t> dense(DenseBytes(c.dtype, c.rows, c.cols));
    // Skewed values (mostly small) so the coded planes have real tables and escapes.
    std::geometric_distribution<int> geo(0.3);
    for (auto& b : dense) b = static_cast<uint8_t>(rng() % 8 == 0 ? rng() : geo(rng));
    if (c.dtype == DType::kInt4 && (c.rows * c.cols) % 2 == 1) dense.back() &= 0x0F;
    CodecConfig config = c.config;
    config.code_all_planes = c.all_planes;
    auto bytes = Encode({c.dtype, c.rows, c.cols, dense}, config);
    if (!bytes.ok()) {
      std::fprintf(stderr, "entropy case %d: %s\n", i, bytes.status().ToString().c_str());
      continue;
    }
    // First byte: the fuzzer's option byte (bit 0 = verify checksums).
    for (uint8_t verify : {uint8_t{1}, uint8_t{0}}) {
      std::string s(1, static_cast<char>(verify));
      s.append(bytes->begin(), bytes->end());
      Write(out / "entropy_decode", "container" + std::to_string(i) + (verify ? "" : "_nocrc"), s);
    }
    ++i;
  }
}

// Protobuf wire format by hand keeps this independent of the message classes' API.
std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
  return s;
}
std::string Field(int number, const std::string& bytes) {
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(bytes.size()) + bytes;
}
std::string Frame(const std::string& message) {
  std::string s;
  s.push_back(static_cast<char>(message.size() & 0xff));
  s.push_back(static_cast<char>(message.size() >> 8));
  return s + message;
}

void Uploads(const fs::path& out) {
  const std::string data = Bytes(300, 11);
  auto header = [](const std::string& sha, int64_t size) {
    std::string h = Field(1, "lease-1") + Field(2, "model") + Field(3, "model.tar");
    h += Varint(4 << 3 | 0) + Varint(static_cast<uint64_t>(size));
    h += Field(5, sha);
    return Field(1, h);  // UploadArtifactRequest.header
  };
  auto chunks = [&](size_t piece) {
    std::string s;
    for (size_t i = 0; i < data.size(); i += piece) s += Frame(Field(2, data.substr(i, piece)));
    return s;
  };
  const std::string sha = tailor::Sha256::Hex(data);
  // Mode byte: bit 0 = check the header's sha256, bit 1 = check the header's size.
  Write(out / "blob_upload", "honest", "\x03" + Frame(header(sha, 300)) + chunks(100));
  Write(out / "blob_upload", "honest_small_chunks", "\x03" + Frame(header(sha, 300)) + chunks(7));
  Write(out / "blob_upload", "wrong_sha", "\x03" + Frame(header(std::string(64, 'a'), 300)) +
                                              chunks(100));
  Write(out / "blob_upload", "too_long", "\x02" + Frame(header(sha, 200)) + chunks(100));
  Write(out / "blob_upload", "short", "\x02" + Frame(header(sha, 400)) + chunks(100));
  Write(out / "blob_upload", "second_header",
        std::string(1, '\0') + Frame(header(sha, 300)) + chunks(100) + Frame(header(sha, 300)));
  Write(out / "blob_upload", "empty", "\x03" + Frame(header(tailor::Sha256::Hex(""), 0)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  Contracts(out);
  Configs(out);
  Safetensors(out);
  Entropy(out);
  Uploads(out);
  return 0;
}
