#include "compression/entropy/package.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "compression/entropy/gemv.h"
#include "nlohmann/json.hpp"

namespace tailor::entropy {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr char kFormat[] = "tailor-entropy-package";
constexpr int kVersion = 1;

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteAll(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// File names inside a package: no paths, nothing a shell or tar would interpret.
bool SafeName(const std::string& n) {
  if (n.empty() || n.size() > 99 || n[0] == '.') return false;
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

Json PointToJson(const ConfigPoint& p) {
  Json j;
  j["dense"] = p.dense;
  if (!p.dense) {
    j["symbols_per_codeword"] = p.config.symbols_per_codeword;
    j["table_log"] = p.config.table_log;
    j["chunk_width"] = p.config.chunk_width;
  }
  j["bytes"] = p.bytes;
  j["latency_us"] = p.latency_us;
  return j;
}

absl::Status Bad(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// Typed field access with precise errors.
template <typename T>
absl::StatusOr<T> Get(const Json& j, const std::string& where, const char* key) {
  if (!j.is_object() || !j.contains(key)) return Bad(where, absl::StrCat("missing '", key, "'"));
  const Json& v = j.at(key);
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return Bad(absl::StrCat(where, ".", key), "must be a string");
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return Bad(absl::StrCat(where, ".", key), "must be a boolean");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return Bad(absl::StrCat(where, ".", key), "must be an integer");
  } else {
    if (!v.is_number()) return Bad(absl::StrCat(where, ".", key), "must be a number");
  }
  return v.get<T>();
}

absl::StatusOr<ConfigPoint> PointFromJson(const Json& j, const std::string& where) {
  ConfigPoint p;
  TAILOR_ASSIGN_OR_RETURN(p.dense, Get<bool>(j, where, "dense"));
  if (!p.dense) {
    TAILOR_ASSIGN_OR_RETURN(p.config.symbols_per_codeword,
                            Get<int>(j, where, "symbols_per_codeword"));
    TAILOR_ASSIGN_OR_RETURN(p.config.table_log, Get<int>(j, where, "table_log"));
    TAILOR_ASSIGN_OR_RETURN(p.config.chunk_width, Get<int>(j, where, "chunk_width"));
  }
  TAILOR_ASSIGN_OR_RETURN(p.bytes, Get<int64_t>(j, where, "bytes"));
  TAILOR_ASSIGN_OR_RETURN(p.latency_us, Get<double>(j, where, "latency_us"));
  if (p.bytes < 0 || p.latency_us < 0) return Bad(where, "negative bytes or latency");
  return p;
}

absl::StatusOr<std::vector<int64_t>> ShapeFromJson(const Json& j, const std::string& where) {
  if (!j.contains("shape") || !j["shape"].is_array() || j["shape"].empty() ||
      j["shape"].size() > 8) {
    return Bad(where, "'shape' must be an array of 1..8 dimensions");
  }
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (const Json& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 32)) {
      return Bad(where, "'shape' entries must be integers in 0..2^32");
    }
    shape.push_back(d.get<int64_t>());
    n *= shape.back();
    if (n > (int64_t{1} << 40)) return Bad(where, "'shape' has too many elements");
  }
  return shape;
}

absl::StatusOr<PackageTensorInfo> InfoFromJson(const Json& j, const std::string& where) {
  PackageTensorInfo t;
  TAILOR_ASSIGN_OR_RETURN(t.name, Get<std::string>(j, where, "name"));
  if (t.name.empty()) return Bad(where, "empty tensor name");
  TAILOR_ASSIGN_OR_RETURN(t.shape, ShapeFromJson(j, where));
  TAILOR_ASSIGN_OR_RETURN(std::string dtype, Get<std::string>(j, where, "dtype"));
  TAILOR_ASSIGN_OR_RETURN(t.dtype, ParseDType(dtype));
  TAILOR_ASSIGN_OR_RETURN(std::string storage, Get<std::string>(j, where, "storage"));
  if (storage != "coded" && storage != "dense") {
    return Bad(where, absl::StrCat("storage '", storage, "' (want coded or dense)"));
  }
  t.coded = storage == "coded";
  TAILOR_ASSIGN_OR_RETURN(t.file, Get<std::string>(j, where, "file"));
  if (!SafeName(t.file)) return Bad(where, absl::StrCat("unsafe file name '", t.file, "'"));
  TAILOR_ASSIGN_OR_RETURN(t.bytes, Get<int64_t>(j, where, "bytes"));
  TAILOR_ASSIGN_OR_RETURN(int64_t crc, Get<int64_t>(j, where, "crc32"));
  if (crc < 0 || crc > 0xFFFFFFFFll) return Bad(where, "crc32 out of range");
  t.crc32 = static_cast<uint32_t>(crc);
  if (HasScales(t.dtype)) {
    TAILOR_ASSIGN_OR_RETURN(t.scale_file, Get<std::string>(j, where, "scale_file"));
    if (!SafeName(t.scale_file)) return Bad(where, "unsafe scale file name");
    TAILOR_ASSIGN_OR_RETURN(int64_t scrc, Get<int64_t>(j, where, "scale_crc32"));
    if (scrc < 0 || scrc > 0xFFFFFFFFll) return Bad(where, "scale_crc32 out of range");
    t.scale_crc32 = static_cast<uint32_t>(scrc);
  }
  if (t.coded) {
    const Json& c = j.contains("config") ? j["config"] : Json();
    TAILOR_ASSIGN_OR_RETURN(t.config.symbols_per_codeword,
                            Get<int>(c, where + ".config", "symbols_per_codeword"));
    TAILOR_ASSIGN_OR_RETURN(t.config.table_log, Get<int>(c, where + ".config", "table_log"));
    TAILOR_ASSIGN_OR_RETURN(t.config.chunk_width, Get<int>(c, where + ".config", "chunk_width"));
    if (absl::Status s = ValidateConfig(t.dtype, t.config); !s.ok()) {
      return Bad(where + ".config", std::string(s.message()));
    }
  }
  t.dense_bytes = DenseBytes(t.dtype, t.rows(), t.cols());
  if (t.dtype != DType::kF32 && t.shape.size() < 2) {
    return Bad(where, "only matrices are quantised");
  }
  t.bits_per_weight = j.value("bits_per_weight", 0.0);
  t.entropy_bits_per_weight = j.value("entropy_bits_per_weight", 0.0);
  if (j.contains("frontier")) {
    if (!j["frontier"].is_array()) return Bad(where, "'frontier' must be an array");
    for (size_t i = 0; i < j["frontier"].size(); ++i) {
      TAILOR_ASSIGN_OR_RETURN(ConfigPoint p,
                              PointFromJson(j["frontier"][i], absl::StrCat(where, ".frontier[", i, "]")));
      t.frontier.push_back(p);
    }
  }
  t.chosen = j.value("chosen", -1);
  if (t.chosen < -1 || t.chosen >= static_cast<int>(t.frontier.size())) {
    return Bad(where, absl::StrCat("chosen ", t.chosen, " is not a frontier index"));
  }
  return t;
}

absl::StatusOr<Json> ParseSettings(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kPackageSettingsFile);
  TAILOR_ASSIGN_OR_RETURN(std::string text, ReadAll(path));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad(path, "not a JSON object");
  if (j.value("format", "") != kFormat) return Bad(path, absl::StrCat("format is not ", kFormat));
  if (j.value("version", 0) != kVersion) {
    return Bad(path, absl::StrCat("version ", j.value("version", 0), " (this build reads ", kVersion, ")"));
  }
  if (!j.contains("tensors") || !j["tensors"].is_array()) return Bad(path, "missing 'tensors'");
  return j;
}

// Sums over the tensors written so far, for the settings' "totals".
struct PackageTotals {
  int64_t resident = 0;  // bytes of the stored files (data + scales)
  int64_t dense = 0;     // bytes the same tensors take uncoded
  int64_t weights = 0;
  double entropy_bits = 0;  // sum over tensors of entropy bits per weight * weights
};

Json TotalsJson(const PackageTotals& t) {
  return {{"weights", t.weights},
          {"resident_bytes", t.resident},
          {"dense_bytes", t.dense},
          {"bits_per_weight", t.weights ? 8.0 * t.resident / t.weights : 0.0},
          {"entropy_bits_per_weight", t.weights ? t.entropy_bits / t.weights : 0.0}};
}

// The bytes stored for `in`: its rANS container when coded (the codec config goes into the
// entry `t`), otherwise its raw storage.
absl::StatusOr<std::vector<uint8_t>> StoredBytes(const PackageTensorInput& in, Json& t) {
  const QuantizedTensor& q = in.tensor;
  if (!in.coded) return q.data;
  TAILOR_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Encode(q.view(), in.config));
  t["config"] = {{"symbols_per_codeword", in.config.symbols_per_codeword},
                 {"table_log", in.config.table_log},
                 {"chunk_width", in.config.chunk_width}};
  return bytes;
}

// Writes the per-row scales of `in` next to its data when its dtype has them (named in the
// entry `t`); returns their size in bytes, 0 when there are none.
absl::StatusOr<int64_t> WriteScales(const std::string& dir, const std::string& stem,
                                    const PackageTensorInput& in, Json& t) {
  const QuantizedTensor& q = in.tensor;
  if (!HasScales(q.dtype)) return 0;
  if (static_cast<int64_t>(q.scales.size()) != q.rows) {
    return absl::InvalidArgumentError(absl::StrCat(in.name, ": ", q.scales.size(),
                                                   " scales for ", q.rows, " rows"));
  }
  const std::string sfile = stem + ".scale";
  const int64_t scale_bytes = q.rows * 4;
  TAILOR_RETURN_IF_ERROR(WriteAll(absl::StrCat(dir, "/", sfile), q.scales.data(), scale_bytes));
  t["scale_file"] = sfile;
  t["scale_crc32"] = Crc32(reinterpret_cast<const uint8_t*>(q.scales.data()), scale_bytes);
  return scale_bytes;
}

// Writes tensor `i` of a package into `dir` and returns its settings entry; adds it to
// `totals`.
absl::StatusOr<Json> WriteTensor(const std::string& dir, size_t i, const PackageTensorInput& in,
                                 PackageTotals& totals) {
  const QuantizedTensor& q = in.tensor;
  TAILOR_RETURN_IF_ERROR(ValidateView(q.view()));
  const std::string stem = absl::StrFormat("t%04d", static_cast<int>(i));
  Json t;
  t["name"] = in.name;
  t["shape"] = in.shape;
  t["dtype"] = DTypeName(q.dtype);
  t["storage"] = in.coded ? "coded" : "dense";
  TAILOR_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, StoredBytes(in, t));
  const std::string file = stem + (in.coded ? ".rans" : ".raw");
  TAILOR_RETURN_IF_ERROR(WriteAll(absl::StrCat(dir, "/", file), bytes.data(), bytes.size()));
  t["file"] = file;
  t["bytes"] = static_cast<int64_t>(bytes.size());
  t["crc32"] = Crc32(bytes.data(), bytes.size());
  TAILOR_ASSIGN_OR_RETURN(const int64_t scale_bytes, WriteScales(dir, stem, in, t));
  const int64_t n = q.rows * q.cols;
  t["dense_bytes"] = DenseBytes(q.dtype, q.rows, q.cols);
  t["bits_per_weight"] = n == 0 ? 0.0 : 8.0 * bytes.size() / static_cast<double>(n);
  t["entropy_bits_per_weight"] = in.entropy_bits_per_weight;
  Json frontier = Json::array();
  for (const ConfigPoint& p : in.frontier) frontier.push_back(PointToJson(p));
  t["frontier"] = frontier;
  t["chosen"] = in.chosen;
  totals.resident += static_cast<int64_t>(bytes.size()) + scale_bytes;
  totals.dense += DenseBytes(q.dtype, q.rows, q.cols) + scale_bytes;
  totals.weights += n;
  totals.entropy_bits += in.entropy_bits_per_weight * static_cast<double>(n);
  return t;
}

}  // namespace

int64_t PackageTensorInfo::cols() const {
  int64_t c = 1;
  for (size_t i = 1; i < shape.size(); ++i) c *= shape[i];
  return c;
}

TensorView LoadedTensor::dense_view() const {
  return TensorView{info.dtype, info.rows(), info.cols(), dense};
}

int64_t Package::resident_bytes() const {
  int64_t n = 0;
  for (const LoadedTensor& t : tensors) n += t.info.resident_bytes();
  return n;
}

int64_t Package::dense_bytes() const {
  int64_t n = 0;
  for (const LoadedTensor& t : tensors) {
    n += t.info.dense_bytes + (t.info.scale_file.empty() ? 0 : t.info.rows() * 4);
  }
  return n;
}

bool IsPackageDir(const std::string& dir) {
  std::error_code ec;
  return fs::exists(absl::StrCat(dir, "/", kPackageSettingsFile), ec);
}

absl::Status WritePackage(const std::string& dir, const std::string& config_json,
                          const PackageSummary& summary,
                          const std::vector<PackageTensorInput>& tensors) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  TAILOR_RETURN_IF_ERROR(WriteAll(absl::StrCat(dir, "/", kPackageConfigFile), config_json.data(),
                                  config_json.size()));
  Json settings;
  settings["format"] = kFormat;
  settings["version"] = kVersion;
  settings["weight_format"] = summary.weight_format;
  settings["budget_bytes"] = summary.budget_bytes;
  settings["source"] = summary.source;
  Json list = Json::array();
  std::set<std::string> names;
  PackageTotals totals;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!names.insert(tensors[i].name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor ", tensors[i].name));
    }
    TAILOR_ASSIGN_OR_RETURN(Json t, WriteTensor(dir, i, tensors[i], totals));
    list.push_back(t);
  }
  settings["tensors"] = list;
  settings["totals"] = TotalsJson(totals);
  const std::string text = settings.dump(1);
  return WriteAll(absl::StrCat(dir, "/", kPackageSettingsFile), text.data(), text.size());
}

absl::StatusOr<std::vector<PackageTensorInfo>> ReadPackageSettings(const std::string& dir,
                                                                   PackageSummary* summary) {
  TAILOR_ASSIGN_OR_RETURN(Json j, ParseSettings(dir));
  if (summary != nullptr) {
    summary->weight_format = j.value("weight_format", "");
    summary->budget_bytes = j.value("budget_bytes", int64_t{0});
    summary->source = j.value("source", "");
  }
  std::vector<PackageTensorInfo> out;
  std::set<std::string> names, files;
  for (size_t i = 0; i < j["tensors"].size(); ++i) {
    TAILOR_ASSIGN_OR_RETURN(PackageTensorInfo t,
                            InfoFromJson(j["tensors"][i], absl::StrCat("settings.json tensors[", i, "]")));
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("settings.json: duplicate tensor ", t.name));
    }
    for (const std::string& f : {t.file, t.scale_file}) {
      if (f.empty()) continue;
      if (f == kPackageSettingsFile || f == kPackageConfigFile || !files.insert(f).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("settings.json: file ", f, " is used twice"));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<Package> LoadPackage(const std::string& dir) {
  Package p;
  TAILOR_ASSIGN_OR_RETURN(std::vector<PackageTensorInfo> infos,
                          ReadPackageSettings(dir, &p.summary));
  TAILOR_ASSIGN_OR_RETURN(p.config_json, ReadAll(absl::StrCat(dir, "/", kPackageConfigFile)));
  for (PackageTensorInfo& info : infos) {
    LoadedTensor t;
    const std::string path = absl::StrCat(dir, "/", info.file);
    TAILOR_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path));
    if (static_cast<int64_t>(bytes.size()) != info.bytes) {
      return absl::DataLossError(absl::StrCat(path, ": ", bytes.size(), " bytes, settings say ",
                                              info.bytes));
    }
    const uint8_t* b = reinterpret_cast<const uint8_t*>(bytes.data());
    if (Crc32(b, bytes.size()) != info.crc32) {
      return absl::DataLossError(absl::StrCat(path, ": CRC-32 mismatch"));
    }
    if (info.coded) {
      absl::StatusOr<CodedTensor> coded = Parse(std::vector<uint8_t>(b, b + bytes.size()));
      if (!coded.ok()) {
        return absl::DataLossError(absl::StrCat(path, ": ", coded.status().message()));
      }
      if (coded->dtype != info.dtype || coded->rows != info.rows() || coded->cols != info.cols()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": container holds ", DTypeName(coded->dtype), " ", coded->rows, "x",
            coded->cols, ", settings say ", DTypeName(info.dtype), " ", info.rows(), "x",
            info.cols()));
      }
      t.coded = std::move(*coded);
    } else {
      if (info.bytes != info.dense_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": dense ", DTypeName(info.dtype),
                                                       " needs ", info.dense_bytes, " bytes"));
      }
      t.dense.assign(b, b + bytes.size());
    }
    if (!info.scale_file.empty()) {
      const std::string spath = absl::StrCat(dir, "/", info.scale_file);
      TAILOR_ASSIGN_OR_RETURN(std::string s, ReadAll(spath));
      if (static_cast<int64_t>(s.size()) != info.rows() * 4) {
        return absl::DataLossError(absl::StrCat(spath, ": ", s.size(), " bytes for ",
                                                info.rows(), " scales"));
      }
      if (Crc32(reinterpret_cast<const uint8_t*>(s.data()), s.size()) != info.scale_crc32) {
        return absl::DataLossError(absl::StrCat(spath, ": CRC-32 mismatch"));
      }
      t.scales.resize(info.rows());
      std::memcpy(t.scales.data(), s.data(), s.size());
    }
    t.info = std::move(info);
    p.tensors.push_back(std::move(t));
  }
  return p;
}

absl::StatusOr<QuantizedTensor> DecodeToQuantized(const LoadedTensor& t) {
  QuantizedTensor q;
  q.dtype = t.info.dtype;
  q.rows = t.info.rows();
  q.cols = t.info.cols();
  q.scales = t.scales;
  if (t.coded.has_value()) {
    TAILOR_ASSIGN_OR_RETURN(q.data, Decode(*t.coded));
  } else {
    q.data = t.dense;
  }
  return q;
}

absl::StatusOr<std::vector<float>> DecodeToFloat(const LoadedTensor& t) {
  TAILOR_ASSIGN_OR_RETURN(QuantizedTensor q, DecodeToQuantized(t));
  return Dequantize(q);
}

absl::Status PackageGemv(const LoadedTensor& t, const float* x, float* y, int threads) {
  if (t.coded.has_value()) return FusedGemv(*t.coded, x, t.scale_data(), y, threads);
  return DenseGemv(t.dense_view(), x, t.scale_data(), y, threads);
}

// ---- ustar -------------------------------------------------------------------------------

namespace {

void Octal(char* field, size_t width, uint64_t v) {
  // width-1 octal digits, NUL terminated.
  std::string s = absl::StrFormat("%0*o", static_cast<int>(width - 1), v);
  std::memcpy(field, s.data(), width - 1);
  field[width - 1] = '\0';
}

uint32_t HeaderSum(const uint8_t* h) {
  uint32_t sum = 0;
  for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return sum;
}

}  // namespace

absl::Status PackPackage(const std::string& dir, const std::string& tar_path) {
  TAILOR_ASSIGN_OR_RETURN(std::vector<PackageTensorInfo> infos, ReadPackageSettings(dir, nullptr));
  std::vector<std::string> files = {kPackageConfigFile, kPackageSettingsFile};
  for (const PackageTensorInfo& t : infos) {
    files.push_back(t.file);
    if (!t.scale_file.empty()) files.push_back(t.scale_file);
  }
  std::string out;
  for (const std::string& name : files) {
    TAILOR_ASSIGN_OR_RETURN(std::string data, ReadAll(absl::StrCat(dir, "/", name)));
    uint8_t h[512] = {};
    char* c = reinterpret_cast<char*>(h);
    std::memcpy(c, name.data(), name.size());
    Octal(c + 100, 8, 0644);
    Octal(c + 108, 8, 0);
    Octal(c + 116, 8, 0);
    Octal(c + 124, 12, data.size());
    Octal(c + 136, 12, 0);
    c[156] = '0';
    std::memcpy(c + 257, "ustar", 6);
    std::memcpy(c + 263, "00", 2);
    const std::string sum = absl::StrFormat("%06o", HeaderSum(h));
    std::memcpy(c + 148, sum.data(), 6);
    c[154] = '\0';
    c[155] = ' ';
    out.append(c, 512);
    out += data;
    out.append((512 - data.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  const std::string tmp = tar_path + ".tmp";
  TAILOR_RETURN_IF_ERROR(WriteAll(tmp, out.data(), out.size()));
  std::error_code ec;
  fs::rename(tmp, tar_path, ec);
  if (ec) return absl::InternalError(absl::StrCat("rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status UnpackPackage(const std::string& tar_path, const std::string& dir) {
  TAILOR_ASSIGN_OR_RETURN(std::string tar, ReadAll(tar_path));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  std::set<std::string> seen;
  size_t pos = 0;
  auto corrupt = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat("package archive ", tar_path, " at byte ", pos, ": ", what));
  };
  while (true) {
    if (pos + 512 > tar.size()) return corrupt("truncated (no end-of-archive blocks)");
    const uint8_t* h = reinterpret_cast<const uint8_t*>(tar.data() + pos);
    bool zero = true;
    for (int i = 0; i < 512 && zero; ++i) zero = h[i] == 0;
    if (zero) break;
    const char* c = reinterpret_cast<const char*>(h);
    const std::string sum_field(c + 148, 8);
    if (std::strtoul(sum_field.c_str(), nullptr, 8) != HeaderSum(h)) {
      return corrupt("header checksum mismatch");
    }
    const std::string name(c, strnlen(c, 100));
    if (!SafeName(name)) {
      return absl::InvalidArgumentError(absl::StrCat("package archive ", tar_path,
                                                     ": unexpected entry name '", name, "'"));
    }
    if (c[156] != '0' && c[156] != '\0') {
      return absl::InvalidArgumentError(
          absl::StrCat("package archive ", tar_path, ": ", name, " is not a regular file"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("package archive ", tar_path, ": ", name, " appears twice"));
    }
    const std::string size_field(c + 124, 12);
    char* end = nullptr;
    const uint64_t size = std::strtoull(size_field.c_str(), &end, 8);
    pos += 512;
    if (size > tar.size() - pos) return corrupt(absl::StrCat(name, " is truncated"));
    TAILOR_RETURN_IF_ERROR(WriteAll(absl::StrCat(dir, "/", name), tar.data() + pos, size));
    pos += size + (512 - size % 512) % 512;
  }
  if (!seen.count(kPackageSettingsFile) || !seen.count(kPackageConfigFile)) {
    return absl::InvalidArgumentError(
        absl::StrCat("package archive ", tar_path, ": no settings.json or config.json"));
  }
  return absl::OkStatus();
}

// ---- frontiers ---------------------------------------------------------------------------

std::string FrontiersToJson(const std::vector<TensorFrontier>& frontiers,
                            const std::string& weight_format) {
  Json j;
  j["format"] = "tailor-entropy-frontiers";
  j["version"] = 1;
  j["weight_format"] = weight_format;
  Json list = Json::array();
  for (const TensorFrontier& f : frontiers) {
    Json t;
    t["name"] = f.name;
    t["dtype"] = DTypeName(f.dtype);
    t["rows"] = f.rows;
    t["cols"] = f.cols;
    t["dense_bytes"] = f.dense_bytes;
    t["entropy_bits_per_weight"] = f.entropy_bits_per_weight;
    Json fr = Json::array();
    for (const ConfigPoint& p : f.frontier) fr.push_back(PointToJson(p));
    t["frontier"] = fr;
    t["candidates"] = static_cast<int64_t>(f.candidates.size());
    int64_t pruned = 0;
    for (const ConfigPoint& p : f.candidates) pruned += p.pruned;
    t["pruned"] = pruned;
    list.push_back(t);
  }
  j["tensors"] = list;
  return j.dump(1);
}

absl::StatusOr<std::vector<TensorFrontier>> FrontiersFromJson(const std::string& json,
                                                              std::string* weight_format) {
  Json j = Json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "tailor-entropy-frontiers") {
    return absl::InvalidArgumentError("frontiers: not a tailor-entropy-frontiers document");
  }
  if (weight_format != nullptr) *weight_format = j.value("weight_format", "");
  if (!j.contains("tensors") || !j["tensors"].is_array()) {
    return absl::InvalidArgumentError("frontiers: missing 'tensors'");
  }
  std::vector<TensorFrontier> out;
  for (size_t i = 0; i < j["tensors"].size(); ++i) {
    const Json& t = j["tensors"][i];
    const std::string where = absl::StrCat("frontiers.tensors[", i, "]");
    TensorFrontier f;
    TAILOR_ASSIGN_OR_RETURN(f.name, Get<std::string>(t, where, "name"));
    TAILOR_ASSIGN_OR_RETURN(std::string dtype, Get<std::string>(t, where, "dtype"));
    TAILOR_ASSIGN_OR_RETURN(f.dtype, ParseDType(dtype));
    TAILOR_ASSIGN_OR_RETURN(f.rows, Get<int64_t>(t, where, "rows"));
    TAILOR_ASSIGN_OR_RETURN(f.cols, Get<int64_t>(t, where, "cols"));
    TAILOR_ASSIGN_OR_RETURN(f.dense_bytes, Get<int64_t>(t, where, "dense_bytes"));
    TAILOR_ASSIGN_OR_RETURN(f.entropy_bits_per_weight,
                            Get<double>(t, where, "entropy_bits_per_weight"));
    if (!t.contains("frontier") || !t["frontier"].is_array() || t["frontier"].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": empty frontier"));
    }
    for (size_t k = 0; k < t["frontier"].size(); ++k) {
      TAILOR_ASSIGN_OR_RETURN(ConfigPoint p, PointFromJson(t["frontier"][k],
                                                           absl::StrCat(where, ".frontier[", k, "]")));
      if (!p.dense) {
        if (absl::Status s = ValidateConfig(f.dtype, p.config); !s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(where, ".frontier[", k, "]: ", s.message()));
        }
      }
      f.frontier.push_back(p);
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace tailor::entropy
